#include "chapters/02-layernorm/problem.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/rng.h"

LnProblem ln_problem_new(size_t n, size_t d, float eps)
{
    LnProblem p = {.n = n, .d = d, .eps = eps};
    p.x = ALLOC_ARRAY(n * d, float);
    p.gamma = ALLOC_ARRAY(d, float);
    p.beta = ALLOC_ARRAY(d, float);
    p.dy = ALLOC_ARRAY(n * d, float);
    p.y = ALLOC_ARRAY(n * d, float);
    p.mean = ALLOC_ARRAY(n, float);
    p.rstd = ALLOC_ARRAY(n, float);
    p.dx = ALLOC_ARRAY(n * d, float);
    p.dgamma = ALLOC_ARRAY(d, float);
    p.dbeta = ALLOC_ARRAY(d, float);
    return p;
}

void ln_problem_check_size(long n, long d)
{
    if ((double)n * (double)d > (double)(1L << 28))
        cli_fail("--n x --d = %ld x %ld is more than 2^28 elements", n, d);
}

void ln_problem_fill_random(LnProblem *p, uint64_t seed, double x_mean, double x_std)
{
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, p->x, p->n * p->d, x_mean, x_std);
    rng_fill_normal_f32(&rng, p->gamma, p->d, 1.0, 0.1);
    if (p->norm == NORM_LAYER) /* RMSNorm has no beta: it stays 0 */
        rng_fill_normal_f32(&rng, p->beta, p->d, 0.0, 0.1);
    rng_fill_normal_f32(&rng, p->dy, p->n * p->d, 0.0, 1.0);
}

