/* The Welford merge of kernels/welford.h, which the GPU kernel runs: exact
 * where no rounding happens, as accurate as one pass for any cut of the data
 * into chunks (irregular and empty ones too), and associative up to rounding. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/parallel_welford.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

enum { N = 4096 };
#define OFFSET 1e4 /* kappa about 1e4: errors large enough to see, far from any bound */

static double relative_difference(double a, double b)
{
    return fabs(a - b) / fabs(b);
}

/* 1024 small integers merged as 1024 one-value states: every mean is a
 * multiple of 2^-10 and every m2 a sum of such squares times counts, all far
 * inside 53 bits, so the merge tree is exact and must give the variance that
 * integer arithmetic gives, to the last bit. */
static void test_merge_tree_is_exact_without_rounding(void)
{
    enum { COUNT = 1024 };
    Rng rng;
    rng_seed(&rng, 11);
    WelfordState *states = ALLOC_ARRAY(COUNT, WelfordState);
    int64_t sum = 0, sum_of_squares = 0;
    for (int i = 0; i < COUNT; i++) {
        int64_t value = (int64_t)rng_below(&rng, 16);
        sum += value;
        sum_of_squares += value * value;
        states[i] = welford_push(welford_empty(), (double)value);
    }
    WelfordState merged = welford_merge_tree(states, COUNT);
    /* n^2 variance = n sum x^2 - (sum x)^2, exact in integers; dividing by
     * n^2 = 2^20 is exact in double. */
    double exact = (double)(COUNT * sum_of_squares - sum * sum) / ((double)COUNT * COUNT);
    EXPECT(merged.count == COUNT, "count %g", merged.count);
    EXPECT(merged.mean == (double)sum / COUNT, "mean %.17g, exact %.17g", merged.mean, (double)sum / COUNT);
    EXPECT(welford_variance(merged) == exact, "variance %.17g, exact %.17g", welford_variance(merged), exact);
    array_free(states);
}

static void test_empty_states(void)
{
    WelfordState a = welford_push(welford_push(welford_empty(), 2.5), -1.0);
    WelfordState left = welford_merge(welford_empty(), a), right = welford_merge(a, welford_empty());
    EXPECT(left.count == a.count && left.mean == a.mean && left.m2 == a.m2, "empty + a is a, bit for bit");
    EXPECT(right.count == a.count && right.mean == a.mean && right.m2 == a.m2, "a + empty is a, bit for bit");
    WelfordState nothing = welford_merge(welford_empty(), welford_empty());
    EXPECT(nothing.count == 0 && nothing.mean == 0 && nothing.m2 == 0, "empty + empty is empty");
    WelfordState one = welford_push(welford_empty(), 1e8 + 0.5);
    EXPECT(one.mean == 1e8 + 0.5 && one.m2 == 0, "the first value is the mean, exactly");
}

/* Any cut of the data, merged, is a Welford computation of the whole. One
 * pass obeys the Welford bound; a tree of merges obeys a smaller one (Chan,
 * Golub & LeVeque: log2 n in place of n). The test demands that the merged
 * result stay inside the one-pass bound (a slip in the merge formula, such as
 * a wrong weight, is off by far more) and agree with one pass within twice it. */
static void check_cut(const double *x, const size_t *bounds, size_t chunks, double one_pass, const AccuracyTrial *trial,
                      const char *what)
{
    double bound = error_bound(METHOD_WELFORD, PRECISION_DOUBLE, trial);
    double exact = trial->reference.variance;
    WelfordState merged = welford_by_chunks(x, bounds, chunks);
    double variance = welford_variance(merged);
    EXPECT(merged.count == N, "%s, %zu chunks: count %g", what, chunks, merged.count);
    EXPECT(relative_difference(variance, exact) <= bound, "%s, %zu chunks: error %.2e, bound %.2e", what, chunks,
           relative_difference(variance, exact), bound);
    EXPECT(relative_difference(variance, one_pass) <= 2 * bound, "%s, %zu chunks: %.2e from one pass, limit %.2e", what,
           chunks, relative_difference(variance, one_pass), 2 * bound);
    /* The running mean of a chunk of m values drifts by at most
     * u max|x| (m/2 + 5) (the derivation in chapter.md), and each of the at
     * most 11 merge levels adds three roundings: u (N/2 + 5 + 33) bounds the
     * mean's error relative to max|x|, here within 0.1% of |mean|. */
    double mean_limit = DBL_EPSILON / 2 * (N / 2 + 5 + 33) * trial->reference.max_abs / fabs(trial->reference.mean);
    EXPECT(relative_difference(merged.mean, trial->reference.mean) <= mean_limit, "%s, %zu chunks: mean off by %.2e",
           what, chunks, relative_difference(merged.mean, trial->reference.mean));
}

