/* welford_remove, the answer to the sliding-window exercise: the inverse of
 * welford_merge, exact where no rounding happens; accurate while what is
 * removed is not much larger than what remains; and, as the exercise
 * predicts, lost once u times the ratio of the two reaches 1. */
#include <math.h>
#include <stdint.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/sliding_window.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

enum { WINDOW = 1024 };
#define U 0x1p-53

static bool same_state(WelfordState a, WelfordState b)
{
    return a.count == b.count && a.mean == b.mean && a.m2 == b.m2;
}

/* States of small integers with means that are multiples of 1/4 and counts
 * that are powers of two: every step of the merge and of its inverse is
 * exact, so removing B from A + B must give A to the last bit. */
static void test_remove_undoes_merge_without_rounding(void)
{
    const WelfordState states[][2] = {
        {{4, 3, 20},    {4, 5, 20} },
        {{6, -1.5, 36}, {2, 2.5, 2}},
        {{2, 0.25, 8},  {6, 6, 64} },
        {{1, 7, 0},     {1, -9, 0} },
    };
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        WelfordState a = states[i][0], b = states[i][1];
        WelfordState back = welford_remove(welford_merge(a, b), b);
        EXPECT(same_state(back, a), "case %zu: (%g, %.17g, %.17g), expected (%g, %g, %g)", i, back.count, back.mean,
               back.m2, a.count, a.mean, a.m2);
    }
    WelfordState all = {4, 3, 20};
    EXPECT(same_state(welford_remove(all, all), welford_empty()), "removing everything leaves the empty state");
}

/* The window's variance after values of spread s have slid through it. Each
 * of the 2 WINDOW pushes and removals rounds an m2 of at most about
 * WINDOW (s^2 + 1) by a few u; relative to the window's m2, about WINDOW,
 * their sum is at most about 2 WINDOW * 4u (s^2 + 1): the bound asserted,
 * loose (the errors mostly cancel) but derived, not fitted. */
static double slid_error(double spread)
{
    double *x = ALLOC_ARRAY(2 * WINDOW, double);
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_normal_f64(&rng, x, WINDOW, 0.0, spread);
    rng_fill_normal_f64(&rng, x + WINDOW, WINDOW, 0.0, 1.0);
    double slid = welford_variance(welford_slide_through(x, WINDOW));
    double exact = variance_reference_f64(x + WINDOW, WINDOW).variance;
    array_free(x);
    return fabs(slid - exact) / exact;
}

static void test_slid_variance_within_its_bound(void)
{
    for (double spread = 1.0; spread <= 1e6; spread *= 100.0) {
        double error = slid_error(spread), bound = 2.0 * WINDOW * 4.0 * U * (spread * spread + 1.0);
        EXPECT(error <= bound, "burst spread %g: relative error %.2e above the bound %.2e", spread, error, bound);
    }
}

/* The failure the exercise predicts: at s = 1e8, u s^2 is about 1, and the
 * window's variance is lost (at least 10% off; NaN would fail too). */
static void test_large_burst_loses_the_window(void)
{
    double error = slid_error(1e8);
    EXPECT(error >= 0.1, "burst spread 1e8: relative error %.2e, expected the window lost (u s^2 ~ 1)", error);
}

int main(void)
{
    test_remove_undoes_merge_without_rounding();
    test_slid_variance_within_its_bound();
    test_large_burst_loses_the_window();
    return test_finish();
}
