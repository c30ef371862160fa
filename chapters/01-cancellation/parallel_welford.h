/* Parallel Welford on the CPU: cut the data into chunks, summarise each chunk
 * on its own, merge the summaries in a tree. The merge is kernels/welford.h,
 * the same code the GPU kernel runs; here it can be tested anywhere. */
#ifndef CHAPTERS_01_CANCELLATION_PARALLEL_WELFORD_H
#define CHAPTERS_01_CANCELLATION_PARALLEL_WELFORD_H

#include <stddef.h>

#include "kernels/welford.h"

/* The state of x[0..n), one value at a time (n may be 0: the empty state). */
WelfordState welford_accumulate(const double *x, size_t n);

/* Merge states[0..count) pairwise, neighbours first, as the levels of a GPU
 * reduction do; count >= 1. Overwrites the array. */
WelfordState welford_merge_tree(WelfordState *states, size_t count);

/* The state of x[0..n) cut into chunks at the boundaries
 * 0 = bounds[0] <= bounds[1] <= ... <= bounds[chunks] = n (empty chunks are
 * allowed), each chunk accumulated on its own and the results merged in a tree. */
WelfordState welford_by_chunks(const double *x, const size_t *bounds, size_t chunks);

#endif
