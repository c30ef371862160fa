/* Five ways to compute the population variance (1/n) * sum (x_i - mean)^2,
 * each in float and in double arithmetic, and a reference computed from the
 * same stored data in quadruple precision.
 *
 *   naive                E[x^2] - E[x]^2 from one pass of two running sums
 *   two_pass             the mean first, then the squared deviations from it
 *   welford              one pass, updating the mean and the sum of squared
 *                        deviations element by element (Welford 1962)
 *   corrected_two_pass   two-pass, minus the error the computed mean leaves
 *                        behind (Chan, Golub & LeVeque 1983)
 *   blocked              one pass over memory: every value measured from x[0],
 *                        chunks of VARIANCE_CHUNK summarised two-pass while in
 *                        L1, the chunk states folded with the Welford merge
 *
 * Every function takes n >= 1 values. */
#ifndef CHAPTERS_01_CANCELLATION_VARIANCE_H
#define CHAPTERS_01_CANCELLATION_VARIANCE_H

#include <stddef.h>

// ANCHOR: choose_the_chunk_size
/* The blocked variance reads chunks of VARIANCE_CHUNK values: 4 KiB of
 * doubles, a small part of any L1 data cache, so a chunk is still there when
 * its second pass reads it. It sums in VARIANCE_LANES independent running
 * sums, a multiple of every SIMD width (16 floats fill a 512-bit register),
 * and prefetches the next chunk one cache line (64 bytes on x86 and most
 * ARM cores) at a time. */
enum { VARIANCE_CHUNK = 512, VARIANCE_LANES = 16, CACHE_LINE_BYTES = 64 };
// ANCHOR_END: choose_the_chunk_size

/* Every function is made twice from variance_generic.h: NAME_f32 on float
 * data, computing in float, and NAME_f64 on double data, computing in
 * double. */
#define DECLARE_VARIANCE_FUNCTIONS(REAL, SUFFIX)                        \
    REAL mean_##SUFFIX(const REAL *x, size_t n);                        \
    REAL variance_naive_##SUFFIX(const REAL *x, size_t n);              \
    REAL variance_two_pass_##SUFFIX(const REAL *x, size_t n);           \
    REAL variance_welford_##SUFFIX(const REAL *x, size_t n);            \
    REAL variance_corrected_two_pass_##SUFFIX(const REAL *x, size_t n); \
    REAL variance_blocked_##SUFFIX(const REAL *x, size_t n);

DECLARE_VARIANCE_FUNCTIONS(float, f32)
DECLARE_VARIANCE_FUNCTIONS(double, f64)

/* The exact statistics of the stored data, to double precision: computed in
 * quadruple precision (113-bit significand), whose error on every data set in
 * this chapter is far below the errors being measured. kappa is the condition
 * number sqrt(1 + mean^2 / variance), +inf when the variance is 0; max_abs
 * is the largest |x_i|, which enters the bound on Welford's error, and
 * max_from_first the largest |x_i - x_0|, which enters the blocked one's. */
typedef struct {
    double mean, variance, kappa, max_abs, max_from_first;
} VarianceReference;

VarianceReference variance_reference_f32(const float *x, size_t n);
VarianceReference variance_reference_f64(const double *x, size_t n);

#endif
