/* Checked, aligned allocation.
 *
 * Arrays are 64-byte aligned (a cache line, and enough for any vector load)
 * and zero-filled. The element count times the element size is checked for
 * overflow. On failure the program prints one line naming the size it asked
 * for and exits with status 1: a numerics program that runs out of memory has
 * nothing sensible left to do, and a NULL that is checked in one place cannot
 * be forgotten in another. */
#ifndef COMMON_ALLOC_H
#define COMMON_ALLOC_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define ARRAY_ALIGNMENT 64

void *array_alloc(size_t count, size_t elem_size);
void array_free(void *array);

/* Aligned and overflow-checked like array_alloc, but NOT zero-filled: the
 * pages stay untouched until first written. For bandwidth probes and
 * benchmarks, where each thread must be the first to touch its own slice so
 * that the operating system places those pages on the thread's NUMA node. */
void *array_alloc_uninitialized(size_t count, size_t elem_size);

/* Grow or shrink an array from array_alloc: returns a new array of new_count
 * elements holding the first min(old_count, new_count) old ones and zeros
 * after them, and frees the old array (which may be NULL). */
void *array_resize(void *array, size_t old_count, size_t new_count, size_t elem_size);

/* A typed shorthand, the count first as in calloc: float *x = ALLOC_ARRAY(n, float); */
#define ALLOC_ARRAY(count, type) ((type *)array_alloc((count), sizeof(type)))

COMMON_END_C

#endif
