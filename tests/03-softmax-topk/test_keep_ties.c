/* topk_keep_ties, the answer to the tie-rule exercise: the fused top K,
 * then exactly the logits equal to the K-th that it left out, in index
 * order, with the K-th's probability; checked against a count made by
 * brute force over the row, on tied random rows and on the limits (a row
 * of equal logits, -inf ties, a NaN K-th). */
#include <math.h>
#include <stdint.h>

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/keep_ties.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/testing.h"

/* What the fused version alone returns, for the first K places. */
static void fused_topk(const float *logits, size_t vocab, int k, float *probs, int64_t *indices)
{
    RowScratch scratch = row_scratch_new(CPU_FUSED, vocab, k);
    softmax_topk_row(CPU_FUSED, logits, vocab, k, &scratch, probs, indices);
    row_scratch_free(&scratch);
}

/* The places after K must be every index above the K-th's with an equal
 * logit, ascending, and nothing else; their probability is the K-th's. */
static void check_row(const char *what, const float *logits, size_t vocab, int k)
{
    float *probs = ALLOC_ARRAY(vocab, float), *fused_probs = ALLOC_ARRAY(vocab, float);
    int64_t *indices = ALLOC_ARRAY(vocab, int64_t), *fused_indices = ALLOC_ARRAY(vocab, int64_t);
    size_t kept = topk_keep_ties(logits, vocab, k, probs, indices);
    fused_topk(logits, vocab, k, fused_probs, fused_indices);
    bool same_first_k = true;
    for (int i = 0; i < k; i++) {
        same_first_k &= indices[i] == fused_indices[i] && probs[i] == fused_probs[i];
    }
    EXPECT(same_first_k, "%s: the first K places differ from the fused top K", what);
    float kth = logits[fused_indices[k - 1]];
    size_t expected = (size_t)k, place = (size_t)k;
    bool ties_in_order = true;
    for (size_t i = (size_t)fused_indices[k - 1] + 1; i < vocab; i++) {
        if (logits[i] == kth) { /* never true for a NaN K-th */
            ties_in_order &= place < kept && indices[place] == (int64_t)i && probs[place] == probs[k - 1];
            expected++;
            place++;
        }
    }
    EXPECT(kept == expected, "%s: kept %zu, expected %zu", what, kept, expected);
    EXPECT(ties_in_order, "%s: the ties after K are not the later equal logits, ascending", what);
    array_free(probs);
    array_free(fused_probs);
    array_free(indices);
    array_free(fused_indices);
}

static void test_tied_random_rows(void)
{
    enum { VOCAB = 2000 };
    float *logits = ALLOC_ARRAY(VOCAB, float);
    const int ks[] = {1, 7, 50, 333};
    for (uint64_t seed = 1; seed <= 6; seed++) {
        fill_tied_logits(logits, VOCAB, seed);
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            check_row("tied random row", logits, VOCAB, ks[i]);
        }
    }
    array_free(logits);
}

static void test_limits(void)
{
    const float equal[17] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    float probs[17];
    int64_t indices[17];
    EXPECT(topk_keep_ties(equal, 17, 3, probs, indices) == 17, "a row of equal logits keeps all 17");
    check_row("equal logits", equal, 17, 3);
    const float minus_infinity[] = {5, -INFINITY, -INFINITY, -INFINITY};
    EXPECT(topk_keep_ties(minus_infinity, 4, 2, probs, indices) == 4, "-inf ties with a -inf K-th are kept");
    EXPECT(probs[2] == 0.0f && probs[3] == 0.0f, "with probability 0");
    const float nan_kth[] = {NAN, NAN, 0, 0};
    EXPECT(topk_keep_ties(nan_kth, 4, 2, probs, indices) == 2, "a NaN K-th has no ties");
}

int main(void)
{
    test_tied_random_rows();
    test_limits();
    return test_finish();
}
