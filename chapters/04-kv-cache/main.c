/* kv_cache: a small transformer decoding loop with no cache, a contiguous
 * cache and a paged cache (in float32 or quantized blocks), and the
 * experiments of Chapter 4. `./kv_cache --help` lists the subcommands. */
#include "chapters/04-kv-cache/commands.h"
#include "chapters/04-kv-cache/gpu.h"
#include "common/cli.h"
#include "common/results.h"

// ANCHOR: gpu_goals
/* The GPU goal: decode attention over 8 sequences of 16384 positions, the
 * best (split-K) version's share of the read bandwidth measured in the same
 * run, in each cache format. */
#define READ "of read bandwidth (min–max)"
static const Goal GPU_GOALS[] = {
    {"fp16",                          {{"cache", "fp16"}},                          READ, 70, false, "%"},
    {"float32",                       {{"cache", "float32"}},                       READ, 70, false, "%"},
    {"FP8 E4M3",                      {{"cache", "FP8 E4M3"}},                      READ, 70, false, "%"},
    {"FP8 E5M2",                      {{"cache", "FP8 E5M2"}},                      READ, 70, false, "%"},
    {"INT8",                          {{"cache", "INT8"}},                          READ, 70, false, "%"},
    {"INT4",                          {{"cache", "INT4"}},                          READ, 70, false, "%"},
    {"INT4, keys per channel (KIVI)", {{"cache", "INT4, keys per channel (KIVI)"}}, READ, 70, false, "%"},
};
#undef READ
// ANCHOR_END: gpu_goals

static int gpu_results_command(int argc, char **argv)
{
    return results_command_with_goals(argc, argv, GPU_GOALS, CLI_COUNT(GPU_GOALS));
}

static const CliCommand COMMANDS[] = {
    {"generate",       generate_command,       "generate one continuation with a contiguous and a paged cache, and compare"       },
    {"verify",         verify_command,         "measure every equality the chapter claims"                                        },
    {"cost",           cost_command,           "FLOPs, bytes and time of generation with and without a cache"                     },
    {"waste",          waste_command,          "the waste experiment: how much reserved memory holds tokens"                      },
    {"waste-data",     waste_data_command,     "the waste experiment as data for the figure"                                      },
    {"bench",          bench_command,          "decode-attention throughput, paged against contiguous"                            },
    {"bench-formats",  bench_formats_command,  "decode-attention time in each cache format"                                       },
    {"attend",         attend_command,         "attention over .npy inputs, in both layouts and through INT8 and INT4"            },
    {"block-diagram",  block_diagram_command,  "the copy-on-write figure: block tables of a fork, as Graphviz DOT"                },
    {"layout-diagram", layout_diagram_command,
     "where an INT4 cache's bytes lie: blocks, kv heads, rows, scales, as Graphviz DOT"                                           },
    {"cow-demo",       cow_demo_command,       "forked sequences writing a shared block, with and without copy-on-write"          },
    {"prefix-demo",    prefix_demo_command,    "prefix caching on requests with shared system prompts"                            },
    {"preempt-demo",   preempt_demo_command,   "too few blocks: preemption and refusal"                                           },
    {"accuracy",       accuracy_command,       "quantized caches against float32 over a 256-token generation"                     },
    {"memory",         memory_command,         "the KV cache of real models: bytes per token, what fits on a card, FLOPs per byte"},
    {"tokens-data",    tokens_data_command,    "the tokens of cache that fit on a card, as data for the figure"                   },
    {"gpu-check",      gpu_check_command,      "check the CUDA decode kernels against the double reference"                       },
    {"gpu-bench",      gpu_bench_command,      "check, then time the CUDA decode kernels; write a stamped results file"           },
    {"gpu-resources",  gpu_resources_command,  "registers, spills, occupancy of each kernel, from ptxas"                          },
    {"gpu-results",    gpu_results_command,
     "print a results file of gpu-bench or torch_sdpa.py, or say there is none; --goals"                                          },
};

int main(int argc, char **argv)
{
    return cli_run_command(argc, argv, COMMANDS, CLI_COUNT(COMMANDS),
                           "a transformer decoding loop without a cache, with a contiguous one, a paged one "
                           "and a quantized one; the memory of real models' caches; CUDA decode-attention kernels");
}
