/* The accuracy experiment and the error bounds it is compared with. */
#include "chapters/01-cancellation/accuracy.h"

#include <float.h>
#include <math.h>

#include "common/alloc.h"
#include "common/rng.h"

const char *const method_names[METHOD_COUNT] = {"naive", "two-pass", "Welford", "corrected two-pass", "blocked"};

const char *precision_name(Precision precision)
{
    return precision == PRECISION_FLOAT ? "float" : "double";
}

double unit_roundoff(Precision precision)
{
    return precision == PRECISION_FLOAT ? FLT_EPSILON / 2 : DBL_EPSILON / 2;
}

double format_spacing(Precision precision, double offset)
{
    if (precision == PRECISION_FLOAT) {
        float stored = (float)offset;
        return (double)nextafterf(stored, INFINITY) - (double)stored;
    }
    return nextafter(offset, INFINITY) - offset;
}

double figure_offset(int step)
{
    return pow(10.0, (double)step / FIGURE_STEPS_PER_DECADE);
}

bool spread_survives_rounding(Precision precision, double offset)
{
    return format_spacing(precision, offset) <= 2 * DATA_SPREAD;
}

/* Each method in both precisions, in Method order (as method_names), so
 * that a trial runs them all in one loop: the list is written once. */
static const struct {
    float (*f32)(const float *x, size_t n);
    double (*f64)(const double *x, size_t n);
} variance_functions[METHOD_COUNT] = {
    {variance_naive_f32,              variance_naive_f64             },
    {variance_two_pass_f32,           variance_two_pass_f64          },
    {variance_welford_f32,            variance_welford_f64           },
    {variance_corrected_two_pass_f32, variance_corrected_two_pass_f64},
    {variance_blocked_f32,            variance_blocked_f64           },
};

/* The exact statistics of the stored data, and its variance by each method
 * computed in the data's precision. */
static void measure_f32(AccuracyTrial *trial, const float *x, size_t n)
{
    trial->reference = variance_reference_f32(x, n);
    for (int m = 0; m < METHOD_COUNT; m++) {
        trial->variance[m] = variance_functions[m].f32(x, n);
    }
}

static void measure_f64(AccuracyTrial *trial, const double *x, size_t n)
{
    trial->reference = variance_reference_f64(x, n);
    for (int m = 0; m < METHOD_COUNT; m++) {
        trial->variance[m] = variance_functions[m].f64(x, n);
    }
}

AccuracyTrial run_accuracy_trial(Precision precision, double offset, size_t n, uint64_t seed)
{
    AccuracyTrial trial = {.n = n, .offset = offset};
    Rng rng;
    rng_seed(&rng, seed);
    if (precision == PRECISION_FLOAT) {
        float *x = ALLOC_ARRAY(n, float);
        rng_fill_normal_f32(&rng, x, n, offset, DATA_SPREAD);
        measure_f32(&trial, x, n);
        array_free(x);
    } else {
        double *x = ALLOC_ARRAY(n, double);
        rng_fill_normal_f64(&rng, x, n, offset, DATA_SPREAD);
        measure_f64(&trial, x, n);
        array_free(x);
    }
    for (int m = 0; m < METHOD_COUNT; m++) {
        trial.relative_error[m] = fabs(trial.variance[m] - trial.reference.variance) / trial.reference.variance;
    }
    return trial;
}

double gamma_bound(double k, double u)
{
    return k * u < 1.0 ? k * u / (1.0 - k * u) : INFINITY;
}

double mean_error_bound(size_t n, double kappa, double u)
{
    return gamma_bound((double)n, u) * kappa;
}

// ANCHOR: bound_the_blocked_method
/* Chunks of b values are summed in the precision, the k chunk states
 * folded in double. kappa_shift: the spread of the data measured from
 * x[0], in units of sigma. eps sigma bounds the error of every mean in
 * the fold. */
static double blocked_error_bound(Precision precision, const AccuracyTrial *trial)
{
    double u = unit_roundoff(precision);
    double u_fold = unit_roundoff(PRECISION_DOUBLE);
    double n = (double)trial->n, b = fmin(n, VARIANCE_CHUNK);
    double k = ceil(n / VARIANCE_CHUNK);
    double sigma = sqrt(trial->reference.variance);
    double kappa_shift = trial->reference.max_from_first / sigma;
    double eps = (gamma_bound(b + 1, u) + gamma_bound(7 * k, u_fold)) * kappa_shift;
    /* Rounding the sums of non-negative terms; shifting; the errors of
     * the means, in the merges' cross terms, their squares and the
     * chunks' sums of squared deviations. */
    return gamma_bound(b + 2, u) + gamma_bound(2 * k + 6, u_fold) + 2 * kappa_shift * u + 4 * eps + 5 * eps * eps;
}
// ANCHOR_END: bound_the_blocked_method

// ANCHOR: bound_each_method
double error_bound(Method method, Precision precision, const AccuracyTrial *trial)
{
    double u = unit_roundoff(precision);
    double n = (double)trial->n;
    double kappa = trial->reference.kappa;
    double r = mean_error_bound(trial->n, kappa, u);
    switch (method) {
    case METHOD_NAIVE:
        /* The sum of squares and the squared mean are off by up to
         * (3n + 4) u ||x||^2 / n together; the subtraction leaves
         * v = ||x||^2 / (n kappa^2). */
        return gamma_bound(3 * n + 4, u) * kappa * kappa;
    case METHOD_TWO_PASS:
        /* The deviations from the wrong mean add n r^2 sigma^2 to the
         * sum of squares, itself a sum of positive terms: gamma_{n+3}. */
        return gamma_bound(n + 3, u) * (1 + r * r) + r * r;
    // ANCHOR: bound_welford_and_the_corrected_two_pass
    case METHOD_WELFORD: {
        /* The running mean drifts by up to u max|x| (k/2 + 5) after k
         * steps; each step's product carries that drift times a
         * deviation. drift is the largest drift in units of sigma. */
        double sigma = sqrt(trial->reference.variance);
        double drift = u * trial->reference.max_abs / sigma * (n / 2 + 5);
        return gamma_bound(n + 3, u) + 2 * sqrt(2.0) * drift + drift * drift;
    }
    case METHOD_CORRECTED_TWO_PASS: {
        /* The correction removes the n r^2 term; what is left is the
         * rounding of both sums, the larger one n (1 + r^2) sigma^2. */
        double q = 1 + r * r, g = gamma_bound(n, u);
        return gamma_bound(n + 4, u) * q + 2 * r * g * sqrt(q) + g * g * q +
               gamma_bound(2, u) * pow(r + g * sqrt(q), 2);
    }
    // ANCHOR_END: bound_welford_and_the_corrected_two_pass
    case METHOD_BLOCKED:
        return blocked_error_bound(precision, trial);
    case METHOD_COUNT:
        break;
    }
    return NAN;
}
// ANCHOR_END: bound_each_method
