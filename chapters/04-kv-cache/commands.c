#include "chapters/04-kv-cache/commands.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/attend_npy.h"
#include "chapters/04-kv-cache/attention_bench.h"
#include "chapters/04-kv-cache/block_diagram.h"
#include "chapters/04-kv-cache/cost.h"
#include "chapters/04-kv-cache/demos.h"
#include "chapters/04-kv-cache/memory.h"
#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/waste.h"
#include "common/bench.h"
#include "common/cli.h"

/* What several subcommands take, with the same default in each. */
#define BLOCK_SIZE 16
#define PROMPT_LEN 1024
#define NEW_TOKENS 100
#define TEMPERATURE 0.8
#define TOP_K 40
#define WASTE_REQUESTS 2000

/* The waste experiment's trace and pool. */
#define WASTE_SEED 7
#define WASTE_MAX_LEN 2048
#define WASTE_POOL_SLOTS 65536
/* The keys and values of bench --quick and bench-formats --quick. */
#define QUICK_BENCH_BYTES (64u << 20)
/* The accuracy experiment: a prompt, then 256 generated tokens. */
#define ACCURACY_PROMPT_LEN 64
#define ACCURACY_NEW_TOKENS 256
#define ACCURACY_SEED 2025

/* A subcommand's options, gathered from the groups it takes. */
#define MOST_OPTIONS 20
typedef struct {
    CliOption items[MOST_OPTIONS];
    size_t count;
} OptionTable;

static void add_options(OptionTable *table, const CliOption *options, size_t count)
{
    if (table->count + count > MOST_OPTIONS)
        cli_fail_status(1, "a subcommand declares more than %d options", MOST_OPTIONS);
    memcpy(table->items + table->count, options, count * sizeof *options);
    table->count += count;
}

static CliOption block_size_option(long *block_size)
{
    return (CliOption){"--block-size", CLI_INT, block_size, 1, 256, "positions per block of the paged cache"};
}

/* The chapter's decoder, as the options describe it. */
typedef struct {
    long vocab, dim, layers, heads, kv_heads, head_dim, hidden, max_len, seed;
} ModelOptions;

static ModelOptions model_options_default(void)
{
    ModelConfig d = model_default_config();
    return (ModelOptions){d.vocab_size, d.dim,        d.n_layers,    d.n_heads,   d.n_kv_heads,
                          d.head_dim,   d.hidden_dim, d.max_seq_len, (long)d.seed};
}

static void add_model_options(OptionTable *table, ModelOptions *m)
{
    const CliOption options[] = {
        {"--vocab",    CLI_INT, &m->vocab,    4, 1000000, "vocabulary size"                            },
        {"--dim",      CLI_INT, &m->dim,      1, 65536,   "width of the residual stream"               },
        {"--layers",   CLI_INT, &m->layers,   1, 256,     "transformer blocks"                         },
        {"--heads",    CLI_INT, &m->heads,    1, 1024,    "query heads"                                },
        {"--kv-heads", CLI_INT, &m->kv_heads, 1, 1024,    "key/value heads (divides --heads; 1 is MQA)"},
        {"--head-dim", CLI_INT, &m->head_dim, 2, 1024,    "width of one head (even)"                   },
        {"--hidden",   CLI_INT, &m->hidden,   1, 262144,  "width of the MLP"                           },
        {"--max-len",  CLI_INT, &m->max_len,  1, 1 << 20, "most positions in one sequence"             },
        {"--seed",     CLI_INT, &m->seed,     0, 1e15,    "seed of the weights"                        },
    };
    add_options(table, options, CLI_COUNT(options));
}

static ModelConfig config_from(const ModelOptions *m)
{
    ModelConfig c = {
        .vocab_size = (int)m->vocab,
        .dim = (int)m->dim,
        .n_layers = (int)m->layers,
        .n_heads = (int)m->heads,
        .n_kv_heads = (int)m->kv_heads,
        .head_dim = (int)m->head_dim,
        .hidden_dim = (int)m->hidden,
        .max_seq_len = (int)m->max_len,
        .seed = (uint64_t)m->seed,
    };
    char err[256];
    if (!model_config_check(&c, err, sizeof err))
        cli_fail("%s", err);
    return c;
}

/* Parse the subcommand's own options, in `table`, and the model's: the
 * model they describe. */
static ModelConfig parse_with_model(int argc, char **argv, OptionTable *table)
{
    ModelOptions m = model_options_default();
    add_model_options(table, &m);
    cli_parse(argc, argv, table->items, table->count, NULL);
    return config_from(&m);
}

typedef struct {
    double temperature;
    long top_k;
} SamplerOptions;

