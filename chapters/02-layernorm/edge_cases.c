#include "chapters/02-layernorm/edge_cases.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/problem.h"
#include "common/alloc.h"
#include "common/rng.h"

enum { SEED = 11 };
static const float EPS = 1e-5f;

static EdgeCheck *add_check(EdgeChecks *out, const char *name, const LnProblem *p, const char *check, bool ok)
{
    if (out->count == EDGE_MAX_CHECKS) {
        fprintf(stderr, "edge_cases: more than %d checks; raise EDGE_MAX_CHECKS\n", EDGE_MAX_CHECKS);
        out->count--; /* overwrite the last one rather than write past the end */
    }
    EdgeCheck *c = &out->checks[out->count++];
    *c = (EdgeCheck){.name = name, .check = check, .ok = ok};
    snprintf(c->shape, sizeof c->shape, "%zu x %zu", p->n, p->d);
    return c;
}

static void set_text(char *text, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_text(char *text, size_t size, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, size, fmt, args);
    va_end(args);
}

static double max_abs_difference(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (!(diff <= worst)) /* a NaN takes over and stays */
            worst = diff;
    }
    return worst;
}

/* Every output of the float kernels against the double reference, with
 * the unit-scale tolerances of ln_compare. */
static void add_reference_check(EdgeChecks *out, const char *name, const LnProblem *p)
{
    LnReference ref = ln_reference_compute(p);
    LnComparison c = ln_compare(p, &ref);
    const CloseReport *reports[] = {&c.y, &c.mean, &c.rstd, &c.dx, &c.dgamma, &c.dbeta};
    const char *names[] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
    int worst = 0;
    for (int i = 1; i < 6; i++)
        if (!(reports[i]->tolerance_used <= reports[worst]->tolerance_used))
            worst = i;
    EdgeCheck *check = add_check(out, name, p, "all outputs match the double reference", c.ok);
    set_text(check->measured, sizeof check->measured, "%.0f%% of tolerance (worst: %s)",
             100.0 * reports[worst]->tolerance_used, names[worst]);
    set_text(check->allowed, sizeof check->allowed, "100%%");
    ln_reference_free(&ref);
}

static void add_exact_check(EdgeChecks *out, const char *name, const LnProblem *p, const char *check,
                            const char *quantity, double difference)
{
    EdgeCheck *c = add_check(out, name, p, check, difference == 0.0);
    set_text(c->measured, sizeof c->measured, "%s = %.3g", quantity, difference);
    set_text(c->allowed, sizeof c->allowed, "0");
}

static LnProblem random_problem(NormKind norm, size_t n, size_t d, double x_mean, double x_std)
{
    LnProblem p = ln_problem_new(n, d, EPS);
    p.norm = norm;
    ln_problem_fill_random(&p, SEED, x_mean, x_std);
    return p;
}

/* y - beta for every element, as one array, to compare with 0. */
static double max_distance_from_beta(const LnProblem *p)
{
    double worst = 0.0;
    for (size_t row = 0; row < p->n; row++) {
        double diff = max_abs_difference(p->y + row * p->d, p->beta, p->d);
        if (!(diff <= worst))
            worst = diff;
    }
    return worst;
}

// ANCHOR: check_a_zero_row
/* A row of zeros has variance 0 (and mean square 0): xhat = 0 * rstd = 0
 * exactly, so y = beta (0 for RMSNorm, whose beta stays 0), and
 * rstd = 1/sqrt(eps) is finite only because eps > 0. */
static void zero_input(EdgeChecks *out, NormKind norm)
{
    const char *name = norm == NORM_RMS ? "zero input (mean square 0)" : "zero input (variance 0)";
    LnProblem p = random_problem(norm, 16, 768, 0.0, 1.0);
    memset(p.x, 0, p.n * p.d * sizeof *p.x);
    ln_problem_run_cpu(&p);
    add_exact_check(out, name, &p, norm == NORM_RMS ? "y = 0 exactly" : "y = beta exactly", "max |y - beta|",
                    max_distance_from_beta(&p));
    add_reference_check(out, name, &p);
    ln_problem_free(&p);
}
// ANCHOR_END: check_a_zero_row

/* One value per row. For layer norm it is its own mean, xhat = 0, and
 * nothing flows back to x: dx = rstd (g - mean(g) - 0) = rstd (g - g) = 0.
 * RMSNorm does not centre: xhat = x / sqrt(x^2 + eps), nearly the sign of
 * x, and dx = rstd g (1 - xhat^2) = g eps rstd^3, small but not 0; only
 * the reference can say what it must be. */
