#include "expect_topk.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "chapters/04-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/rng.h"

/* softmax_exp returns 0 instead of the subnormals below FLT_MIN. */
#define PROB_ATOL ((double)FLT_MIN)

double topk_rtol_sequential_sum(size_t vocab)
{
    return TOPK_RTOL_TREE_SUM + (double)(vocab - 1) * 0x1p-24;
}

typedef struct {
    size_t failures;
    size_t first_row;
    int first_j;
    double rtol;
    double worst_used, worst_rel;
    char first[200];
} Mismatch;

static void check_row(const float *logits, size_t row, size_t vocab, int k, const float *probs,
                      const int64_t *indices, double *ref_probs, int64_t *ref_indices, Mismatch *m)
{
    softmax_topk_reference(logits + row * vocab, vocab, k, ref_probs, ref_indices);
    for (int j = 0; j < k; j++) {
        float got = probs[row * (size_t)k + (size_t)j];
        int64_t index = indices[row * (size_t)k + (size_t)j];
        double ref = ref_probs[j];
        bool ok;
        if (isnan(ref)) {
            ok = isnan(got);
        } else {
            double limit = PROB_ATOL + m->rtol * fabs(ref);
            double error = fabs((double)got - ref);
            ok = error <= limit;
            if (ok && error / limit > m->worst_used) {
                m->worst_used = error / limit;
            }
            if (ok && ref >= PROB_ATOL && error / ref > m->worst_rel) {
                m->worst_rel = error / ref;
            }
        }
        ok = ok && index == ref_indices[j];
        if (!ok && m->failures++ == 0) {
            snprintf(m->first, sizeof m->first, "row %zu place %d: got index %lld prob %.9g, expected %lld %.9g",
                     row, j, (long long)index, (double)got, (long long)ref_indices[j], ref);
        }
    }
}

bool topk_matches_reference(const char *what, const float *logits, size_t rows, size_t vocab, int k,
                            const float *probs, const int64_t *indices, double rtol)
{
    double *ref_probs = ALLOC_ARRAY(double, (size_t)k);
    int64_t *ref_indices = ALLOC_ARRAY(int64_t, (size_t)k);
    Mismatch m = {.rtol = rtol};
    for (size_t row = 0; row < rows; row++) {
        check_row(logits, row, vocab, k, probs, indices, ref_probs, ref_indices, &m);
    }
    array_free(ref_probs);
    array_free(ref_indices);
    if (m.failures == 0) {
        printf("ok   %s: %zu rows x %d, max relative error %.2g, %.0f%% of rtol %.2g\n", what, rows, k,
               m.worst_rel, 100.0 * m.worst_used, rtol);
        return true;
    }
    printf("FAIL %s: %zu of %zu places differ; first: %s\n", what, m.failures, rows * (size_t)k, m.first);
    return false;
}

void fill_test_logits(float *logits, size_t count, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, logits, count, 0.0, 3.0);
    /* Multiples of 1/16: a few hundred distinct values, so a long row has
     * ties among its top K, the case where kernels disagree. */
    for (size_t i = 0; i < count; i++) {
        logits[i] = roundf(logits[i] * 16.0f) / 16.0f;
    }
}