static void add_sampler_options(OptionTable *table, SamplerOptions *s)
{
    const CliOption options[] = {
        {"--temperature", CLI_DOUBLE, &s->temperature, 0, 100,     "sampling temperature; 0 is greedy"          },
        {"--top-k",       CLI_INT,    &s->top_k,       0, 1000000, "sample among the k likeliest tokens; 0: all"},
    };
    add_options(table, options, CLI_COUNT(options));
}

static Sampler sampler_from(const SamplerOptions *s, const ModelConfig *c)
{
    if (s->top_k > c->vocab_size)
        cli_fail("--top-k %ld is larger than the vocabulary, --vocab %d", s->top_k, c->vocab_size);
    return (Sampler){.temperature = s->temperature, .top_k = (int)s->top_k};
}

/* A prompt, then new tokens: every position but the last is stored. */
typedef struct {
    long prompt_len, new_tokens;
} GenerationOptions;

/* At most this many prompt tokens, and as many new ones: the prefill's
 * attention, and the uncached baseline's recomputation, grow with the
 * square of the length. 8192 positions take seconds here; the 2^20 that
 * --max-len allows would take about a day, which is a hang to a reader. */
enum { LONGEST_GENERATION = 16384 };

static void add_generation_options(OptionTable *table, GenerationOptions *g)
{
    const CliOption options[] = {
        {"--prompt-len", CLI_INT, &g->prompt_len, 1, LONGEST_GENERATION, "prompt tokens (time grows with its square)"},
        {"--new-tokens", CLI_INT, &g->new_tokens, 1, LONGEST_GENERATION, "tokens to generate"                        },
    };
    add_options(table, options, CLI_COUNT(options));
}

static void check_generation_length(const GenerationOptions *g, const ModelConfig *c)
{
    if (g->prompt_len > c->max_seq_len)
        cli_fail("--prompt-len %ld is longer than the model's maximum, --max-len %d", g->prompt_len, c->max_seq_len);
    if (g->prompt_len + g->new_tokens - 1 > c->max_seq_len)
        cli_fail("--prompt-len %ld and --new-tokens %ld need %ld positions, more than --max-len %d", g->prompt_len,
                 g->new_tokens, g->prompt_len + g->new_tokens - 1, c->max_seq_len);
}

/* generate and cost: the prompt and new tokens, the command's own options,
 * the sampler's where `s` is not NULL, then the model's. */
static ModelConfig parse_generation(int argc, char **argv, GenerationOptions *g, const CliOption *own, size_t own_count,
                                    SamplerOptions *s)
{
    OptionTable table = {0};
    add_generation_options(&table, g);
    add_options(&table, own, own_count);
    if (s != NULL)
        add_sampler_options(&table, s);
    return parse_with_model(argc, argv, &table);
}

/* The exit status of a run that printed claims with a yes/NO verdict. A
 * claim that does not hold is a defect of this program, not of its input:
 * status 1, after the whole output, and one line saying so. */
static int status_of_claims(bool every_claim_holds)
{
    if (every_claim_holds)
        return 0;
    fprintf(stderr, "%s: error: a claim printed above does not hold (marked NO)\n", cli_program_name());
    return 1;
}

int generate_command(int argc, char **argv)
{
    GenerationOptions g = {PROMPT_LEN, NEW_TOKENS};
    SamplerOptions s = {TEMPERATURE, TOP_K};
    long block_size = BLOCK_SIZE;
    const CliOption own[] = {block_size_option(&block_size)};
    ModelConfig config = parse_generation(argc, argv, &g, own, CLI_COUNT(own), &s);
    Sampler sampler = sampler_from(&s, &config);
    check_generation_length(&g, &config);
    Model model = model_create(&config);
    bool same = demo_generate(&model, (int)g.prompt_len, (int)g.new_tokens, (int)block_size, &sampler, stdout);
    model_free(&model);
    return status_of_claims(same);
}

int cost_command(int argc, char **argv)
{
    GenerationOptions g = {PROMPT_LEN, NEW_TOKENS};
    bool markdown = false;
    const CliOption own[] = {cli_markdown_option(&markdown)};
    ModelConfig config = parse_generation(argc, argv, &g, own, CLI_COUNT(own), NULL);
    check_generation_length(&g, &config);
    Model model = model_create(&config);
    bool same = cost_report(&model, (int)g.prompt_len, (int)g.new_tokens, stdout, table_format_for(markdown));
    model_free(&model);
    return status_of_claims(same);
}