static void join_path(char *path, const char *dir, const char *name)
{
    if (snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
        cli_fail("directory name too long: '%s'", dir);
}

/* Load one float32 array of the given shape (0: any length) into dest. */
static NpyArray load_f32(const char *dir, const char *name, int ndim, const size_t *shape)
{
    char path[PATH_MAX];
    join_path(path, dir, name);
    return npy_load_or_exit(path, NPY_FLOAT32, ndim, shape);
}

static void take_data(float *dest, NpyArray *array)
{
    size_t count = npy_element_count(array);
    for (size_t i = 0; i < count; i++)
        dest[i] = ((const float *)array->data)[i];
    npy_free(array);
}

/* x or dy, widened to float32 (exactly); file_dtype says what the file held. */
static NpyArray load_stored(const char *dir, const char *name, NpyFloatEncoding encoding, const size_t *shape)
{
    char path[PATH_MAX];
    join_path(path, dir, name);
    return npy_load_as_float32_or_exit(path, encoding, 2, shape);
}

/* One line and exit 2 unless dy has x's rows (n = 0 told the loader "any
 * number of rows") and x's storage type. */
static void require_dy_fits_x(const char *dir, NpyArray *x, NpyArray *dy)
{
    size_t n = x->shape[0], d = x->shape[1], dy_rows = dy->shape[0];
    LnStorage x_storage = ln_storage_of_dtype(x->file_dtype), dy_storage = ln_storage_of_dtype(dy->file_dtype);
    if (dy_rows == n && dy_storage == x_storage)
        return;
    npy_free(x);
    npy_free(dy);
    if (dy_rows != n)
        cli_fail("%s/dy.npy: expected [%zu x %zu] like x.npy, got [%zu x %zu]", dir, n, d, dy_rows, d);
    cli_fail("%s/dy.npy holds %s, x.npy %s: x and dy share one storage type", dir, ln_storage_name(dy_storage),
             ln_storage_name(x_storage));
}

LnProblem ln_problem_load(const char *dir, NormKind norm, float eps, NpyFloatEncoding encoding)
{
    NpyArray x = load_stored(dir, "x.npy", encoding, (size_t[]){0, 0});
    size_t n = x.shape[0], d = x.shape[1];
    if (d == 0) { /* rows of no elements have no mean or rstd; no rows are fine */
        npy_free(&x);
        cli_fail("%s/x.npy: need at least one column, got %zu x %zu", dir, n, d);
    }
    NpyArray dy = load_stored(dir, "dy.npy", encoding, (size_t[]){n, d});
    require_dy_fits_x(dir, &x, &dy);
    /* The parameters are float32 in every storage type (the chapter says why). */
    NpyArray gamma = load_f32(dir, "gamma.npy", 1, (size_t[]){d});
    LnProblem p = ln_problem_new(n, d, eps);
    p.norm = norm;
    p.storage = ln_storage_of_dtype(x.file_dtype);
    take_data(p.x, &x);
    take_data(p.dy, &dy);
    take_data(p.gamma, &gamma);
    if (norm == NORM_LAYER) { /* RMSNorm has no beta: it stays 0 */
        NpyArray beta = load_f32(dir, "beta.npy", 1, (size_t[]){d});
        take_data(p.beta, &beta);
    }
    return p;
}

void ln_problem_narrow_inputs(LnProblem *p)
{
    ln_storage_narrow_array(p->storage, p->x, p->n * p->d);
    ln_storage_narrow_array(p->storage, p->dy, p->n * p->d);
}

void ln_problem_narrow_results(LnProblem *p)
{
    ln_storage_narrow_array(p->storage, p->y, p->n * p->d);
    ln_storage_narrow_array(p->storage, p->dx, p->n * p->d);
}

const char *ln_problem_result_names(NormKind norm)
{
    return norm == NORM_RMS ? "y, rstd, dx, dgamma" : "y, mean, rstd, dx, dgamma, dbeta";
}

/* Add NAME.npy, an n x d array of values in `storage` (16-bit types as their bits). */
static void add_stored(NpyOutputDir *out, const char *name, LnStorage storage, const size_t *shape, const float *values)
{
    if (storage == STORAGE_FLOAT32) {
        npy_output_dir_add(out, name, NPY_FLOAT32, 2, shape, values);
        return;
    }
    size_t count = shape[0] * shape[1];
    uint16_t *bits = ALLOC_ARRAY(count, uint16_t);
    ln_storage_bits(storage, bits, values, count);
    npy_output_dir_add(out, name, ln_storage_dtype(storage), 2, shape, bits);
    array_free(bits);
}

/* The files appear together or not at all (npy_output_dir). */
void ln_problem_save_results(const LnProblem *p, const char *dir)
{
    const size_t matrix[2] = {p->n, p->d}, rows[1] = {p->n}, columns[1] = {p->d};
    bool layer = p->norm == NORM_LAYER;
    NpyOutputDir out = npy_output_dir_open(dir);
    add_stored(&out, "y.npy", p->storage, matrix, p->y);
    if (layer)
        npy_output_dir_add(&out, "mean.npy", NPY_FLOAT32, 1, rows, p->mean);
    npy_output_dir_add(&out, "rstd.npy", NPY_FLOAT32, 1, rows, p->rstd);
    add_stored(&out, "dx.npy", p->storage, matrix, p->dx);
    npy_output_dir_add(&out, "dgamma.npy", NPY_FLOAT32, 1, columns, p->dgamma);
    if (layer)
        npy_output_dir_add(&out, "dbeta.npy", NPY_FLOAT32, 1, columns, p->dbeta);
    npy_output_dir_commit(&out);
}

void ln_problem_save_inputs(const LnProblem *p, const char *dir)
{
    const size_t matrix[2] = {p->n, p->d}, columns[1] = {p->d};
    NpyOutputDir out = npy_output_dir_open(dir);
    add_stored(&out, "x.npy", p->storage, matrix, p->x);
    npy_output_dir_add(&out, "gamma.npy", NPY_FLOAT32, 1, columns, p->gamma);
    if (p->norm == NORM_LAYER)
        npy_output_dir_add(&out, "beta.npy", NPY_FLOAT32, 1, columns, p->beta);
    add_stored(&out, "dy.npy", p->storage, matrix, p->dy);
    npy_output_dir_commit(&out);
}

uint64_t ln_problem_x_checksum(const LnProblem *p)
{
    const unsigned char *bytes = (const unsigned char *)p->x;
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < p->n * p->d * sizeof *p->x; i++)
        h = (h ^ bytes[i]) * 0x100000001b3u;
    return h;
}

void ln_problem_free(LnProblem *p)
{
    float *arrays[] = {p->x, p->gamma, p->beta, p->dy, p->y, p->mean, p->rstd, p->dx, p->dgamma, p->dbeta};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    *p = (LnProblem){0};
}

/* In a 16-bit storage type the kernels read x and dy, and write y and dx,
 * as 16-bit rows (their values in p are exact in that type: the loader or
 * ln_problem_narrow_inputs made them so); p gets y and dx back widened,
 * exactly, for the checks that follow. */
typedef struct {
    const void *x, *dy;
    void *out;
} StoredRows;

static uint16_t *stored_bits(const LnProblem *p, const float *values)
{
    uint16_t *bits = ALLOC_ARRAY(p->n * p->d, uint16_t);
    ln_storage_bits(p->storage, bits, values, p->n * p->d);
    return bits;
}

