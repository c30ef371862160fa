#include "chapters/04-kv-cache/memory.h"

#include <math.h>
#include <stdbool.h>

#include "chapters/04-kv-cache/paged_cache.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

// ANCHOR: list_published_model_shapes
/* From each model's published configuration (config.json) and model card:
 * layers, query heads, kv heads, head_dim, longest context, parameters.
 * Mistral-7B is v0.3 (32K context, no sliding window); the Qwen2.5 models
 * reach 131,072 tokens with YaRN, as their cards state. */
const ModelSpec REAL_MODELS[] = {
    {"Llama-2-7B",     32,  32,  32, 128, 4096,   6738415616.0  },
    {"Llama-2-13B",    40,  40,  40, 128, 4096,   13015864320.0 },
    {"Llama-2-70B",    80,  64,  8,  128, 4096,   68976648192.0 },
    {"Llama-3-8B",     32,  32,  8,  128, 8192,   8030261248.0  },
    {"Llama-3-70B",    80,  64,  8,  128, 8192,   70553706496.0 },
    {"Llama-3.1-405B", 126, 128, 8,  128, 131072, 405853388800.0},
    {"Mistral-7B",     32,  32,  8,  128, 32768,  7248023552.0  },
    {"Mixtral-8x7B",   32,  32,  8,  128, 32768,  46702792704.0 },
    {"Qwen2.5-7B",     28,  28,  4,  128, 131072, 7615616512.0  },
    {"Qwen2.5-72B",    80,  64,  8,  128, 131072, 72706203648.0 },
};
// ANCHOR_END: list_published_model_shapes
const int REAL_MODEL_COUNT = sizeof REAL_MODELS / sizeof REAL_MODELS[0];

/* Blocks of 16 positions; at head_dim 128 the rows and scales of a block
 * need no padding, so the block's bytes / 16 are exactly one token's. */
enum { CALCULATOR_BLOCK = 16 };

// ANCHOR: count_kv_bytes_per_token
double kv_bytes_per_token(const ModelSpec *m, KvFormat format)
{
    PagedKvShape shape = {CALCULATOR_BLOCK, m->n_kv_heads, m->head_dim};
    double key = (double)kv_block_bytes(kv_layout(format, true, shape, KV_DEFAULT_INT4_GROUP));
    double value = (double)kv_block_bytes(kv_layout(format, false, shape, KV_DEFAULT_INT4_GROUP));
    return m->layers * (key + value) / CALCULATOR_BLOCK;
}

double tokens_that_fit(const ModelSpec *m, KvFormat format, double card_gib, double utilisation)
{
    double room = utilisation * card_gib * GIB - 2.0 * m->parameters; /* fp16 weights */
    return room > 0.0 ? floor(room / kv_bytes_per_token(m, format)) : 0.0;
}

/* Per token of context and per layer, every query head does a dot product
 * with the key and a multiply-add with the value: 4 * head_dim FLOPs. */
double decode_attention_intensity(const ModelSpec *m, KvFormat format)
{
    double flops = 4.0 * m->layers * m->n_heads * m->head_dim;
    return flops / kv_bytes_per_token(m, format);
}
// ANCHOR_END: count_kv_bytes_per_token

// ANCHOR: count_the_largest_batch
/* A sequence holds whole blocks, so it takes its context rounded up to a
 * multiple of the block size. */
double largest_batch(const ModelSpec *m, KvFormat format, double card_gib, double utilisation, int context)
{
    double slots = (double)paged_kv_blocks_for(context, CALCULATOR_BLOCK) * CALCULATOR_BLOCK;
    return floor(tokens_that_fit(m, format, card_gib, utilisation) / slots);
}
// ANCHOR_END: count_the_largest_batch

/* The formats of the columns. FP8 E5M2 takes exactly the bytes of E4M3 (a
 * byte a number, its per-tensor scales outside the blocks): one column. */
static const KvFormat CALCULATOR_FORMATS[] = {KV_FORMAT_FP16, KV_FORMAT_FP8_E4M3, KV_FORMAT_INT8, KV_FORMAT_INT4};
enum { CALCULATOR_FORMAT_COUNT = sizeof CALCULATOR_FORMATS / sizeof CALCULATOR_FORMATS[0] };

/* 1234567 as "1.23M", 61400 as "61.4k". */
static void count_cell(Table *t, double n)
{
    if (n >= 1e6)
        table_cell(t, "%.2fM", n / 1e6);
    else if (n >= 1e3)
        table_cell(t, "%.1fk", n / 1e3);
    else
        table_cell(t, "%.0f", n);
}

static void shapes_table(FILE *out, TableFormat format)
{
    const char *headers[] = {"model",
                             "layers",
                             "query / kv heads",
                             "head_dim",
                             "context",
                             "parameters",
                             "KiB per token: fp16",
                             "FP8",
                             "INT8",
                             "INT4",
                             "one sequence at full context: fp16",
                             "FP8",
                             "INT4"};
    Table *t = table_new(13, headers, "lrrrrrrrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        table_cell(t, "%s", m->name);
        table_cell(t, "%d", m->layers);
        table_cell(t, "%d / %d", m->n_heads, m->n_kv_heads);
        table_cell(t, "%d", m->head_dim);
        table_cell(t, "%d", m->max_context);
        table_cell(t, "%.2fB", m->parameters / 1e9);
        for (int f = 0; f < CALCULATOR_FORMAT_COUNT; f++)
            table_cell(t, "%.1f", kv_bytes_per_token(m, CALCULATOR_FORMATS[f]) / 1024);
        const KvFormat at_full_context[] = {KV_FORMAT_FP16, KV_FORMAT_FP8_E4M3, KV_FORMAT_INT4};
        for (int f = 0; f < 3; f++)
            table_cell(t, "%.2f GiB", m->max_context * kv_bytes_per_token(m, at_full_context[f]) / GIB);
    }
    table_print(t, out, format);
    table_free(t);
}

