#include "chapters/04-kv-cache/memory.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

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

/* The cards of the tokens tables, a card of N GB taken as N GiB; the figure
 * shows the last three, the cards of the chapter's data-centre examples. */
typedef struct {
    const char *name;
    double gib;
} Card;
static const Card CARDS[] = {
    {"24 GB",         24 },
    {"40 GB",         40 },
    {"80 GB",         80 },
    {"141 GB (H200)", 141},
    {"180 GB (B200)", 180},
};
enum { CARD_COUNT = sizeof CARDS / sizeof CARDS[0], FIGURE_FIRST_CARD = 2 };

/* The formats of the tokens figure: fp16, and the two the chapter's kernels
 * read fastest; INT8 sits just under FP8 (memory --all). */
static const KvFormat FIGURE_FORMATS[] = {KV_FORMAT_FP16, KV_FORMAT_FP8_E4M3, KV_FORMAT_INT4};
enum { FIGURE_FORMAT_COUNT = sizeof FIGURE_FORMATS / sizeof FIGURE_FORMATS[0] };
static const char *const FIGURE_FORMAT_NAMES[] = {"fp16", "FP8", "INT4"};

/* The models the prose around the book's tables names; the models a bold
 * cell is about are shown as well, whether named here or not. */
static const char *const DISCUSSED_MODELS[] = {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3.1-405B",
                                               "Qwen2.5-72B"};

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

static void bold_if(Table *t, bool bold)
{
    if (bold)
        table_bold_last(t);
}

static double sequence_gib(const ModelSpec *m, KvFormat format)
{
    return m->max_context * kv_bytes_per_token(m, format) / GIB;
}

/* A model's family is its name up to the last '-': "Llama-2" of "Llama-2-70B". */
static bool same_family(const ModelSpec *a, const ModelSpec *b)
{
    size_t length = (size_t)(strrchr(a->name, '-') - a->name);
    return strrchr(b->name, '-') - b->name == (ptrdiff_t)length && strncmp(a->name, b->name, length) == 0;
}

GqaPair memory_gqa_pair(void)
{
    GqaPair pair = {-1, -1};
    double best_ratio = 1.0;
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        for (int j = 0; j < REAL_MODEL_COUNT; j++) {
            const ModelSpec *larger = &REAL_MODELS[i], *smaller = &REAL_MODELS[j];
            double ratio = kv_bytes_per_token(smaller, KV_FORMAT_FP16) / kv_bytes_per_token(larger, KV_FORMAT_FP16);
            if (same_family(larger, smaller) && larger->parameters > smaller->parameters && ratio > best_ratio) {
                best_ratio = ratio;
                pair = (GqaPair){i, j};
            }
        }
    }
    return pair;
}

bool memory_sequence_fills_a_card(const ModelSpec *m)
{
    return sequence_gib(m, KV_FORMAT_FP16) >= LONG_CONTEXT_CARD_GIB;
}

static bool in_gqa_pair(int model, GqaPair pair)
{
    return model == pair.larger || model == pair.smaller;
}

static bool discussed(int model, GqaPair pair)
{
    for (size_t i = 0; i < sizeof DISCUSSED_MODELS / sizeof DISCUSSED_MODELS[0]; i++)
        if (strcmp(REAL_MODELS[model].name, DISCUSSED_MODELS[i]) == 0)
            return true;
    return in_gqa_pair(model, pair) || memory_sequence_fills_a_card(&REAL_MODELS[model]);
}

/* Every column, every model (memory --all). */
static void full_shapes_table(FILE *out, TableFormat format)
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
    Table *t = TABLE_NEW(headers, "lrrrrrrrrrrrr");
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
        for (int f = 0; f < FIGURE_FORMAT_COUNT; f++)
            table_cell(t, "%.2f GiB", sequence_gib(m, FIGURE_FORMATS[f]));
    }
    table_print(t, out, format);
    table_free(t);
}

