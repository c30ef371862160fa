/* The fused version and the sampler on logits stored in 16 bits (fp16 and
 * bf16), read as they are: the same results, to the bit, as on the same
 * logits widened to float32 first (widening is exact, so there is nothing
 * to tolerate), for irregular V, every K structure, the special values,
 * and several threads; widen_logits gives each type's widening
 * (kernels/fp16.h, kernels/bf16.h) on every one of the 65536 patterns; and
 * the pass without its top K, which the benchmark times beside the fused
 * pass, has the fused pass's own softmax state. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/bf16.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"

/* Every 16-bit pattern widened at once (the vector loop), against the
 * scalar conversions of kernels/: the same float bits, NaN payloads and
 * signs included. */
static void test_widen_every_pattern(void)
{
    enum { PATTERNS = 1 << 16 };
    uint16_t *bits = ALLOC_ARRAY(PATTERNS, uint16_t);
    float *widened = ALLOC_ARRAY(PATTERNS, float);
    for (int i = 0; i < PATTERNS; i++) {
        bits[i] = (uint16_t)i;
    }
    const LogitsType types[] = {LOGITS_FLOAT16, LOGITS_BFLOAT16};
    for (int t = 0; t < 2; t++) {
        widen_logits((StoredLogits){bits, types[t]}, 0, PATTERNS, widened);
        int wrong = 0, first = -1;
        for (int i = 0; i < PATTERNS; i++) {
            float expected = types[t] == LOGITS_FLOAT16 ? half_to_float(bits[i]) : bf16_to_float(bits[i]);
            if (float_bits(widened[i]) != float_bits(expected)) {
                first = wrong++ == 0 ? i : first;
            }
        }
        EXPECT(wrong == 0, "type %d: %d of 65536 patterns widened wrong, the first 0x%04x", (int)types[t], wrong,
               first);
    }
    array_free(bits);
    array_free(widened);
}

enum { ROWS = 7 };

/* Random logits, then the special rows: a NaN, a +inf, only -inf, and a row
 * of few distinct values (ties everywhere, and, in fp16, subnormals). */
static void fill_logits(float *x, size_t vocab, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, x, ROWS * vocab, 0.0, 3.0);
    x[1 * vocab + vocab / 2] = NAN;
    x[2 * vocab + vocab / 3] = INFINITY;
    for (size_t i = 0; i < vocab; i++) {
        x[3 * vocab + i] = -INFINITY;
        x[4 * vocab + i] = (float)(i % 5) * 1e-6f - 3.0f;
    }
}

/* The logits stored in 16 bits of `type`, and the floats they stand for. */
static void store_in_16_bits(const float *x, size_t count, LogitsType type, uint16_t *stored, float *widened)
{
    for (size_t i = 0; i < count; i++) {
        stored[i] = type == LOGITS_FLOAT16 ? half_from_float(x[i]) : (uint16_t)(float_bits(x[i]) >> 16);
        widened[i] = type == LOGITS_FLOAT16 ? half_to_float(stored[i]) : bf16_to_float(stored[i]);
    }
}

static bool same_bytes(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}

