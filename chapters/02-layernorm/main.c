/* layernorm: the program of chapter 2, a table of subcommands. */
#include "chapters/02-layernorm/commands.h"
#include "chapters/02-layernorm/gpu.h"
#include "common/cli.h"
#include "common/results.h"

// ANCHOR: gpu_goals
/* The GPU goals: each width's best version, as a share of the copy kernel
 * measured in the same run (the column of gpu-bench's table). */
#define COPY "of the copy kernel (range)"
static const Goal GPU_GOALS[] = {
    {"layer norm forward, d = 768",   {{"norm", "layer"}, {"pass", "forward"}, {"d", "768"}},   COPY, 85, false, "%"},
    {"layer norm forward, d = 1024",  {{"norm", "layer"}, {"pass", "forward"}, {"d", "1024"}},  COPY, 85, false, "%"},
    {"layer norm forward, d = 4096",  {{"norm", "layer"}, {"pass", "forward"}, {"d", "4096"}},  COPY, 85, false, "%"},
    {"layer norm backward, d = 768",  {{"norm", "layer"}, {"pass", "backward"}, {"d", "768"}},  COPY, 75, false, "%"},
    {"layer norm backward, d = 1024", {{"norm", "layer"}, {"pass", "backward"}, {"d", "1024"}}, COPY, 75, false, "%"},
    {"layer norm backward, d = 4096", {{"norm", "layer"}, {"pass", "backward"}, {"d", "4096"}}, COPY, 75, false, "%"},
    {"RMSNorm forward, d = 768",      {{"norm", "rms"}, {"pass", "forward"}, {"d", "768"}},     COPY, 85, false, "%"},
    {"RMSNorm forward, d = 1024",     {{"norm", "rms"}, {"pass", "forward"}, {"d", "1024"}},    COPY, 85, false, "%"},
    {"RMSNorm forward, d = 4096",     {{"norm", "rms"}, {"pass", "forward"}, {"d", "4096"}},    COPY, 85, false, "%"},
    {"RMSNorm backward, d = 768",     {{"norm", "rms"}, {"pass", "backward"}, {"d", "768"}},    COPY, 75, false, "%"},
    {"RMSNorm backward, d = 1024",    {{"norm", "rms"}, {"pass", "backward"}, {"d", "1024"}},   COPY, 75, false, "%"},
    {"RMSNorm backward, d = 4096",    {{"norm", "rms"}, {"pass", "backward"}, {"d", "4096"}},   COPY, 75, false, "%"},
};
#undef COPY
// ANCHOR_END: gpu_goals

static int gpu_results_command(int argc, char **argv)
{
    return results_command_with_goals(argc, argv, GPU_GOALS, CLI_COUNT(GPU_GOALS));
}

static const CliCommand COMMANDS[] = {
    {"run",           run_command,           "float forward and backward on random inputs, against the double reference"},
    {"apply",         apply_command,         "the same on x, gamma, beta, dy from .npy files; write the results as .npy"},
    {"gradcheck",     gradcheck_command,     "check the backward pass three ways, in double"                            },
    {"edge-cases",    edge_cases_command,    "run the edge cases and print what each checked"                           },
    {"complexity",    complexity_command,    "print bytes and FLOPs per element, unfused vs fused"                      },
    {"cache-memory",  cache_memory_command,  "print what caching xhat costs in real models"                             },
    {"storage",       storage_command,       "y and dx stored in fp16 and bf16: how many are correctly rounded"         },
    {"failure",       failure_command,       "show a numerical failure mode"                                            },
    {"bench",         bench_command,         "measure the CPU kernels' throughput against memcpy"                       },
    {"gpu-check",     gpu_check_command,     "validate every CUDA kernel version against the double reference"          },
    {"gpu-apply",     gpu_apply_command,     "apply, with the CUDA kernels"                                             },
    {"gpu-bench",     gpu_bench_command,     "validate, then time the CUDA kernels against the device-to-device copy"   },
    {"gpu-resources", gpu_resources_command, "registers, spills, occupancy of each kernel, from ptxas"                  },
    {"gpu-results",   gpu_results_command,
     "print the GPU benchmark's results file, PyTorch's (--file), or the goals' verdicts (--goals)"                     },
};

int main(int argc, char **argv)
{
    return cli_run_command(argc, argv, COMMANDS, CLI_COUNT(COMMANDS),
                           "layer norm forward and backward, gradient checks, edge cases and benchmarks");
}