/* The models the prose discusses; in bold, the GQA pair's bytes per token
 * and the sequences that fill a 40 GB card. Layers, head_dim and parameters
 * are in the listing above the table; the other formats' sequences are the
 * fp16 one scaled by the bytes per token. */
static void book_shapes_table(FILE *out, TableFormat format)
{
    const char *headers[] = {"model",   "query / kv heads",
                             "context", "KiB per token: fp16",
                             "FP8",     "INT8",
                             "INT4",    "one sequence, full context, fp16"};
    Table *t = TABLE_NEW(headers, "lrrrrrrr");
    GqaPair pair = memory_gqa_pair();
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        if (!discussed(i, pair))
            continue;
        table_cell(t, "%s", m->name);
        table_cell(t, "%d / %d", m->n_heads, m->n_kv_heads);
        table_cell(t, "%d", m->max_context);
        for (int f = 0; f < CALCULATOR_FORMAT_COUNT; f++) {
            table_cell(t, "%.1f", kv_bytes_per_token(m, CALCULATOR_FORMATS[f]) / 1024);
            bold_if(t, f == 0 && in_gqa_pair(i, pair));
        }
        table_cell(t, "%.2f GiB", sequence_gib(m, KV_FORMAT_FP16));
        bold_if(t, memory_sequence_fills_a_card(m));
    }
    table_print(t, out, format);
    table_free(t);
}

static void fit_table(FILE *out, TableFormat format, KvFormat kv_format)
{
    const char *headers[1 + 1 + CARD_COUNT] = {"model", "fp16 weights"};
    for (int c = 0; c < CARD_COUNT; c++)
        headers[2 + c] = CARDS[c].name;
    Table *t = TABLE_NEW(headers, "lrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        table_cell(t, "%s", m->name);
        table_cell(t, "%.1f GiB", 2.0 * m->parameters / GIB);
        for (int c = 0; c < CARD_COUNT; c++) {
            double tokens = tokens_that_fit(m, kv_format, CARDS[c].gib, MEMORY_UTILISATION);
            if (tokens > 0.0)
                count_cell(t, tokens);
            else
                table_cell(t, "-");
        }
    }
    table_print(t, out, format);
    table_free(t);
}

void memory_tokens_figure_data(FILE *out)
{
    fprintf(out,
            "# Tokens of KV cache that fit beside the fp16 weights in %.0f%% of a card (N GB taken as N GiB),\n"
            "# one block per card, its first line naming the card and the formats; NaN: the weights do not fit.\n",
            100 * MEMORY_UTILISATION);
    for (int c = FIGURE_FIRST_CARD; c < CARD_COUNT; c++) {
        fprintf(out, "%s\"%s\"", c > FIGURE_FIRST_CARD ? "\n\n" : "", CARDS[c].name);
        for (int f = 0; f < FIGURE_FORMAT_COUNT; f++)
            fprintf(out, " %s", FIGURE_FORMAT_NAMES[f]);
        fputc('\n', out);
        for (int i = 0; i < REAL_MODEL_COUNT; i++) {
            fprintf(out, "%s", REAL_MODELS[i].name);
            for (int f = 0; f < FIGURE_FORMAT_COUNT; f++) {
                double tokens = tokens_that_fit(&REAL_MODELS[i], FIGURE_FORMATS[f], CARDS[c].gib, MEMORY_UTILISATION);
                fprintf(out, tokens > 0.0 ? " %.0f" : " NaN", tokens);
            }
            fputc('\n', out);
        }
    }
}

/* Sequences of `context` tokens that fit on an H200 in each format; a dash
 * where the model does not take that context or its weights do not fit. */
static bool weights_fit(const ModelSpec *m)
{
    return tokens_that_fit(m, KV_FORMAT_FP16, H200_GIB, MEMORY_UTILISATION) > 0.0;
}

static bool batch_possible(const ModelSpec *m, int context)
{
    return context <= m->max_context && weights_fit(m);
}

