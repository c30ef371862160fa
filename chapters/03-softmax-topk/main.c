/* softmax_topk: the K largest softmax probabilities of each row of logits,
 * and their indices, on the CPU (three versions) or the GPU (five kernels),
 * plus the tables and benchmarks of the chapter. */
#include "chapters/03-softmax-topk/commands.h"
#include "chapters/03-softmax-topk/gpu.h"
#include "common/cli.h"
#include "common/results.h"

// ANCHOR: gpu_goals
/* The GPU goals at V = 128256 (Llama 3's vocabulary): on 4096 rows, the best
 * version's share of the read bandwidth measured in the same run; on one
 * row, a decode step, its time. */
#define READ "of read bandwidth (slowest–fastest)"
#define ONE_ROW "microseconds (slowest–fastest)"
static const Goal GPU_GOALS[] = {
    {"4096 rows, K = 1",  {{"V", "128256"}, {"K", "1"}},  READ,    85, false, "%"   },
    {"4096 rows, K = 8",  {{"V", "128256"}, {"K", "8"}},  READ,    85, false, "%"   },
    {"4096 rows, K = 64", {{"V", "128256"}, {"K", "64"}}, READ,    85, false, "%"   },
    {"one row, K = 1",    {{"K", "1"}},                   ONE_ROW, 10, true,  " µs"},
    {"one row, K = 8",    {{"K", "8"}},                   ONE_ROW, 10, true,  " µs"},
    {"one row, K = 64",   {{"K", "64"}},                  ONE_ROW, 10, true,  " µs"},
};
#undef READ
#undef ONE_ROW
// ANCHOR_END: gpu_goals

static int gpu_results_command(int argc, char **argv)
{
    return results_command_with_goals(argc, argv, GPU_GOALS, CLI_COUNT(GPU_GOALS));
}

static const CliCommand COMMANDS[] = {
    {"run",                run_command,                "the top K of random logits on the CPU, checked against the double reference"          },
    {"apply",              apply_command,              "the top K of the logits in --load FILE (.npy), written to --save DIR (both required)" },
    {"sample",             sample_command,             "tokens drawn from the logits in --load FILE after temperature, top-K, top-p and min-p"},
    {"hard-inputs",        hard_inputs_command,        "table: what the fused version returns for hard inputs"                                },
    {"traffic",            traffic_command,            "table: predicted memory traffic and measured time per version"                        },
    {"accuracy",           accuracy_command,           "table: largest relative error of each version"                                        },
    {"bench",              bench_command,              "benchmark the CPU versions over V and K, on one thread and on all"                    },
    {"merge-demo",         merge_demo_command,         "table: the cross-warp merge, right and mixing rows"                                   },
    {"rejection",          rejection_command,          "table: sorting-free top-p by rejection against the sort-based sampler"                },
    {"ties",               ties_command,               "table: the top K with every logit tied with the K-th kept"                            },
    {"admissions-data",    admissions_data_command,    "the data of the figure: logits admitted to the top K along a row"                     },
    {"merge-tree-diagram", merge_tree_diagram_command, "the figure of the warps' merge tree, as Graphviz DOT"                                 },
    {"radix-data",         radix_data_command,         "the data of the figure: the four histograms of radix select on one row"               },
    {"lanes-diagram",      lanes_diagram_command,      "the figure of which lane reads which logit of a row, as Graphviz DOT"                 },
    {"gpu-run",            gpu_run_command,            "run, on a GPU kernel"                                                                 },
    {"gpu-apply",          gpu_apply_command,          "apply, on a GPU kernel"                                                               },
    {"gpu-sample",         gpu_sample_command,         "sample, on a GPU kernel"                                                              },
    {"gpu-check",          gpu_check_command,          "every GPU kernel against the double reference"                                        },
    {"gpu-bench",          gpu_bench_command,          "validate, then time every GPU kernel; --results writes a stamped file"                },
    {"gpu-resources",      gpu_resources_command,      "registers, spills, occupancy of each kernel, from ptxas"                              },
    {"gpu-latency",        gpu_latency_command,        "a model of one decode step's latency on a GPU, versions 4 and 8"                      },
    {"gpu-slow-paths",     gpu_slow_paths_command,
     "versions 6 and 9: the budget with the slow paths, counted on the benchmark's rows"                                                      },
    {"gpu-results",        gpu_results_command,        "print a GPU results file, or say that there is none; --goals: its verdicts"           },
};

int main(int argc, char **argv)
{
    return cli_run_command(argc, argv, COMMANDS, CLI_COUNT(COMMANDS),
                           "softmax + top-K of rows of logits, from three passes to one fused pass (CPU and CUDA)");
}
