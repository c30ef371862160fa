#include "chapters/02-layernorm/stability.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "chapters/01-cancellation/variance.h"
#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/problem.h"
#include "chapters/02-layernorm/row_loops.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/files.h"
#include "common/rng.h"
#include "kernels/layernorm_row.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

enum { SEED = 5 };

/* The larger of two errors, where NaN counts as larger than anything
 * (fmax would drop it, and hide the very failure being shown). */
static double worse(double a, double b)
{
    return isnan(a) || b <= a ? a : b;
}

static double max_abs_f32(const float *values, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        worst = worse(worst, fabs(values[i]));
    return worst;
}

static double max_error_f32(const float *got, const double *ref, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        worst = worse(worst, fabs(got[i] - ref[i]));
    return worst;
}

// ANCHOR: show_zero_variance
/* Constant rows: the variance is 0, so rstd = 1/sqrt(eps), and only eps
 * keeps it finite. With eps = 0, xhat = 0 * inf = NaN. The sums of the
 * last two rows overflow (1e26: the squared deviations from a first mean an
 * ulp off; -3e38: the sum itself), and they take the rescaled path. */
static void zero_variance(Table *table)
{
    const float values[] = {0.0f, 0.1f, 1e4f, 1e26f, -3e38f};
    const size_t value_count = sizeof values / sizeof values[0];
    const float eps_values[] = {1e-5f, 0.0f};
    for (size_t e = 0; e < 2; e++)
        for (size_t v = 0; v < value_count; v++) {
            LnProblem p = ln_problem_new(4, 781, eps_values[e]);
            ln_problem_fill_random(&p, SEED, 0.0, 1.0);
            for (size_t i = 0; i < p.n * p.d; i++)
                p.x[i] = values[v];
            ln_problem_run_cpu(&p);
            for (size_t j = 0; j < p.d; j++)
                p.y[j] -= p.beta[j]; /* first row: y - beta */
            table_cell(table, "%g", values[v]);
            table_cell(table, "%g", eps_values[e]);
            table_cell(table, "%.6g", p.rstd[0]);
            table_cell(table, "%.3g", max_abs_f32(p.y, p.d));
            table_cell(table, "%.3g", max_abs_f32(p.dx, p.n * p.d));
            ln_problem_free(&p);
        }
}
// ANCHOR_END: show_zero_variance

/* y of one row with a given mean and variance, in float. */
static void normalize_row(float *y, const float *x, const float *gamma, const float *beta, size_t d, float mean,
                          float var, float eps)
{
    float rstd = 1.0f / sqrtf(var + eps);
    for (size_t j = 0; j < d; j++)
        y[j] = gamma[j] * ((x[j] - mean) * rstd) + beta[j];
}

// ANCHOR: centre_on_the_stored_mean
/* y, dx and dgamma centred on the float mean alone, from the mean and rstd
 * our kernel saved in p (the same statistics; ln_problem_run_cpu first):
 * the residual is dropped in the forward pass (0) and not recovered in the
 * backward one (sum(x - m) taken as 0). Row sums and dgamma in double, so
 * that what remains of the error is the centring. */
static void stored_mean_run(LnProblem *p)
{
    size_t d = p->d;
    double *dgamma = ALLOC_ARRAY(d, double);
    for (size_t row = 0; row < p->n; row++) {
        const float *x = p->x + row * d, *dy = p->dy + row * d;
        float *y = p->y + row * d, *dx = p->dx + row * d, mean = p->mean[row], rstd = p->rstd[row];
        double sum_g = 0.0, sum_g_centered = 0.0;
        for (size_t j = 0; j < d; j++) {
            y[j] = ln_affine(ln_normalize(x[j], mean, 0.0f, rstd), p->gamma[j], p->beta[j]);
            sum_g += p->gamma[j] * dy[j];
            sum_g_centered += (double)(p->gamma[j] * dy[j]) * (x[j] - mean);
        }
        LnBackwardMeans means = ln_backward_means((float)sum_g, (float)sum_g_centered, 0.0f, (float)d, rstd);
        for (size_t j = 0; j < d; j++) {
            float xhat = ln_normalize(x[j], mean, 0.0f, rstd);
            dx[j] = ln_dx(p->gamma[j] * dy[j], xhat, means.mean_g, means.mean_g_xhat, rstd);
            dgamma[j] += (double)dy[j] * xhat;
        }
    }
    for (size_t j = 0; j < d; j++)
        p->dgamma[j] = (float)dgamma[j];
    array_free(dgamma);
}
// ANCHOR_END: centre_on_the_stored_mean