/* The book shows the rows that take the context, without the longest-context
 * column, and names the others under the table; --all shows them with dashes. */
static void batch_table(FILE *out, TableFormat format, int context, bool all)
{
    const char *all_headers[] = {"model", "longest context", "fp16", "FP8", "INT8", "INT4", "FP8 / fp16"};
    const char *book_headers[] = {"model", "fp16", "FP8", "INT8", "INT4", "FP8 / fp16"};
    Table *t = all ? TABLE_NEW(all_headers, "lrrrrrr") : TABLE_NEW(book_headers, "lrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        bool possible = batch_possible(m, context);
        if (!all && !possible)
            continue;
        table_cell(t, "%s", m->name);
        if (all)
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

/* How many models `pick` holds for. */
static int count_models(bool (*pick)(const ModelSpec *, int), int context)
{
    int count = 0;
    for (int i = 0; i < REAL_MODEL_COUNT; i++)
        count += pick(&REAL_MODELS[i], context);
    return count;
}

/* "A, B and C", of the models for which `pick` holds. */
static void print_model_list(FILE *out, bool (*pick)(const ModelSpec *, int), int context)
{
    int count = count_models(pick, context), printed = 0;
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        if (!pick(&REAL_MODELS[i], context))
            continue;
        printed++;
        fprintf(out, "%s%s", printed == 1 ? "" : printed == count ? " and " : ", ", REAL_MODELS[i].name);
    }
}

static bool too_short(const ModelSpec *m, int context)
{
    return weights_fit(m) && context > m->max_context;
}

static bool too_heavy(const ModelSpec *m, int context)
{
    (void)context;
    return !weights_fit(m);
}

/* One sentence naming the models the book's batch table leaves out, each
 * clause only where it names a model. */
static void print_left_out_of_the_batch_table(FILE *out, int context)
{
    int short_count = count_models(too_short, context), heavy_count = count_models(too_heavy, context);
    if (short_count + heavy_count == 0)
        return;
    fprintf(out, "\nNot in the table (`memory --all` shows them with dashes): ");
    if (short_count > 0) {
        print_model_list(out, too_short, context);
        fprintf(out, " %s not take %d tokens%s", short_count == 1 ? "does" : "do", context,
                heavy_count > 0 ? "; " : ".\n");
    }
    if (heavy_count > 0) {
        fprintf(out, "the fp16 weights of ");
        print_model_list(out, too_heavy, context);
        fprintf(out, " do not fit on the card.\n");
    }
}

static double share_of_ridge(const ModelSpec *m)
{
    return decode_attention_intensity(m, KV_FORMAT_FP16) / (H200_BF16_DENSE_FLOPS / H200_HBM_BYTES_PER_S);
}

/* The model whose share of the ridge is the largest (`sign` +1: the one with
 * the most query heads per kv head) or the smallest (-1). */
static int extreme_share_of_ridge(int sign)
{
    int extreme = 0;
    for (int i = 1; i < REAL_MODEL_COUNT; i++)
        if (sign * (share_of_ridge(&REAL_MODELS[i]) - share_of_ridge(&REAL_MODELS[extreme])) > 0)
            extreme = i;
    return extreme;
}

static void full_intensity_table(FILE *out, TableFormat format)
{
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
    Table *t = TABLE_NEW(headers, "lrrrrrrrrr");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        table_cell(t, "%s", m->name);
        table_cell(t, "%d", m->n_heads / m->n_kv_heads);
        for (int f = 0; f < CALCULATOR_FORMAT_COUNT; f++)
            table_cell(t, "%.1f", decode_attention_intensity(m, CALCULATOR_FORMATS[f]));
        table_cell(t, "%.1f%%", 100 * share_of_ridge(m));
        for (int f = 0; f < FIGURE_FORMAT_COUNT; f++)
            table_cell(t, "%.2f ms",
                       1e3 * m->max_context * kv_bytes_per_token(m, FIGURE_FORMATS[f]) / H200_HBM_BYTES_PER_S);
    }
    table_print(t, out, format);
    table_free(t);
}