/* x, dy and a place for the result (y or dx, in p as `result`) as stored. */
static StoredRows stored_rows(const LnProblem *p, float *result)
{
    if (p->storage == STORAGE_FLOAT32)
        return (StoredRows){p->x, p->dy, result};
    return (StoredRows){stored_bits(p, p->x), stored_bits(p, p->dy), ALLOC_ARRAY(p->n * p->d, uint16_t)};
}

static void stored_rows_done(const LnProblem *p, StoredRows rows, float *result)
{
    if (p->storage == STORAGE_FLOAT32)
        return;
    ln_storage_widen_bits(p->storage, result, rows.out, p->n * p->d);
    array_free((void *)rows.x);
    array_free((void *)rows.dy);
    array_free(rows.out);
}

void ln_problem_run_cpu(LnProblem *p)
{
    StoredRows rows = stored_rows(p, p->y);
    if (p->norm == NORM_RMS)
        rmsnorm_forward_stored(rows.out, p->rstd, rows.x, p->gamma, p->n, p->d, p->eps, p->storage);
    else
        layernorm_forward_stored(rows.out, p->mean, p->rstd, rows.x, p->gamma, p->beta, p->n, p->d, p->eps, p->storage);
    stored_rows_done(p, rows, p->y);
    ln_problem_backward_cpu(p);
}

void ln_problem_backward_cpu(LnProblem *p)
{
    StoredRows rows = stored_rows(p, p->dx);
    /* layer norm's scratch (dgamma and dbeta) holds RMSNorm's (dgamma) too */
    float *scratch = ALLOC_ARRAY(layernorm_backward_f32_scratch_floats(p->n, p->d), float);
    if (p->norm == NORM_RMS)
        rmsnorm_backward_stored(rows.out, p->dgamma, scratch, rows.dy, rows.x, p->rstd, p->gamma, p->n, p->d, p->eps,
                                p->storage);
    else
        layernorm_backward_stored(rows.out, p->dgamma, p->dbeta, scratch, rows.dy, rows.x, p->mean, p->rstd, p->gamma,
                                  p->n, p->d, p->eps, p->storage);
    array_free(scratch);
    stored_rows_done(p, rows, p->dx);
}

static double *widened(const float *values, size_t count)
{
    double *out = ALLOC_ARRAY(count, double);
    widen_f32(out, values, count);
    return out;
}

LnReference ln_reference_compute(const LnProblem *p)
{
    size_t n = p->n, d = p->d;
    LnReference ref = {.n = n, .d = d};
    ref.y = ALLOC_ARRAY(n * d, double);
    ref.dx = ALLOC_ARRAY(n * d, double);
    ref.mean = ALLOC_ARRAY(n, double);
    ref.rstd = ALLOC_ARRAY(n, double);
    ref.dgamma = ALLOC_ARRAY(d, double);
    ref.dbeta = ALLOC_ARRAY(d, double);
    double *x = widened(p->x, n * d), *dy = widened(p->dy, n * d);
    double *gamma = widened(p->gamma, d), *beta = widened(p->beta, d);
    if (p->norm == NORM_RMS) {
        rmsnorm_forward_f64(ref.y, ref.rstd, x, gamma, n, d, p->eps);
        rmsnorm_backward_f64(ref.dx, ref.dgamma, dy, x, ref.rstd, gamma, n, d);
    } else {
        layernorm_forward_f64(ref.y, ref.mean, ref.rstd, x, gamma, beta, n, d, p->eps);
        layernorm_backward_f64(ref.dx, ref.dgamma, ref.dbeta, dy, x, ref.mean, ref.rstd, gamma, n, d);
    }
    array_free(x);
    array_free(dy);
    array_free(gamma);
    array_free(beta);
    return ref;
}

void ln_reference_free(LnReference *ref)
{
    double *arrays[] = {ref->y, ref->mean, ref->rstd, ref->dx, ref->dgamma, ref->dbeta};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    *ref = (LnReference){0};
}

// ANCHOR: bound_what_the_mean_costs
/* What the float mean's one rounding costs, row by row, to first order.
 * The kernel's mean is within an ulp of the exact mean, at most 2u|mean|
 * (u = 2^-24), and x - mean is then exact (Sterbenz), so every xhat of the
 * row moves by the same delta <= 2u |mean| rstd = 2u kappa, with kappa =
 * |mean| / sigma the condition number of chapter 1 (less its 1, which the
 * unit-scale tolerances cover). y = gamma xhat + beta moves by gamma delta;
 * dx = rstd (g - mean(g) - xhat mean(g xhat)) by rstd delta (mean(g xhat) +
 * xhat mean(g)); dgamma = sum over rows of dy xhat by sum |dy| delta.
 * RMSNorm centres nothing: its mean is 0, and so is delta. */
