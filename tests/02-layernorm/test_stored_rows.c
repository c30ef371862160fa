/* The kernels on 16-bit rows (layernorm_*_stored, rmsnorm_*_stored) give
 * the bits of the float32 kernels run on x and dy widened first, with y and
 * dx rounded to the storage type afterwards: the widening is exact and the
 * arithmetic the same, so nothing may differ, not even in the last bit of
 * mean, rstd, dgamma or dbeta. Odd row lengths put the row ends on the
 * head and tail paths; a NaN row and (bf16, float's range) a row that
 * overflows the sums take the rare paths. */
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

typedef struct {
    float *y, *dx, *mean, *rstd, *dgamma, *dbeta;
} Results;

static Results results_new(size_t n, size_t d)
{
    Results r = {ALLOC_ARRAY(float, n *d), ALLOC_ARRAY(float, n *d), ALLOC_ARRAY(float, n),
                 ALLOC_ARRAY(float, n),    ALLOC_ARRAY(float, d),    ALLOC_ARRAY(float, d)};
    return r;
}

static void results_free(Results *r)
{
    float *arrays[] = {r->y, r->dx, r->mean, r->rstd, r->dgamma, r->dbeta};
    for (size_t i = 0; i < 6; i++)
        array_free(arrays[i]);
}

/* Forward then backward, rows in `storage` (x, dy, y, dx as void *). */
static void run(NormKind norm, LnStorage storage, void *y, void *dx, Results *r, const void *x, const void *dy,
                const float *gamma, const float *beta, size_t n, size_t d)
{
    float *scratch = ALLOC_ARRAY(float, layernorm_backward_f32_scratch_floats(n, d));
    if (norm == NORM_RMS) {
        rmsnorm_forward_stored(y, r->rstd, x, gamma, n, d, 1e-5f, storage);
        rmsnorm_backward_stored(dx, r->dgamma, scratch, dy, x, r->rstd, gamma, n, d, storage);
    } else {
        layernorm_forward_stored(y, r->mean, r->rstd, x, gamma, beta, n, d, 1e-5f, storage);
        layernorm_backward_stored(dx, r->dgamma, r->dbeta, scratch, dy, x, r->mean, r->rstd, gamma, n, d, storage);
    }
    array_free(scratch);
}

static bool same_bits(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}

/* Random inputs in `storage`, as bits, with one NaN row and, in bf16, one
 * row of magnitude 1e30 (its squares overflow float). */
static void fill_stored(uint16_t *bits, LnStorage storage, size_t n, size_t d, uint64_t seed, double offset)
{
    float *values = ALLOC_ARRAY(float, n *d);
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

static void check_case(NormKind norm, LnStorage storage, size_t n, size_t d, int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    size_t count = n * d;
    uint16_t *x = ALLOC_ARRAY(uint16_t, count), *dy = ALLOC_ARRAY(uint16_t, count);
    uint16_t *y = ALLOC_ARRAY(uint16_t, count), *dx = ALLOC_ARRAY(uint16_t, count);
    uint16_t *y_expected = ALLOC_ARRAY(uint16_t, count), *dx_expected = ALLOC_ARRAY(uint16_t, count);
    float *gamma = ALLOC_ARRAY(float, d), *beta = ALLOC_ARRAY(float, d);
    float *x_wide = ALLOC_ARRAY(float, count), *dy_wide = ALLOC_ARRAY(float, count);
    fill_stored(x, storage, n, d, 100 + d, 3.0);
    fill_stored(dy, storage, n, d, 200 + d, 0.0);
    Rng rng;
    rng_seed(&rng, 300 + d);
    rng_fill_normal_f32(&rng, gamma, d, 1.0, 0.1);
    rng_fill_normal_f32(&rng, beta, d, 0.0, 0.1);

    Results got = results_new(n, d), expected = results_new(n, d);
    run(norm, storage, y, dx, &got, x, dy, gamma, beta, n, d);
    /* The float32 path: widen, run, round y and dx. */
    ln_storage_widen_bits(storage, x_wide, x, count);
    ln_storage_widen_bits(storage, dy_wide, dy, count);
    run(norm, STORAGE_FLOAT32, expected.y, expected.dx, &expected, x_wide, dy_wide, gamma, beta, n, d);
    ln_storage_bits(storage, y_expected, expected.y, count);
    ln_storage_bits(storage, dx_expected, expected.dx, count);

    bool layer = norm == NORM_LAYER;
    EXPECT(same_bits(y, y_expected, count * 2) && same_bits(dx, dx_expected, count * 2),
           "%s norm %s, %zu x %zu, %d threads: y and dx the bits of widen, float32, round", norm_kind_name(norm),
           ln_storage_name(storage), n, d, threads);
    EXPECT(same_bits(got.rstd, expected.rstd, n * 4) && (!layer || same_bits(got.mean, expected.mean, n * 4)),
           "%s norm %s, %zu x %zu, %d threads: the saved statistics the float32 path's bits", norm_kind_name(norm),
           ln_storage_name(storage), n, d, threads);
    EXPECT(same_bits(got.dgamma, expected.dgamma, d * 4) && (!layer || same_bits(got.dbeta, expected.dbeta, d * 4)),
           "%s norm %s, %zu x %zu, %d threads: dgamma (and dbeta) the float32 path's bits", norm_kind_name(norm),
           ln_storage_name(storage), n, d, threads);

    results_free(&got);
    results_free(&expected);
    void *arrays[] = {x, dy, y, dx, y_expected, dx_expected, gamma, beta, x_wide, dy_wide};
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
#ifdef _OPENMP
    omp_set_num_threads(max_threads);
#endif
    return test_finish();
}
