/* The subcommands of kv_cache, one function each: `kv_cache NAME [options]`
 * runs NAME_command with the arguments from NAME on, which parses its own
 * options, runs the teaching code and prints. Each returns the exit status. */
#ifndef CHAPTERS_04_KV_CACHE_COMMANDS_H
#define CHAPTERS_04_KV_CACHE_COMMANDS_H

/* The experiments on the chapter's decoder: its shape is options of each. */
int generate_command(int argc, char **argv);
int verify_command(int argc, char **argv);
int cost_command(int argc, char **argv);
int cow_demo_command(int argc, char **argv);
int prefix_demo_command(int argc, char **argv);
int preempt_demo_command(int argc, char **argv);
int accuracy_command(int argc, char **argv);

/* The experiments that need no model. */
int waste_command(int argc, char **argv);
int waste_data_command(int argc, char **argv);
int memory_command(int argc, char **argv);
int bench_command(int argc, char **argv);
int bench_formats_command(int argc, char **argv);
int attend_command(int argc, char **argv);

#endif
