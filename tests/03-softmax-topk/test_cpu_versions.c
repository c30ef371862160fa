/* The three CPU versions against the double reference: irregular shapes,
 * every K structure, the hard inputs, and several threads. */
#include <stdio.h>
#include <string.h>

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"

/* The fused version sums in chunks; the other two one logit at a time. */
static double cpu_rtol(CpuVersion version, size_t vocab)
{
    return version == CPU_FUSED ? TOPK_RTOL_TREE_SUM : topk_rtol_sequential_sum(vocab);
}

static bool run_and_check(CpuVersion version, const char *what, const float *logits, size_t rows, size_t vocab, int k,
                          int threads)
{
    float *probs = ALLOC_ARRAY(rows * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY(rows * (size_t)k, int64_t);
    softmax_topk_rows(version, logits, rows, vocab, k, threads, probs, indices);
    char label[200];
    snprintf(label, sizeof label, "%s: %s", cpu_version_name(version), what);
    bool ok = topk_matches_reference(label, logits, rows, vocab, k, probs, indices, cpu_rtol(version, vocab));
    array_free(probs);
    array_free(indices);
    return ok;
}

static void test_hard_inputs(void)
{
    for (int c = 0; c < HARD_INPUT_COUNT; c++) {
        const HardInput *input = &HARD_INPUTS[c];
        float *row = ALLOC_ARRAY(input->vocab, float);
        input->fill(row, input->vocab);
        for (CpuVersion v = CPU_NAIVE; v <= CPU_FUSED; v++) {
            EXPECT(run_and_check(v, input->name, row, 1, input->vocab, input->k, 1), "%s: %s", cpu_version_name(v),
                   input->name);
        }
        array_free(row);
    }
}

/* Shapes that are not powers of two, around the fused chunk (256) and the
 * list/buffer switch (K = 32/33), with K up to V. */
static void test_shapes(void)
{
    const size_t vocabs[] = {2, 3, 5, 17, 255, 256, 257, 781, 1823, 50257};
    const int ks[] = {1, 2, 7, 32, 33, 64, 100, 256, 1823};
    for (size_t a = 0; a < sizeof vocabs / sizeof vocabs[0]; a++) {
        size_t vocab = vocabs[a], rows = vocab > 10000 ? 3 : 5;
        float *logits = ALLOC_ARRAY(rows * vocab, float);
        fill_tied_logits(logits, rows * vocab, vocab);
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
            int k = ks[b] > (int)vocab ? (int)vocab : ks[b];
            char what[64];
            snprintf(what, sizeof what, "V = %zu, K = %d", vocab, k);
            for (CpuVersion v = CPU_NAIVE; v <= CPU_FUSED; v++) {
                EXPECT(run_and_check(v, what, logits, rows, vocab, k, 1), "%s: %s", cpu_version_name(v), what);
            }
        }
        array_free(logits);
    }
}

/* Logits of three values only: the K-th best is tied with hundreds of
 * others, in many chunks. The fused version offers only logits at least
 * its floor, which here equals the K-th best: the ties at the floor must
 * get in, by index. */
static void test_ties_at_floor(void)
{
    enum { ROWS = 3, VOCAB = 3001 };
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    for (size_t i = 0; i < ROWS * VOCAB; i++) {
        logits[i] = (float)((i * 7919) % 3);
    }
    const int ks[] = {1, 8, 16, 33, 64, 1500};
    for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
        char what[64];
        snprintf(what, sizeof what, "three values, K = %d", ks[b]);
        EXPECT(run_and_check(CPU_FUSED, what, logits, ROWS, VOCAB, ks[b], 1), "fused: %s", what);
    }
    array_free(logits);
}

/* Rows split over threads give the same bits as one thread. */
static void test_threads(void)
{
    enum { ROWS = 13, VOCAB = 3001, K = 40 };
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    fill_tied_logits(logits, ROWS * VOCAB, 7);
    for (CpuVersion v = CPU_NAIVE; v <= CPU_FUSED; v++) {
        float *p1 = ALLOC_ARRAY(ROWS * K, float), *p2 = ALLOC_ARRAY(ROWS * K, float);
        int64_t *i1 = ALLOC_ARRAY(ROWS * K, int64_t), *i2 = ALLOC_ARRAY(ROWS * K, int64_t);
        softmax_topk_rows(v, logits, ROWS, VOCAB, K, 1, p1, i1);
        softmax_topk_rows(v, logits, ROWS, VOCAB, K, 3, p2, i2);
        EXPECT(memcmp(p1, p2, sizeof(float) * ROWS * K) == 0 && memcmp(i1, i2, sizeof(int64_t) * ROWS * K) == 0,
               "%s: 1 and 3 threads differ", cpu_version_name(v));
        EXPECT(topk_matches_reference(cpu_version_name(v), logits, ROWS, VOCAB, K, p2, i2, cpu_rtol(v, VOCAB)),
               "%s: 3 threads", cpu_version_name(v));
        array_free(p1);
        array_free(p2);
        array_free(i1);
        array_free(i2);
    }
    array_free(logits);
}

int main(void)
{
    test_hard_inputs();
    test_shapes();
    test_ties_at_floor();
    test_threads();
    return test_finish();
}
