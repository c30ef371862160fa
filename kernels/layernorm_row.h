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
#include <stdbool.h>

#include "common/hostdevice.h"

/* mean and rstd are what the forward pass saves; residual is the part of
 * the exact mean that the float mean lost, used to centre the row and then
 * dropped (the backward pass recomputes it from x and the saved mean). */
typedef struct {
    float mean, rstd, residual;
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

// ANCHOR: keep_what_the_mean_lost
/* The float mean m = fl(m0 + c) drops up to half an ulp of m; Fast2Sum
 * recovers the dropped part exactly: r = c - (m - m0), so that m + r =
 * m0 + c. The condition is |m0| >= |c|, and it holds wherever the offset
 * matters: c undoes the rounding errors of m0's float sum, a small fraction
 * of m0 when the row is far from zero (about d/32 roundings of u at worst).
 * Where it fails, the mean is small next to the spread, and so is r. */
HOST_DEVICE static inline float ln_mean_residual(float first_mean, float correction, float mean)
{
    return correction - (mean - first_mean);
}
// ANCHOR_END: keep_what_the_mean_lost

// ANCHOR: finish_row_statistics
/* The row's statistics from a second pass over it: with a first estimate
 * m0 of the mean, sum_dev = sum(x - m0) and sum_dev_sq = sum((x - m0)^2).
 * In exact arithmetic sum_dev is 0; in floating point it holds the
 * rounding error of m0, and adding it back makes the mean accurate to the
 * last bit (the corrected two-pass algorithm of Chan, Golub and LeVeque).
 * The variance subtracts the square of that tiny correction.
 *
 * m = m0 + c rounds once more, and ln_mean_residual keeps what it drops.
 * RMSNorm's are the same with the mean held at 0: var is the mean square. */
typedef struct {
    float mean, var, residual;
} LnRowMoments;

HOST_DEVICE static inline LnRowMoments ln_moments_from_deviations(float first_mean, float sum_dev, float sum_dev_sq,
                                                                  float d)
{
    float correction = sum_dev / d;
    float var = sum_dev_sq / d - correction * correction;
    /* True value >= 0 (Cauchy-Schwarz); rounding of two nearly equal terms,
     * as in a constant row, can leave it a hair below 0. Written so that a
     * NaN (a NaN or an inf in the row) is not clamped: NaN < 0 is false, so
     * rstd stays NaN, as in PyTorch, instead of 1/sqrt(eps). */
    var = var < 0.0f ? 0.0f : var;
    float mean = first_mean + correction;
    LnRowMoments moments = {mean, var, ln_mean_residual(first_mean, correction, mean)};
    return moments;
}

HOST_DEVICE static inline LnRowStats ln_row_stats(LnRowMoments moments, float eps)
{
    LnRowStats stats = {moments.mean, ln_rstd(moments.var, eps), moments.residual};
    return stats;
}

HOST_DEVICE static inline LnRowStats ln_stats_from_deviations(float first_mean, float sum_dev, float sum_dev_sq,
                                                              float d, float eps)
{
    return ln_row_stats(ln_moments_from_deviations(first_mean, sum_dev, sum_dev_sq, d), eps);
}
// ANCHOR_END: finish_row_statistics

// ANCHOR: centre_a_row_again
/* The variance above is the mean square of the deviations, which holds
 * var + c^2, less c^2. Where the first mean m0 is more than a standard
 * deviation off (c^2 > var), that subtraction cancels: the float roundings
 * of the mean square, relative to var, grow by (var + c^2) / var. m0 can be
 * that far off: its float sum rounds at the scale of the mean, not of the
 * spread (4096 values near 3e7 of unit spread), and for d - 1 equal values
 * and one an ulp above, a first mean an ulp off is sqrt(d) standard
 * deviations off. (A correctly rounded mean would be within one: each x is
 * a float, so at least as far from the mean as the nearest float is.)
 * c^2 > var is c^2 above half the mean square, var + c^2. Such a row is
 * centred again, on m1 = m0 + c (within about an ulp of the mean), and
 * its deviations summed twice: once for their mean c1, and once for
 * sum(((x - m1) - c1)^2), which is d var with nothing subtracted. */
HOST_DEVICE static inline bool ln_first_mean_is_far(float sum_dev, float sum_dev_sq, float d)
{
    float correction = sum_dev / d;
    return correction * correction > 0.5f * (sum_dev_sq / d);
}

HOST_DEVICE static inline LnRowMoments ln_moments_about_the_mean(float centre, float sum_dev, float sum_sq_about_mean,
                                                                 float d)
{
    float correction = sum_dev / d;
    float mean = centre + correction;
    LnRowMoments moments = {mean, sum_sq_about_mean / d, ln_mean_residual(centre, correction, mean)};
    return moments;
}
// ANCHOR_END: centre_a_row_again

// ANCHOR: find_a_row_that_overflows
/* A float holds |x| up to 3.4e38, but a sum of d squares only while |x|
 * stays below sqrt(3.4e38 / d): 6.7e17 for d = 768. Past that the sum is
 * inf, rstd 0 and y = beta. A row whose sums overflow is summed again
 * scaled by 2^-k, k from its largest magnitude M (M 2^-k in [1, 2)): every
 * scaled element is below 2, every deviation below 4, and no sum of fewer
 * than 2^123 of their squares overflows.
 *
 * The other end has the same cure: a square below 2^-126 is subnormal and
 * rounds at 2^-149, whatever its size, so a row whose variance is near
 * 2^-126 (a spread of 1e-19, with eps 0) loses digits. Below 2^-100 the
 * row is scaled up the same way (k < 0).
 *
 * Overflowed sums leave var + eps inf or NaN, so rstd 0 or NaN; so does a
 * NaN or an inf in the row. Only such a row, or one whose var + eps is
 * below 2^-100 (rstd above 2^50), pays for finding its largest magnitude,
 * which tells the cases apart. */
HOST_DEVICE static inline bool ln_may_need_rescaling(float rstd)
{
    return !(rstd > 0.0f && rstd <= 0x1p50f);
}

HOST_DEVICE static inline int ln_scaling_exponent(float max_magnitude)
{
    return ilogbf(max_magnitude);
}

/* A row element's size for the maximum that ln_scaling_exponent takes: a
 * NaN counts as inf, so that a row holding a NaN or an inf has no finite
 * maximum. */
HOST_DEVICE static inline float ln_magnitude(float x)
{
    return isnan(x) ? INFINITY : fabsf(x);
}

/* A row holding a NaN or an inf is not rescaled (it stays NaN), nor is a
 * row of zeros (nothing to scale; with eps 0, rstd stays inf). */
HOST_DEVICE static inline bool ln_can_rescale(float max_magnitude)
{
    return isfinite(max_magnitude) && max_magnitude > 0.0f;
}
// ANCHOR_END: find_a_row_that_overflows

// ANCHOR: scale_the_statistics_back
/* Multiplying by a power of two only changes the exponent, so the scaled
 * elements are exact, and so is every sum, square and quotient formed from
 * them: each is 2^-k (or 2^-2k) times the one the plain formula would
 * round, rounded to the same bits. The moments of the scaled row are
 * exactly 2^-k mean, 2^-k residual and 2^-2k var, except that a scaled
 * element below 2^-126 (below 2^-126 M unscaled) is subnormal and rounds,
 * an error of at most 2^-149 M, far below the sums' own roundings of
 * 2^-24 M. */
HOST_DEVICE static inline float ln_unscaled(float scaled, int k)
{
    return ldexpf(scaled, k);
}

/* rstd = 1 / sqrt(var + eps) from the scaled variance. Where eps 2^-2k is a
 * float, exactly, this is ln_rstd on the scaled values, 2^k times the plain
 * formula's bits, scaled back. Where it is not (it rounds or underflows to
 * 0, as 1e-5 2^-2k does for k > 55), eps cannot be scaled: a constant row
 * of 1e26 has var 0, and var + eps 2^-2k = 0 would give rstd inf, not
 * 1/sqrt(eps). Then var + eps is formed in double at the row's own scale,
 * where neither can overflow or underflow (var 2^2k < 2^260, eps >= 2^-149),
 * and the result rounds once to float from a double within an ulp of it. */
HOST_DEVICE static inline float ln_rescaled_rstd(float scaled_var, int k, float eps)
{
    float scaled_eps = ldexpf(eps, -2 * k);
    if (ldexpf(scaled_eps, 2 * k) == eps)
        return ldexpf(ln_rstd(scaled_var, scaled_eps), -k);
    return (float)(1.0 / sqrt(ldexp((double)scaled_var, 2 * k) + (double)eps));
}

/* The statistics of a row from the moments of the row times 2^-k. */
HOST_DEVICE static inline LnRowStats ln_unscaled_stats(LnRowMoments scaled, int k, float eps)
{
    LnRowStats stats = {ln_unscaled(scaled.mean, k), ln_rescaled_rstd(scaled.var, k, eps),
                        ln_unscaled(scaled.residual, k)};
    return stats;
}
// ANCHOR_END: scale_the_statistics_back

// ANCHOR: rescale_statistics_held_in_double
/* Forward 1 sums in double and forward 2 merges Welford states in double:
 * double holds the square of any float, and only rounding a sum of squares
 * (or the variance) to float can overflow, or lose digits below 2^-100.
 * Where it would, they are scaled by 2^-2k first, exactly, in double, with
 * k from the sum itself (the scaled variance in [1/2, 4): ilogb / 2 rounds
 * toward 0), and the row's statistics come from the scaled ones as above.
 * k = 0 otherwise: ldexp by 0 changes nothing. */
HOST_DEVICE static inline int ln_double_scaling_exponent(double sum_sq, float d)
{
    double var = sum_sq / d;
    bool fits = !isinf((float)sum_sq) && !(var > 0.0 && var < 0x1p-100);
    return fits ? 0 : ilogb(var) / 2;
}

/* From a mean and a variance held in double: the residual is what rounding
 * the mean to float leaves over. */
HOST_DEVICE static inline LnRowStats ln_stats_from_double(double mean, double var, float eps)
{
    int k = ln_double_scaling_exponent(var, 1.0f);
    float rounded = (float)mean;
    LnRowStats stats = {rounded, ln_rescaled_rstd((float)ldexp(var, -2 * k), k, eps), (float)(mean - rounded)};
    return stats;
}

// ANCHOR_END: rescale_statistics_held_in_double

// ANCHOR: moments_in_double
/* ln_moments_from_deviations in double: from sum(x - c) and sum((x - c)^2)
 * about a shift c, the correction (mean - c), the mean square about c,
 * and the variance, the one less the other's square, where that
 * subtraction cancels only double's roundings (clamped at 0, a NaN kept). */
typedef struct {
    double correction, mean_sq, var;
} LnDoubleMoments;

HOST_DEVICE static inline LnDoubleMoments ln_double_moments(double sum_dev, double sum_dev_sq, double d)
{
    LnDoubleMoments m = {sum_dev / d, sum_dev_sq / d, 0.0};
    m.var = m.mean_sq - m.correction * m.correction;
    m.var = m.var < 0.0 ? 0.0 : m.var;
    return m;
}

/* From sums of deviations from a float first mean: the mean and the
 * variance in double, then rounded (ln_stats_from_double above). */
HOST_DEVICE static inline LnRowStats ln_stats_from_double_deviations(float first_mean, double sum_dev,
                                                                     double sum_dev_sq, float d, float eps)
{
    LnDoubleMoments m = ln_double_moments(sum_dev, sum_dev_sq, d);
    return ln_stats_from_double((double)first_mean + m.correction, m.var, eps);
}
// ANCHOR_END: moments_in_double

// ANCHOR: normalize_an_element
/* xhat = (x - mean - residual) * rstd, the subtractions in this order:
 * x - mean is exact wherever the offset matters (Sterbenz), and removing
 * the residual then centres x on the exact mean, not on its float. */
HOST_DEVICE static inline float ln_normalize(float x, float mean, float residual, float rstd)
{
    return ((x - mean) - residual) * rstd;
}

/* y = gamma * xhat + beta in one fused multiply-add: one rounding, not
 * two, and the same bits on the CPU and the GPU (where nvcc would fuse
 * the expression anyway). The product is not rounded on its own, so it
 * cannot overflow where y fits: gamma = -3e38 and xhat = -1.5 give 4.5e38,
 * beyond float's range, but y = 1.5e38 with beta = -3e38. */
HOST_DEVICE static inline float ln_affine(float xhat, float gamma, float beta)
{
    return fmaf(gamma, xhat, beta);
}
// ANCHOR_END: normalize_an_element

// ANCHOR: keep_statistics_in_double
/* A 16-bit row's statistics in double, each with a bound on its own error:
 * what the float path's results are checked against (ln_cancellation_guard)
 * and what the elements it cannot vouch for are computed from. mean_error
 * bounds |mean - exact mean| * rstd (in units of xhat); rstd_error bounds
 * |rstd / exact rstd - 1|. */
typedef struct {
    double mean, rstd, mean_error, rstd_error;
} LnExactStats;

/* From a shift c near the row (its first float mean) and the double sums
 * sum(x - c) and sum((x - c)^2) of its d elements. Each of the d + 1
 * roundings on the way to a sum is at most 2^-53 of the magnitudes summed;
 * sum |x - c| <= d sqrt(mean of (x - c)^2) (Cauchy-Schwarz); the variance
 * subtracts a square no larger than its first term, and rstd halves the
 * variance's relative error and rounds three times more. */
HOST_DEVICE static inline LnExactStats ln_exact_stats(double shift, double sum_dev, double sum_dev_sq, double d,
                                                      double eps)
{
    const double unit = 0x1p-53, sum_error = (d + 2.0) * unit;
    LnDoubleMoments m = ln_double_moments(sum_dev, sum_dev_sq, d);
    LnExactStats s;
    s.mean = shift + m.correction;
    s.rstd = 1.0 / sqrt(m.var + eps);
    s.mean_error = (unit * fabs(s.mean) + sum_error * sqrt(m.mean_sq)) * s.rstd;
    s.rstd_error = 2.0 * sum_error * m.mean_sq / (m.var + eps) + 3.0 * unit;
    return s;
}

/* What the float path normalises with, rounded from those: the float
 * mean, what it dropped, and rstd. */
HOST_DEVICE static inline LnRowStats ln_rounded_stats(LnExactStats s)
{
    float mean = (float)s.mean;
    LnRowStats stats = {mean, (float)s.rstd, (float)(s.mean - mean)};
    return stats;
}
// ANCHOR_END: keep_statistics_in_double

// ANCHOR: guard_against_cancellation
/* A float result v of a value w = t + b, where the float path computed t
 * with an error of at most relative |t| + absolute, and rounded the sum
 * once, is within half an ulp of w in a storage type of p significant
 * bits, and so rounds to within one ulp of it, where
 *     |v| >= scale |b| + floor.
 * Derivation: the error e = |v - w| is at most relative |t| + absolute +
 * u |v|, with |t| <= |w| + |b| <= |v| + e + |b|; half an ulp of w is at
 * least h |w| >= h (|v| - e), h = 2^-(p+1). Solving e <= h (|v| - e) for
 * |v| with q = (1 + h) / (1 - relative) gives
 *     |v| (h - q (relative + u)) >= q (relative |b| + absolute).
 * Near cancellation (|w| small next to |b|) no float path can promise it;
 * where relative is too large for any |v|, the guard is infinite, and the
 * caller computes every element in double. */
typedef struct {
    double scale, floor;
} LnCancellationGuard;

HOST_DEVICE static inline LnCancellationGuard ln_cancellation_guard(double relative, double absolute,
                                                                    int significant_bits)
{
    const double u = 0x1p-24, h = ldexp(1.0, -(significant_bits + 1));
    double q = (1.0 + h) / (1.0 - relative), room = h - q * (relative + u);
    LnCancellationGuard guard = {INFINITY, INFINITY};
    if (room > 0.0 && absolute < INFINITY) { /* false for a NaN too */
        guard.scale = q * relative / room;
        guard.floor = q * absolute / room;
    }
    return guard;
}
// ANCHOR_END: guard_against_cancellation

// ANCHOR: test_an_element_against_the_guard
/* The kernels test one product per element, |v| >= s * weight, with a
 * weight per column computed once, |b| + 2^-10 |c| (the absolute error is
 * a multiple of |c|, gamma or the like, and vanishes with it), and a
 * factor per row, s = max(scale, floor 2^10): then s weight >= scale |b| +
 * floor |c|. Rounded up, with room for the float roundings of the weight
 * and of the test. A NaN v fails it, and so does every v where s is
 * infinite: those go to double. */
#define LN_GUARD_WEIGHT_OF_C 0x1p-10f

HOST_DEVICE static inline float ln_guard_weight(float b, float c)
{
    return fabsf(b) + LN_GUARD_WEIGHT_OF_C * fabsf(c);
}

HOST_DEVICE static inline float ln_guard_factor(LnCancellationGuard guard)
{
    const double room_for_the_test = 1.0 + 0x1p-20;
    double factor = fmax(guard.scale, guard.floor / (double)LN_GUARD_WEIGHT_OF_C) * room_for_the_test;
    return isnan(factor) ? INFINITY : (float)factor;
}

HOST_DEVICE static inline bool ln_within_guard(float v, float weight, float factor)
{
    return fabsf(v) >= factor * weight;
}
// ANCHOR_END: test_an_element_against_the_guard

// ANCHOR: guard_the_normalized_elements
/* The float path's y = gamma * xhat + beta, xhat = ((x - mean) - residual)
 * * rstd, from statistics rounded from `exact`: centring rounds twice (2u,
 * relative; u of the residual, absolute) and misses the exact mean by the
 * residual's rounding (u/2 of it) and the double mean's own error; rstd is
 * off by its rounding to float, measured here, and by the double's own
 * error; the product with rstd rounds once (the one with gamma is inside
 * y's fused multiply-add, which rounds once as the guard's sum). The
 * absolute part of xhat's error reaches y times |gamma|: the guard's c. */
HOST_DEVICE static inline float ln_forward_guard_factor(LnExactStats exact, LnRowStats rounded, int significant_bits)
{
    const double u = 0x1p-24;
    double rstd_off = fabs((double)rounded.rstd - exact.rstd) / exact.rstd + exact.rstd_error;
    double relative = 3.1 * u + 1.01 * rstd_off;
    double absolute = 1.01 * (1.5 * u * fabs((double)rounded.residual) * exact.rstd + exact.mean_error);
    return ln_guard_factor(ln_cancellation_guard(relative, absolute, significant_bits));
}

/* y in double from the double statistics, for the caller to round once. */
HOST_DEVICE static inline double ln_y_in_double(float x, float gamma, float beta, LnExactStats exact)
{
    return (double)gamma * (((double)x - exact.mean) * exact.rstd) + (double)beta;
}
// ANCHOR_END: guard_the_normalized_elements

// ANCHOR: recover_the_residual_in_the_backward_pass
/* The backward pass has the saved mean m but not the residual. Per row it
 * sums g = gamma * dy, g * (x - m) and x - m, in the one pass it already
 * makes, and from them takes the residual r = mean(x - m) (the x - m are
 * exact, so r is as good as the forward pass's) and, because
 * xhat = ((x - m) - r) * rstd,
 *     sum(g * xhat) = rstd * (sum(g * (x - m)) - r * sum(g)),
 * with no second pass to form xhat first. */
typedef struct {
    float mean_g, mean_g_xhat, residual;
} LnBackwardMeans;

HOST_DEVICE static inline LnBackwardMeans ln_backward_means(float sum_g, float sum_g_centered, float sum_centered,
                                                            float d, float rstd)
{
    float residual = sum_centered / d;
    LnBackwardMeans means = {sum_g / d, rstd * (sum_g_centered - residual * sum_g) / d, residual};
    return means;
}
// ANCHOR_END: recover_the_residual_in_the_backward_pass

// ANCHOR: compute_the_input_gradient
/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), with g = gamma * dy:
 * the compact backward formula derived in chapter 2. */
