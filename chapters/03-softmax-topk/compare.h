/* Comparing top-K results with the double reference: indices exactly (the
 * order is defined, ties included), probabilities within a relative
 * tolerance, NaN exactly where the reference has NaN. Used by the program
 * to validate every GPU kernel before it is timed, and by the tests. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_COMPARE_H
#define CHAPTERS_03_SOFTMAX_TOPK_COMPARE_H

#include <stddef.h>
#include <stdint.h>

/* Relative tolerance of a float probability against the double reference,
 * for versions that sum a row in chunks or in a tree (the fused CPU version,
 * every GPU kernel): x - max rounded to float costs up to |x - max| 2^-24
 * (below 2.5e-6 for |x - max| < 40), exp 1.4 2^-24, the division 2^-24,
 * and a chunked or tree sum of V terms about log2(V) 2^-24 (the fused CPU
 * version: at most 32 terms one after another in float, then double, so at
 * most 31 2^-24). */
#define TOPK_RTOL_TREE_SUM 1e-5

/* For sums where one thread adds `terms` logits' weights one after another
 * in float (all V of them in the naive and online versions): the classic
 * bound for a sequential sum of positive terms, (terms - 1) 2^-24, on top of
 * the above. With ties in the data the rounding errors do not cancel, and
 * the measured error gets near the bound. */
double topk_rtol_sequential_sum(size_t terms);

/* For the GPU kernels: each thread adds at most ceil(V / 32) logits in
 * sequence (one warp per row in kernel 2, more threads in the others). The
 * GPU's exp differs from the CPU's by a few ulp, and version 6 sums with
 * the special function unit's 2^x (about 4 2^-24 on a sum of weights, see
 * softmax_exp_in_sum): both well inside TOPK_RTOL_TREE_SUM. */
double topk_rtol_gpu(size_t vocab);

typedef struct {
    size_t places; /* probabilities (and indices) compared */
    size_t wrong_indices;
    size_t wrong_probs;    /* outside the tolerance, or NaN on one side only */
    double max_rel_error;  /* over reference probabilities >= FLT_MIN */
    double tolerance_used; /* largest error / allowed error */
    char first_mismatch[200];
} TopkComparison;

/* Compare rows 0, row_step, 2 row_step, ... of [rows, k] results for logits
 * [rows, vocab]. Besides rtol, an absolute 2 * FLT_TRUE_MIN is allowed: the
 * rounding of a subnormal probability to the subnormal grid. */
TopkComparison compare_with_reference(const float *logits, size_t rows, size_t row_step, size_t vocab, int k,
                                      const float *probs, const int64_t *indices, double rtol);

#endif
