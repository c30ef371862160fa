/* Catastrophic cancellation: the program of chapter 1, a table of
 * subcommands (commands.h, gpu.h). */
#include "chapters/01-cancellation/commands.h"
#include "chapters/01-cancellation/gpu.h"
#include "common/cli.h"
#include "common/results.h"

static const CliCommand COMMANDS[] = {
    {"show",            show_command,            "the variance of one data set four ways, each result with its error"  },
    {"offset-sweep",    offset_sweep_command,    "each method's relative error for offsets 1, 10, 100, ..."            },
    {"blocked-sweep",   blocked_sweep_command,   "the same sweep for the blocked method, with its bound"               },
    {"theory-data",     theory_data_command,     "write errors and bounds against kappa, float and double"             },
    {"layernorm-demo",  layernorm_demo_command,  "layer norm of one float row with the naive and two-pass variance"    },
    {"merge-demo",      merge_demo_command,      "Welford states of 1, 2, 4, ..., 1024 chunks merged, against one pass"},
    {"window-demo",     window_demo_command,     "a variance over a sliding window: values merged in, then taken out"  },
    {"derivative",      derivative_command,      "central difference and complex step, predicted and measured"         },
    {"derivative-data", derivative_data_command, "write the derivative errors against the step"                        },
    {"bench",           bench_command,           "throughput of each method against memcpy and a plain read"           },
    {"gpu-check",       gpu_check_command,       "row variances on the GPU against the CPU reference"                  },
    {"gpu-bench",       gpu_bench_command,       "validate, then time the GPU row variances"                           },
    {"gpu-resources",   gpu_resources_command,   "registers, spills, occupancy of each kernel, from ptxas"             },
    {"gpu-results",     results_command,         "show the GPU benchmark's committed results"                          },
};

int main(int argc, char **argv)
{
    return cli_run_command(argc, argv, COMMANDS, CLI_COUNT(COMMANDS),
                           "the variance four ways (five with the blocked one), in float and double, against the "
                           "exact value; and cancellation in numerical derivatives");
}