HOST_DEVICE static inline float ln_dx(float g, float xhat, float mean_g, float mean_g_xhat, float rstd)
{
    return rstd * (g - mean_g - xhat * mean_g_xhat);
}
// ANCHOR_END: compute_the_input_gradient

// ANCHOR: keep_the_backward_sums_in_double
/* The backward pass's sums over a 16-bit row, in double, with g = gamma dy
 * (exact in double: 24 bits times at most 11) and dev = x - c about a
 * centre c: the saved mean for layer norm, where they are sum(g),
 * sum(g^2), sum(g dev), sum(dev) and sum(dev^2); 0 for RMSNorm, which
 * centres nothing and leaves sum(g) and sum(dev) at 0. From them, the
 * row's exact statistics (ln_exact_stats) and: */
typedef struct {
    double sum_g, sum_g_sq, sum_g_dev, sum_dev, sum_dev_sq;
} LnBackwardSums;

/* the exact terms of dx, for the elements computed in double, */
typedef struct {
    double mean, rstd, mean_g, mean_g_xhat;
} LnExactBackward;

/* and the guard of the float path's dx (ln_dx_within_guard). */
typedef struct {
    float factor, floor;
} LnDxGuard;

typedef struct {
    LnBackwardMeans means; /* the float path's, with the saved rstd */
    LnDxGuard guard;
    LnExactBackward exact;
} LnGuardedBackward;
// ANCHOR_END: keep_the_backward_sums_in_double

