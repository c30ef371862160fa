#include "chapters/03-softmax-topk/compare.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"

/* Probabilities below FLT_MIN are subnormal floats, on a grid of spacing
 * 2^-149 = FLT_TRUE_MIN: exp rounds to it once (twice on the CPU, to 24 bits
 * and then to the grid) and the division by the sum once more, so a
 * correct subnormal probability is within 2 steps of the grid. */
#define PROB_ATOL (2.0 * (double)FLT_TRUE_MIN)

double topk_rtol_sequential_sum(size_t terms)
{
    return TOPK_RTOL_TREE_SUM + (double)(terms - 1) * 0x1p-24;
}

double topk_rtol_gpu(size_t vocab)
{
    return topk_rtol_sequential_sum((vocab + 31) / 32);
}

static bool probability_ok(float got, double ref, double rtol, TopkComparison *c)
{
    if (isnan(ref) || isnan(got)) {
        return isnan(ref) && isnan(got);
    }
    double limit = PROB_ATOL + rtol * fabs(ref);
    double error = fabs((double)got - ref);
    if (!(error <= limit)) {
        return false;
    }
    c->tolerance_used = fmax(c->tolerance_used, error / limit);
    if (ref >= FLT_MIN) {
        c->max_rel_error = fmax(c->max_rel_error, error / ref);
    }
    return true;
}

TopkComparison compare_with_reference(const float *logits, size_t rows, size_t row_step, size_t vocab, int k,
                                      const float *probs, const int64_t *indices, double rtol)
{
    TopkComparison c = {0};
    double *ref_probs = ALLOC_ARRAY((size_t)k, double);
    int64_t *ref_indices = ALLOC_ARRAY((size_t)k, int64_t);
    for (size_t row = 0; row < rows; row += row_step) {
        softmax_topk_reference(logits + row * vocab, vocab, k, ref_probs, ref_indices);
        for (int j = 0; j < k; j++) {
            size_t at = row * (size_t)k + (size_t)j;
            bool index_ok = indices[at] == ref_indices[j];
            bool prob_ok = probability_ok(probs[at], ref_probs[j], rtol, &c);
            c.wrong_indices += !index_ok;
            c.wrong_probs += !prob_ok;
            if ((!index_ok || !prob_ok) && c.first_mismatch[0] == '\0') {
                snprintf(c.first_mismatch, sizeof c.first_mismatch,
                         "row %zu place %d: index %lld, probability %.9g; expected %lld, %.9g", row, j,
                         (long long)indices[at], (double)probs[at], (long long)ref_indices[j], ref_probs[j]);
            }
            c.places++;
        }
    }
    array_free(ref_probs);
    array_free(ref_indices);
    return c;
}
