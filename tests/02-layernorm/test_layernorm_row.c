/* The per-row arithmetic shared by the CPU code and the CUDA kernels
 * (kernels/layernorm_row.h), and the row plan of the register-resident
 * kernels (kernels/layernorm.h): tested here, on any machine, because the
 * kernels call exactly this code. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "chapters/02-layernorm/row_loops.h"
#include "chapters/02-layernorm/storage.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/layernorm.h"
#include "kernels/layernorm_row.h"
#include "kernels/rmsnorm_row.h"

static void test_rstd_is_two_rounded_operations(void)
{
    /* 1/sqrt(v + eps) with v + eps a perfect square: every step is exact. */
    EXPECT(ln_rstd(3.75f, 0.25f) == 0.5f, "rstd of 4 is 0.5, got %.9g", ln_rstd(3.75f, 0.25f));
    EXPECT(ln_rstd(0.0f, 0.0f) == INFINITY, "var + eps = 0 gives inf (what eps is there to prevent)");
}

static void test_statistics_from_deviations(void)
{
    /* x = {1, 2, 3, 6}: mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5.
     * From a first mean of 2.5 (off by 0.5): deviations -1.5, -0.5, 0.5, 3.5,
     * sum 2, sum of squares 2.25 + 0.25 + 0.25 + 12.25 = 15 (all exact). */
    LnRowStats stats = ln_stats_from_deviations(2.5f, 2.0f, 15.0f, 4.0f, 0.0f);
    EXPECT(stats.mean == 3.0f, "the correction restores the mean: got %.9g", stats.mean);
    EXPECT(stats.rstd == 1.0f / sqrtf(3.5f), "variance 15/4 - (2/4)^2 = 3.5: rstd %.9g", stats.rstd);
    /* A constant row of three values seen from a first mean that is off by
     * dev: every deviation is dev, and for this dev the rounded
     * sum_dev_sq / 3 - (sum_dev / 3)^2 is -9.3e-10, not 0. Clamped to 0, with
     * eps = 0, rstd is +inf (a variance of exactly 0), not a NaN from sqrt(-9.3e-10). */
    float dev = 0x1.9999a4p-4f;
    float sum_dev = dev + dev + dev, sum_dev_sq = dev * dev + dev * dev + dev * dev;
    EXPECT(sum_dev_sq / 3.0f - (sum_dev / 3.0f) * (sum_dev / 3.0f) < 0.0f, "the unclamped variance is negative here");
    LnRowStats constant = ln_stats_from_deviations(1.0f, sum_dev, sum_dev_sq, 3.0f, 0.0f);
    EXPECT(constant.rstd == INFINITY, "the clamped variance is 0: rstd %.9g", constant.rstd);
}

/* A NaN in a row reaches sum_dev_sq (and an inf turns x - mean into
 * inf - inf = NaN): the variance is NaN, and rstd must be NaN, as in
 * PyTorch, not 1/sqrt(eps) from a clamp that maps NaN to 0. */
static void test_nan_statistics_stay_nan(void)
{
    LnRowStats stats = ln_stats_from_deviations(1.0f, NAN, NAN, 4.0f, 1e-5f);
    EXPECT(isnan(stats.rstd), "a NaN variance gives a NaN rstd: got %.9g", stats.rstd);
    EXPECT(isnan(stats.mean), "and a NaN mean: got %.9g", stats.mean);
    stats = ln_stats_from_deviations(1.0f, 0.0f, NAN, 4.0f, 1e-5f);
    EXPECT(isnan(stats.rstd), "a NaN sum of squares alone gives a NaN rstd: got %.9g", stats.rstd);
}

/* m0 = 1e4 and a correction c that m = m0 + c cannot hold: the residual
 * is exactly what m dropped, m + r = m0 + c in double (exact there: all
 * three are floats within 2^24 ulps of one another). Also through the
 * statistics, and for a mean held in double. */
