/* Version 5's radix select (kernels/softmax_topk.cu) run on the CPU, pass
 * by pass: the same keys, bins and digit step (kernels/softmax_topk.h),
 * one thread counting instead of a block. It gives the figure of the four
 * histograms, and the tests check it against sorting. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_RADIX_SELECT_H
#define CHAPTERS_03_SOFTMAX_TOPK_RADIX_SELECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/softmax_topk.h"

#define RADIX_PASSES (32 / TOPK_RADIX_BITS)

/* One pass: the keys that start with `before`'s prefix, counted by their
 * digit at bits shift .. shift + 7, and the selection after its digit. */
typedef struct {
    int shift;
    RadixSelection before, after;
    unsigned histogram[TOPK_RADIX_DIGITS];
} RadixPass;

/* The K-th key of row [vocab] (1 <= k <= vocab) and how many keys are
 * larger, as version 5 finds them; passes[] records each pass. */
RadixSelection radix_select_kth_key(const float *row, size_t vocab, int k, RadixPass passes[RADIX_PASSES]);

/* The data of the figure: for a row of `vocab` random logits (normal(0, 3),
 * seeded), one block per pass of 256 lines "digit, count, where" (0: above
 * the chosen digit, 1: the chosen one, 2: below), headed by the column
 * titles, of which gnuplot reads the count's as the panel's legend. */
void write_radix_histogram_data(FILE *out, size_t vocab, int k, uint64_t seed);

#endif
