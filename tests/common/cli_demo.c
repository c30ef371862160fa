/* A program with one option of each kind, for test_cli.sh: it prints what it
 * parsed, so the script can check good input as well as bad. */
#include <stdbool.h>
#include <stdio.h>

#include "common/cli.h"

int main(int argc, char **argv)
{
    long n = 1000;
    double x = 0.5, t = 1.0;
    const char *name = "demo";
    bool verbose = false;
    const CliOption options[] = {
        {"--n",       CLI_INT,              &n,       2,   100000000, "number of samples"},
        {"--x",       CLI_DOUBLE,           &x,       -10, 1e9,       "a value"          },
        {"--t",       CLI_DOUBLE_ABOVE_MIN, &t,       0,   10,        "a value above 0"  },
        {"--name",    CLI_STRING,           &name,    0,   0,         "a label"          },
        {"--verbose", CLI_FLAG,             &verbose, 0,   0,         "say more"         },
    };
    cli_parse(argc, argv, options, sizeof options / sizeof options[0], "parse options and print them");
    printf("n=%ld x=%.17g t=%.17g name=%s verbose=%d\n", n, x, t, name, verbose);
    return 0;
}
