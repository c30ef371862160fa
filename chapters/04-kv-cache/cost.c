#include "chapters/04-kv-cache/cost.h"

#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/uncached.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/bench.h"

// ANCHOR: count_the_cost_of_one_forward_pass
/* One forward pass over `count` new tokens at positions start..start+count-1.
 * Token t attends to t + 1 positions: a dot product and a weighted sum of
 * head_dim values each, per query head and layer. The logits are computed
 * for the last token only. The traffic counts every weight once and every key
 * and value once: read for attention, written for the new tokens. */
static GenerationCost forward_pass(const ModelConfig *c, double start, double count)
{
    double attended = count * start + count * (count + 1) / 2; /* sum of (t + 1) */
    double attention = 4.0 * c->n_layers * c->n_heads * c->head_dim * attended;
    double kv = model_kv_bytes_per_token(c);
    return (GenerationCost){
        .forward_passes = 1,
        .tokens_processed = count,
        .flops = count * model_matmul_flops_per_token(c) + attention + model_logits_flops(c),
        .bytes = model_weight_bytes(c) + (start + count) * kv + count * kv,
    };
}
// ANCHOR_END: count_the_cost_of_one_forward_pass

static void add_cost(GenerationCost *total, GenerationCost pass)
{
    total->forward_passes += pass.forward_passes;
    total->tokens_processed += pass.tokens_processed;
    total->flops += pass.flops;
    total->bytes += pass.bytes;
}

// ANCHOR: add_up_cached_and_uncached_generation
/* With a cache: the prompt in one pass, then one token per pass. */
GenerationCost cost_cached(const ModelConfig *c, int prompt_len, int n_new)
{
    GenerationCost total = {0};
    add_cost(&total, forward_pass(c, 0, prompt_len));
    for (int s = 1; s < n_new; s++)
        add_cost(&total, forward_pass(c, prompt_len + s - 1, 1));
    return total;
}

/* Without: every pass runs over everything so far. */
GenerationCost cost_uncached(const ModelConfig *c, int prompt_len, int n_new)
{
    GenerationCost total = {0};
    for (int s = 0; s < n_new; s++)
        add_cost(&total, forward_pass(c, 0, prompt_len + s));
    return total;
}
// ANCHOR_END: add_up_cached_and_uncached_generation

typedef struct {
    const char *name;
    GenerationCost predicted;
    double seconds;
} CostRow;

static void add_row(Table *table, const CostRow *row)
{
    table_cell(table, "%s", row->name);
    table_cell(table, "%.0f", row->predicted.forward_passes);
    table_cell(table, "%.0f", row->predicted.tokens_processed);
    table_cell(table, "%.3f", row->predicted.flops / 1e9);
    table_cell(table, "%.3f", row->predicted.bytes / 1e9);
    table_cell(table, "%.3f", row->seconds);
    table_cell(table, "%.2f", row->predicted.flops / row->seconds / 1e9);
}

static void cost_ratio_table(const ModelConfig *c, FILE *out, TableFormat format)
{
    const int sizes[][2] = {
        {256,  25  },
        {1024, 100 },
        {4096, 100 },
        {4096, 1000}
    };
    const char *headers[] = {"prompt", "generated", "FLOPs without / with", "bytes without / with"};
    Table *table = TABLE_NEW(headers, "rrrr");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        GenerationCost with = cost_cached(c, sizes[i][0], sizes[i][1]);
        GenerationCost without = cost_uncached(c, sizes[i][0], sizes[i][1]);
        table_cell(table, "%d", sizes[i][0]);
        table_cell(table, "%d", sizes[i][1]);
        table_cell(table, "%.1f", without.flops / with.flops);
        table_cell(table, "%.1f", without.bytes / with.bytes);
    }
    table_print(table, out, format);
    table_free(table);
}

bool cost_report(const Model *model, int prompt_len, int n_new, FILE *out, TableFormat format)
{
    const ModelConfig *c = &model->config;
    const Sampler greedy = {0};
    Rng rng;
    rng_seed(&rng, c->seed);
    Request *cached = requests_random(c, &rng, 1, prompt_len, prompt_len, n_new, n_new);
    Request *uncached = requests_copy(c, cached, 1);

    double start = clock_seconds();
    serve_each_alone(model, cached, 1, &greedy);
    CostRow with = {"with a cache", cost_cached(c, prompt_len, n_new), clock_seconds() - start};
    start = clock_seconds();
    generate_uncached(model, uncached, &greedy);
    CostRow without = {"without a cache", cost_uncached(c, prompt_len, n_new), clock_seconds() - start};

    const char *headers[] = {"generation", "passes", "tokens run", "GFLOP", "GB moved", "seconds", "GFLOP/s"};
    Table *table = TABLE_NEW(headers, "lrrrrrr");
    add_row(table, &without);
    add_row(table, &with);
    table_cell(table, "ratio");
    table_cell(table, "%.1f", without.predicted.forward_passes / with.predicted.forward_passes);
    table_cell(table, "%.1f", without.predicted.tokens_processed / with.predicted.tokens_processed);
    table_cell(table, "%.1f", without.predicted.flops / with.predicted.flops);
    table_cell(table, "%.1f", without.predicted.bytes / with.predicted.bytes);
    table_cell(table, "%.1f", without.seconds / with.seconds);
    table_cell(table, " ");
    table_print(table, out, format);
    table_free(table);

    Comparison same = comparison_new();
    compare_requests(&same, cached, uncached, c->vocab_size);
    fprintf(out,
            "\nprompt %d tokens, %d generated; same tokens both ways: %s; "
            "the cache holds %.0f KiB (%.0f bytes per position)\n",
            prompt_len, n_new, same.tokens_equal ? "yes" : "NO",
            (prompt_len + n_new - 1) * model_kv_bytes_per_token(c) / 1024, model_kv_bytes_per_token(c));
    fprintf(out, "\nthe formula at other lengths:\n\n");
    cost_ratio_table(c, out, format);
    requests_free(cached, 1);
    requests_free(uncached, 1);
    return same.tokens_equal;
}
