#include "tests/03-softmax-topk/expect_topk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"

bool topk_matches_reference(const char *what, const float *logits, size_t rows, size_t vocab, int k, const float *probs,
                            const int64_t *indices, double rtol)
{
    TopkComparison c = compare_with_reference(logits, rows, 1, vocab, k, probs, indices, rtol);
    if (c.wrong_indices + c.wrong_probs == 0) {
        printf("ok   %s: %zu rows x %d, max relative error %.2g, %.0f%% of rtol %.2g\n", what, rows, k, c.max_rel_error,
               100.0 * c.tolerance_used, rtol);
        return true;
    }
    printf("FAIL %s: %zu wrong indices, %zu wrong probabilities of %zu; first: %s\n", what, c.wrong_indices,
           c.wrong_probs, c.places, c.first_mismatch);
    return false;
}

static const float *sort_logits; /* qsort has no context argument */

static int rank_order(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    float x = sort_logits[i], y = sort_logits[j];
    if (x != y) {
        return x > y ? -1 : 1;
    }
    return i < j ? -1 : 1;
}

int reference_survivors(const float *logits, size_t vocab, SamplingParams params, double *probs, int64_t *indices)
{
    int64_t *order = ALLOC_ARRAY(vocab, int64_t);
    for (size_t i = 0; i < vocab; i++) {
        order[i] = (int64_t)i;
    }
    sort_logits = logits;
    qsort(order, vocab, sizeof order[0], rank_order);
    /* softmax(x / T) over the whole row, then the top K renormalised. */
    double max = logits[order[0]] / params.temperature, row_sum = 0.0, k_sum = 0.0;
    for (size_t i = 0; i < vocab; i++) {
        row_sum += exp(logits[i] / params.temperature - max);
    }
    int k = params.top_k;
    for (int j = 0; j < k; j++) {
        probs[j] = exp(logits[order[j]] / params.temperature - max) / row_sum;
        k_sum += probs[j];
    }
    int count = 0;
    for (double mass = 0.0; count < k && (params.top_p >= 1.0 || mass < params.top_p);) {
        probs[count] /= k_sum;
        mass += probs[count++];
    }
    double largest = probs[0], kept = 0.0;
    while (count > 1 && probs[count - 1] < params.min_p * largest) {
        count--;
    }
    for (int j = 0; j < count; j++) {
        kept += probs[j];
    }
    for (int j = 0; j < k; j++) {
        probs[j] = j < count ? probs[j] / kept : 0.0;
        indices[j] = j < count ? order[j] : -1;
    }
    array_free(order);
    return count;
}
