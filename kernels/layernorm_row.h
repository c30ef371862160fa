/* The arithmetic of one layer-norm row, written once for the CPU code in
 * chapters/02-layernorm/ and the CUDA kernels in kernels/layernorm.cu.
 *
 * Each function is the per-element or per-row formula only; how the sums
 * are formed (lanes on the CPU, warps and blocks on the GPU) is the
 * caller's business. Because both sides call these, a CPU test of them is a
 * test of the kernels' arithmetic on a machine without a GPU. */
#ifndef KERNELS_LAYERNORM_ROW_H
#define KERNELS_LAYERNORM_ROW_H

#include <math.h>

#include "common/hostdevice.h"

typedef struct {
    float mean, rstd;
} LnRowStats;

/* dgamma and dbeta are sums over rows, formed in float in at least this
 * many chunks of rows (CPU) or thread blocks (GPU) and then added in
 * double: no chunk sums more than n / 256 rows in float, whatever the number
 * of threads or of multiprocessors, and the tests' tolerance rests on that. */
#define LN_BACKWARD_CHUNKS 256

// ANCHOR: compute_rstd
/* 1 / sqrt(var + eps), as two correctly rounded operations (IEEE sqrt and
 * division on both CPU and GPU; never an approximate rsqrt), so that the
 * CPU and every kernel compute the same rstd from the same variance. */
HOST_DEVICE static inline float ln_rstd(float var, float eps)
{
    return 1.0f / sqrtf(var + eps);
}
// ANCHOR_END: compute_rstd

// ANCHOR: finish_row_statistics
/* The row's statistics from a second pass over it: with a first estimate
 * m0 of the mean, sum_dev = sum(x - m0) and sum_dev_sq = sum((x - m0)^2).
 * In exact arithmetic sum_dev is 0; in floating point it holds the
 * rounding error of m0, and adding it back makes the mean accurate to the
 * last bit (the corrected two-pass algorithm of Chan, Golub and LeVeque).
 * The variance subtracts the square of that tiny correction. */
HOST_DEVICE static inline LnRowStats ln_stats_from_deviations(float first_mean, float sum_dev, float sum_dev_sq,
                                                              float d, float eps)
{
    float correction = sum_dev / d;
    float var = sum_dev_sq / d - correction * correction;
    /* True value >= 0 (Cauchy-Schwarz); rounding of two nearly equal terms,
     * as in a constant row, can leave it a hair below 0. Written so that a
     * NaN (a NaN or an inf in the row) is not clamped: NaN < 0 is false, so
     * rstd stays NaN, as in PyTorch, instead of 1/sqrt(eps). */
    var = var < 0.0f ? 0.0f : var;
    LnRowStats stats = {first_mean + correction, ln_rstd(var, eps)};
    return stats;
}
// ANCHOR_END: finish_row_statistics

// ANCHOR: normalize_an_element
HOST_DEVICE static inline float ln_normalize(float x, float mean, float rstd)
{
    return (x - mean) * rstd;
}

HOST_DEVICE static inline float ln_affine(float xhat, float gamma, float beta)
{
    return gamma * xhat + beta;
}
// ANCHOR_END: normalize_an_element

// ANCHOR: compute_the_input_gradient
/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), with g = gamma * dy:
 * the compact backward formula derived in chapter 2. */
HOST_DEVICE static inline float ln_dx(float g, float xhat, float mean_g, float mean_g_xhat, float rstd)
{
    return rstd * (g - mean_g - xhat * mean_g_xhat);
}
// ANCHOR_END: compute_the_input_gradient

#endif