static void test_chunked_merges_agree_with_one_pass(void)
{
    double *x = ALLOC_ARRAY(N, double);
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_normal_f64(&rng, x, N, OFFSET, DATA_SPREAD);
    AccuracyTrial trial = {.n = N, .reference = variance_reference_f64(x, N)};
    double one_pass = welford_variance(welford_accumulate(x, N));

    size_t *bounds = ALLOC_ARRAY(1025, size_t);
    for (size_t chunks = 1; chunks <= 1024; chunks *= 2) {
        for (size_t c = 0; c <= chunks; c++) {
            bounds[c] = c * N / chunks;
        }
        check_cut(x, bounds, chunks, one_pass, &trial, "equal chunks");

        /* Irregular: random cut points, sorted; repeated ones make empty chunks. */
        bounds[0] = 0;
        bounds[chunks] = N;
        for (size_t c = 1; c < chunks; c++) {
            bounds[c] = rng_below(&rng, N + 1);
        }
        for (size_t c = 1; c < chunks; c++) { /* insertion sort: at most 1023 cut points */
            for (size_t d = c; d > 1 && bounds[d - 1] > bounds[d]; d--) {
                size_t t = bounds[d];
                bounds[d] = bounds[d - 1];
                bounds[d - 1] = t;
            }
        }
        check_cut(x, bounds, chunks, one_pass, &trial, "irregular chunks");

        /* Every other chunk empty, the data in the rest. */
        for (size_t c = 0; c <= chunks; c++) {
            bounds[c] = ((c + 1) / 2) * N / ((chunks + 1) / 2);
        }
        bounds[chunks] = N;
        check_cut(x, bounds, chunks, one_pass, &trial, "empty chunks");
    }
    array_free(bounds);
    array_free(x);
}

/* (a + b) + c against a + (b + c) for random splits of data with kappa near
 * 1e3. Each merge rounds m2 at most 6 times (gamma_6); the first merge's mean
 * carries a rounding of u |mean| <= u kappa sigma into the second merge's
 * delta, where it moves delta^2 n_a n_b / n by at most 2 u kappa of m2 for
 * chunk means within a few sigma of each other: 2 gamma_6 + 4 u kappa. */
static void test_merge_is_nearly_associative(void)
{
    enum { COUNT = 300, TRIALS = 1000 };
    const double offset = 1e3, u = DBL_EPSILON / 2;
    double x[COUNT];
    Rng rng;
    rng_seed(&rng, 7);
    double worst = 0.0;
    for (int t = 0; t < TRIALS; t++) {
        rng_fill_normal_f64(&rng, x, COUNT, offset, DATA_SPREAD);
        size_t a = 1 + rng_below(&rng, 100), b = 1 + rng_below(&rng, 100);
        WelfordState A = welford_accumulate(x, a), B = welford_accumulate(x + a, b);
        WelfordState C = welford_accumulate(x + a + b, COUNT - a - b);
        WelfordState left = welford_merge(welford_merge(A, B), C), right = welford_merge(A, welford_merge(B, C));
        double kappa = variance_reference_f64(x, COUNT).kappa;
        double limit = 2 * gamma_bound(6, u) + 4 * u * kappa;
        double difference = relative_difference(left.m2, right.m2);
        worst = fmax(worst, difference / limit);
        EXPECT(left.count == right.count, "counts agree");
        EXPECT(relative_difference(left.m2, right.m2) <= limit, "trial %d: m2 differs by %.2e, limit %.2e", t,
               relative_difference(left.m2, right.m2), limit);
    }
    printf("associativity: worst difference %.0f%% of its limit\n", 100 * worst);
}

int main(void)
{
    test_merge_tree_is_exact_without_rounding();
    test_empty_states();
    test_chunked_merges_agree_with_one_pass();
    test_merge_is_nearly_associative();
    return test_finish();
}