// ANCHOR: bound_what_the_double_sums_miss
/* The absolute part of the float path's error in the bracket of dx, from
 * what the double sums miss: each sum is off by sum_error times its terms'
 * sizes (Cauchy-Schwarz bounds those by the roots of sum(g^2) and
 * sum(dev^2)); mean_g = sum(g) / d; mean_g_xhat = rstd (sum(g dev) -
 * sum(dev) sum(g) / d) / d, times |xhat| <= sqrt(d) (a row's xhat squared
 * add up to at most d); and xhat itself, off by the residual's rounding
 * and the exact mean's error, times mean_g_xhat. */
HOST_DEVICE static inline double ln_dx_absolute_error(LnBackwardSums s, LnExactStats exact, LnBackwardMeans means,
                                                      double mean_g_xhat, float saved_rstd, double d)
{
    const double u = 0x1p-24, sum_error = (d + 4.0) * 0x1p-53;
    double root_g_sq = sqrt(s.sum_g_sq), root_dev_sq = sqrt(s.sum_dev_sq);
    double mean_g_error = sum_error * root_g_sq / sqrt(d);
    double mean_g_xhat_error = saved_rstd * sum_error * root_g_sq * (2.0 * root_dev_sq + fabs(s.sum_dev) / sqrt(d)) / d;
    double xhat_error = 1.5 * u * fabs((double)means.residual) * exact.rstd + exact.mean_error;
    return mean_g_error + sqrt(d) * mean_g_xhat_error + fabs(mean_g_xhat) * xhat_error;
}
// ANCHOR_END: bound_what_the_double_sums_miss