int run_demo(int argc, char **argv, DemoFunction *demo, bool samples, long least_block_size)
{
    SamplerOptions s = {TEMPERATURE, TOP_K};
    long block_size = BLOCK_SIZE;
    bool markdown = false;
    OptionTable table = {0};
    const CliOption own[] = {block_size_option(&block_size), cli_markdown_option(&markdown)};
    add_options(&table, own, CLI_COUNT(own));
    if (samples)
        add_sampler_options(&table, &s);
    ModelConfig config = parse_with_model(argc, argv, &table);
    Sampler sampler = samples ? sampler_from(&s, &config) : (Sampler){0};
    if (block_size < least_block_size)
        cli_fail("--block-size %ld is too small for this workload: it needs at least %ld", block_size,
                 least_block_size);
    int needed = demo_positions_needed((int)block_size);
    if (config.max_seq_len < needed)
        cli_fail("--max-len %d is too short: this needs at least %d with --block-size %ld", config.max_seq_len, needed,
                 block_size);
    Model model = model_create(&config);
    bool every_claim_holds = demo(&model, (int)block_size, &sampler, stdout, table_format_for(markdown));
    model_free(&model);
    return status_of_claims(every_claim_holds);
}

static bool verify_without_sampling(const Model *model, int block_size, const Sampler *sampler, FILE *out,
                                    TableFormat format)
{
    (void)sampler;
    return demo_verify(model, block_size, out, format);
}

int verify_command(int argc, char **argv)
{
    return run_demo(argc, argv, verify_without_sampling, false, 1);
}

int cow_demo_command(int argc, char **argv)
{
    /* Blocks of one position are always full: no partly filled block is
     * shared, and nothing is copied on write. */
    return run_demo(argc, argv, demo_copy_on_write, true, 2);
}

int prefix_demo_command(int argc, char **argv)
{
    return run_demo(argc, argv, demo_prefix_caching, true, 1);
}

int preempt_demo_command(int argc, char **argv)
{
    return run_demo(argc, argv, demo_preemption, true, demo_preemption_least_block_size());
}

int accuracy_command(int argc, char **argv)
{
    long block_size = BLOCK_SIZE, int4_group = KV_DEFAULT_INT4_GROUP;
    bool markdown = false;
    OptionTable table = {0};
    const CliOption own[] = {
        block_size_option(&block_size),
        {"--int4-group", CLI_INT, &int4_group, 1, 1024, "INT4 channels per scale: 32 or 64"},
        cli_markdown_option(&markdown),
    };
    add_options(&table, own, CLI_COUNT(own));
    ModelConfig config = parse_with_model(argc, argv, &table);
    if (int4_group != 32 && int4_group != 64)
        cli_fail("--int4-group must be 32 or 64, got %ld", int4_group);
    if (config.max_seq_len < ACCURACY_PROMPT_LEN + ACCURACY_NEW_TOKENS)
        cli_fail("the experiment needs --max-len of at least %d", ACCURACY_PROMPT_LEN + ACCURACY_NEW_TOKENS);
    if (config.head_dim < 2 * ACCURACY_OUTLIER_PAIRS) /* model_add_key_outliers: the last channels of a head */
        cli_fail("--head-dim %d is too small for the experiment: it gives each key head %d outlier channels",
                 config.head_dim, 2 * ACCURACY_OUTLIER_PAIRS);
    const AccuracySetup setup = {ACCURACY_PROMPT_LEN, ACCURACY_NEW_TOKENS, (int)block_size, (int)int4_group,
                                 ACCURACY_SEED};
    accuracy_report(&config, &setup, stdout, table_format_for(markdown));
    return 0;
}

