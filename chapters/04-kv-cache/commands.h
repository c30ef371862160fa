/* The subcommands of kv_cache, one function each: `kv_cache NAME [options]`
 * runs NAME_command with the arguments from NAME on, which parses its own
 * options, runs the teaching code and prints. Each returns the exit status. */
#ifndef CHAPTERS_04_KV_CACHE_COMMANDS_H
#define CHAPTERS_04_KV_CACHE_COMMANDS_H

#include "common/cli.h"

/* The experiments on the chapter's decoder: its shape is options of each. */
CliCommandFunction generate_command, verify_command, cost_command, cow_demo_command, prefix_demo_command,
    preempt_demo_command, accuracy_command;

/* The experiments that need no model. */
CliCommandFunction waste_command, waste_data_command, block_diagram_command, layout_diagram_command, memory_command,
    tokens_data_command, bench_command, bench_formats_command, attend_command;

#endif
