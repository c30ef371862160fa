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
    /* Optional: each default is a marker for "not given" (an int and a
     * number outside their ranges, a NULL string), and --help says so. */
    long seed = -1;
    double p = 0.0;
    const char *label = NULL;
    const CliOption options[] = {
        {"--n",       CLI_INT,              &n,       2,   100000000, "number of samples"},
        {"--x",       CLI_DOUBLE,           &x,       -10, 1e9,       "a value"          },
        {"--t",       CLI_DOUBLE_ABOVE_MIN, &t,       0,   10,        "a value above 0"  },
        {"--name",    CLI_STRING,           &name,    0,   0,         "a label"          },
        {"--verbose", CLI_FLAG,             &verbose, 0,   0,         "say more"         },
        {"--seed",    CLI_INT,              &seed,    0,   1000,      "a seed"           },
        {"--p",       CLI_DOUBLE_ABOVE_MIN, &p,       0,   1,         "a probability"    },
        {"--label",   CLI_STRING,           &label,   0,   0,         "a second label"   },
    };
    cli_parse(argc, argv, options, sizeof options / sizeof options[0], "parse options and print them");
    printf("n=%ld x=%.17g t=%.17g name=%s verbose=%d\n", n, x, t, name, verbose);
    if (seed >= 0 || p > 0.0 || label != NULL)
        printf("seed=%ld p=%.17g label=%s\n", seed, p, label != NULL ? label : "(none)");
    return 0;
}
