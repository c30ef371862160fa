/* The subcommands of `cancellation`, one function each: it parses its own
 * options, runs the chapter's experiment and prints the result. Each returns
 * the exit status (bad input exits 2 from inside, through cli_fail). */
#ifndef CHAPTERS_01_CANCELLATION_COMMANDS_H
#define CHAPTERS_01_CANCELLATION_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/cli.h"
#include "common/table.h"

/* commands.c: the accuracy of the variance */
CliCommandFunction show_command, offset_sweep_command, blocked_sweep_command, theory_data_command,
    layernorm_demo_command, merge_demo_command, window_demo_command;

/* commands_derivative.c: cancellation in numerical derivatives */
CliCommandFunction derivative_command, derivative_data_command;

/* commands_bench.c: what stability costs */
CliCommandFunction bench_command;

/* Plumbing the commands share. */
void print_table(Table *table, bool markdown); /* and free it */

#endif
