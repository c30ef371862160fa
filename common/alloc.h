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

/* Typed shorthands: float *x = ALLOC_ARRAY(float, n); */
#define ALLOC_ARRAY(type, count) ((type *)array_alloc((count), sizeof(type)))

COMMON_END_C

#endif
