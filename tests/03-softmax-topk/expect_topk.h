/* Test helpers shared by the CPU and the GPU tests of chapter 3. */
#ifndef TESTS_03_SOFTMAX_TOPK_EXPECT_TOPK_H
#define TESTS_03_SOFTMAX_TOPK_EXPECT_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/sampling.h"

/* Compare every row with the double reference (compare_with_reference),
 * print one line, ok or FAIL with the first mismatch, and return whether
 * all matched. */
bool topk_matches_reference(const char *what, const float *logits, size_t rows, size_t vocab, int k, const float *probs,
                            const int64_t *indices, double rtol);

/* The survivors of the sampling steps by their definition, in double over
 * the whole row (a sort of every logit, softmax(x / T), then top-K, top-p
 * and min-p in that order); finite logits only. probs and indices [K]: the
 * survivors, then 0 and -1. Returns how many survive. */
int reference_survivors(const float *logits, size_t vocab, SamplingParams params, double *probs, int64_t *indices);

#endif
