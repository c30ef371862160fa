/* A program made of subcommands, for test_cli_commands.sh: `show` prints
 * what it parsed, `exit` returns the status it is given, `results` is the
 * gpu-results subcommand every chapter program has. */
#include <stdio.h>

#include "common/cli.h"
#include "common/results.h"

static int show(int argc, char **argv)
{
    long n = 3;
    const CliOption options[] = {
        {"--n", CLI_INT, &n, 1, 100, "how many lines to print"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    for (long i = 0; i < n; i++) {
        printf("line %ld\n", i);
    }
    return 0;
}

static int exit_with(int argc, char **argv)
{
    long status = 0;
    const CliOption options[] = {
        {"--status", CLI_INT, &status, 0, 1, "the exit status"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    return (int)status;
}

static const CliCommand COMMANDS[] = {
    {"show",    show,            "print --n lines"    },
    {"exit",    exit_with,       "exit with --status" },
    {"results", results_command, "show a results file"},
};

int main(int argc, char **argv)
{
    return cli_run_command(argc, argv, COMMANDS, CLI_COUNT(COMMANDS), "a program of three subcommands");
}
