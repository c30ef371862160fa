/* The subcommands of `cancellation`, one function each: it parses its own
 * options, runs the chapter's experiment and prints the result. Each returns
 * the exit status (bad input exits 2 from inside, through cli_fail). */
#ifndef CHAPTERS_01_CANCELLATION_COMMANDS_H
#define CHAPTERS_01_CANCELLATION_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"

/* commands.c: the accuracy of the variance */
int show_command(int argc, char **argv);
int offset_sweep_command(int argc, char **argv);
int blocked_sweep_command(int argc, char **argv);
int theory_data_command(int argc, char **argv);
int layernorm_demo_command(int argc, char **argv);
int merge_demo_command(int argc, char **argv);

/* commands_derivative.c: cancellation in numerical derivatives */
int derivative_command(int argc, char **argv);
int derivative_data_command(int argc, char **argv);

/* commands_bench.c: what stability costs */
int bench_command(int argc, char **argv);

/* Plumbing the commands share. */
void print_table(Table *table, bool markdown); /* and free it */
FILE *open_for_writing(const char *path);      /* or stop with one line, status 1 */
void close_written(FILE *file, const char *path);

#endif