typedef struct {
    double y, dx, dgamma; /* the largest changes, to add to the absolute tolerances */
} MeanRoundingCost;
// ANCHOR_END: bound_what_the_mean_costs

// ANCHOR: add_up_what_the_mean_costs
static MeanRoundingCost mean_rounding_cost(const LnProblem *p, const LnReference *ref)
{
    const double two_u = 0x1p-23;
    size_t n = p->n, d = p->d;
    MeanRoundingCost cost = {0};
    double max_gamma = 0.0, *dgamma_shift = ALLOC_ARRAY(d, double);
    for (size_t j = 0; j < d; j++)
        max_gamma = fmax(max_gamma, fabs(p->gamma[j]));
    for (size_t row = 0; row < n; row++) {
        double rstd = ref->rstd[row], delta = two_u * fabs(ref->mean[row]) * rstd;
        const float *x = p->x + row * d, *dy = p->dy + row * d;
        double mean_g = 0.0, mean_g_xhat = 0.0, max_xhat = 0.0;
        for (size_t j = 0; j < d; j++) {
            double xhat = (x[j] - ref->mean[row]) * rstd, g = (double)p->gamma[j] * dy[j];
            mean_g += g / (double)d;
            mean_g_xhat += g * xhat / (double)d;
            max_xhat = fmax(max_xhat, fabs(xhat));
            dgamma_shift[j] += fabs(dy[j]) * delta;
        }
        cost.y = fmax(cost.y, max_gamma * delta);
        cost.dx = fmax(cost.dx, rstd * delta * (fabs(mean_g_xhat) + max_xhat * fabs(mean_g)));
    }
    for (size_t j = 0; j < d; j++)
        cost.dgamma = fmax(cost.dgamma, dgamma_shift[j]);
    array_free(dgamma_shift);
    return cost;
}
// ANCHOR_END: add_up_what_the_mean_costs

/* y or dx against the reference with float32's tolerances (atol, rtol),
 * and, in a 16-bit storage type, the one rounding more into it: at most
 * u = 2^-11 (fp16) or 2^-8 (bf16) of the float result, which is within
 * atol + rtol |ref| of |ref|, or half the subnormals' spacing near 0. */
static CloseReport check_stored(const LnProblem *p, const float *got, const double *ref, double atol, double rtol)
{
    bool narrowed = p->storage != STORAGE_FLOAT32;
    double u = narrowed ? 0.5 * ln_storage_ulp(p->storage, 1.0) : 0.0;
    double tiny = narrowed ? 0.5 * ln_storage_ulp(p->storage, 0.0) : 0.0;
    return check_close_f32(got, ref, p->n * p->d, atol * (1.0 + u) + tiny, rtol + u * (1.0 + rtol));
}

// ANCHOR: set_float_tolerances
/* Float against the double reference. u = 2^-24 = 6e-8 is float's unit
 * roundoff; xhat, gamma, dy are of order 1, x and dx scale with the row's
 * standard deviation sigma = 1/rstd and with rstd, so their absolute
 * tolerances do too. To y, dx and dgamma's, the cost of the rounded mean
 * is added (mean_rounding_cost): negligible at offset 0, the whole error
 * at a large offset, where no float kernel can do better. RMSNorm's outputs take fewer roundings than layer
 * norm's (no centring, no beta) and its sigma is the row's root mean
 * square: the same tolerances hold, for the same reasons. */