static void test_residual_keeps_what_the_mean_lost(void)
{
    const float first_mean = 1e4f, corrections[] = {0x1.2345p-9f, -0x1.fffffep-8f, 3e-4f, 0.0f};
    for (int k = 0; k < 4; k++) {
        float c = corrections[k], m = first_mean + c, r = ln_mean_residual(first_mean, c, m);
        EXPECT((double)m + (double)r == (double)first_mean + (double)c,
               "m0 + c = m + r exactly for c = %a: m = %a, r = %a", c, m, r);
        LnRowStats stats = ln_stats_from_deviations(first_mean, c * 8.0f, 8.0f, 8.0f, 0.0f);
        EXPECT(stats.mean == m && stats.residual == r, "the statistics carry it (c = %a)", c);
    }
    double exact = 1e4 + 0x1.2345p-9;
    LnRowStats wide = ln_stats_from_double(exact, 4.0, 0.0f);
    EXPECT((double)wide.mean + (double)wide.residual == exact && wide.rstd == 0.5f,
           "a double mean splits into float mean + residual exactly: %a + %a", wide.mean, wide.residual);
}

/* The corrected two-pass sums of a row times 2^-k, in one float lane
 * each: the formula of the statistics, without a kernel's summation order. */
typedef struct {
    float first_mean, sum_dev, sum_dev_sq, sum_sq;
} RowSums;

static RowSums row_sums(const float *x, int d, int k)
{
    RowSums s = {0};
    for (int j = 0; j < d; j++)
        s.first_mean += ldexpf(x[j], -k);
    s.first_mean /= (float)d;
    for (int j = 0; j < d; j++) {
        float scaled = ldexpf(x[j], -k), dev = scaled - s.first_mean;
        s.sum_dev += dev;
        s.sum_dev_sq += dev * dev;
        s.sum_sq += scaled * scaled;
    }
    return s;
}

/* The rescaled path forced on a row that does not overflow, with k of
 * either sign and eps = 1e-5, which 2^-2k leaves normal (exact) for these
 * k: statistics scaled back are the plain path's bits, for layer norm and
 * RMSNorm. */
static void test_rescaled_statistics_are_the_plain_bits(void)
{
    enum { D = 37 };
    float x[D];
    for (int j = 0; j < D; j++)
        x[j] = 3.0f + sinf(1.7f * (float)j) * (1.0f + 0.1f * (float)j);
    const float eps = 1e-5f;
    RowSums plain = row_sums(x, D, 0);
    LnRowStats want = ln_stats_from_deviations(plain.first_mean, plain.sum_dev, plain.sum_dev_sq, (float)D, eps);
    float want_rms = rms_rstd(plain.sum_sq, (float)D, eps);
    const int exponents[] = {1, 2, 7, 40, -3, -50};
    for (int e = 0; e < 6; e++) {
        int k = exponents[e];
        RowSums s = row_sums(x, D, k);
        LnRowStats got =
            ln_unscaled_stats(ln_moments_from_deviations(s.first_mean, s.sum_dev, s.sum_dev_sq, (float)D), k, eps);
        float got_rms = ln_rescaled_rstd(rms_moments(s.sum_sq, (float)D).var, k, eps);
        EXPECT(got.mean == want.mean && got.residual == want.residual && got.rstd == want.rstd,
               "k = %d: mean %a, residual %a, rstd %a; plain %a, %a, %a", k, got.mean, got.residual, got.rstd,
               want.mean, want.residual, want.rstd);
        EXPECT(got_rms == want_rms, "k = %d: RMSNorm rstd %a, plain %a", k, got_rms, want_rms);
    }
}

/* Where eps 2^-2k is not a float (1e-5 2^-172 underflows to 0), a scaled
 * variance of 0 still gives 1/sqrt(eps), correctly rounded, not inf; eps 0
 * gives inf, as 1/sqrt(0) does in PyTorch; and a scaled variance far above
 * eps gives 2^-k / sqrt(var). */
static void test_rescaled_rstd_keeps_eps(void)
{
    const float eps = 1e-5f;
    float want = (float)(1.0 / sqrt((double)eps));
    EXPECT(ln_rescaled_rstd(0.0f, 86, eps) == want, "var 0, k = 86: rstd %.9g, 1/sqrt(eps) %.9g",
           (double)ln_rescaled_rstd(0.0f, 86, eps), (double)want);
    EXPECT(ln_rescaled_rstd(0.0f, 127, 1.0f) == 1.0f, "var 0, k = 127, eps 1: rstd 1");
    EXPECT(isinf(ln_rescaled_rstd(0.0f, 127, 0.0f)), "var 0, eps 0: rstd inf");
    EXPECT(ln_rescaled_rstd(2.25f, 100, eps) == ldexpf(1.0f / 1.5f, -100), "var 2.25 2^200: rstd 2^-100 / 1.5");
}