// ANCHOR: bound_the_error_of_dx
/* The float path computes dx = rstd (g - mean_g - xhat mean_g_xhat) from
 * g, xhat, the means rounded from double, and the saved rstd. Each term's
 * error is a few u of that term, the saved rstd's distance from the exact
 * one (measured: rstd_off) counts once in dx and twice more in the last
 * term, and the double sums leave a tiny absolute part; in all, at most
 *     eps T + absolute,  T = |g| + |mean_g| + |xhat mean_g_xhat|,
 * eps = 3.5u + 3 rstd_off, in units of the bracket. That is the guard of
 * ln_cancellation_guard with nothing relative and eps T + absolute as its
 * absolute part: |bracket| >= f (T + absolute (1 + 1/eps)), f its floor
 * per unit, made larger for what the test cannot see exactly. One term
 * less per element: |g| <= |bracket| + |mean_g| + |B|, B = xhat
 * mean_g_xhat, up to two roundings, so with F = f / (1 - f) it holds where
 *     |bracket| >= 2F |B| + F (2 |mean_g| + absolute (1 + 1/eps)):
 * a factor per row times |B|, plus a floor per row. */
HOST_DEVICE static inline LnDxGuard ln_dx_guard(LnBackwardSums s, LnExactStats exact, LnBackwardMeans means,
                                                double mean_g_xhat, float saved_rstd, double d, int significant_bits)
{
    const double u = 0x1p-24;
    double rstd_off = fabs((double)saved_rstd - exact.rstd) / exact.rstd + exact.rstd_error;
    double eps = 3.5 * u + 3.0 * rstd_off;
    double absolute = ln_dx_absolute_error(s, exact, means, mean_g_xhat, saved_rstd, d);
    /* The test sees |bracket|, not |dx| (rstd_off and a rounding apart),
     * and T from the float terms (within eps T + absolute of the exact). */
    double f =
        ln_cancellation_guard(0.0, eps, significant_bits).floor * (1.0 + 8.0 * u) / ((1.0 - rstd_off) * (1.0 - eps));
    const double room = 1.0 + 0x1p-20; /* for the float roundings of the test */
    double factor = 2.0 * f / (1.0 - f) * room;
    double floor = f / (1.0 - f) * (2.0 * fabs((double)means.mean_g) + absolute * (1.0 + 1.0 / eps)) * room;
    /* No float term may overflow: |g|, |mean_g| <= root of sum(g^2); |B| <= largest_b. */
    double largest_b = (sqrt(s.sum_dev_sq) + fabs(s.sum_dev / d)) * saved_rstd * fabs((double)means.mean_g_xhat) * 2.0;
    bool usable = f < 0.5 && rstd_off < 0.5 && floor < INFINITY &&
                  2.0 * sqrt(s.sum_g_sq) + largest_b < 0x1p125; /* each false for a NaN too */
    LnDxGuard guard = {usable ? (float)factor : INFINITY, usable ? (float)floor : INFINITY};
    return guard;
}
// ANCHOR_END: bound_the_error_of_dx

