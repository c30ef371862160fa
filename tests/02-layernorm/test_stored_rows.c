/* The kernels on 16-bit rows (layernorm_*_stored, rmsnorm_*_stored)
 * against the double reference on the same stored inputs, and against the
 * float32 kernels run on x and dy widened first (exact):
 * - The layer norm forward pass of a 16-bit row takes its statistics in
 *   double and guards its float results (kernels/layernorm_row.h): mean and
 *   rstd are the double reference's, rounded to float (within half a float
 *   ulp, and the double's own error), and y is within one ulp of the
 *   storage type of the double reference, everywhere; NaN where it is NaN.
 * - The backward passes of both norms take their sums in double and guard
 *   dx the same way: dx within one ulp of the double reference everywhere.
 *   Their parameter gradients are the float32 path's arithmetic: RMSNorm's
 *   dgamma and layer norm's dbeta its very bits; layer norm's dgamma
 *   recomputes xhat with a residual rounded from double, not summed in
 *   float, and is held to the float32 tolerance of problem.c's ln_compare.
 * - RMSNorm's forward pass is the float32 path's: the same bits.
 * - The passes without the guard (layernorm_*_float_then_round,
 *   rmsnorm_backward_float_then_round), which the benchmark times beside
 *   the guarded ones, are the float32 kernels on the widened rows, each
 *   result rounded once: the same bits, statistics and gradients too.
 * - The same backward passes with their rows in one chunk, which the
 *   benchmark times on rows in cache: the same dx.
 * Odd row lengths put the row ends on the head and tail paths; a NaN row
 * and (bf16, float's range) a row that overflows float's sums of squares
 * take the rare paths. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "chapters/02-layernorm/storage.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/layernorm_row.h"

typedef struct {
    float *y, *dx, *mean, *rstd, *dgamma, *dbeta;
} Results;

static Results results_new(size_t n, size_t d)
{
    Results r = {ALLOC_ARRAY(n * d, float), ALLOC_ARRAY(n * d, float), ALLOC_ARRAY(n, float),
                 ALLOC_ARRAY(n, float),     ALLOC_ARRAY(d, float),     ALLOC_ARRAY(d, float)};
    return r;
}

static void results_free(Results *r)
{
    float *arrays[] = {r->y, r->dx, r->mean, r->rstd, r->dgamma, r->dbeta};
    for (size_t i = 0; i < 6; i++)
        array_free(arrays[i]);
}

static void run_backward(NormKind norm, LnStorage storage, void *dx, Results *r, const void *x, const void *dy,
                         const float *gamma, size_t n, size_t d)
{
    float *scratch = ALLOC_ARRAY(layernorm_backward_f32_scratch_floats(n, d), float);
    if (norm == NORM_RMS)
        rmsnorm_backward_stored(dx, r->dgamma, scratch, dy, x, r->rstd, gamma, n, d, 1e-5f, storage);
    else
        layernorm_backward_stored(dx, r->dgamma, r->dbeta, scratch, dy, x, r->mean, r->rstd, gamma, n, d, 1e-5f,
                                  storage);
    array_free(scratch);
}

/* Forward then backward, rows in `storage` (x, dy, y, dx as void *). */
static void run(NormKind norm, LnStorage storage, void *y, void *dx, Results *r, const void *x, const void *dy,
                const float *gamma, const float *beta, size_t n, size_t d)
{
    if (norm == NORM_RMS)
        rmsnorm_forward_stored(y, r->rstd, x, gamma, n, d, 1e-5f, storage);
    else
        layernorm_forward_stored(y, r->mean, r->rstd, x, gamma, beta, n, d, 1e-5f, storage);
    run_backward(norm, storage, dx, r, x, dy, gamma, n, d);
}

static bool same_bits(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}

/* Random inputs in `storage`, as bits, with one NaN row and, in bf16, one
 * row of magnitude 1e30 (its squares overflow float). */
static void fill_stored(uint16_t *bits, LnStorage storage, size_t n, size_t d, uint64_t seed, double offset)
{
    float *values = ALLOC_ARRAY(n * d, float);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, values, n * d, offset, 1.0);
    if (n > 2)
        values[1 * d + d / 2] = NAN;
    if (n > 3 && storage == STORAGE_BF16)
        for (size_t j = 0; j < d; j++)
            values[2 * d + j] *= 1e30f;
    ln_storage_bits(storage, bits, values, n * d);
    array_free(values);
}