/* The exponent puts the row's largest magnitude in [1, 2); a NaN counts
 * as inf, so that a row holding one has no finite maximum; such a row, and
 * a row of zeros, is not rescaled. Rows that need it are those whose
 * var + eps is inf, NaN or below 2^-100. */
static void test_scaling_exponent(void)
{
    EXPECT(ln_scaling_exponent(1e30f) == 99 && ldexpf(1e30f, -99) >= 1.0f && ldexpf(1e30f, -99) < 2.0f,
           "1e30 = 1.58 x 2^99: k = %d", ln_scaling_exponent(1e30f));
    EXPECT(ln_scaling_exponent(FLT_MAX) == 127, "FLT_MAX: k = 127");
    EXPECT(ln_scaling_exponent(1e-20f) == -67, "1e-20 = 1.48 x 2^-67: k = %d", ln_scaling_exponent(1e-20f));
    EXPECT(ln_magnitude(-3.0f) == 3.0f && ln_magnitude(NAN) == INFINITY && ln_magnitude(-INFINITY) == INFINITY,
           "magnitudes of -3, NaN, -inf: 3, inf, inf");
    EXPECT(ln_can_rescale(1e-30f) && !ln_can_rescale(0.0f) && !ln_can_rescale(INFINITY),
           "rescaled: largest magnitude 1e-30, not 0 or inf");
    EXPECT(ln_may_need_rescaling(0.0f) && ln_may_need_rescaling(NAN) && ln_may_need_rescaling(0x1p51f) &&
               !ln_may_need_rescaling(0x1p50f) && !ln_may_need_rescaling(1.0f),
           "rstd 0, NaN, 2^51 need rescaling; 2^50 and 1 do not");
}

/* Statistics held in double (forward 1 and 2): a variance of 1e60, which
 * no float holds, still gives rstd 1e-30 to within the roundings of
 * (float)var, sqrt and the division, 1.25 ulp, and so does one of 1e-40
 * (subnormal in float, 2^-133) with eps 0; within float's range the
 * rescaling is not taken (bits as ln_rstd's). */
static void test_statistics_held_in_double_rescale(void)
{
    const double var = 1.2345e60;
    LnRowStats stats = ln_stats_from_double(0.0, var, 1e-5f);
    double exact = 1.0 / sqrt(var), ulp = nextafterf((float)exact, INFINITY) - (float)exact;
    EXPECT(fabs(stats.rstd - exact) <= 1.25 * ulp, "var 1.2345e60: rstd %.9g, exact %.9g", stats.rstd, exact);
    const double tiny = 1.2345e-40;
    double tiny_exact = 1.0 / sqrt(tiny), tiny_ulp = nextafterf((float)tiny_exact, INFINITY) - (float)tiny_exact;
    float tiny_rstd = ln_stats_from_double(0.0, tiny, 0.0f).rstd;
    EXPECT(fabs(tiny_rstd - tiny_exact) <= 1.25 * tiny_ulp, "var 1.2345e-40: rstd %.9g, exact %.9g", (double)tiny_rstd,
           tiny_exact);
    EXPECT(ln_stats_from_double(0.0, 3.75, 0.25f).rstd == 0.5f, "var 3.75 + eps 0.25: rstd 0.5, unscaled");
    LnRowStats sums = ln_stats_from_double_deviations(0.0f, 0.0, 1e69, 1000.0f, 1e-5f);
    EXPECT(fabs(sums.rstd - 1e-33) <= 1.25 * 1e-33 * 0x1p-23, "sum of squares 1e69 over d = 1000: rstd %.9g",
           sums.rstd);
}