static void d_equals_one(EdgeChecks *out, NormKind norm)
{
    const char *name = "D = 1";
    LnProblem p = random_problem(norm, 64, 1, 0.0, 1.0);
    ln_problem_run_cpu(&p);
    if (norm == NORM_LAYER) {
        add_exact_check(out, name, &p, "y = beta exactly", "max |y - beta|", max_distance_from_beta(&p));
        float *zeros = ALLOC_ARRAY(p.n, float);
        add_exact_check(out, name, &p, "dx = 0 exactly", "max |dx|", max_abs_difference(p.dx, zeros, p.n));
        array_free(zeros);
    }
    add_reference_check(out, name, &p);
    ln_problem_free(&p);
}

static void large_d(EdgeChecks *out, NormKind norm)
{
    LnProblem p = random_problem(norm, 64, 8192, 0.0, 1.0);
    ln_problem_run_cpu(&p);
    add_reference_check(out, "large D", &p);
    ln_problem_free(&p);
}

static void irregular_shape(EdgeChecks *out, NormKind norm)
{
    LnProblem p = random_problem(norm, 1823, 781, 0.0, 1.0);
    ln_problem_run_cpu(&p);
    add_reference_check(out, "irregular shape", &p);
    ln_problem_free(&p);
}

// ANCHOR: check_a_large_mean
/* x = 1e4 + N(0, 1) in float. The two-pass kernel keeps the variance;
 * what it cannot avoid is that the mean is stored as a float, rounded to
 * a multiple of ulp(1e4) ~ 1e-3: that moves every xhat by up to half of
 * it times rstd. The checks: the mean is within one ulp of the exact mean,
 * and y within the unit-scale tolerance plus what one ulp of the mean does. */
static void large_mean_float(EdgeChecks *out, NormKind norm)
{
    const char *name = "large mean, float";
    const double offset = 1e4;
    LnProblem p = random_problem(norm, 64, 1024, offset, 1.0);
    ln_problem_run_cpu(&p);
    LnReference ref = ln_reference_compute(&p);
    double ulp = nextafterf((float)offset, INFINITY) - (float)offset;
    double worst_mean_ulps = 0.0, max_rstd = 0.0, max_gamma = 0.0;
    for (size_t row = 0; row < p.n; row++) {
        worst_mean_ulps = fmax(worst_mean_ulps, fabs(p.mean[row] - ref.mean[row]) / ulp);
        max_rstd = fmax(max_rstd, ref.rstd[row]);
    }
    for (size_t j = 0; j < p.d; j++)
        max_gamma = fmax(max_gamma, fabs(p.gamma[j]));
    EdgeCheck *c = add_check(out, name, &p, "mean within 1 ulp of the exact mean", worst_mean_ulps <= 1.0);
    set_text(c->measured, sizeof c->measured, "%.2f ulp(1e4)", worst_mean_ulps);
    set_text(c->allowed, sizeof c->allowed, "1 ulp(1e4)");
    /* Unit-scale y tolerance (3e-6) plus an ulp of the mean (as the check above)
     * through rstd and gamma. */
    double atol = 3e-6 + ulp * max_rstd * max_gamma;
    CloseReport y = check_close_f32(p.y, ref.y, p.n * p.d, atol, 3e-6);
    c = add_check(out, name, &p, "y within tolerance + rstd |gamma| ulp(mean)", y.ok);
    set_text(c->measured, sizeof c->measured, "max |error| %.2g", y.max_abs_error);
    set_text(c->allowed, sizeof c->allowed, "%.2g", atol);
    ln_reference_free(&ref);
    ln_problem_free(&p);
}
// ANCHOR_END: check_a_large_mean

/* The same at 1e8 in double. The exact result is known without higher
 * precision: layer norm ignores a shift, and x - 1e8 is computed exactly
 * (Sterbenz: the two are within a factor 2), so LN(x - 1e8), a
 * well-conditioned problem, is the reference. */
