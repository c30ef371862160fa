/* The order of the additions into dgamma and dbeta, which the backward
 * kernels promise (layernorm.c: sum_parameter_gradients_in_chunks): in each
 * of the fixed chunks of rows, every row's share added to the chunk's float
 * partial in row order, whether the kernel sweeps one row or two at once;
 * then the partials added in double, in chunk order, and rounded to float.
 * The thread-count and storage-type tests compare the kernels with
 * themselves, and the reference comparisons allow an ulp or more, so
 * neither would see another order. Here the shares are exact and of very
 * different sizes, a float partial rounds them in an order of its own, and
 * the expected bits are that order, summed by this test: every comparison
 * is exact.
 *
 * The inputs make each share exact: mean 0 and rstd 1 are passed in (the
 * backward pass takes them as given), x is +1 and -1 in alternate columns,
 * so every row sums to 0 and the residual the row sums recover is 0, and
 * xhat = x; dy is a small integer times a power of two, exact in fp16 and
 * bf16, so dy * xhat is too. */
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

/* +1, -1, +1, ...; an odd row ends with a 0, so that the row still sums
 * to 0 (its share is 0). */
static float x_at(size_t j, size_t d)
{
    if (d % 2 == 1 && j == d - 1)
        return 0.0f;
    return j % 2 == 0 ? 1.0f : -1.0f;
}

/* Column 0 is built so that its partial depends on the order: each chunk's
 * first row gives 2048 and the others 2^-13, half an ulp of 2048. Added one
 * by one, every 2^-13 ties and rounds back to 2048 (even); any two of them
 * added first make an ulp, which stays. The other columns are m * 2^e,
 * m in 1..7 and e in -12..11, at random. */
static float dy_at(size_t row_in_chunk, size_t j, Rng *rng)
{
    if (j == 0)
        return row_in_chunk == 0 ? 2048.0f : 0x1p-13f;
    return (float)(1 + rng_below(rng, 7)) * ldexpf(1.0f, (int)rng_below(rng, 24) - 12);
}

/* dgamma and dbeta in the promised order, from the float values of x and dy. */
static void expected_sums(float *dgamma, float *dbeta, const float *x, const float *dy, size_t n, size_t d)
{
    size_t chunks = n < LN_BACKWARD_CHUNKS ? n : LN_BACKWARD_CHUNKS;
    double *total_g = ALLOC_ARRAY(d, double), *total_b = ALLOC_ARRAY(d, double); /* zeroed */
    for (size_t chunk = 0; chunk < chunks; chunk++)
        for (size_t j = 0; j < d; j++) {
            float part_g = 0.0f, part_b = 0.0f;
            for (size_t row = chunk * n / chunks; row < (chunk + 1) * n / chunks; row++) {
                part_g += dy[row * d + j] * x[row * d + j];
                part_b += dy[row * d + j];
            }
            total_g[j] += part_g;
            total_b[j] += part_b;
        }
    for (size_t j = 0; j < d; j++) {
        dgamma[j] = (float)total_g[j];
        dbeta[j] = (float)total_b[j];
    }
    array_free(total_g);
    array_free(total_b);
}

/* n = rows_per_chunk chunks' worth of rows: an odd count leaves each chunk
 * a last row on its own. */
static void check_case(NormKind norm, LnStorage storage, size_t rows_per_chunk, size_t d, int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    size_t n = LN_BACKWARD_CHUNKS * rows_per_chunk, count = n * d, bytes = count * ln_storage_bytes(storage);
    float *x = ALLOC_ARRAY(count, float), *dy = ALLOC_ARRAY(count, float), *gamma = ALLOC_ARRAY(d, float);
    float *mean = ALLOC_ARRAY(n, float), *rstd = ALLOC_ARRAY(n, float); /* mean 0 */
    Rng rng;
    rng_seed(&rng, 7 + d);
    for (size_t row = 0; row < n; row++) {
        rstd[row] = 1.0f;
        for (size_t j = 0; j < d; j++) {
            x[row * d + j] = x_at(j, d);
            dy[row * d + j] = dy_at(row % rows_per_chunk, j, &rng);
        }
    }
    for (size_t j = 0; j < d; j++)
        gamma[j] = 1.0f;
    /* The kernels read x and dy in the storage type: exact, as above. */
    void *x_stored = x, *dy_stored = dy, *dx = array_alloc_uninitialized(bytes, 1);
    if (storage != STORAGE_FLOAT32) {
        x_stored = ALLOC_ARRAY(count, uint16_t);
        dy_stored = ALLOC_ARRAY(count, uint16_t);
        ln_storage_bits(storage, x_stored, x, count);
        ln_storage_bits(storage, dy_stored, dy, count);
    }
    float *dgamma = ALLOC_ARRAY(d, float), *dbeta = ALLOC_ARRAY(d, float);
    float *want_g = ALLOC_ARRAY(d, float), *want_b = ALLOC_ARRAY(d, float);
    float *scratch = ALLOC_ARRAY(layernorm_backward_f32_scratch_floats(n, d), float);
    if (norm == NORM_RMS)
        rmsnorm_backward_stored(dx, dgamma, scratch, dy_stored, x_stored, rstd, gamma, n, d, 1e-5f, storage);
    else
        layernorm_backward_stored(dx, dgamma, dbeta, scratch, dy_stored, x_stored, mean, rstd, gamma, n, d, 1e-5f,
                                  storage);
    expected_sums(want_g, want_b, x, dy, n, d);

    bool layer = norm == NORM_LAYER;
    EXPECT(want_g[0] == 2048.0f * LN_BACKWARD_CHUNKS, "the premise: in order, every 2^-13 of column 0 rounds away");
    EXPECT(memcmp(dgamma, want_g, d * sizeof *dgamma) == 0 && (!layer || memcmp(dbeta, want_b, d * sizeof *dbeta) == 0),
           "%s norm %s, %zu rows a chunk, d = %zu, %d threads: dgamma%s the bits of the rows added in order "
           "(column 0: %.9g, expected %.9g)",
           norm_kind_name(norm), ln_storage_name(storage), rows_per_chunk, d, threads, layer ? " and dbeta" : "",
           (double)dgamma[0], (double)want_g[0]);

    void *arrays[] = {x, dy, gamma, mean, rstd, dx, dgamma, dbeta, want_g, want_b, scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    if (storage != STORAGE_FLOAT32) {
        array_free(x_stored);
        array_free(dy_stored);
    }
}

int main(void)
{
#ifdef _OPENMP
    int max_threads = omp_get_max_threads();
#endif
    /* d = 64: rows whose bytes are whole blocks, swept two at a time;
     * d = 37: rows that start at different offsets from a block, one at a
     * time. 5 rows a chunk: two pairs and a row on its own. */
    const size_t widths[] = {64, 37};
    for (int norm = NORM_LAYER; norm <= NORM_RMS; norm++)
        for (int s = 0; s < 3; s++)
            for (size_t w = 0; w < 2; w++)
                for (int threads = 1; threads <= 2; threads++)
                    check_case((NormKind)norm, (LnStorage)s, 5, widths[w], threads);
#ifdef _OPENMP
    omp_set_num_threads(max_threads);
#endif
    return test_finish();
}