int waste_command(int argc, char **argv)
{
    long requests = WASTE_REQUESTS;
    bool markdown = false;
    const CliOption options[] = {
        {"--requests", CLI_INT, &requests, 1, 1000000, "requests in the trace"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    waste_report((int)requests, WASTE_MAX_LEN, WASTE_POOL_SLOTS, WASTE_SEED, stdout, table_format_for(markdown));
    return 0;
}

int waste_data_command(int argc, char **argv)
{
    long requests = WASTE_REQUESTS;
    const CliOption options[] = {
        {"--requests", CLI_INT, &requests, 1, 1000000, "requests in the trace"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    waste_figure_data((int)requests, WASTE_MAX_LEN, WASTE_SEED, stdout);
    return 0;
}

int block_diagram_command(int argc, char **argv)
{
    long blocks = 8, block_size = 4, prompt = 10, seed = 3;
    const char *after = "fork";
    const CliOption options[] = {
        {"--after",      CLI_STRING, &after,      0, 0,        "fork (every block shared) or writes (each wrote one token)"},
        {"--blocks",     CLI_INT,    &blocks,     2, 64,       "physical blocks in the pool"                               },
        {"--block-size", CLI_INT,    &block_size, 2, 64,       "positions per block"                                       },
        {"--prompt",     CLI_INT,    &prompt,     1, 4096,     "positions of the prompt both sequences share"              },
        {"--seed",       CLI_INT,    &seed,       0, 1L << 30, "seed of the free list's order"                             },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    BlockDiagramStage stage = BLOCK_DIAGRAM_AFTER_FORK;
    if (strcmp(after, "writes") == 0)
        stage = BLOCK_DIAGRAM_AFTER_WRITES;
    else if (strcmp(after, "fork") != 0)
        cli_fail("--after must be fork or writes, got '%s'", after);
    if (!block_diagram_copy_on_write(stdout, stage, (int)blocks, (int)block_size, (int)prompt, (uint64_t)seed))
        cli_fail("the prompt's last block must be partly full (--prompt not a multiple of --block-size), "
                 "with a free block left for its copy (--blocks)");
    return 0;
}

int layout_diagram_command(int argc, char **argv)
{
    long block_size = 4, kv_heads = 2, head_dim = 64;
    const CliOption options[] = {
        {"--block-size", CLI_INT, &block_size, 1, 16, "positions per block"                 },
        {"--kv-heads",   CLI_INT, &kv_heads,   1, 8,  "kv heads"                            },
        {"--head-dim",   CLI_INT, &head_dim,   4, 64, "channels of a head (a multiple of 4)"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (head_dim % 4 != 0)
        cli_fail("--head-dim must be a multiple of 4, got %ld", head_dim);
    PagedKvShape shape = {(int)block_size, (int)kv_heads, (int)head_dim};
    block_diagram_layout(stdout, kv_layout(KV_FORMAT_INT4, true, shape, KV_DEFAULT_INT4_GROUP), 1, (int)kv_heads - 1);
    return 0;
}

int memory_command(int argc, char **argv)
{
    bool markdown = false, all = false;
    long context = MEMORY_DEFAULT_CONTEXT;
    const CliOption options[] = {
        cli_markdown_option(&markdown),
        {"--context", CLI_INT,  &context, 1, 1 << 24, "tokens per sequence of the largest-batch table"          },
        {"--all",     CLI_FLAG, &all,     0, 0,
                     "every model and column, and the tokens that fit on each card (the book shows the models it discusses)"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    memory_report(stdout, table_format_for(markdown), (int)context, all);
    return 0;
}

int tokens_data_command(int argc, char **argv)
{
    cli_parse(argc, argv, NULL, 0, NULL);
    memory_tokens_figure_data(stdout);
    return 0;
}

typedef bool BenchFunction(int block_size, size_t cache_bytes, FILE *out, TableFormat format);

static int run_bench(int argc, char **argv, BenchFunction *bench)
{
    long block_size = BLOCK_SIZE;
    bool quick = false, markdown = false;
    const CliOption options[] = {
        block_size_option(&block_size),
        {"--quick", CLI_FLAG, &quick, 0, 0, "a 64 MiB cache instead of one above the last-level cache"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    bool outputs_match =
        bench((int)block_size, quick ? QUICK_BENCH_BYTES : bench_large_bytes(), stdout, table_format_for(markdown));
    return status_of_claims(outputs_match);
}

int bench_command(int argc, char **argv)
{
    return run_bench(argc, argv, attention_bench_report);
}

int bench_formats_command(int argc, char **argv)
{
    return run_bench(argc, argv, attention_bench_formats);
}

/* --fp8-scales: how the FP8 outputs' scales are calibrated. */
static KvScaleAxis fp8_scales_option(const char *text)
{
    if (strcmp(text, "tensor") == 0)
        return KV_SCALE_PER_TENSOR;
    if (strcmp(text, "head") == 0)
        return KV_SCALE_PER_HEAD;
    cli_fail("--fp8-scales expects tensor or head, got '%s'", text);
}

int attend_command(int argc, char **argv)
{
    const char *load = NULL, *save = NULL, *fp8_scales = "tensor";
    const CliOption options[] = {
        {"--load",       CLI_STRING, &load,       0, 0, "the directory of q.npy, k.npy, v.npy and lens.npy"},
        {"--save",       CLI_STRING, &save,       0, 0,
         "the directory to write out_contiguous.npy, out_paged.npy, out_int8.npy, out_int4.npy, out_fp8_e4m3.npy "
         "and out_fp8_e5m2.npy to"                                                                         },
        {"--fp8-scales", CLI_STRING, &fp8_scales, 0, 0,
         "the FP8 scales: tensor (default; one for all keys, one for all values) or head (one per kv head)"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (load == NULL || save == NULL)
        cli_fail("give both --load DIR and --save DIR");
    attend_npy(load, save, BLOCK_SIZE, KV_DEFAULT_INT4_GROUP, fp8_scales_option(fp8_scales));
    return 0;
}
