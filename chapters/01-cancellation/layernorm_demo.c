/* Layer normalisation of one float row with the naive and the two-pass
 * variance, against the exact normalisation of the same row. */
#include "chapters/01-cancellation/layernorm_demo.h"

#include <math.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/rng.h"

// ANCHOR: normalise_a_row
void layernorm_row_f32(const float *x, float *y, size_t n, VarianceFunctionF32 variance)
{
    float mean = mean_f32(x, n);
    float inverse_std = 1.0f / sqrtf(variance(x, n) + LAYERNORM_EPS);
    for (size_t i = 0; i < n; i++) {
        y[i] = (x[i] - mean) * inverse_std;
    }
}
// ANCHOR_END: normalise_a_row

static LayerNormOutcome normalise_and_compare(const float *x, size_t n, VarianceFunctionF32 variance,
                                              const VarianceReference *reference, float *y)
{
    LayerNormOutcome outcome = {.variance = variance(x, n)};
    layernorm_row_f32(x, y, n, variance);
    double inverse_std = 1.0 / sqrt(reference->variance + LAYERNORM_EPS);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) {
            outcome.nonfinite++;
            continue;
        }
        double exact = (x[i] - reference->mean) * inverse_std;
        outcome.max_abs_error = fmax(outcome.max_abs_error, fabs(y[i] - exact));
    }
    return outcome;
}

/* An output moves by the error of the mean over sigma, plus |y| times half
 * the variance's relative error (the square root halves it) and five
 * roundings: x - mean, + eps, sqrt, the reciprocal and the product. */
static double two_pass_output_bound(const AccuracyTrial *statistics, double max_abs_y)
{
    double u = unit_roundoff(PRECISION_FLOAT);
    double variance_error = error_bound(METHOD_TWO_PASS, PRECISION_FLOAT, statistics);
    return mean_error_bound(statistics->n, statistics->reference.kappa, u) +
           max_abs_y * (variance_error / 2 + gamma_bound(5, u));
}

LayerNormTrial run_layernorm_trial(double offset, size_t n, uint64_t seed)
{
    float *x = ALLOC_ARRAY(n, float), *y = ALLOC_ARRAY(n, float);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, x, n, offset, DATA_SPREAD);

    AccuracyTrial statistics = {.n = n, .offset = offset, .reference = variance_reference_f32(x, n)};
    LayerNormTrial trial = {.offset = offset, .kappa = statistics.reference.kappa};
    trial.naive = normalise_and_compare(x, n, variance_naive_f32, &statistics.reference, y);
    trial.two_pass = normalise_and_compare(x, n, variance_two_pass_f32, &statistics.reference, y);

    double max_abs_y = 0.0;
    for (size_t i = 0; i < n; i++) {
        max_abs_y = fmax(max_abs_y, fabs(x[i] - statistics.reference.mean) / sqrt(statistics.reference.variance));
    }
    trial.two_pass_bound = two_pass_output_bound(&statistics, max_abs_y);
    array_free(x);
    array_free(y);
    return trial;
}