/* got within `ulps` ulps of the float nearest ref (NaN where ref is NaN). */
static bool within_float_ulps(float got, double ref, double ulps)
{
    if (isnan(ref))
        return isnan(got);
    float nearest = (float)ref;
    double ulp = (double)nextafterf(fabsf(nearest), INFINITY) - fabsf(nearest);
    return fabs((double)got - ref) <= ulps * ulp;
}

/* y within one ulp of the storage type of the double reference, NaN where
 * it is NaN; mean and rstd its statistics rounded to float. */
static void check_layer_norm_forward(LnStorage storage, const uint16_t *y, const Results *got, const float *x_wide,
                                     const float *gamma, const float *beta, size_t n, size_t d, int threads)
{
    size_t count = n * d;
    double *x64 = ALLOC_ARRAY(count, double), *gamma64 = ALLOC_ARRAY(d, double), *beta64 = ALLOC_ARRAY(d, double);
    double *y_ref = ALLOC_ARRAY(count, double), *mean_ref = ALLOC_ARRAY(n, double), *rstd_ref = ALLOC_ARRAY(n, double);
    float *y_got = ALLOC_ARRAY(count, float);
    widen_f32(x64, x_wide, count);
    widen_f32(gamma64, gamma, d);
    widen_f32(beta64, beta, d);
    layernorm_forward_f64(y_ref, mean_ref, rstd_ref, x64, gamma64, beta64, n, d, (double)1e-5f);
    ln_storage_widen_bits(storage, y_got, y, count);
    size_t beyond = 0, stats_off = 0;
    for (size_t i = 0; i < count; i++)
        beyond +=
            isnan(y_ref[i]) ? !isnan(y_got[i]) : !(fabs(y_got[i] - y_ref[i]) <= ln_storage_ulp(storage, y_ref[i]));
    /* Half a float ulp, and 2^-20 of one for the two doubles' own errors.
     * A row holding a NaN has a NaN mean, and its rstd is NaN too (the
     * reference's fmax turns its variance into 0). */
    for (size_t row = 0; row < n; row++)
        stats_off += isnan(mean_ref[row]) ? !(isnan(got->mean[row]) && isnan(got->rstd[row]))
                                          : !within_float_ulps(got->mean[row], mean_ref[row], 0.5 + 0x1p-20) +
                                                !within_float_ulps(got->rstd[row], rstd_ref[row], 0.5 + 0x1p-20);
    EXPECT(beyond == 0, "layer norm %s, %zu x %zu, %d threads: %zu of y beyond one ulp of the double reference",
           ln_storage_name(storage), n, d, threads, beyond);
    EXPECT(stats_off == 0, "layer norm %s, %zu x %zu, %d threads: %zu saved statistics not the reference's rounding",
           ln_storage_name(storage), n, d, threads, stats_off);
    void *arrays[] = {x64, gamma64, beta64, y_ref, mean_ref, rstd_ref, y_got};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

/* The double reference's own error in dx = rstd (g - mean_g - xhat
 * mean_g_xhat): each term carries about d + 8 roundings of 2^-53 (sums of
 * d terms; rstd and xhat from them), so at most 4 (d + 8) 2^-53 rstd
 * (|g| + |mean_g| + |xhat mean_g_xhat|). Where the terms cancel far below
 * that, the double is noise, and a dx within one ulp of the exact value
 * can be that far from it: a one-element RMSNorm row of 1e30 has an exact
 * dx of about 1e-66, and the double reference gives 1e-16. Next to the
 * float path's error of a few 2^-24 of the same terms, this is nothing:
 * the test still sees a float dx where double was needed. mean is NULL for
 * RMSNorm, which centres nothing and has no mean_g. */
static void reference_dx_error(double *error, const double *x, const double *dy, const double *gamma,
                               const double *mean, const double *rstd, size_t n, size_t d)
{
    const double per_term = 4.0 * ((double)d + 8.0) * 0x1p-53;
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d, *dyr = dy + row * d;
        double centre = mean != NULL ? mean[row] : 0.0, r = rstd[row], mean_g = 0.0, mean_g_xhat = 0.0;
        for (size_t j = 0; j < d; j++) {
            mean_g += gamma[j] * dyr[j] / (double)d;
            mean_g_xhat += gamma[j] * dyr[j] * (xr[j] - centre) * r / (double)d;
        }
        if (mean == NULL)
            mean_g = 0.0;
        for (size_t j = 0; j < d; j++) {
            double size = fabs(gamma[j] * dyr[j]) + fabs(mean_g) + fabs((xr[j] - centre) * r * mean_g_xhat);
            error[row * d + j] = per_term * r * size;
        }
    }
}

