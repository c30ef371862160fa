/* The subcommands of kv_cache, one function each: `kv_cache NAME [options]`
 * runs NAME_command with the arguments from NAME on, which parses its own
 * options, runs the teaching code and prints. Each returns the exit status. */
#ifndef CHAPTERS_04_KV_CACHE_COMMANDS_H
#define CHAPTERS_04_KV_CACHE_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/sampling.h"
#include "common/cli.h"
#include "common/table.h"

/* The experiments on the chapter's decoder: its shape is options of each. */
CliCommandFunction generate_command, verify_command, cost_command, cow_demo_command, prefix_demo_command,
    preempt_demo_command, accuracy_command;

/* The experiments that need no model. */
CliCommandFunction waste_command, waste_data_command, block_diagram_command, layout_diagram_command, memory_command,
    tokens_data_command, bench_command, bench_formats_command, attend_command;

/* A demonstration on a fixed workload: prints, and returns true when every
 * claim it prints holds. */
typedef bool DemoFunction(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format);

/* verify and the demonstrations: parse the options they share, run `demo` on
 * the model they describe, and return the exit status, 1 when a claim it
 * printed does not hold. `samples` says whether the workload draws tokens,
 * and `least_block_size` is the smallest --block-size its requests allow.
 * Declared here for the test that runs it on a claim that fails. */
int run_demo(int argc, char **argv, DemoFunction *demo, bool samples, long least_block_size);

#endif
