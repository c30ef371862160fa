/* The GPU row statistics against the quadruple-precision CPU reference. */
#include "chapters/01-cancellation/gpu.h"

#include <float.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "kernels/welford_gpu.h"

const GpuCheckShape gpu_check_shapes[] = {
    {1823, 781,    256,  "irregular rows and columns"},
    {7,    5,      32,   "fewer columns than threads"},
    {3,    1,      64,   "one column"                },
    {5,    1000,   100,  "block not a multiple of 32"},
    {64,   300,    33,   "a last warp of one thread" },
    {9,    37,     1,    "one thread per row"        },
    {33,   4096,   1024, "the largest block"         },
    {2,    100000, 96,   "long rows"                 },
};
const int gpu_check_shape_count = (int)(sizeof gpu_check_shapes / sizeof gpu_check_shapes[0]);

bool check_gpu_rows(const GpuCheckShape *shape, uint64_t seed, FILE *out)
{
    size_t rows = shape->rows, cols = shape->cols;
    float *x = ALLOC_ARRAY(float, rows *cols);
    float *mean = ALLOC_ARRAY(float, rows), *variance = ALLOC_ARRAY(float, rows);
    double *exact_mean = ALLOC_ARRAY(double, rows), *exact_variance = ALLOC_ARRAY(double, rows);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, x, rows * cols, GPU_CHECK_OFFSET, DATA_SPREAD);
    for (size_t r = 0; r < rows; r++) {
        VarianceReference reference = variance_reference_f32(x + r * cols, cols);
        exact_mean[r] = reference.mean;
        exact_variance[r] = reference.variance;
    }

    int status = welford_rows_gpu(x, rows, cols, shape->threads, mean, variance);

    /* The results are rounded to float (relative error u = 2^-24); the double
     * states add at most the Welford bound in double, below 2e-9 for rows of
     * up to 1e5 values with kappa near 100: 2u covers both. */
    const double rtol = FLT_EPSILON;
    char what[128];
    snprintf(what, sizeof what, "%zu x %zu, %d threads (%s): variance", rows, cols, shape->threads, shape->why);
    bool ok = status == 0;
    if (!ok) {
        fprintf(out, "FAIL %s: the launcher refused the shape\n", what);
    } else {
        CloseReport variance_report = check_close_f32(variance, exact_variance, rows, 0.0, rtol);
        ok = close_report_print(out, what, &variance_report);
        snprintf(what, sizeof what, "%zu x %zu, %d threads (%s): mean", rows, cols, shape->threads, shape->why);
        CloseReport mean_report = check_close_f32(mean, exact_mean, rows, 0.0, rtol);
        ok = close_report_print(out, what, &mean_report) && ok;
    }
    array_free(x);
    array_free(mean);
    array_free(variance);
    array_free(exact_mean);
    array_free(exact_variance);
    return ok;
}
