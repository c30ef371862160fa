/* The blocked variance of chapter 1: the same answer as one-pass Welford
 * and two-pass at sizes that cut chunks and lanes anywhere, every value
 * counted wherever it falls, exactly 0 for constant data, and an offset
 * that never enters the arithmetic. (Its error bound across the offset
 * sweep, float and double, is checked with the other methods' in
 * test_variance.c.) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

/* Around one chunk, a chunk and a lane plus a few, and a large size that is
 * a multiple of neither. */
static const size_t sizes[] = {
    1, VARIANCE_CHUNK - 1, VARIANCE_CHUNK, VARIANCE_CHUNK + 1, 3 * VARIANCE_CHUNK + VARIANCE_LANES + 3, 100003,
};
enum { SIZE_COUNT = sizeof sizes / sizeof sizes[0] };

/* kappa about 10: large enough that the offset matters, small enough that
 * Welford's bound for 10^5 float values stays below 1 (it grows like n kappa). */
#define OFFSET 10.0

static double relative_difference(double a, double b, double exact)
{
    return fabs(a - b) / exact;
}

/* Each method is within its bound of the exact variance, so two of them are
 * within the sum of their bounds of each other. */
static void check_agreement(Precision precision, const AccuracyTrial *trial, Method other)
{
    double exact = trial->reference.variance;
    double limit = error_bound(METHOD_BLOCKED, precision, trial) + error_bound(other, precision, trial);
    double difference = relative_difference(trial->variance[METHOD_BLOCKED], trial->variance[other], exact);
    EXPECT(difference <= limit, "%s, n = %zu: blocked and %s differ by %.2e, limit %.2e", precision_name(precision),
           trial->n, method_names[other], difference, limit);
}

static void test_agrees_with_one_pass_and_two_pass(Precision precision)
{
    for (int s = 0; s < SIZE_COUNT; s++) {
        AccuracyTrial trial = run_accuracy_trial(precision, OFFSET, sizes[s], 3);
        if (sizes[s] == 1) {
            /* One value: no spread, and every method must say exactly 0. */
            EXPECT(trial.variance[METHOD_BLOCKED] == 0.0, "%s, n = 1: blocked gives %g", precision_name(precision),
                   trial.variance[METHOD_BLOCKED]);
            continue;
        }
        double bound = error_bound(METHOD_BLOCKED, precision, &trial);
        EXPECT(trial.relative_error[METHOD_BLOCKED] <= bound, "%s, n = %zu: blocked error %.2e, bound %.2e",
               precision_name(precision), sizes[s], trial.relative_error[METHOD_BLOCKED], bound);
        check_agreement(precision, &trial, METHOD_WELFORD);
        check_agreement(precision, &trial, METHOD_TWO_PASS);
    }
}

/* The blocked variance of x against the exact variance of x, within its bound. */
static void check_against_reference(Precision precision, double blocked, VarianceReference reference, size_t n,
                                    const char *what)
{
    AccuracyTrial trial = {.n = n, .reference = reference};
    double error = fabs(blocked - reference.variance) / reference.variance;
    double bound = error_bound(METHOD_BLOCKED, precision, &trial);
    EXPECT(error <= bound, "%s, %s: error %.2e, bound %.2e", precision_name(precision), what, error, bound);
}

/* Zeros and a single 1: the variance is (n - 1) / n^2, carried entirely by
 * the one value, so a chunk or a tail left out (or counted twice) misses it
 * by 100% or more. The 1 goes first (where it is also the shift), at both
 * sides of the first chunk boundary, and last, alone in the last chunk. */
static void test_every_value_counts(void)
{
    enum { N = 2 * VARIANCE_CHUNK + 1 };
    const size_t positions[] = {0, VARIANCE_CHUNK - 1, VARIANCE_CHUNK, N - 1};
    float *xf = ALLOC_ARRAY(N, float);
    double *xd = ALLOC_ARRAY(N, double);
    for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
        for (size_t i = 0; i < N; i++) {
            xf[i] = i == positions[p] ? 1.0f : 0.0f;
            xd[i] = i == positions[p] ? 1.0 : 0.0;
        }
        char what[64];
        snprintf(what, sizeof what, "a single 1 at %zu of %d", positions[p], N);
        check_against_reference(PRECISION_FLOAT, variance_blocked_f32(xf, N), variance_reference_f32(xf, N), N, what);
        check_against_reference(PRECISION_DOUBLE, variance_blocked_f64(xd, N), variance_reference_f64(xd, N), N, what);
    }
    array_free(xf);
    array_free(xd);
}

/* Every value minus the first is exactly 0, so every sum, mean, deviation,
 * merge delta and m2 is exactly 0, whatever the value and the size. */
static void test_constant_data_gives_exactly_zero(void)
{
    const double values[] = {0.1, -3.7e8, 7.0, 1e30};
    float *xf = ALLOC_ARRAY(sizes[SIZE_COUNT - 1], float);
    double *xd = ALLOC_ARRAY(sizes[SIZE_COUNT - 1], double);
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        for (int s = 0; s < SIZE_COUNT; s++) {
            for (size_t i = 0; i < sizes[s]; i++) {
                xf[i] = (float)values[v];
                xd[i] = values[v];
            }
            float vf = variance_blocked_f32(xf, sizes[s]);
            double vd = variance_blocked_f64(xd, sizes[s]);
            EXPECT(vf == 0.0f, "float, %zu copies of %g: %g", sizes[s], values[v], vf);
            EXPECT(vd == 0.0, "double, %zu copies of %g: %g", sizes[s], values[v], vd);
        }
    }
    array_free(xf);
    array_free(xd);
}

/* Integers below 1000, and the same integers plus a large offset that keeps
 * them exact (2^13 in float, 2^40 in double): every x_i - x_0 is the same
 * exact integer in both, so everything after it is the same arithmetic, and
 * the two variances must agree to the last bit. The offset never enters. */
static void test_the_offset_never_enters_the_arithmetic(void)
{
    enum { N = 3 * VARIANCE_CHUNK + 7 };
    float *zf = ALLOC_ARRAY(N, float), *xf = ALLOC_ARRAY(N, float);
    double *zd = ALLOC_ARRAY(N, double), *xd = ALLOC_ARRAY(N, double);
    Rng rng;
    rng_seed(&rng, 17);
    for (size_t i = 0; i < N; i++) {
        double z = (double)rng_below(&rng, 1000);
        zf[i] = (float)z;
        xf[i] = (float)(z + 0x1p13);
        zd[i] = z;
        xd[i] = z + 0x1p40;
    }
    float near_f = variance_blocked_f32(zf, N), far_f = variance_blocked_f32(xf, N);
    double near_d = variance_blocked_f64(zd, N), far_d = variance_blocked_f64(xd, N);
    EXPECT(near_f == far_f, "float: %.9g without the offset, %.9g with it", near_f, far_f);
    EXPECT(near_d == far_d, "double: %.17g without the offset, %.17g with it", near_d, far_d);
    array_free(zf);
    array_free(xf);
    array_free(zd);
    array_free(xd);
}

int main(void)
{
    test_agrees_with_one_pass_and_two_pass(PRECISION_FLOAT);
    test_agrees_with_one_pass_and_two_pass(PRECISION_DOUBLE);
    test_every_value_counts();
    test_constant_data_gives_exactly_zero();
    test_the_offset_never_enters_the_arithmetic();
    return test_finish();
}
