/* The memory calculator against published figures and against the formula
 * written out by hand: OPT-13B needs 800 KB (KiB) per token in fp16 (the
 * PagedAttention paper), Llama-2-7B about 2 GB at 4096 tokens; INT8 and
 * INT4 add their scales, FP8 has none in its blocks; tokens that fit, the
 * largest batch at a context and FLOPs per byte follow. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/04-kv-cache/memory.h"
#include "common/testing.h"

static const ModelSpec *find_model(const char *name)
{
    for (int i = 0; i < REAL_MODEL_COUNT; i++)
        if (strcmp(REAL_MODELS[i].name, name) == 0)
            return &REAL_MODELS[i];
    return NULL;
}

static void published_figures(void)
{
    /* OPT-13B: 40 layers, hidden size 5120 = 40 heads of 128, multi-head attention. */
    const ModelSpec opt_13b = {"OPT-13B", 40, 40, 40, 128, 2048, 12.9e9};
    double opt = kv_bytes_per_token(&opt_13b, KV_FORMAT_FP16);
    EXPECT(opt == 800.0 * 1024, "OPT-13B: %.0f bytes per token, the paper's 800 KB (2 x 5120 x 40 x 2)", opt);

    const ModelSpec *llama = find_model("Llama-2-7B");
    EXPECT(llama != NULL, "Llama-2-7B is in the table");
    if (llama == NULL)
        return;
    double at_4096 = 4096 * kv_bytes_per_token(llama, KV_FORMAT_FP16);
    EXPECT(at_4096 == 2.0 * 1024 * 1024 * 1024, "Llama-2-7B at 4096 tokens: %.0f bytes, 2 GiB", at_4096);
    EXPECT(at_4096 > 2.1e9 && at_4096 < 2.2e9, "that is about 2 GB (2.15e9 bytes)");
}

static void every_model_by_the_formula(void)
{
    EXPECT(REAL_MODEL_COUNT == 10, "the ten models of the chapter");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        double numbers = 2.0 * m->layers * m->n_kv_heads * m->head_dim; /* keys and values */
        double fp16 = kv_bytes_per_token(m, KV_FORMAT_FP16);
        /* INT8: a byte per number and a 2-byte scale per head_dim numbers;
         * INT4: half a byte per number and a 2-byte scale per 32. */
        double int8 = numbers * (1.0 + 2.0 / m->head_dim), int4 = numbers * (0.5 + 2.0 / 32);
        EXPECT(fp16 == 2 * numbers, "%s: fp16 is 2 bytes per number", m->name);
        /* FP8: a byte per number, its per-tensor scales outside the blocks. */
        EXPECT(kv_bytes_per_token(m, KV_FORMAT_FP8_E4M3) == numbers, "%s: FP8 E4M3 is 1 byte per number", m->name);
        EXPECT(kv_bytes_per_token(m, KV_FORMAT_FP8_E5M2) == numbers, "%s: FP8 E5M2 is 1 byte per number", m->name);
        EXPECT(kv_bytes_per_token(m, KV_FORMAT_INT8) == int8, "%s: INT8 with its scales", m->name);
        EXPECT(kv_bytes_per_token(m, KV_FORMAT_INT4) == int4, "%s: INT4 with its scales", m->name);
        EXPECT(m->n_heads % m->n_kv_heads == 0, "%s: query heads a multiple of kv heads", m->name);
        EXPECT(decode_attention_intensity(m, KV_FORMAT_FP16) == (double)m->n_heads / m->n_kv_heads,
               "%s: fp16 decode attention does (query heads / kv heads) FLOPs per byte", m->name);
    }
}

static void tokens_beside_the_weights(void)
{
    const ModelSpec *llama = find_model("Llama-2-7B");
    const ModelSpec *big = find_model("Llama-3.1-405B");
    if (llama == NULL || big == NULL) {
        EXPECT(false, "the models of this test are in the table");
        return;
    }
    double room = 0.9 * 80 * 1073741824.0 - 2 * 6738415616.0;
    EXPECT(tokens_that_fit(llama, KV_FORMAT_FP16, 80, 0.9) == floor(room / 524288),
           "Llama-2-7B on 80 GB: what is left of 90%% after the fp16 weights, in 512 KiB tokens");
    EXPECT(tokens_that_fit(big, KV_FORMAT_FP16, 180, 0.9) == 0, "405B parameters in fp16 do not fit on 180 GB");
    EXPECT(tokens_that_fit(llama, KV_FORMAT_INT4, 80, 0.9) > 3.5 * tokens_that_fit(llama, KV_FORMAT_FP16, 80, 0.9),
           "an INT4 cache holds 256/72 as many tokens as fp16");
}