static void large_mean_double(EdgeChecks *out, NormKind norm)
{
    (void)norm; /* the double layer norm reference only */
    const char *name = "large mean, double";
    const double offset = 1e8;
    size_t n = 64, d = 1024;
    double *x = ALLOC_ARRAY(n * d, double), *shifted = ALLOC_ARRAY(n * d, double);
    double *gamma = ALLOC_ARRAY(d, double), *beta = ALLOC_ARRAY(d, double);
    double *y = ALLOC_ARRAY(n * d, double), *y_shifted = ALLOC_ARRAY(n * d, double);
    double *mean = ALLOC_ARRAY(n, double), *rstd = ALLOC_ARRAY(n, double);
    Rng rng;
    rng_seed(&rng, SEED);
    rng_fill_normal_f64(&rng, x, n * d, offset, 1.0);
    rng_fill_normal_f64(&rng, gamma, d, 1.0, 0.1);
    rng_fill_normal_f64(&rng, beta, d, 0.0, 0.1);
    for (size_t i = 0; i < n * d; i++)
        shifted[i] = x[i] - offset;
    layernorm_forward_f64(y_shifted, mean, rstd, shifted, gamma, beta, n, d, EPS);
    layernorm_forward_f64(y, mean, rstd, x, gamma, beta, n, d, EPS);
    double max_rstd = 0.0, max_gamma = 0.0;
    for (size_t row = 0; row < n; row++)
        max_rstd = fmax(max_rstd, rstd[row]);
    for (size_t j = 0; j < d; j++)
        max_gamma = fmax(max_gamma, fabs(gamma[j]));
    /* An ulp of the mean (it is rounded once, to half an ulp) through rstd and
     * gamma, plus a few ulps of y. */
    double ulp = nextafter(offset, INFINITY) - offset;
    double atol = ulp * max_rstd * max_gamma + 1e-14;
    CloseReport report = check_close_f64(y, y_shifted, n * d, atol, 1e-14);
    LnProblem shape = {.n = n, .d = d};
    EdgeCheck *c = add_check(out, name, &shape, "y = LN(x - 1e8) within rstd |gamma| ulp(mean)", report.ok);
    set_text(c->measured, sizeof c->measured, "max |error| %.2g", report.max_abs_error);
    set_text(c->allowed, sizeof c->allowed, "%.2g", atol);
    double *arrays[] = {x, shifted, gamma, beta, y, y_shifted, mean, rstd};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

// ANCHOR: check_scale_invariance
/* LN(a x) = LN(x) for a > 0, once eps is scaled too: var(a x) + a^2 eps =
 * a^2 (var(x) + eps). For a power of two every step scales exactly (the
 * sqrt of a^2 v is a sqrt(v) exactly), so the float results must agree to
 * the last bit: y and xhat equal, dx scaled by exactly 1/a. */
static void scale_invariance(EdgeChecks *out, NormKind norm)
{
    const char *name = "scale invariance";
    const int exponents[] = {-10, 20};
    LnProblem base = random_problem(norm, 64, 781, 0.0, 1.0);
    ln_problem_run_cpu(&base);
    for (size_t e = 0; e < sizeof exponents / sizeof exponents[0]; e++) {
        float a = ldexpf(1.0f, exponents[e]);
        LnProblem scaled = random_problem(norm, 64, 781, 0.0, 1.0);
        for (size_t i = 0; i < scaled.n * scaled.d; i++)
            scaled.x[i] *= a;
        scaled.eps = EPS * a * a;
        ln_problem_run_cpu(&scaled);
        for (size_t i = 0; i < scaled.n * scaled.d; i++)
            scaled.dx[i] *= a;
        double diff = fmax(max_abs_difference(scaled.y, base.y, base.n * base.d),
                           max_abs_difference(scaled.dx, base.dx, base.n * base.d));
        diff = fmax(diff, max_abs_difference(scaled.dgamma, base.dgamma, base.d));
        add_exact_check(out, name, &base,
                        exponents[e] < 0 ? "a = 2^-10: LN(a x), a dx(a x) bit-equal to LN(x), dx(x)"
                                         : "a = 2^20: LN(a x), a dx(a x) bit-equal to LN(x), dx(x)",
                        "max difference", diff);
        ln_problem_free(&scaled);
    }
    ln_problem_free(&base);
}
// ANCHOR_END: check_scale_invariance

// ANCHOR: measure_a_rows_gradient_norm
/* dx = rstd * P g, where P = I - 11^T/d - xhat xhat^T/d removes g's
 * components along 1 and along xhat (RMSNorm's P = I - xhat xhat^T/d,
 * along xhat only); its eigenvalues lie in [0, 1] (the projection onto
 * xhat is scaled by var/(var+eps) <= 1, or ms/(ms+eps)). So per row
 * |dx| <= rstd |g|, at any input scale: rstd adapts, the direction does
 * not blow up. A row's |dx| / (rstd |g|), and its dx's error relative to
 * the reference's |dx|: */
typedef struct {
    double ratio, error;
} RowGradientNorms;

static RowGradientNorms row_gradient_norms(const LnProblem *p, const LnReference *ref, size_t row)
{
    double dx_norm = 0.0, g_norm = 0.0, error_norm = 0.0, ref_norm = 0.0;
    for (size_t j = 0; j < p->d; j++) {
        size_t i = row * p->d + j;
        double g = (double)p->gamma[j] * p->dy[i];
        dx_norm += (double)p->dx[i] * p->dx[i];
        g_norm += g * g;
        error_norm += (p->dx[i] - ref->dx[i]) * (p->dx[i] - ref->dx[i]);
        ref_norm += ref->dx[i] * ref->dx[i];
    }
    RowGradientNorms norms = {sqrt(dx_norm / g_norm) / ref->rstd[row], sqrt(error_norm / ref_norm)};
    return norms;
}
// ANCHOR_END: measure_a_rows_gradient_norm

// ANCHOR: bound_the_gradient_norm
/* The bound checked for x = s N(0, 1), s = 1e-3 ... 1e6, eps fixed. */
static void gradient_norms_across_scales(EdgeChecks *out, NormKind norm)
{
    const char *name = "gradient norms, scales 1e-3 to 1e6";
    double worst_ratio = 0.0, worst_error = 0.0;
    LnProblem p = random_problem(norm, 64, 768, 0.0, 1.0);
    for (int exponent = -3; exponent <= 6; exponent++) {
        ln_problem_fill_random(&p, SEED, 0.0, pow(10.0, exponent));
        ln_problem_run_cpu(&p);
        LnReference ref = ln_reference_compute(&p);
        for (size_t row = 0; row < p.n; row++) {
            RowGradientNorms norms = row_gradient_norms(&p, &ref, row);
            worst_ratio = fmax(worst_ratio, norms.ratio);
            worst_error = fmax(worst_error, norms.error);
        }
        ln_reference_free(&ref);
    }
    /* 1 + a few float roundings: |P| <= 1 exactly; the computed dx carries relative error ~1e-6. */
    EdgeCheck *c = add_check(out, name, &p, "|dx| <= rstd |gamma dy| in every row", worst_ratio <= 1.0 + 1e-5);
    set_text(c->measured, sizeof c->measured, "max |dx| / (rstd |g|) = %.6f", worst_ratio);
    set_text(c->allowed, sizeof c->allowed, "1 + 1e-5");
    /* Relative to the row's |dx|, the float error is that of the unit-scale case: ~1e-6. */
    c = add_check(out, name, &p, "dx matches the reference at every scale", worst_error <= 1e-5);
    set_text(c->measured, sizeof c->measured, "max |dx - ref| / |ref| = %.2g", worst_error);
    set_text(c->allowed, sizeof c->allowed, "1e-5");
    ln_problem_free(&p);
}
// ANCHOR_END: bound_the_gradient_norm

// ANCHOR: check_an_rms_row_far_from_zero
/* x = 1e4 + N(0, 1): the offset that costs layer norm the rounding of its
 * mean. RMSNorm subtracts nothing: its sum of squares adds positive terms,
 * so it is well conditioned at any offset, and every output must meet the
 * unit-scale tolerances (which scale dx's with rstd) as at offset 0. */
static void rms_far_from_zero(EdgeChecks *out, NormKind norm)
{
    LnProblem p = random_problem(norm, 64, 1024, 1e4, 1.0);
    ln_problem_run_cpu(&p);
    add_reference_check(out, "offset 1e4, no centring", &p);
    ln_problem_free(&p);
}
// ANCHOR_END: check_an_rms_row_far_from_zero

const EdgeCase edge_cases[] = {
    {"zero_input",                       NORM_LAYER, zero_input                  },
    {"d_equals_one",                     NORM_LAYER, d_equals_one                },
    {"large_d",                          NORM_LAYER, large_d                     },
    {"large_mean_float",                 NORM_LAYER, large_mean_float            },
    {"large_mean_double",                NORM_LAYER, large_mean_double           },
    {"scale_invariance",                 NORM_LAYER, scale_invariance            },
    {"irregular_shape",                  NORM_LAYER, irregular_shape             },
    {"gradient_norms_across_scales",     NORM_LAYER, gradient_norms_across_scales},
    {"rms_zero_input",                   NORM_RMS,   zero_input                  },
    {"rms_d_equals_one",                 NORM_RMS,   d_equals_one                },
    {"rms_large_d",                      NORM_RMS,   large_d                     },
    {"rms_far_from_zero",                NORM_RMS,   rms_far_from_zero           },
    {"rms_scale_invariance",             NORM_RMS,   scale_invariance            },
    {"rms_irregular_shape",              NORM_RMS,   irregular_shape             },
    {"rms_gradient_norms_across_scales", NORM_RMS,   gradient_norms_across_scales},
};
const int edge_case_count = sizeof edge_cases / sizeof edge_cases[0];

bool edge_cases_run_all(NormKind norm, EdgeChecks *out)
{
    out->count = 0;
    for (int i = 0; i < edge_case_count; i++)
        if (edge_cases[i].norm == norm)
            edge_cases[i].run(out, edge_cases[i].norm);
    bool ok = true;
    for (int i = 0; i < out->count; i++)
        ok = ok && out->checks[i].ok;
    return ok;
}
