/* kv_cache: a small transformer decoding loop with no cache, a contiguous
 * cache and a paged cache (in float32 or quantized blocks), and the
 * experiments of Chapter 4.
 *
 *   ./kv_cache                  generate with both caches and compare
 *   ./kv_cache --verify         every equality the chapter claims, measured
 *   ./kv_cache --cost           FLOPs, bytes and time with and without a cache
 *   ./kv_cache --waste          how much reserved memory holds tokens
 *   ./kv_cache --bench          decode attention, paged against contiguous
 *   ./kv_cache --bench --formats  decode attention in each cache format
 *   ./kv_cache --attend DIR     attention over .npy inputs, both layouts, INT8, INT4
 *   ./kv_cache --accuracy       quantized caches against float32
 *   ./kv_cache --memory         the KV cache of real models
 *   ./kv_cache --gpu [--bench]  the CUDA decode kernels: checked, or timed
 *
 * and the demonstrations --cow-demo, --prefix-demo, --preempt-demo. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/attend_npy.h"
#include "chapters/04-kv-cache/attention_bench.h"
#include "chapters/04-kv-cache/cost.h"
#include "chapters/04-kv-cache/demos.h"
#include "chapters/04-kv-cache/gpu.h"
#include "chapters/04-kv-cache/memory.h"
#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/waste.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/results.h"

#define WASTE_SEED 7
#define WASTE_MAX_LEN 2048
#define WASTE_POOL_SLOTS 65536
#define QUICK_BENCH_BYTES (64u << 20)
/* The accuracy experiment: a prompt, then 256 generated tokens. */
#define ACCURACY_PROMPT_LEN 64
#define ACCURACY_NEW_TOKENS 256
#define ACCURACY_SEED 2025

typedef struct {
    bool verify, cost, waste, waste_data, bench, cow_demo, prefix_demo, preempt_demo, accuracy, memory;
    const char *attend_dir, *show_results, *results, *commit;
    bool markdown, quick, gpu, formats;
    long vocab, dim, layers, heads, kv_heads, head_dim, hidden, max_len, seed;
    long prompt_len, new_tokens, block_size, top_k, requests, int4_group;
    double temperature;
} Options;

static int modes_chosen(const Options *o)
{
    bool modes[] = {o->verify,
                    o->cost,
                    o->waste,
                    o->waste_data,
                    o->bench,
                    o->cow_demo,
                    o->prefix_demo,
                    o->preempt_demo,
                    o->accuracy,
                    o->memory,
                    o->attend_dir != NULL,
                    o->show_results != NULL};
    int n = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        n += modes[i];
    return n;
}

static ModelConfig config_from(const Options *o)
{
    ModelConfig c = {
        .vocab_size = (int)o->vocab,
        .dim = (int)o->dim,
        .n_layers = (int)o->layers,
        .n_heads = (int)o->heads,
        .n_kv_heads = (int)o->kv_heads,
        .head_dim = (int)o->head_dim,
        .hidden_dim = (int)o->hidden,
        .max_seq_len = (int)o->max_len,
        .seed = (uint64_t)o->seed,
    };
    char err[256];
    if (!model_config_check(&c, err, sizeof err))
        cli_fail("%s", err);
    return c;
}

/* What the chosen mode needs of the model's maximum length. */
static void check_lengths(const Options *o)
{
    bool fixed_workload = o->verify || o->cow_demo || o->prefix_demo || o->preempt_demo;
    int needed = demo_positions_needed((int)o->block_size);
    if (fixed_workload && o->max_len < needed)
        cli_fail("--verify and the demonstrations need --max-len of at least %d with --block-size %ld", needed,
                 o->block_size);
    if (fixed_workload)
        return;
    if (o->accuracy) {
        if (o->max_len < ACCURACY_PROMPT_LEN + ACCURACY_NEW_TOKENS)
            cli_fail("--accuracy needs --max-len of at least %d", ACCURACY_PROMPT_LEN + ACCURACY_NEW_TOKENS);
        return;
    }
    if (o->prompt_len > o->max_len)
        cli_fail("--prompt-len %ld is longer than the model's maximum, --max-len %ld", o->prompt_len, o->max_len);
    if (o->prompt_len + o->new_tokens - 1 > o->max_len)
        cli_fail("--prompt-len %ld and --new-tokens %ld need %ld positions, more than --max-len %ld", o->prompt_len,
                 o->new_tokens, o->prompt_len + o->new_tokens - 1, o->max_len);
}