/* The batch written out by hand: the room after the weights, in tokens of
 * the format, divided by the context rounded up to whole blocks of 16. */
static double batch_by_hand(double parameters, double bytes_per_token, double card_gib, int context)
{
    double tokens = floor((0.9 * card_gib * 1073741824.0 - 2 * parameters) / bytes_per_token);
    double slots = 16.0 * ((context + 15) / 16);
    return floor(tokens / slots);
}

static void largest_batches(void)
{
    const ModelSpec *llama = find_model("Llama-3-8B");
    if (llama == NULL) {
        EXPECT(false, "Llama-3-8B is in the table");
        return;
    }
    /* 32 layers, 8 kv heads of 128: 65536 numbers a token. */
    const int contexts[] = {1, 15, 16, 17, 4000, 8192, 32768};
    for (size_t i = 0; i < sizeof contexts / sizeof contexts[0]; i++) {
        int c = contexts[i];
        double fp16 = largest_batch(llama, KV_FORMAT_FP16, 141, 0.9, c);
        double fp8 = largest_batch(llama, KV_FORMAT_FP8_E4M3, 141, 0.9, c);
        EXPECT(fp16 == batch_by_hand(8030261248.0, 131072, 141, c), "fp16 at %d tokens: %.0f sequences", c, fp16);
        EXPECT(fp8 == batch_by_hand(8030261248.0, 65536, 141, c), "FP8 at %d tokens: %.0f sequences", c, fp8);
        EXPECT(largest_batch(llama, KV_FORMAT_FP8_E5M2, 141, 0.9, c) == fp8, "E5M2 holds the batch of E4M3 at %d", c);
        EXPECT(fp8 >= 2 * fp16 && fp8 <= 2 * fp16 + 1, "half the bytes, twice the batch (to a sequence) at %d", c);
    }
    const ModelSpec *big = find_model("Llama-3.1-405B");
    EXPECT(big != NULL && largest_batch(big, KV_FORMAT_FP8_E4M3, 141, 0.9, 8192) == 0,
           "no batch at all where the weights do not fit");
}

/* The pair the prose names for grouped-query attention, and what makes it
 * that: the larger model shares its kv heads, the smaller does not, and the
 * larger keeps the smaller cache per token. */
static void the_gqa_pair_of_the_prose(void)
{
    GqaPair pair = memory_gqa_pair();
    EXPECT(pair.larger >= 0 && pair.smaller >= 0, "a pair is found");
    if (pair.larger < 0 || pair.smaller < 0)
        return;
    const ModelSpec *larger = &REAL_MODELS[pair.larger], *smaller = &REAL_MODELS[pair.smaller];
    EXPECT(strcmp(larger->name, "Llama-2-70B") == 0 && strcmp(smaller->name, "Llama-2-13B") == 0,
           "the prose's pair, Llama-2-70B and Llama-2-13B: got %s and %s", larger->name, smaller->name);
    EXPECT(larger->n_kv_heads < larger->n_heads && smaller->n_kv_heads == smaller->n_heads,
           "the larger shares kv heads, the smaller has one per query head");
    double by_hand_larger = 2.0 * 2 * larger->layers * larger->n_kv_heads * larger->head_dim;
    double by_hand_smaller = 2.0 * 2 * smaller->layers * smaller->n_kv_heads * smaller->head_dim;
    EXPECT(larger->parameters > smaller->parameters && by_hand_larger < by_hand_smaller,
           "more parameters, fewer bytes per token: %.0f against %.0f", by_hand_larger, by_hand_smaller);
}

/* "One sequence at the full context of Llama-3.1-405B, or of Qwen2.5-72B,
 * holds as much cache as a 40 GB card has memory, or more": those two and no
 * other, by the bytes written out by hand. */
static void the_sequences_that_fill_a_card(void)
{
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        double bytes = (double)m->max_context * 2 * 2 * m->layers * m->n_kv_heads * m->head_dim;
        bool named = strcmp(m->name, "Llama-3.1-405B") == 0 || strcmp(m->name, "Qwen2.5-72B") == 0;
        EXPECT(memory_sequence_fills_a_card(m) == (bytes >= 40 * 1073741824.0), "%s: %.2f GiB against the 40 GiB card",
               m->name, bytes / 1073741824.0);
        EXPECT(memory_sequence_fills_a_card(m) == named, "%s: %s the prose names", m->name,
               named ? "one of the models" : "not a model");
    }
}