/* PyTorch's float32 errors on these same rows, as torch_failure_modes.py
 * recorded them beside the program, in torch-failure-modes.tsv (huge mean)
 * and torch-overflow.tsv: one line per offset (or scale), "offset, FNV-1a
 * of x's bytes, y, dx, dgamma", after a '#' stamp line and a header. The
 * checksum tells when the rows have changed since, so that a comparison on
 * other inputs shows as "stale", not as a number. */
#define TORCH_HUGE_MEAN_RECORD "torch-failure-modes.tsv"
#define TORCH_OVERFLOW_RECORD "torch-overflow.tsv"
enum { TORCH_RECORD_MAX_ROWS = 16 };

typedef struct {
    double offset;
    uint64_t x_checksum;
    LnMaxErrors errors;
} TorchErrors;

typedef struct {
    TorchErrors rows[TORCH_RECORD_MAX_ROWS];
    int count;
} TorchRecord;

static int read_torch_line(void *state, char *line, int line_number)
{
    TorchRecord *record = state;
    if (line_number <= 2)
        return 0; /* the stamp and the header */
    TorchErrors e;
    unsigned long long checksum;
    if (record->count == TORCH_RECORD_MAX_ROWS || sscanf(line, "%lf\t%llx\t%lf\t%lf\t%lf", &e.offset, &checksum,
                                                         &e.errors.y, &e.errors.dx, &e.errors.dgamma) != 5)
        return line_number;
    e.x_checksum = checksum;
    record->rows[record->count++] = e;
    return 0;
}

static int parse_torch_record(FILE *stream, void *out, char *err, size_t err_size)
{
    TorchRecord *record = out;
    record->count = 0;
    int bad_line = read_lines(stream, read_torch_line, record);
    if (bad_line != 0)
        snprintf(err, err_size, "line %d: not \"offset, checksum, y, dx, dgamma\"", bad_line);
    return bad_line == 0 ? 0 : -1;
}

/* The record, or none (count 0) where there is no file; a file that does
 * not read is one line and exit 2. */
static TorchRecord torch_record_read(const char *path)
{
    TorchRecord record = {.count = 0};
    char err[CLI_MESSAGE_SIZE];
    if (access(path, F_OK) == 0 && parse_text_file(path, parse_torch_record, &record, err, sizeof err))
        cli_fail("%s", err);
    return record;
}

/* One error of PyTorch's on the problem p (at `offset`, or scale), selected by
 * `field` (offsetof in LnMaxErrors): "-" where it was not run, "stale"
 * where it ran on other rows. */
static void torch_cell(Table *table, const TorchRecord *record, const LnProblem *p, double offset, size_t field)
{
    for (int i = 0; i < record->count; i++) {
        const TorchErrors *e = &record->rows[i];
        if (e->offset != offset)
            continue;
        if (e->x_checksum != ln_problem_x_checksum(p))
            table_cell(table, "stale");
        else
            table_cell(table, "%.3g", *(const double *)((const char *)&e->errors + field));
        return;
    }
    table_cell(table, "-");
}

/* x = offset + N(0, 1) in float. The one-pass variance E[x^2] - E[x]^2
 * (chapter 1) subtracts two numbers of size offset^2 whose difference is
 * 1: it is lost once offset^2 u exceeds 1. The plain two-pass variance
 * survives, but its float mean is off by many ulps. "Stored mean" is the
 * corrected two-pass mean, off by one rounding, half an ulp of the offset
 * at most, with every row centred on it (stored_mean_run). "Ours" also
 * removes the residual. The last
 * column is the bound ln_compare puts on y: apply's verdict (FAIL where it
 * is exceeded). */
static const double HUGE_MEAN_OFFSETS[] = {0, 1, 1e2, 1e4, 1e5, 1e6, 1e7};
enum { HUGE_MEAN_ROWS = 64, HUGE_MEAN_D = 1024, HUGE_MEAN_OFFSET_COUNT = 7 };

static LnProblem offset_problem(double offset)
{
    LnProblem p = ln_problem_new(HUGE_MEAN_ROWS, HUGE_MEAN_D, 1e-5f);
    ln_problem_fill_random(&p, SEED, offset, 1.0);
    return p;
}