/* dx within one ulp of the storage type of the double reference (and
 * the reference's own error), NaN where it is NaN; layer norm's dgamma within ln_compare's float32 tolerance
 * for rows of unit scale (sums of n order-1 terms, in float in chunks). */
static void check_backward(NormKind norm, LnStorage storage, const uint16_t *dx, const Results *got,
                           const float *x_wide, const float *dy_wide, const float *gamma, const float *beta, size_t n,
                           size_t d, int threads)
{
    size_t count = n * d;
    double *x64 = ALLOC_ARRAY(count, double), *dy64 = ALLOC_ARRAY(count, double), *gamma64 = ALLOC_ARRAY(d, double);
    double *beta64 = ALLOC_ARRAY(d, double), *y_ref = ALLOC_ARRAY(count, double), *dx_ref = ALLOC_ARRAY(count, double);
    double *mean_ref = ALLOC_ARRAY(n, double), *rstd_ref = ALLOC_ARRAY(n, double);
    double *dgamma_ref = ALLOC_ARRAY(d, double), *dbeta_ref = ALLOC_ARRAY(d, double);
    float *dx_got = ALLOC_ARRAY(count, float);
    widen_f32(x64, x_wide, count);
    widen_f32(dy64, dy_wide, count);
    widen_f32(gamma64, gamma, d);
    widen_f32(beta64, beta, d);
    if (norm == NORM_RMS) {
        rmsnorm_forward_f64(y_ref, rstd_ref, x64, gamma64, n, d, (double)1e-5f);
        rmsnorm_backward_f64(dx_ref, dgamma_ref, dy64, x64, rstd_ref, gamma64, n, d);
    } else {
        layernorm_forward_f64(y_ref, mean_ref, rstd_ref, x64, gamma64, beta64, n, d, (double)1e-5f);
        layernorm_backward_f64(dx_ref, dgamma_ref, dbeta_ref, dy64, x64, mean_ref, rstd_ref, gamma64, n, d);
    }
    ln_storage_widen_bits(storage, dx_got, dx, count);
    double *dx_ref_error = ALLOC_ARRAY(count, double);
    reference_dx_error(dx_ref_error, x64, dy64, gamma64, norm == NORM_LAYER ? mean_ref : NULL, rstd_ref, n, d);
    size_t beyond = 0, dgamma_off = 0;
    for (size_t i = 0; i < count; i++)
        beyond += isnan(dx_ref[i])
                      ? !isnan(dx_got[i])
                      : !(fabs(dx_got[i] - dx_ref[i]) <= ln_storage_ulp(storage, dx_ref[i]) + dx_ref_error[i]);
    for (size_t j = 0; norm == NORM_LAYER && j < d; j++)
        dgamma_off +=
            isnan(dgamma_ref[j])
                ? !isnan(got->dgamma[j])
                : !(fabs(got->dgamma[j] - dgamma_ref[j]) <= 1e-6 * sqrt((double)n) + 1e-5 * fabs(dgamma_ref[j]));
    EXPECT(beyond == 0, "%s norm %s, %zu x %zu, %d threads: %zu of dx beyond one ulp of the double reference",
           norm_kind_name(norm), ln_storage_name(storage), n, d, threads, beyond);
    EXPECT(dgamma_off == 0, "layer norm %s, %zu x %zu, %d threads: %zu of dgamma outside the float32 tolerance",
           ln_storage_name(storage), n, d, threads, dgamma_off);
    void *arrays[] = {x64,      dy64,     gamma64,    beta64,    y_ref,  dx_ref,
                      mean_ref, rstd_ref, dgamma_ref, dbeta_ref, dx_got, dx_ref_error};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

/* The passes without the guard against `expected`, the float32 kernels'
 * results on the widened rows: the same bits once rounded. */
static void check_float_then_round(NormKind norm, LnStorage storage, const Results *expected, const uint16_t *x,
                                   const uint16_t *dy, const float *gamma, const float *beta, size_t n, size_t d,
                                   int threads)
{
    size_t count = n * d;
    uint16_t *y = ALLOC_ARRAY(count, uint16_t), *dx = ALLOC_ARRAY(count, uint16_t);
    uint16_t *y_expected = ALLOC_ARRAY(count, uint16_t), *dx_expected = ALLOC_ARRAY(count, uint16_t);
    float *scratch = ALLOC_ARRAY(layernorm_backward_f32_scratch_floats(n, d), float);
    Results got = results_new(n, d);
    bool layer = norm == NORM_LAYER;
    if (layer) {
        layernorm_forward_float_then_round(y, got.mean, got.rstd, x, gamma, beta, n, d, 1e-5f, storage);
        layernorm_backward_float_then_round(dx, got.dgamma, got.dbeta, scratch, dy, x, got.mean, got.rstd, gamma, n, d,
                                            storage);
    } else {
        rmsnorm_forward_stored(y, got.rstd, x, gamma, n, d, 1e-5f, storage); /* unguarded already */
        rmsnorm_backward_float_then_round(dx, got.dgamma, scratch, dy, x, got.rstd, gamma, n, d, storage);
    }
    ln_storage_bits(storage, y_expected, expected->y, count);
    ln_storage_bits(storage, dx_expected, expected->dx, count);
    bool statistics =
        same_bits(got.rstd, expected->rstd, n * 4) && (!layer || same_bits(got.mean, expected->mean, n * 4));
    bool gradients =
        same_bits(got.dgamma, expected->dgamma, d * 4) && (!layer || same_bits(got.dbeta, expected->dbeta, d * 4));
    EXPECT(same_bits(y, y_expected, count * 2) && same_bits(dx, dx_expected, count * 2) && statistics && gradients,
           "%s norm %s, %zu x %zu, %d threads, float then round: y, dx, statistics and gradients the bits of widen, "
           "float32, round",
           norm_kind_name(norm), ln_storage_name(storage), n, d, threads);
    results_free(&got);
    void *arrays[] = {y, dx, y_expected, dx_expected, scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

/* The benchmark's one-chunk passes (layernorm_backward_in_one_chunk,
 * rmsnorm_backward_in_one_chunk), guarded and not: the dx bits of the
 * passes they stand in for, whose chunks change only how the parameter
 * gradients are summed. `got` holds the forward pass's statistics. */
static void check_in_one_chunk(NormKind norm, LnStorage storage, const uint16_t *x, const uint16_t *dy,
                               const float *gamma, const Results *got, size_t n, size_t d, int threads)
{
    size_t count = n * d;
    uint16_t *chunked = ALLOC_ARRAY(count, uint16_t), *in_one = ALLOC_ARRAY(count, uint16_t);
    float *scratch = ALLOC_ARRAY(layernorm_backward_f32_scratch_floats(n, d), float);
    float *dgamma = ALLOC_ARRAY(d, float), *dbeta = ALLOC_ARRAY(d, float);
    bool same = true;
    for (int guarded = 0; guarded <= 1; guarded++) {
        if (norm == NORM_LAYER && guarded)
            layernorm_backward_stored(chunked, dgamma, dbeta, scratch, dy, x, got->mean, got->rstd, gamma, n, d, 1e-5f,
                                      storage);
        else if (norm == NORM_LAYER)
            layernorm_backward_float_then_round(chunked, dgamma, dbeta, scratch, dy, x, got->mean, got->rstd, gamma, n,
                                                d, storage);
        else if (guarded)
            rmsnorm_backward_stored(chunked, dgamma, scratch, dy, x, got->rstd, gamma, n, d, 1e-5f, storage);
        else
            rmsnorm_backward_float_then_round(chunked, dgamma, scratch, dy, x, got->rstd, gamma, n, d, storage);
        if (norm == NORM_LAYER)
            layernorm_backward_in_one_chunk(in_one, dgamma, dbeta, scratch, dy, x, got->mean, got->rstd, gamma, n, d,
                                            1e-5f, storage, guarded);
        else
            rmsnorm_backward_in_one_chunk(in_one, dgamma, scratch, dy, x, got->rstd, gamma, n, d, 1e-5f, storage,
                                          guarded);
        same = same && same_bits(in_one, chunked, count * 2);
    }
    EXPECT(same, "%s norm %s, %zu x %zu, %d threads: dx in one chunk, guarded and not, the bits of the chunked passes",
           norm_kind_name(norm), ln_storage_name(storage), n, d, threads);
    void *arrays[] = {chunked, in_one, scratch, dgamma, dbeta};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

static void check_case(NormKind norm, LnStorage storage, size_t n, size_t d, int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    size_t count = n * d;
    uint16_t *x = ALLOC_ARRAY(count, uint16_t), *dy = ALLOC_ARRAY(count, uint16_t);
    uint16_t *y = ALLOC_ARRAY(count, uint16_t), *dx = ALLOC_ARRAY(count, uint16_t);
    uint16_t *y_expected = ALLOC_ARRAY(count, uint16_t);
    float *gamma = ALLOC_ARRAY(d, float), *beta = ALLOC_ARRAY(d, float);
    float *x_wide = ALLOC_ARRAY(count, float), *dy_wide = ALLOC_ARRAY(count, float);
    fill_stored(x, storage, n, d, 100 + d, 3.0);
    fill_stored(dy, storage, n, d, 200 + d, 0.0);
    Rng rng;
    rng_seed(&rng, 300 + d);
    rng_fill_normal_f32(&rng, gamma, d, 1.0, 0.1);
    rng_fill_normal_f32(&rng, beta, d, 0.0, 0.1);

    Results got = results_new(n, d), expected = results_new(n, d);
    run(norm, storage, y, dx, &got, x, dy, gamma, beta, n, d);
    ln_storage_widen_bits(storage, x_wide, x, count);
    ln_storage_widen_bits(storage, dy_wide, dy, count);
    bool layer = norm == NORM_LAYER;
    run(norm, STORAGE_FLOAT32, expected.y, expected.dx, &expected, x_wide, dy_wide, gamma, beta, n, d);
    if (layer) {
        check_layer_norm_forward(storage, y, &got, x_wide, gamma, beta, n, d, threads);
    } else {
        ln_storage_bits(storage, y_expected, expected.y, count);
        EXPECT(same_bits(y, y_expected, count * 2) && same_bits(got.rstd, expected.rstd, n * 4),
               "RMSNorm %s, %zu x %zu, %d threads: y and rstd the bits of widen, float32, round",
               ln_storage_name(storage), n, d, threads);
    }
    check_backward(norm, storage, dx, &got, x_wide, dy_wide, gamma, beta, n, d, threads);
    EXPECT(same_bits(layer ? got.dbeta : got.dgamma, layer ? expected.dbeta : expected.dgamma, d * 4),
           "%s norm %s, %zu x %zu, %d threads: %s the float32 path's bits", norm_kind_name(norm),
           ln_storage_name(storage), n, d, threads, layer ? "dbeta" : "dgamma");
    check_float_then_round(norm, storage, &expected, x, dy, gamma, beta, n, d, threads);
    check_in_one_chunk(norm, storage, x, dy, gamma, &got, n, d, threads);

    results_free(&got);
    results_free(&expected);
    void *arrays[] = {x, dy, y, dx, y_expected, gamma, beta, x_wide, dy_wide};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

int main(void)
{
#ifdef _OPENMP
    int max_threads = omp_get_max_threads();
#endif
    const size_t widths[] = {1, 7, 16, 33, 100, 768, 1029};
    const LnStorage storages[] = {STORAGE_FP16, STORAGE_BF16};
    for (int norm = NORM_LAYER; norm <= NORM_RMS; norm++)
        for (size_t s = 0; s < 2; s++)
            for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
                for (int threads = 1; threads <= 2; threads++)
                    check_case((NormKind)norm, storages[s], 37, widths[w], threads);
    /* Enough rows for the backward passes' chunks to hold two or three
     * (LN_BACKWARD_CHUNKS): rows swept in pairs, a line of each at a time
     * where their lines line up (768), a block at a time where rows of 48
     * are paired by their blocks but lie half a line apart. */
    const size_t paired_widths[] = {48, 768};
    for (int norm = NORM_LAYER; norm <= NORM_RMS; norm++)
        for (size_t s = 0; s < 2; s++)
            for (size_t w = 0; w < 2; w++)
                check_case((NormKind)norm, storages[s], 2 * LN_BACKWARD_CHUNKS + 5, paired_widths[w], 2);
#ifdef _OPENMP
    omp_set_num_threads(max_threads);
#endif
    return test_finish();
}