/* "Decode attention is more than an order of magnitude below the ridge for
 * every model, and more than two for those without grouped-query attention":
 * (query heads / kv heads) FLOPs per byte in fp16, against 989 TFLOP/s over
 * 4.8 TB/s. */
static void below_the_ridge(void)
{
    double ridge = 989e12 / 4.8e12;
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        const ModelSpec *m = &REAL_MODELS[i];
        double intensity = decode_attention_intensity(m, KV_FORMAT_FP16);
        EXPECT(intensity < ridge / 10, "%s: %.1f FLOPs per byte, under a tenth of %.0f", m->name, intensity, ridge);
        EXPECT(m->n_kv_heads < m->n_heads || intensity < ridge / 100, "%s without GQA: under a hundredth", m->name);
    }
}

/* The figure's data: a block per card, every model in every block (none
 * dropped), NaN exactly where the fp16 weights do not fit in 90% of the card,
 * and FP8 holding twice the tokens of fp16 (to a token: each is floored). */
static void the_tokens_figure_data(void)
{
    CapturedOutput captured;
    memory_tokens_figure_data(capture_output(&captured));
    char *text = captured_text(&captured);
    int blocks = 0, rows = 0;
    double card = 0.0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        if (line[0] == '"') {
            EXPECT(blocks == 0 || rows == REAL_MODEL_COUNT, "block %d has all %d models", blocks, REAL_MODEL_COUNT);
            card = atof(line + 1); /* "141 GB (H200)": 141 */
            blocks++;
            rows = 0;
            continue;
        }
        char name[64];
        double fp16, fp8, int4;
        EXPECT(sscanf(line, "%63s %lf %lf %lf", name, &fp16, &fp8, &int4) == 4, "a model and three counts: %s", line);
        const ModelSpec *m = find_model(name);
        EXPECT(m != NULL && m == &REAL_MODELS[rows], "row %d is model %d: %s", rows, rows, name);
        if (m != NULL) {
            bool fit = 2 * m->parameters < 0.9 * card * 1073741824.0;
            EXPECT(fit == !isnan(fp16) && fit == !isnan(fp8) && fit == !isnan(int4),
                   "%s on %.0f GB: NaN exactly where the weights do not fit", name, card);
            EXPECT(!fit || (fp8 >= 2 * fp16 && fp8 <= 2 * fp16 + 1 && int4 > 3.5 * fp16),
                   "%s on %.0f GB: FP8 twice fp16, INT4 256/72 of it", name, card);
        }
        rows++;
    }
    EXPECT(blocks == 3 && rows == REAL_MODEL_COUNT, "three cards of %d models: %d blocks", REAL_MODEL_COUNT, blocks);
    free(text);
}

static int count_of(const char *text, const char *needle)
{
    int count = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        count++;
    return count;
}

/* The book's tables: the bold cells are the claims' (the GQA pair's bytes per
 * token, the two sequences that fill a card, the share closest to the ridge),
 * each on a row that is shown; --all shows every model in each of its six
 * tables. */
static void the_book_and_the_full_report(void)
{
    CapturedOutput captured;
    memory_report(capture_output(&captured), TABLE_MARKDOWN, 8192, false);
    char *book = captured_text(&captured);
    EXPECT(count_of(book, "**") == 2 * 5, "five bold cells:\n%s", book);
    EXPECT(strstr(book, "**320.0**") != NULL && strstr(book, "**800.0**") != NULL, "the GQA pair's KiB per token");
    EXPECT(strstr(book, "**63.00 GiB**") != NULL && strstr(book, "**40.00 GiB**") != NULL,
           "the two sequences that fill a 40 GB card");
    EXPECT(count_of(book, "Mistral-7B") == 1, "Mistral-7B only in the batch table, which shows every row it can");
    memory_report(capture_output(&captured), TABLE_MARKDOWN, 8192, true);
    char *all = captured_text(&captured);
    EXPECT(strstr(all, "**") == NULL, "nothing bold in the full tables");
    for (int i = 0; i < REAL_MODEL_COUNT; i++) {
        char row[64];
        snprintf(row, sizeof row, "| %s ", REAL_MODELS[i].name);
        EXPECT(count_of(all, row) == 6, "%s in all six tables of --all", REAL_MODELS[i].name);
    }
    free(book);
    free(all);
}

int main(void)
{
    published_figures();
    every_model_by_the_formula();
    tokens_beside_the_weights();
    largest_batches();
    below_the_ridge();
    the_gqa_pair_of_the_prose();
    the_sequences_that_fill_a_card();
    the_tokens_figure_data();
    the_book_and_the_full_report();
    return test_finish();
}
