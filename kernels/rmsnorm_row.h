/* The arithmetic of one RMSNorm row, written once for the CPU code in
 * chapters/02-layernorm/rmsnorm.c and the CUDA kernels in
 * kernels/layernorm.cu, as
 * kernels/layernorm_row.h is for layer norm: the per-row and per-element
 * formulas only, however the sums are formed. */
#ifndef KERNELS_RMSNORM_ROW_H
#define KERNELS_RMSNORM_ROW_H

#include "common/hostdevice.h"
#include "kernels/layernorm_row.h"

// ANCHOR: finish_rms_statistics
/* RMSNorm's moments are layer norm's with the mean held at 0: var is the
 * mean square sum(x^2) / d, and rstd = 1 / sqrt(var + eps) with ln_rstd's
 * two correctly rounded operations. Unlike the variance, a sum of squares
 * needs no clamp: each term is >= 0, so the rounded sum is too; a NaN in
 * the row stays NaN. */
HOST_DEVICE static inline LnRowMoments rms_moments(float sum_sq, float d)
{
    LnRowMoments moments = {0.0f, sum_sq / d, 0.0f};
    return moments;
}

HOST_DEVICE static inline float rms_rstd(float sum_sq, float d, float eps)
{
    return ln_rstd(rms_moments(sum_sq, d).var, eps);
}
// ANCHOR_END: finish_rms_statistics

// ANCHOR: rescale_a_sum_of_squares_held_in_double
/* Forward 1 and 2 on the GPU sum the squares in double, which holds any
 * float's square; only rounding the sum to float can overflow. Where it
 * would, the sum is scaled by 2^-2k first, exactly, as layer norm's
 * variance is (ln_double_scaling_exponent), and rstd taken as from layer
 * norm's scaled variance (ln_rescaled_rstd). */
HOST_DEVICE static inline float rms_rstd_from_double(double sum_sq, float d, float eps)
{
    int k = ln_double_scaling_exponent(sum_sq, d);
    return ln_rescaled_rstd(rms_moments((float)ldexp(sum_sq, -2 * k), d).var, k, eps);
}
// ANCHOR_END: rescale_a_sum_of_squares_held_in_double

// ANCHOR: compute_the_rms_input_gradient
/* dx = rstd * (g - xhat * mean(g * xhat)), with g = gamma * dy and
 * xhat = x * rstd: layer norm's formula without the mean(g) term, because
 * nothing was centred. */
HOST_DEVICE static inline float rms_dx(float g, float xhat, float mean_g_xhat, float rstd)
{
    return rstd * (g - xhat * mean_g_xhat);
}
// ANCHOR_END: compute_the_rms_input_gradient

#endif