/* The models the prose discusses, fp16 and INT4 (FP8 and INT8 lie between);
 * in bold, the share of the ridge closest to it. */
static void book_intensity_table(FILE *out, TableFormat format)
{
    const char *headers[] = {"model", "query heads per kv head", "FLOPs per byte: fp16",
                             "INT4",  "fp16, share of ridge",    "reading a full context: fp16",
                             "INT4"};
    const KvFormat shown[] = {KV_FORMAT_FP16, KV_FORMAT_INT4};
    Table *t = TABLE_NEW(headers, "lrrrrrr");
    GqaPair pair = memory_gqa_pair();
    int closest = extreme_share_of_ridge(+1);
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        if (!discussed(i, pair) && i != closest)
            continue;
        table_cell(t, "%s", m->name);
        table_cell(t, "%d", m->n_heads / m->n_kv_heads);
        for (int f = 0; f < 2; f++)
            table_cell(t, "%.1f", decode_attention_intensity(m, shown[f]));
        table_cell(t, "%.1f%%", 100 * share_of_ridge(m));
        bold_if(t, i == closest);
        for (int f = 0; f < 2; f++)
            table_cell(t, "%.2f ms", 1e3 * m->max_context * kv_bytes_per_token(m, shown[f]) / H200_HBM_BYTES_PER_S);
    }
    table_print(t, out, format);
    table_free(t);
    const ModelSpec *near = &REAL_MODELS[closest], *far = &REAL_MODELS[extreme_share_of_ridge(-1)];
    fprintf(out, "\nOver all %d models, fp16 decode attention is at %.1f%% (%s) to %.1f%% (%s) of the ridge point.\n",
            REAL_MODEL_COUNT, 100 * share_of_ridge(far), far->name, 100 * share_of_ridge(near), near->name);
}

void memory_report(FILE *out, TableFormat format, int context, bool all)
{
    fprintf(out,
            "KV cache per token and per sequence (FP8, E4M3 or E5M2: one byte a number, its scales outside the blocks, "
            "two per layer or two per kv head and layer; "
            "INT8: one fp16 scale per token and kv head; INT4: one per %d channels):\n\n",
            KV_DEFAULT_INT4_GROUP);
    if (all) {
        full_shapes_table(out, format);
        fprintf(out,
                "\nTokens of fp16 cache that fit beside the fp16 weights, using %.0f%% of the card "
                "(a card of N GB taken as N GiB):\n\n",
                100 * MEMORY_UTILISATION);
        fit_table(out, format, KV_FORMAT_FP16);
        fprintf(out, "\nThe same with an FP8 cache:\n\n");
        fit_table(out, format, KV_FORMAT_FP8_E4M3);
        fprintf(out, "\nThe same with an INT4 cache:\n\n");
        fit_table(out, format, KV_FORMAT_INT4);
    } else {
        book_shapes_table(out, format);
    }
    fprintf(out,
            "\nThe largest batch of sequences of %d tokens on one H200 (%.0f GB), each in whole blocks of %d "
            "positions:\n\n",
            context, H200_GIB, CALCULATOR_BLOCK);
    batch_table(out, format, context, all);
    if (!all)
        print_left_out_of_the_batch_table(out, context);
    double ridge = H200_BF16_DENSE_FLOPS / H200_HBM_BYTES_PER_S;
    fprintf(out,
            "\nDecode attention, FLOPs per byte of cache read. H200 ridge point: %.0f TFLOP/s (bf16, dense) / "
            "%.1f TB/s = %.0f FLOPs per byte:\n\n",
            H200_BF16_DENSE_FLOPS / 1e12, H200_HBM_BYTES_PER_S / 1e12, ridge);
    if (all)
        full_intensity_table(out, format);
    else
        book_intensity_table(out, format);
}