/* x = {10, 11, 13} seen from a saved mean m = 11 (the true mean is 34/3):
 * x - m = -1, 0, 2, so the residual is 1/3; with g = {1, 2, 3} and rstd 2,
 * sum(g) = 6, sum(g (x - m)) = 5, and sum(g xhat) = 2 (5 - 6/3) = 6, which
 * the direct sum of g ((x - m) - 1/3) * 2 gives too. */
static void test_backward_means_recover_the_residual(void)
{
    LnBackwardMeans means = ln_backward_means(6.0f, 5.0f, 1.0f, 3.0f, 2.0f);
    EXPECT(means.residual == 1.0f / 3.0f, "residual mean(x - m) = 1/3: got %.9g", means.residual);
    EXPECT(means.mean_g == 2.0f, "mean(g) = 2: got %.9g", means.mean_g);
    float direct = 0.0f;
    const float g[] = {1.0f, 2.0f, 3.0f}, centered[] = {-1.0f, 0.0f, 2.0f};
    for (int j = 0; j < 3; j++)
        direct += g[j] * ln_normalize(centered[j] + 11.0f, 11.0f, means.residual, 2.0f);
    EXPECT(fabsf(means.mean_g_xhat - direct / 3.0f) <= 1e-6f && fabsf(means.mean_g_xhat - 2.0f) <= 1e-6f,
           "mean(g xhat) = 2 expanded, %.9g directly: got %.9g (1e-6: a few roundings of 2)", direct / 3.0f,
           means.mean_g_xhat);
}

static void test_normalize_and_dx(void)
{
    EXPECT(ln_normalize(5.0f, 3.0f, 0.0f, 0.5f) == 1.0f, "(5 - 3) * 0.5 = 1");
    EXPECT(ln_normalize(5.0f, 3.0f, 0.5f, 0.5f) == 0.75f, "((5 - 3) - 0.5) * 0.5 = 0.75");
    EXPECT(ln_affine(1.0f, 2.0f, 0.25f) == 2.25f, "2 * 1 + 0.25");
    /* dx = rstd (g - mean(g) - xhat mean(g xhat)) = 2 (3 - 1 - 0.5 * 2) = 2 */
    EXPECT(ln_dx(3.0f, 0.5f, 1.0f, 2.0f, 2.0f) == 2.0f, "compact formula, exact small numbers");
}

/* The vectors cover the row exactly, the block holds them all, and one
 * warp fewer would not: no warp of the block is idle. */
static bool plan_covers_row(LnRowPlan plan, size_t d)
{
    size_t vectors = d / (size_t)plan.width, threads = (size_t)plan.threads, items = (size_t)plan.items;
    return vectors * (size_t)plan.width == d && threads * items >= vectors && (threads - 32) * items < vectors;
}

/* Every d up to 40000, both alignments, in a storage type: a 16-byte
 * vector is 4 floats or 8 16-bit values, and a thread holds at most
 * LN_PLAN_MOST_ITEMS of them. */
static int bad_plans(LnStorage storage)
{
    int bad = 0, vector = LN_VECTOR_VALUES(storage);
    for (size_t d = 1; d <= 40000; d++) {
        for (int aligned = 0; aligned <= 1; aligned++) {
            LnRowPlan plan = ln_row_plan(d, aligned, storage);
            int most = LN_PLAN_MOST_ITEMS(aligned && d % (size_t)vector == 0 ? vector : 1);
            size_t max_d = (size_t)LN_PLAN_MAX_THREADS * (size_t)most * (size_t)plan.width;
            bool fits = d <= max_d;
            bool ok;
            if (!fits) {
                ok = plan.threads == 0;
            } else {
                ok = plan.threads > 0 && plan.threads % 32 == 0 && plan.threads <= LN_PLAN_MAX_THREADS &&
                     plan.items >= 1 && plan.items <= most && plan_covers_row(plan, d) &&
                     (plan.items == most || plan.threads <= LN_PLAN_PREFERRED_THREADS) &&
                     plan.width == (aligned && d % (size_t)vector == 0 ? vector : 1);
            }
            if (!ok && bad++ < 5)
                printf("bad %s plan for d = %zu, aligned %d: width %d, items %d, threads %d\n",
                       ln_storage_name(storage), d, aligned, plan.width, plan.items, plan.threads);
        }
    }
    return bad;
}