// ANCHOR: take_the_terms_of_dx_from_the_sums
/* From the sums: the exact terms, the float path's (with the saved rstd,
 * as the float32 path's ln_backward_means), and the guard. */
HOST_DEVICE static inline LnGuardedBackward ln_guarded_backward(LnBackwardSums s, LnExactStats exact, float saved_rstd,
                                                                double d, int significant_bits)
{
    double residual = s.sum_dev / d, g_centred = s.sum_g_dev - residual * s.sum_g;
    LnGuardedBackward b;
    b.exact.mean = exact.mean;
    b.exact.rstd = exact.rstd;
    b.exact.mean_g = s.sum_g / d;
    b.exact.mean_g_xhat = exact.rstd * g_centred / d;
    b.means.mean_g = (float)b.exact.mean_g;
    b.means.mean_g_xhat = (float)(saved_rstd * g_centred / d);
    b.means.residual = (float)residual;
    b.guard = ln_dx_guard(s, exact, b.means, b.exact.mean_g_xhat, saved_rstd, d, significant_bits);
    return b;
}
// ANCHOR_END: take_the_terms_of_dx_from_the_sums

// ANCHOR: test_dx_against_the_guard
/* Whether the guard vouches for the float path's dx: the bracket of ln_dx
 * against a factor times |xhat mean_g_xhat| plus a floor, both per row.
 * An element of a row whose guard is infinite fails it, and so does a
 * NaN; the compiler shares the bracket and its product with ln_dx.
 * RMSNorm's dx is this with mean_g = 0. */
HOST_DEVICE static inline bool ln_dx_within_guard(float g, float xhat, float mean_g, float mean_g_xhat, LnDxGuard guard)
{
    float along_xhat = xhat * mean_g_xhat;
    return fabsf(g - mean_g - along_xhat) >= fmaf(guard.factor, fabsf(along_xhat), guard.floor);
}

/* dx in double from the exact terms, for the caller to round once. */
HOST_DEVICE static inline double ln_dx_in_double(float dy, float x, float gamma, LnExactBackward e)
{
    double g = (double)gamma * dy, xhat = ((double)x - e.mean) * e.rstd;
    return e.rstd * (g - e.mean_g - xhat * e.mean_g_xhat);
}
// ANCHOR_END: test_dx_against_the_guard

#endif