/* Our kernel's errors, apply's verdict on them, then the stored mean's. */
typedef struct {
    LnMaxErrors ours, stored;
    LnComparison check;
} CentringErrors;

static CentringErrors centring_errors(LnProblem *p, const LnReference *ref)
{
    CentringErrors e;
    ln_problem_run_cpu(p);
    e.ours = ln_max_errors(p, ref);
    e.check = ln_compare(p, ref);
    stored_mean_run(p);
    e.stored = ln_max_errors(p, ref);
    return e;
}

static void huge_mean(Table *table)
{
    TorchRecord torch = torch_record_read(TORCH_HUGE_MEAN_RECORD);
    for (int k = 0; k < HUGE_MEAN_OFFSET_COUNT; k++) {
        double offset = HUGE_MEAN_OFFSETS[k];
        LnProblem p = offset_problem(offset);
        LnReference ref = ln_reference_compute(&p);
        // ANCHOR: normalise_with_each_variance
        double naive = 0.0, two_pass = 0.0;
        for (size_t row = 0; row < p.n; row++) {
            const float *x = p.x + row * p.d;
            float mean = mean_f32(x, p.d);
            normalize_row(p.y + row * p.d, x, p.gamma, p.beta, p.d, mean, variance_naive_f32(x, p.d), p.eps);
            naive = worse(naive, max_error_f32(p.y + row * p.d, ref.y + row * p.d, p.d));
            normalize_row(p.y + row * p.d, x, p.gamma, p.beta, p.d, mean, variance_two_pass_f32(x, p.d), p.eps);
            two_pass = worse(two_pass, max_error_f32(p.y + row * p.d, ref.y + row * p.d, p.d));
        }
        // ANCHOR_END: normalise_with_each_variance
        CentringErrors e = centring_errors(&p, &ref);
        float f = (float)offset;
        table_cell(table, "%g", offset);
        table_cell(table, "%.3g", naive);
        table_cell(table, "%.3g", two_pass);
        table_cell(table, "%.3g", e.stored.y);
        table_cell(table, "%.3g", e.ours.y);
        torch_cell(table, &torch, &p, offset, offsetof(LnMaxErrors, y));
        table_cell(table, "%.3g", 0.5 * (nextafterf(f, INFINITY) - f));
        table_cell(table, "%.3g%s", e.check.y.atol, e.check.ok ? "" : " FAIL");
        ln_reference_free(&ref);
        ln_problem_free(&p);
    }
}

/* The same rows, the gradients: dx and dgamma centred on the stored mean
 * and on the exact one. */
static void huge_mean_gradients(FILE *out, TableFormat format)
{
    const char *headers[] = {"offset",       "dx, stored mean", "dx, ours", "dx, PyTorch", "dgamma, stored mean",
                             "dgamma, ours", "dgamma, PyTorch"};
    Table *table = TABLE_NEW(headers, "rrrrrrr");
    TorchRecord torch = torch_record_read(TORCH_HUGE_MEAN_RECORD);
    for (int k = 0; k < HUGE_MEAN_OFFSET_COUNT; k++) {
        LnProblem p = offset_problem(HUGE_MEAN_OFFSETS[k]);
        LnReference ref = ln_reference_compute(&p);
        CentringErrors e = centring_errors(&p, &ref);
        table_cell(table, "%g", HUGE_MEAN_OFFSETS[k]);
        table_cell(table, "%.3g", e.stored.dx);
        table_cell(table, "%.3g", e.ours.dx);
        torch_cell(table, &torch, &p, HUGE_MEAN_OFFSETS[k], offsetof(LnMaxErrors, dx));
        table_cell(table, "%.3g", e.stored.dgamma);
        table_cell(table, "%.3g", e.ours.dgamma);
        torch_cell(table, &torch, &p, HUGE_MEAN_OFFSETS[k], offsetof(LnMaxErrors, dgamma));
        ln_reference_free(&ref);
        ln_problem_free(&p);
    }
    fprintf(out, "\n");
    table_print(table, out, format);
    table_free(table);
}

// ANCHOR: correlate_with_the_exact_row
/* Pearson's correlation of a float row with the exact values it was rounded
 * from: 1 for any row that is an increasing affine function of them, as
 * normalisation is; less by what rounding added. */
