/* The memory calculator against published figures and against the formula
 * written out by hand: OPT-13B needs 800 KB (KiB) per token in fp16 (the
 * PagedAttention paper), Llama-2-7B about 2 GB at 4096 tokens; INT8 and
 * INT4 add their scales, FP8 has none in its blocks; tokens that fit, the
 * largest batch at a context and FLOPs per byte follow. */
#include <math.h>
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

int main(void)
{
    published_figures();
    every_model_by_the_formula();
    tokens_beside_the_weights();
    largest_batches();
    return test_finish();
}