int main(int argc, char **argv)
{
    ModelConfig d = model_default_config();
    Options o = {
        .vocab = d.vocab_size,
        .dim = d.dim,
        .layers = d.n_layers,
        .heads = d.n_heads,
        .kv_heads = d.n_kv_heads,
        .head_dim = d.head_dim,
        .hidden = d.hidden_dim,
        .max_len = d.max_seq_len,
        .seed = (long)d.seed,
        .prompt_len = 1024,
        .new_tokens = 100,
        .block_size = 16,
        .top_k = 40,
        .requests = 2000,
        .int4_group = KV_DEFAULT_INT4_GROUP,
        .temperature = 0.8,
    };
    const CliOption options[] = {
        {"--verify",       CLI_FLAG,   &o.verify,       0, 0,       "measure every equality the chapter claims"                            },
        {"--cost",         CLI_FLAG,   &o.cost,         0, 0,       "FLOPs, bytes and time of generation with and without a cache"         },
        {"--waste",        CLI_FLAG,   &o.waste,        0, 0,       "the waste experiment: reserved memory that holds tokens"              },
        {"--waste-data",   CLI_FLAG,   &o.waste_data,   0, 0,       "the waste experiment as data for the figure"                          },
        {"--bench",        CLI_FLAG,   &o.bench,        0, 0,       "decode-attention throughput, paged against contiguous"                },
        {"--attend",       CLI_STRING, &o.attend_dir,   0, 0,
         "read q.npy, k.npy, v.npy, lens.npy from DIR; write out_contiguous.npy, out_paged.npy, out_int8.npy, "
         "out_int4.npy"                                                                                                                    },
        {"--cow-demo",     CLI_FLAG,   &o.cow_demo,     0, 0,
         "forked sequences writing a shared block, with and without copy-on-write"                                                         },
        {"--prefix-demo",  CLI_FLAG,   &o.prefix_demo,  0, 0,       "prefix caching on requests with shared system prompts"                },
        {"--preempt-demo", CLI_FLAG,   &o.preempt_demo, 0, 0,       "too few blocks: preemption and refusal"                               },
        {"--accuracy",     CLI_FLAG,   &o.accuracy,     0, 0,
         "quantized caches against float32 over a 256-token generation (the book adds "
         "--head-dim 128 --block-size 32)"                                                                                                 },
        {"--memory",       CLI_FLAG,   &o.memory,       0, 0,
         "the KV cache of real models: bytes per token, what fits on a card, FLOPs per byte"                                               },
        {"--formats",      CLI_FLAG,   &o.formats,      0, 0,       "with --bench: time the cache formats instead of the layouts"          },
        {"--gpu",          CLI_FLAG,   &o.gpu,          0, 0,       "check the CUDA decode kernels (with --bench: time them)"              },
        {"--results",      CLI_STRING, &o.results,      0, 0,       "with --gpu --bench: write the results (Markdown) here"                },
        {"--commit",       CLI_STRING, &o.commit,       0, 0,       "with --gpu --bench: the commit to stamp (else $GIT_COMMIT)"           },
        {"--show-results", CLI_STRING, &o.show_results, 0, 0,       "print a GPU results file, or say there is none"                       },
        {"--markdown",     CLI_FLAG,   &o.markdown,     0, 0,       "print tables as Markdown"                                             },
        {"--quick",        CLI_FLAG,   &o.quick,        0, 0,       "--bench with a 64 MiB cache instead of one above the last-level cache"},
        {"--vocab",        CLI_INT,    &o.vocab,        4, 1000000, "vocabulary size"                                                      },
        {"--dim",          CLI_INT,    &o.dim,          1, 65536,   "width of the residual stream"                                         },
        {"--layers",       CLI_INT,    &o.layers,       1, 256,     "transformer blocks"                                                   },
        {"--heads",        CLI_INT,    &o.heads,        1, 1024,    "query heads"                                                          },
        {"--kv-heads",     CLI_INT,    &o.kv_heads,     1, 1024,    "key/value heads (divides --heads; 1 is MQA)"                          },
        {"--head-dim",     CLI_INT,    &o.head_dim,     2, 1024,    "width of one head (even)"                                             },
        {"--hidden",       CLI_INT,    &o.hidden,       1, 262144,  "width of the MLP"                                                     },
        {"--max-len",      CLI_INT,    &o.max_len,      1, 1 << 20, "most positions in one sequence"                                       },
        {"--seed",         CLI_INT,    &o.seed,         0, 1e15,    "seed of the weights"                                                  },
        {"--prompt-len",   CLI_INT,    &o.prompt_len,   1, 1 << 20, "prompt tokens (generation and --cost)"                                },
        {"--new-tokens",   CLI_INT,    &o.new_tokens,   1, 1 << 20, "tokens to generate (generation and --cost)"                           },
        {"--block-size",   CLI_INT,    &o.block_size,   1, 256,     "positions per block of the paged cache"                               },
        {"--temperature",  CLI_DOUBLE, &o.temperature,  0, 100,     "sampling temperature; 0 is greedy"                                    },
        {"--top-k",        CLI_INT,    &o.top_k,        0, 1000000, "sample among the k likeliest tokens; 0: all"                          },
        {"--int4-group",   CLI_INT,    &o.int4_group,   1, 1024,    "INT4 channels per scale: 32 or 64"                                    },
        {"--requests",     CLI_INT,    &o.requests,     1, 1000000, "requests in the trace of --waste"                                     },
    };
    cli_parse(argc, argv, options, sizeof options / sizeof options[0],
              "kv_cache: a transformer decoding loop without a cache, with a contiguous one, a paged one and "
              "a quantized one; the memory of real models' caches; CUDA decode-attention kernels");
    if (modes_chosen(&o) > 1)
        cli_fail("choose one of --verify, --cost, --waste, --waste-data, --bench, --attend, "
                 "--cow-demo, --prefix-demo, --preempt-demo, --accuracy, --memory, --show-results");
    if (o.gpu && modes_chosen(&o) > o.bench)
        cli_fail("--gpu goes alone (the check) or with --bench");
    if ((o.results || o.commit) && !(o.gpu && o.bench))
        cli_fail("--results and --commit go with --gpu --bench");
    if (o.quick && !o.bench)
        cli_fail("--quick applies to --bench only");
    if (o.formats && (!o.bench || o.gpu))
        cli_fail("--formats goes with --bench (on the CPU)");
    if (o.int4_group != 32 && o.int4_group != 64)
        cli_fail("--int4-group must be 32 or 64, got %ld", o.int4_group);
    TableFormat format = o.markdown ? TABLE_MARKDOWN : TABLE_TEXT;
    int block_size = (int)o.block_size;

    if (o.attend_dir) {
        attend_npy_directory(o.attend_dir, block_size, (int)o.int4_group);
        return 0;
    }
    if (o.show_results) {
        results_show(o.show_results);
        return 0;
    }
    if (o.gpu && o.bench) {
        gpu_bench(o.quick, o.results, o.commit, format);
        return 0;
    }
    if (o.gpu)
        return gpu_check(stdout, GPU_CHECK_WIDEST_HEADS) == 0 ? 0 : 1;
    if (o.memory) {
        memory_report(stdout, format);
        return 0;
    }
    if (o.waste || o.waste_data) {
        if (o.waste)
            waste_report((int)o.requests, WASTE_MAX_LEN, WASTE_POOL_SLOTS, WASTE_SEED, stdout, format);
        else
            waste_figure_data((int)o.requests, WASTE_MAX_LEN, WASTE_SEED, stdout);
        return 0;
    }
    if (o.bench) {
        size_t bytes = o.quick ? QUICK_BENCH_BYTES : bench_large_bytes();
        if (o.formats)
            attention_bench_formats(block_size, bytes, stdout, format);
        else
            attention_bench_report(block_size, bytes, stdout, format);
        return 0;
    }
    ModelConfig config = config_from(&o);
    if (o.top_k > o.vocab)
        cli_fail("--top-k %ld is larger than the vocabulary, --vocab %ld", o.top_k, o.vocab);
    check_lengths(&o);
    if (o.accuracy) {
        const AccuracySetup setup = {ACCURACY_PROMPT_LEN, ACCURACY_NEW_TOKENS, block_size, (int)o.int4_group,
                                     ACCURACY_SEED};
        accuracy_report(&config, &setup, stdout, format);
        return 0;
    }
    Model model = model_create(&config);
    const Sampler sampler = {.temperature = o.temperature, .top_k = (int)o.top_k};
    if (o.verify)
        demo_verify(&model, block_size, stdout, format);
    else if (o.cost)
        cost_report(&model, (int)o.prompt_len, (int)o.new_tokens, stdout, format);
    else if (o.cow_demo)
        demo_copy_on_write(&model, block_size, &sampler, stdout, format);
    else if (o.prefix_demo)
        demo_prefix_caching(&model, block_size, &sampler, stdout, format);
    else if (o.preempt_demo)
        demo_preemption(&model, block_size, &sampler, stdout, format);
    else
        demo_generate(&model, (int)o.prompt_len, (int)o.new_tokens, block_size, &sampler, stdout);
    model_free(&model);
    return 0;
}