LnComparison ln_compare(const LnProblem *p, const LnReference *ref)
{
    size_t n = p->n, d = p->d;
    double max_rstd = 0.0, max_sigma = 0.0;
    for (size_t row = 0; row < n; row++) {
        max_rstd = fmax(max_rstd, ref->rstd[row]);
        max_sigma = fmax(max_sigma, 1.0 / ref->rstd[row]);
    }
    LnComparison c = {.norm = p->norm};
    MeanRoundingCost cost = mean_rounding_cost(p, ref);
    // ANCHOR: tolerate_the_statistics
    /* mean: the corrected two-pass mean is one rounding from exact (u |mean|), plus
     * the float error of the correction, u times the row's spread for random
     * floats; inputs rounded to fp16 or bf16 share their low bits, so the
     * roundings of the correction's sum add up instead of cancelling: up to
     * 2u (measured: 1.2e-7 at sigma 1, 128 x 4096 fp16 rows of seed 13). */
    c.mean = check_close_f32(p->mean, ref->mean, n, 3e-7 * max_sigma, 1e-6);
    /* rstd: var is a float sum over the row in 32 lanes of d/32 terms, added
     * pairwise (on the GPU, at most 32 terms a thread and 10 levels of a
     * block's tree, fewer roundings for any d beyond 1024): about
     * sqrt(d/32) roundings of u with luck, d/32 + 5 at worst
     * (rows of values quantized far from zero come near it), and up to twice
     * that where the first mean was off by up to a standard deviation
     * (ln_first_mean_is_far); the square root halves it, sqrt and the division
     * add 1.5u. 2e-6 holds the lucky case; the bound takes over past d = 560. */
    double rstd_rtol = fmax(2e-6, ((double)d / 32.0 + 16.0) * 0x1p-24);
    c.rstd = check_close_f32(p->rstd, ref->rstd, n, 0.0, rstd_rtol);
    // ANCHOR_END: tolerate_the_statistics
    /* rstd's error beyond the 2e-6 that y's and dx's tolerances below allow for it */
    double rstd_excess = rstd_rtol - 2e-6;
    /* y: five roundings per element on values up to |y| ~ 5 (ulp 5e-7), plus rstd's error. */
    c.y = check_stored(p, p->y, ref->y, 3e-6 + cost.y, 3e-6 + rstd_excess);
    /* dx = rstd (g - mean(g) - ...): eight roundings on terms of order |g| ~ 1, with
     * cancellation inside the brackets, then scaled by rstd. */
    c.dx = check_stored(p, p->dx, ref->dx, 3e-6 * max_rstd + cost.dx, 1e-5 + rstd_excess);
    /* dgamma, dbeta: sums over n rows of order-1 terms, so of size ~sqrt(n); each chunk of
     * n/256 rows is summed in float (error ~ u sqrt(n/256) of the size), chunks in double. */
    double sum_atol = 1e-6 * sqrt((double)n);
    c.dgamma = check_close_f32(p->dgamma, ref->dgamma, d, sum_atol + cost.dgamma, 1e-5);
    c.dbeta = check_close_f32(p->dbeta, ref->dbeta, d, sum_atol, 1e-5);
    c.ok = c.mean.ok && c.rstd.ok && c.y.ok && c.dx.ok && c.dgamma.ok && c.dbeta.ok;
    return c;
}
// ANCHOR_END: set_float_tolerances

/* The larger of two errors; a NaN wins (fmax would drop it). */
static double worse_error(double a, double b)
{
    return isnan(a) || b <= a ? a : b;
}

static double max_error(const float *got, const double *ref, size_t count)
{
    double worst = 0.0;
    for (size_t i = 0; i < count; i++)
        worst = worse_error(worst, fabs(got[i] - ref[i]));
    return worst;
}

LnMaxErrors ln_max_errors(const LnProblem *p, const LnReference *ref)
{
    LnMaxErrors e = {max_error(p->y, ref->y, p->n * p->d), max_error(p->dx, ref->dx, p->n * p->d),
                     max_error(p->dgamma, ref->dgamma, p->d)};
    return e;
}

enum { OFFSET_ROWS = 64, OFFSET_D = 1024, OFFSET_SEED = 5 };

LnMaxErrors ln_errors_at_offset(double offset, LnRunKernels run, void *context, const char **refused)
{
    LnProblem p = ln_problem_new(OFFSET_ROWS, OFFSET_D, 1e-5f);
    ln_problem_fill_random(&p, OFFSET_SEED, offset, 1.0);
    *refused = run(&p, context);
    LnReference ref = ln_reference_compute(&p);
    LnMaxErrors errors = ln_max_errors(&p, &ref);
    ln_reference_free(&ref);
    ln_problem_free(&p);
    return errors;
}

bool ln_comparison_print(FILE *out, const char *label, const LnComparison *c)
{
    char what[128];
    const struct {
        const char *name;
        const CloseReport *report;
    } rows[] = {
        {"y",      &c->y     },
        {"mean",   &c->mean  },
        {"rstd",   &c->rstd  },
        {"dx",     &c->dx    },
        {"dgamma", &c->dgamma},
        {"dbeta",  &c->dbeta }
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (c->norm == NORM_RMS && (rows[i].report == &c->mean || rows[i].report == &c->dbeta))
            continue;
        snprintf(what, sizeof what, "%s %s", label, rows[i].name);
        close_report_print(out, what, rows[i].report);
    }
    return c->ok;
}