static double correlation(const float *a, const double *b, size_t d)
{
    double mean_a = 0.0, mean_b = 0.0, ab = 0.0, aa = 0.0, bb = 0.0;
    for (size_t j = 0; j < d; j++) {
        mean_a += a[j] / (double)d;
        mean_b += b[j] / (double)d;
    }
    for (size_t j = 0; j < d; j++) {
        ab += (a[j] - mean_a) * (b[j] - mean_b);
        aa += (a[j] - mean_a) * (a[j] - mean_a);
        bb += (b[j] - mean_b) * (b[j] - mean_b);
    }
    return ab / sqrt(aa * bb);
}
// ANCHOR_END: correlate_with_the_exact_row

// ANCHOR: show_a_tiny_eps
/* Rows 1 + 1e-6 N(0, 1): the variation is several ulps of 1, and rounding
 * the row to float adds noise of a few percent of it. eps decides the
 * scale of what comes out: with eps >> var, rstd ~ 1/sqrt(eps) and xhat
 * stays small; with eps << var, xhat has unit variance, and the
 * gradient's gain rstd grows to 1/sigma. Normalising is affine, so xhat's
 * correlation with the exact row is the float row's at every eps. */
enum { TINY_EPS_ROWS = 64, TINY_EPS_D = 768 };
const float TINY_EPS_VALUES[TINY_EPS_COUNT] = {1e-2f, 1e-5f, 1e-8f, 1e-11f, 1e-14f, 1e-17f};

TinyEpsRun tiny_eps_run(float eps)
{
    LnProblem p = ln_problem_new(TINY_EPS_ROWS, TINY_EPS_D, eps);
    ln_problem_fill_random(&p, SEED, 1.0, 1e-6);
    double *exact = ALLOC_ARRAY(p.n * p.d, double);
    tiny_eps_exact_rows(exact, p.n * p.d);
    ln_problem_run_cpu(&p);
    TinyEpsRun run = {INFINITY, 0.0, 0.0, max_abs_f32(p.dx, p.n * p.d), 1.0};
    float *xhat = ALLOC_ARRAY(p.d, float);
    for (size_t row = 0; row < p.n; row++) {
        run.rstd_min = fmin(run.rstd_min, p.rstd[row]);
        run.rstd_max = fmax(run.rstd_max, p.rstd[row]);
        for (size_t j = 0; j < p.d; j++) {
            xhat[j] = (p.x[row * p.d + j] - p.mean[row]) * p.rstd[row];
            run.max_xhat = worse(run.max_xhat, fabs(xhat[j]));
        }
        run.min_correlation = fmin(run.min_correlation, correlation(xhat, exact + row * p.d, p.d));
    }
    array_free(xhat);
    array_free(exact);
    ln_problem_free(&p);
    return run;
}
// ANCHOR_END: show_a_tiny_eps

static void tiny_eps(Table *table)
{
    for (int e = 0; e < TINY_EPS_COUNT; e++) {
        TinyEpsRun run = tiny_eps_run(TINY_EPS_VALUES[e]);
        table_cell(table, "%g", TINY_EPS_VALUES[e]);
        table_cell(table, "%.3g ... %.3g", run.rstd_min, run.rstd_max);
        table_cell(table, "%.3g", run.max_xhat);
        table_cell(table, "%.3g", run.max_dx);
        table_cell(table, "%.5f", run.min_correlation);
    }
}

/* The values the rows were rounded from: the same draws, in double. */
void tiny_eps_exact_rows(double *exact, size_t count)
{
    Rng rng;
    rng_seed(&rng, SEED);
    rng_fill_normal_f64(&rng, exact, count, 1.0, 1e-6);
}

// ANCHOR: predict_what_rounding_costs
/* Rounding to nearest adds an error spread evenly over +-spacing/2, of
 * variance spacing^2 / 12, independent of the value's deviation. Noise of
 * variance N on a signal of variance S leaves a correlation of
 * 1 / sqrt(1 + N / S) with the signal. */
double tiny_eps_predicted_correlation(void)
{
    size_t count = (size_t)TINY_EPS_ROWS * TINY_EPS_D;
    double *exact = ALLOC_ARRAY(count, double), noise = 0.0, signal = 0.0;
    tiny_eps_exact_rows(exact, count);
    for (size_t i = 0; i < count; i++) {
        float rounded = (float)exact[i];
        double spacing = nextafterf(rounded, INFINITY) - rounded;
        noise += spacing * spacing / 12.0 / (double)count;
        signal += (exact[i] - 1.0) * (exact[i] - 1.0) / (double)count;
    }
    array_free(exact);
    return 1.0 / sqrt(1.0 + noise / signal);
}
// ANCHOR_END: predict_what_rounding_costs

