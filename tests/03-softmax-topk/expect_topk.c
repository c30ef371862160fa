#include "tests/03-softmax-topk/expect_topk.h"

#include <stdio.h>

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