/* The dx guard from a row's double sums: finite, vouching for a bracket of
 * the size of its terms and not for one that cancels, where the saved
 * rstd is the exact one's rounding; infinite (every element to double)
 * where the saved rstd is 1% off, where a float term could overflow, and
 * where the sums are NaN. */
static void test_dx_guard(void)
{
    const double x[] = {1.0, -0.5, 2.0, 0.25}, dy[] = {0.5, 1.0, -1.5, 2.0};
    enum { D = 4 };
    double mean = 0.6875;
    LnBackwardSums s = {0};
    for (int j = 0; j < D; j++) {
        double dev = x[j] - mean;
        s.sum_g += dy[j], s.sum_g_sq += dy[j] * dy[j], s.sum_g_dev += dy[j] * dev;
        s.sum_dev += dev, s.sum_dev_sq += dev * dev;
    }
    LnExactStats exact = ln_exact_stats(mean, s.sum_dev, s.sum_dev_sq, D, 1e-5);
    float rstd = (float)exact.rstd;
    LnDxGuard guard = ln_guarded_backward(s, exact, rstd, D, 11).guard;
    EXPECT(guard.factor < 0.01f && guard.floor < 0.01f, "fp16 guard of an ordinary row: factor %g, floor %g",
           (double)guard.factor, (double)guard.floor);
    EXPECT(ln_dx_within_guard(1.0f, 0.5f, 0.0f, 1.0f, guard), "a bracket of 0.5 on terms of 1 passes");
    EXPECT(!ln_dx_within_guard(0.5f + 0x1p-20f, 0.5f, 0.0f, 1.0f, guard), "a bracket of 2^-20 on terms of 0.5 fails");
    float off = ln_guarded_backward(s, exact, rstd * 1.01f, D, 11).guard.factor;
    LnBackwardSums huge = s, nan = s;
    huge.sum_g_sq = 0x1p260;
    nan.sum_g_dev = NAN;
    float overflowing = ln_guarded_backward(huge, exact, rstd, D, 11).guard.factor;
    float not_a_number = ln_guarded_backward(nan, exact, rstd, D, 11).guard.floor;
    EXPECT(isinf(off) && isinf(overflowing) && isinf(not_a_number),
           "guard infinite for an rstd 1%% off (%g), terms that may overflow (%g), NaN sums (%g)", (double)off,
           (double)overflowing, (double)not_a_number);
}

/* The error bounds that LnExactStats carries, against long double (11 bits
 * more than double: its own error is 2^-11 of theirs), on 16-bit rows far
 * from zero, where the sums in double lose the most: the statistics that a
 * backward pass takes from its double sums about the saved mean are within
 * mean_error and rstd_error of the exact ones. The guards of y and dx rest
 * on these bounds. They are worst cases, about 30 times what these rows
 * reach; a bound that left out the sums' rounding fails here (seen, with
 * sum_error set to 0: rstd at offset 0, d = 4096 and 16384). */
static void check_exact_stats_bounds(LnStorage storage, size_t d, double offset, uint64_t seed)
{
    float *x = ALLOC_ARRAY(d, float), *dy = ALLOC_ARRAY(d, float), *gamma = ALLOC_ARRAY(d, float);
    double *gamma_wide = ALLOC_ARRAY(d, double);
    uint16_t *x_bits = ALLOC_ARRAY(d, uint16_t), *dy_bits = ALLOC_ARRAY(d, uint16_t);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, x, d, offset, 1.0);
    rng_fill_normal_f32(&rng, dy, d, 0.0, 1.0);
    ln_storage_bits(storage, x_bits, x, d);
    ln_storage_bits(storage, dy_bits, dy, d);
    long double sum = 0.0L, sum_sq = 0.0L;
    for (size_t j = 0; j < d; j++) {
        gamma[j] = gamma_wide[j] = 1.0;
        x[j] = ln_storage_narrow(storage, x[j]);
        sum += x[j];
    }
    long double mean = sum / (long double)d;
    for (size_t j = 0; j < d; j++)
        sum_sq += (x[j] - mean) * (x[j] - mean);
    const float eps = 1e-5f;
    long double rstd = 1.0L / sqrtl(sum_sq / (long double)d + eps);
    float saved_mean = (float)mean;
    LnBackwardSums s;
    /* the row itself stands for "the next x", which the sums prefetch */
    CALL_FOR_STORAGE(
        storage, s = backward_sums_in_double(dy_bits, x_bits, gamma_wide, d, saved_mean, true, x_bits, fixed_storage));
    LnExactStats exact = ln_exact_stats(saved_mean, s.sum_dev, s.sum_dev_sq, (double)d, eps);
    const double reference_share = 1.0 + 0x1p-10;
    double mean_off = (double)(fabsl((long double)exact.mean - mean) * rstd);
    double rstd_off = (double)fabsl((long double)exact.rstd / rstd - 1.0L);
    EXPECT(mean_off <= exact.mean_error * reference_share && rstd_off <= exact.rstd_error * reference_share,
           "%s, d = %zu, offset %g: mean off by %.3g (bound %.3g), rstd by %.3g (bound %.3g)", ln_storage_name(storage),
           d, offset, mean_off, exact.mean_error, rstd_off, exact.rstd_error);
    void *arrays[] = {x, dy, gamma, gamma_wide, x_bits, dy_bits};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