static void fit_table(FILE *out, TableFormat format, KvFormat kv_format)
{
    const double cards[] = {24, 40, 80, 141, 180};
    const char *headers[] = {"model", "fp16 weights", "24 GB", "40 GB", "80 GB", "141 GB (H200)", "180 GB (B200)"};
    Table *t = table_new(7, headers, "lrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        table_cell(t, "%s", m->name);
        table_cell(t, "%.1f GiB", 2.0 * m->parameters / GIB);
        for (int c = 0; c < 5; c++) {
            double tokens = tokens_that_fit(m, kv_format, cards[c], MEMORY_UTILISATION);
            if (tokens > 0.0)
                count_cell(t, tokens);
            else
                table_cell(t, "-");
        }
    }
    table_print(t, out, format);
    table_free(t);
}

/* Sequences of `context` tokens that fit on an H200 in each format; a dash
 * where the model does not take that context or its weights do not fit. */
static bool batch_possible(const ModelSpec *m, int context)
{
    return context <= m->max_context && tokens_that_fit(m, KV_FORMAT_FP16, H200_GIB, MEMORY_UTILISATION) > 0.0;
}

static void batch_table(FILE *out, TableFormat format, int context)
{
    const char *headers[] = {"model", "longest context", "fp16", "FP8", "INT8", "INT4", "FP8 / fp16"};
    Table *t = table_new(7, headers, "lrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        bool possible = batch_possible(m, context);
        table_cell(t, "%s", m->name);
        table_cell(t, "%d", m->max_context);
        for (int f = 0; f < CALCULATOR_FORMAT_COUNT; f++) {
            if (possible)
                table_cell(t, "%.0f", largest_batch(m, CALCULATOR_FORMATS[f], H200_GIB, MEMORY_UTILISATION, context));
            else
                table_cell(t, "-");
        }
        double fp16 = largest_batch(m, KV_FORMAT_FP16, H200_GIB, MEMORY_UTILISATION, context);
        double fp8 = largest_batch(m, KV_FORMAT_FP8_E4M3, H200_GIB, MEMORY_UTILISATION, context);
        if (possible && fp16 > 0.0)
            table_cell(t, "%.2f×", fp8 / fp16);
        else
            table_cell(t, "-");
    }
    table_print(t, out, format);
    table_free(t);
}

static void intensity_table(FILE *out, TableFormat format)
{
    double ridge = H200_BF16_DENSE_FLOPS / H200_HBM_BYTES_PER_S;
    fprintf(out, "H200 ridge point: %.0f TFLOP/s (bf16, dense) / %.1f TB/s = %.0f FLOPs per byte\n\n",
            H200_BF16_DENSE_FLOPS / 1e12, H200_HBM_BYTES_PER_S / 1e12, ridge);
    const char *headers[] = {"model",
                             "query heads per kv head",
                             "FLOPs per byte: fp16",
                             "FP8",
                             "INT8",
                             "INT4",
                             "fp16, share of ridge",
                             "reading one full context at 4.8 TB/s: fp16",
                             "FP8",
                             "INT4"};
    Table *t = table_new(10, headers, "lrrrrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        table_cell(t, "%s", m->name);
        table_cell(t, "%d", m->n_heads / m->n_kv_heads);
        for (int f = 0; f < CALCULATOR_FORMAT_COUNT; f++)
            table_cell(t, "%.1f", decode_attention_intensity(m, CALCULATOR_FORMATS[f]));
        table_cell(t, "%.1f%%", 100 * decode_attention_intensity(m, KV_FORMAT_FP16) / ridge);
        const KvFormat read_in[] = {KV_FORMAT_FP16, KV_FORMAT_FP8_E4M3, KV_FORMAT_INT4};
        for (int f = 0; f < 3; f++)
            table_cell(t, "%.2f ms", 1e3 * m->max_context * kv_bytes_per_token(m, read_in[f]) / H200_HBM_BYTES_PER_S);
    }
    table_print(t, out, format);
    table_free(t);
}

void memory_report(FILE *out, TableFormat format, int context)
{
    fprintf(out,
            "KV cache per token and per sequence (FP8, E4M3 or E5M2: one byte a number, its scales outside the blocks, "
            "two per layer or two per kv head and layer; "
            "INT8: one fp16 scale per token and kv head; INT4: one per %d channels):\n\n",
            KV_DEFAULT_INT4_GROUP);
    shapes_table(out, format);
    fprintf(out,
            "\nTokens of fp16 cache that fit beside the fp16 weights, using %.0f%% of the card "
            "(a card of N GB taken as N GiB):\n\n",
            100 * MEMORY_UTILISATION);
    fit_table(out, format, KV_FORMAT_FP16);
    fprintf(out, "\nThe same with an FP8 cache:\n\n");
    fit_table(out, format, KV_FORMAT_FP8_E4M3);
    fprintf(out, "\nThe same with an INT4 cache:\n\n");
    fit_table(out, format, KV_FORMAT_INT4);
    fprintf(out,
            "\nThe largest batch of sequences of %d tokens on one H200 (%.0f GB), each in whole blocks of %d "
            "positions:\n\n",
            context, H200_GIB, CALCULATOR_BLOCK);
    batch_table(out, format, context);
    fprintf(out, "\nDecode attention, FLOPs per byte of cache read:\n\n");
    intensity_table(out, format);
}