static void check_type(LogitsType type, size_t vocab, int k, int threads)
{
    size_t count = ROWS * vocab, out = ROWS * (size_t)k;
    float *x = ALLOC_ARRAY(count, float), *widened = ALLOC_ARRAY(count, float);
    uint16_t *stored = ALLOC_ARRAY(count, uint16_t);
    float *probs16 = ALLOC_ARRAY(out, float), *probs32 = ALLOC_ARRAY(out, float);
    int64_t *indices16 = ALLOC_ARRAY(out, int64_t), *indices32 = ALLOC_ARRAY(out, int64_t);
    fill_logits(x, vocab, vocab + (size_t)k);
    store_in_16_bits(x, count, type, stored, widened);
    StoredLogits as_stored = {stored, type};
    softmax_topk_stored_rows(as_stored, ROWS, vocab, k, threads, probs16, indices16);
    softmax_topk_rows(CPU_FUSED, widened, ROWS, vocab, k, threads, probs32, indices32);
    EXPECT(same_bytes(probs16, probs32, out * sizeof(float)) && same_bytes(indices16, indices32, out * sizeof(int64_t)),
           "type %d, V = %zu, K = %d, %d threads: the top K of the 16-bit logits differs from the widened ones'",
           (int)type, vocab, k, threads);
    /* The sampler: the same candidates, so the same survivors and tokens. */
    enum { SAMPLES = 16 };
    int64_t tokens16[ROWS * SAMPLES], tokens32[ROWS * SAMPLES];
    SamplingParams params = sampling_params_top_k(k);
    params.top_p = 0.8;
    params.temperature = 0.7;
    sample_rows(as_stored, ROWS, vocab, params, DRAW_INVERSE_CDF, 3, SAMPLES, threads, tokens16, probs16, indices16);
    sample_rows(float32_logits(widened), ROWS, vocab, params, DRAW_INVERSE_CDF, 3, SAMPLES, threads, tokens32, probs32,
                indices32);
    EXPECT(same_bytes(tokens16, tokens32, sizeof tokens16) && same_bytes(probs16, probs32, out * sizeof(float)) &&
               same_bytes(indices16, indices32, out * sizeof(int64_t)),
           "type %d, V = %zu, K = %d: the sampler on the 16-bit logits differs from the widened ones'", (int)type,
           vocab, k);
    array_free(x);
    array_free(widened);
    array_free(stored);
    array_free(probs16);
    array_free(probs32);
    array_free(indices16);
    array_free(indices32);
}

/* V: one logit, less than a lane block, one block, a chunk and a tail,
 * many chunks and a tail. K: the sorted list, the floor with one group and
 * with four, and no floor (K > 64). */
static void test_fused_reads_16_bits(void)
{
    const size_t vocabs[] = {1, 63, 64, 1001, 50257};
    const int ks[] = {1, 8, 64, 100};
    const LogitsType types[] = {LOGITS_FLOAT16, LOGITS_BFLOAT16};
    for (int t = 0; t < 2; t++) {
        for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
            for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
                if ((size_t)ks[c] <= vocabs[v]) {
                    check_type(types[t], vocabs[v], ks[c], 1 + (int)(c % 3));
                }
            }
        }
    }
}

/* The pass without its top K (the benchmark's reference) is the fused
 * pass's own: its state gives, to the bit, the probability the fused pass
 * gave its top 1, on every row (NaN, +inf and -inf ones too), every type,
 * irregular V and several threads. */
static void check_pass_alone(LogitsType type, size_t vocab, int threads)
{
    size_t count = ROWS * vocab;
    float *x = ALLOC_ARRAY(count, float), *widened = ALLOC_ARRAY(count, float), probs[ROWS];
    uint16_t *stored = ALLOC_ARRAY(count, uint16_t);
    int64_t indices[ROWS];
    SoftmaxState states[ROWS];
    fill_logits(x, vocab, 2 * vocab + 1);
    StoredLogits logits = float32_logits(x);
    if (type != LOGITS_FLOAT32) {
        store_in_16_bits(x, count, type, stored, widened);
        logits = (StoredLogits){stored, type};
    } else {
        memcpy(widened, x, count * sizeof *x);
    }
    softmax_topk_stored_rows(logits, ROWS, vocab, 1, threads, probs, indices);
    softmax_state_stored_rows(logits, ROWS, vocab, threads, states);
    int wrong = 0, first = -1;
    for (int row = 0; row < ROWS; row++) {
        float top = widened[(size_t)row * vocab + (size_t)indices[row]];
        if (!test_same_float(softmax_probability(states[row], top), probs[row])) {
            first = wrong++ == 0 ? row : first;
        }
    }
    EXPECT(wrong == 0, "type %d, V = %zu, %d threads: %d of %d rows' states differ from the fused pass's, the first %d",
           (int)type, vocab, threads, wrong, ROWS, first);
    array_free(x);
    array_free(widened);
    array_free(stored);
}

static void test_pass_alone(void)
{
    const size_t vocabs[] = {1, 63, 64, 1001, 50257};
    const LogitsType types[] = {LOGITS_FLOAT32, LOGITS_FLOAT16, LOGITS_BFLOAT16};
    for (int t = 0; t < 3; t++) {
        for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
            check_pass_alone(types[t], vocabs[v], 1 + (int)(v % 3));
        }
    }
}

int main(void)
{
    test_widen_every_pattern();
    test_fused_reads_16_bits();
    test_pass_alone();
    return test_finish();
}
