/* Checking [rows, k] softmax + top-K results against the double reference
 * (chapters/04-softmax-topk: softmax_topk_reference): indices exactly,
 * probabilities within a stated tolerance, NaN exactly where the reference
 * has NaN. Shared by the CPU and the GPU tests. */
#ifndef TESTS_CH04_EXPECT_TOPK_H
#define TESTS_CH04_EXPECT_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Relative tolerance of a float probability against the double reference,
 * for versions that sum a row in chunks or in a tree (the fused CPU version,
 * every GPU kernel): x - max rounded to float costs up to |x - max| 2^-24
 * (below 2.5e-6 for the test logits, |x - max| < 40), exp 1.4 2^-24, the
 * division 2^-24, and a chunked or tree sum of V terms about log2(V) 2^-24. */
#define TOPK_RTOL_TREE_SUM 1e-5

/* For versions that add the row's terms one after another in float (naive,
 * online): the classic bound for a sequential sum of V positive terms,
 * (V - 1) 2^-24, on top of the above. With ties in the data the rounding
 * errors do not cancel, and the measured error gets near the bound. */
double topk_rtol_sequential_sum(size_t vocab);

/* Print one line (ok or FAIL with the first mismatch) and return whether
 * every row matched: indices exactly, probabilities within rtol (and an
 * absolute FLT_MIN, for softmax_exp's flush of subnormals to 0). */
bool topk_matches_reference(const char *what, const float *logits, size_t rows, size_t vocab, int k,
                            const float *probs, const int64_t *indices, double rtol);

/* Logits for [rows, vocab] tests: normal(0, 3) rounded to multiples of 1/16. */
void fill_test_logits(float *logits, size_t count, uint64_t seed);

#endif