static void tiny_eps_note(FILE *out, TableFormat format)
{
    (void)format;
    fprintf(out,
            "\nRounding the rows to float alone, noise of variance spacing^2 / 12 on a signal of variance "
            "(1e-6)^2, predicts a correlation of %.5f.\n",
            tiny_eps_predicted_correlation());
}

/* x = scale * N(0, 1): float holds these values (up to 3.4e38), but not
 * their squares once scale passes ~1e18. Without rescaling, var becomes
 * inf (or inf - inf = NaN, once the squared mean correction overflows too),
 * rstd 0 or NaN, and y collapses to beta: finite and wrong, or NaN. The
 * kernel rescales such rows by a power of two (row_stats_f32). */
enum { OVERFLOW_ROWS = 16, OVERFLOW_D = 768 };

// ANCHOR: take_the_statistics_without_rescaling
/* The corrected two-pass statistics of every row without the rescaling,
 * and y from them: what the kernel computed before it rescaled. */
static void unscaled_run(LnProblem *p)
{
    size_t d = p->d;
    for (size_t row = 0; row < p->n; row++) {
        const float *x = p->x + row * d;
        float first_mean = sum_in_lanes(x, d, SUM_VALUES) / (float)d, sum_dev = 0.0f, sum_dev_sq = 0.0f;
        for (size_t j = 0; j < d; j++) {
            sum_dev += x[j] - first_mean;
            sum_dev_sq += (x[j] - first_mean) * (x[j] - first_mean);
        }
        LnRowStats stats = ln_stats_from_deviations(first_mean, sum_dev, sum_dev_sq, (float)d, p->eps);
        for (size_t j = 0; j < d; j++)
            p->y[row * d + j] =
                ln_affine(ln_normalize(x[j], stats.mean, stats.residual, stats.rstd), p->gamma[j], p->beta[j]);
        p->rstd[row] = stats.rstd;
    }
}
// ANCHOR_END: take_the_statistics_without_rescaling

static void overflow(Table *table)
{
    TorchRecord torch = torch_record_read(TORCH_OVERFLOW_RECORD);
    const int exponents[] = {16, 17, 18, 19, 20, 25, 30, 35};
    for (size_t e = 0; e < sizeof exponents / sizeof exponents[0]; e++) {
        LnProblem p = ln_problem_new(OVERFLOW_ROWS, OVERFLOW_D, 1e-5f);
        double scale = pow(10.0, exponents[e]);
        ln_problem_fill_random(&p, SEED, 0.0, scale);
        LnReference ref = ln_reference_compute(&p);
        table_cell(table, "1e%d", exponents[e]);
        table_cell(table, "%.3g", max_abs_f32(p.x, p.n * p.d));
        table_cell(table, "%.3g", ref.rstd[0]);
        unscaled_run(&p);
        table_cell(table, "%.3g", p.rstd[0]);
        table_cell(table, "%.3g", max_error_f32(p.y, ref.y, p.n * p.d));
        torch_cell(table, &torch, &p, scale, offsetof(LnMaxErrors, y));
        ln_problem_run_cpu(&p);
        table_cell(table, "%.3g", p.rstd[0]);
        table_cell(table, "%.3g", max_error_f32(p.y, ref.y, p.n * p.d));
        ln_reference_free(&ref);
        ln_problem_free(&p);
    }
}

static void overflow_note(FILE *out, TableFormat format)
{
    (void)format;
    const double d = OVERFLOW_D, half_max = (2.0 - ldexp(1.0, -10)) * ldexp(1.0, 15); /* IEEE binary16 */
    fprintf(out,
            "\nA float sum of d = %.0f squares overflows once |x - mean| passes sqrt(FLT_MAX / d) = %.2g. "
            "In half precision (largest finite value %.0f) one square overflows once |x| passes %.1f.\n",
            d, sqrt(FLT_MAX / d), half_max, sqrt(half_max));
}

/* |got - exact| in units of the float spacing at exact. */
static double ulps(float got, double exact)
{
    float rounded = (float)exact;
    double spacing = nextafterf(rounded, INFINITY) - rounded;
    return fabs(got - exact) / spacing;
}