static void test_exact_stats_bounds(void)
{
    const size_t widths[] = {768, 4096, 16384};
    for (size_t w = 0; w < 3; w++) {
        check_exact_stats_bounds(STORAGE_FP16, widths[w], 1e4, 40 + w);
        check_exact_stats_bounds(STORAGE_BF16, widths[w], 1e6, 50 + w);
        check_exact_stats_bounds(STORAGE_BF16, widths[w], 0.0, 60 + w);
    }
}

static void test_row_plan(void)
{
    const LnStorage storages[] = {STORAGE_FLOAT32, STORAGE_FP16, STORAGE_BF16};
    for (int t = 0; t < 3; t++)
        EXPECT(bad_plans(storages[t]) == 0, "%s: %d plans out of 80000 are wrong", ln_storage_name(storages[t]),
               bad_plans(storages[t]));
    LnRowPlan wide = ln_row_plan(4096, true, STORAGE_FLOAT32);
    EXPECT(wide.width == 4 && wide.items == 2 && wide.threads == 512, "d = 4096: 2 float4 per thread, 512 threads");
    EXPECT(ln_row_plan(8193, false, STORAGE_FLOAT32).threads == 0, "8193 single floats do not fit in 1024 threads x 8");
    EXPECT(ln_row_plan(32768, true, STORAGE_FLOAT32).threads == 1024,
           "32768 fits as 8 float4 per thread in 1024 threads");
    LnRowPlan half = ln_row_plan(4096, true, STORAGE_BF16);
    EXPECT(half.width == 8 && half.items == 1 && half.threads == 512, "d = 4096 in bf16: 1 vector of 8, 512 threads");
    EXPECT(ln_row_plan(32768, true, STORAGE_FP16).threads == 1024 && ln_row_plan(32768, true, STORAGE_FP16).items == 4,
           "32768 fp16 fit as 4 vectors of 8 in 1024 threads");
    EXPECT(ln_row_plan(32776, true, STORAGE_FP16).threads == 0, "32776 fp16 do not fit");
}

static void test_alignment(void)
{
    _Alignas(16) float buffer[8];
    const void *aligned[] = {buffer, buffer + 4, NULL};
    const void *one_off[] = {buffer, buffer + 1, NULL};
    EXPECT(ln_all_16_byte_aligned(aligned), "buffer and buffer + 4 floats are 16-byte aligned");
    EXPECT(!ln_all_16_byte_aligned(one_off), "buffer + 1 float is not");
}

int main(void)
{
    test_rstd_is_two_rounded_operations();
    test_statistics_from_deviations();
    test_nan_statistics_stay_nan();
    test_residual_keeps_what_the_mean_lost();
    test_rescaled_statistics_are_the_plain_bits();
    test_scaling_exponent();
    test_rescaled_rstd_keeps_eps();
    test_statistics_held_in_double_rescale();
    test_backward_means_recover_the_residual();
    test_normalize_and_dx();
    test_dx_guard();
    test_exact_stats_bounds();
    test_row_plan();
    test_alignment();
    return test_finish();
}
