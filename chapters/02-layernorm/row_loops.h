/* The loops that the chapter's float row kernels (layernorm.c, rmsnorm.c)
 * share: sums that vectorise without reordering, and parameter gradients
 * summed over rows in a fixed number of chunks. */
#ifndef CHAPTERS_02_LAYERNORM_ROW_LOOPS_H
#define CHAPTERS_02_LAYERNORM_ROW_LOOPS_H

#include <math.h>
#include <stddef.h>

#include "common/alloc.h"
#include "kernels/layernorm_row.h"

// ANCHOR: sum_in_lanes
/* A float sum the compiler can vectorise without -ffast-math: LANES
 * independent running sums, one per vector lane, added pairwise at the end.
 * Vectorising `s += x[i]` would reorder the additions, which C forbids;
 * these are separate chains, so no reordering is needed, and the result
 * is the same bits whatever the vector width. */
enum { LANES = 32 };

static inline float add_lanes(float *acc)
{
    for (int width = LANES / 2; width > 0; width /= 2)
        for (int k = 0; k < width; k++)
            acc[k] += acc[k + width];
    return acc[0];
}

static inline float sum_f32(const float *x, size_t n)
{
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += x[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += x[i];
    return add_lanes(acc);
}
// ANCHOR_END: sum_in_lanes

// ANCHOR: rescale_a_row_on_the_cpu
/* A copy of the row times 2^-k, k = ln_overflow_exponent of its largest
 * magnitude (exact: kernels/layernorm_row.h), for a row whose statistics
 * came out 0 or NaN; NULL where the row holds a NaN or an inf, whose
 * statistics stay NaN. Rare, so it allocates; the caller frees. */
static inline float *rescaled_row_f32(const float *x, size_t d, int *k)
{
    float max_magnitude = 0.0f;
    for (size_t j = 0; j < d; j++)
        max_magnitude = fmaxf(max_magnitude, ln_magnitude(x[j]));
    if (!isfinite(max_magnitude))
        return NULL;
    *k = ln_overflow_exponent(max_magnitude);
    float *scaled = ALLOC_ARRAY(float, d);
    for (size_t j = 0; j < d; j++)
        scaled[j] = ldexpf(x[j], -*k);
    return scaled;
}
// ANCHOR_END: rescale_a_row_on_the_cpu

/* The number of chunks of rows that the backward passes sum dgamma (and
 * dbeta) in: LN_BACKWARD_CHUNKS, or one per row when there are fewer. */
static inline size_t backward_chunks(size_t n)
{
    return n < LN_BACKWARD_CHUNKS ? n : LN_BACKWARD_CHUNKS;
}

/* Each chunk left `count` partial rows of d floats in scratch, one after
 * the other; add them in chunk order, in double (chunks * d additions,
 * nothing next to the n * d of the rows), into outputs[0 .. count-1]. */
static inline void add_chunk_partials(float *const *outputs, size_t count, const float *scratch, size_t chunks,
                                      size_t d)
{
    size_t width = count * d;
    double *totals = ALLOC_ARRAY(double, width); /* zeroed */
    for (size_t chunk = 0; chunk < chunks; chunk++)
        for (size_t j = 0; j < width; j++)
            totals[j] += scratch[chunk * width + j];
    for (size_t k = 0; k < count; k++)
        for (size_t j = 0; j < d; j++)
            outputs[k][j] = (float)totals[k * d + j];
    array_free(totals);
}

#endif