typedef struct {
    const char *name;
    float (*rstd)(float v);
} RstdMethod;

static float rstd_sqrt_then_divide(float v)
{
    return 1.0f / sqrtf(v);
}

#if defined(__SSE__)
/* The hardware's approximate reciprocal square root (x86 rsqrtss: about 12
 * correct bits; CUDA's rsqrtf and its fast-math 1/sqrtf are approximations too). */
static float rstd_approximate(float v)
{
    return _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(v)));
}

/* One Newton step r' = r (3 - v r^2) / 2 roughly doubles the correct bits. */
static float rstd_approximate_newton(float v)
{
    float r = rstd_approximate(v);
    return r * (1.5f - 0.5f * v * r * r);
}
#endif

// ANCHOR: measure_rstd_accuracy
/* rstd for a million values v spread log-uniformly over [1e-12, 1e12],
 * against the exact 1/sqrt(v) in double. */
static void rsqrt_accuracy(Table *table)
{
    const RstdMethod methods[] = {
        {"1.0f / sqrtf(v), two correctly rounded operations", rstd_sqrt_then_divide  },
#if defined(__SSE__)
        {"approximate rsqrt (x86 rsqrtss)",                   rstd_approximate       },
        {"approximate rsqrt + one Newton step",               rstd_approximate_newton},
#endif
    };
    enum { SAMPLES = 1000000 };
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        Rng rng;
        rng_seed(&rng, SEED);
        double worst = 0.0;
        long exact_count = 0;
        for (int i = 0; i < SAMPLES; i++) {
            float v = (float)pow(10.0, rng_uniform_range(&rng, -12.0, 12.0));
            double exact = 1.0 / sqrt((double)v);
            float got = methods[m].rstd(v);
            worst = fmax(worst, ulps(got, exact));
            exact_count += got == (float)exact;
        }
        table_cell(table, "%s", methods[m].name);
        table_cell(table, "%.3g", worst);
        table_cell(table, "%.1f%%", 100.0 * (double)exact_count / SAMPLES);
    }
}
// ANCHOR_END: measure_rstd_accuracy

typedef struct {
    const char *name;
    void (*run)(Table *table);
    int columns;
    const char *headers[8];
    const char *align;
    void (*note)(FILE *out, TableFormat format); /* printed after the table, or NULL */
} FailureMode;

static const FailureMode failure_modes[] = {
    {"zero-variance", zero_variance,  5, {"row value", "eps", "rstd", "max |y - beta|", "max |dx|"},          "rrrrr", NULL               },
    {"huge-mean",
     huge_mean,                       8,
     {"offset", "one-pass var: max |y error|", "two-pass", "stored mean", "ours", "PyTorch float32", "ulp(offset)/2",
      "apply's bound on y"},
     "rrrrrrrr",                                                                                                       huge_mean_gradients},
    {"tiny-eps",
     tiny_eps,                        5,
     {"eps", "rstd (min ... max over rows)", "max |xhat|", "max |dx|", "xhat vs exact row: min correlation"},
     "rrrrr",                                                                                                          tiny_eps_note      },
    {"overflow",
     overflow,                        8,
     {"scale", "max |x|", "rstd, double", "rstd, unscaled sums", "max |y error|, unscaled",
      "PyTorch float32: max |y error|", "rstd, rescaled (ours)", "max |y error|, ours"},
     "rrrrrrrr",                                                                                                       overflow_note      },
    {"rsqrt",         rsqrt_accuracy, 3, {"rstd computed as", "max error (ulp)", "correctly rounded"},        "lrr",   NULL               },
};
enum { FAILURE_MODE_COUNT = sizeof failure_modes / sizeof failure_modes[0] };

const char failure_mode_names[] = "zero-variance, huge-mean, tiny-eps, overflow, rsqrt";

bool failure_mode_print(const char *name, FILE *out, TableFormat format)
{
    for (int i = 0; i < FAILURE_MODE_COUNT; i++) {
        const FailureMode *mode = &failure_modes[i];
        if (strcmp(name, mode->name) != 0)
            continue;
        Table *table = table_new(mode->columns, mode->headers, mode->align);
        mode->run(table);
        table_print(table, out, format);
        table_free(table);
        if (mode->note != NULL)
            mode->note(out, format);
        return true;
    }
    return false;
}
