/* Central differences against the complex step: the finite difference's best
 * step and smallest error where the error model puts them, the complex step
 * at the working precision for every test function. */
#include <float.h>
#include <math.h>
#include <stddef.h>

#include "chapters/01-cancellation/derivative.h"
#include "common/testing.h"

static const double u = DBL_EPSILON / 2;

/* The complex step's result is as accurate as f itself: the imaginary part
 * goes through the same few roundings (a glibc complex function, or a short
 * expression of them) as the real part does, and the division by a power of
 * two is exact. Four roundings' worth, 4u, is the budget. */
static void test_complex_step_is_at_working_precision(void)
{
    for (int f = 0; f < test_function_count; f++) {
        double error =
            worst_relative_error(&test_functions[f], COMPLEX_STEP_DERIVATIVE, COMPLEX_STEP, DERIVATIVE_POINTS);
        EXPECT(error <= 4 * u, "%s: complex-step error %.2e = %.2f u", test_functions[f].name, error, error / u);
    }
}

/* For exp the worst error over the points is h^2/6 + (rounding of f)/h, and
 * the rounding of f is at most u (glibc's exp errs by 0.51 ulp at most) and,
 * over 101 independent points, nearly reaches it: the measured curve lies
 * between h^2/6 + 0.7u/h and h^2/6 + u/h + u. With the model's best step
 * h_star = (3u)^(1/3) and smallest error e_star = (3u)^(2/3)/2, the grid
 * (steps of 10^(1/8)) has a point within 1.16 h_star whose error is at most
 * 1.02 e_star + u, and every step where the lower curve stays below that
 * lies in [0.5, 1.45] h_star: the test allows [0.5, 2] h_star and
 * [0.5, 1.1] e_star. */
static void test_central_difference_best_step(void)
{
    const TestFunction *exp_function = &test_functions[0];
    for (int k = 0; k < DERIVATIVE_STEP_COUNT; k++) {
        double h = derivative_grid_step(k);
        EXPECT(!isnan(worst_relative_error(exp_function, CENTRAL_DIFFERENCE, h, DERIVATIVE_POINTS)),
               "no NaN at step %g", h);
    }
    BestStep best = best_grid_step(exp_function, CENTRAL_DIFFERENCE, DERIVATIVE_POINTS);
    double h_star = predicted_best_step(u), e_star = predicted_error(h_star, u);
    /* The model's value against its closed form. 2/3 is not a binary
     * fraction, and pow magnifies its rounding by |ln 3u| = 35: 1e-14. */
    EXPECT(fabs(e_star - pow(3 * u, 2.0 / 3) / 2) <= 1e-14 * e_star, "predicted smallest error %.17g = (3u)^(2/3)/2",
           e_star);
    EXPECT(best.step >= h_star / 2 && best.step <= 2 * h_star, "best step %.2e, predicted %.2e", best.step, h_star);
    EXPECT(best.error >= e_star / 2 && best.error <= 1.1 * e_star, "smallest error %.2e, predicted %.2e", best.error,
           e_star);
    /* The V: a thousand times smaller and larger steps are far worse. */
    double small = worst_relative_error(exp_function, CENTRAL_DIFFERENCE, h_star / 1000, DERIVATIVE_POINTS);
    double large = worst_relative_error(exp_function, CENTRAL_DIFFERENCE, h_star * 1000, DERIVATIVE_POINTS);
    EXPECT(small > 100 * best.error, "step h*/1000: error %.2e (rounding, about 1000 E*)", small);
    EXPECT(large > 100 * best.error, "step 1000 h*: error %.2e (truncation, about 1e6 E*)", large);
}

/* The step actually taken: x + h and x - h are rounded, and the difference
 * divides by their distance, so a step that is not representable at x still
 * gives the slope of the chord that was evaluated. For f(x) = x, exactly 1. */
static double identity(double x, const void *context)
{
    (void)context;
    return x;
}

static void test_central_difference_divides_by_the_step_taken(void)
{
    const double steps[] = {1e-1, 1e-7, 3e-13, 1e-15};
    for (int s = 0; s < 4; s++) {
        double slope = central_difference(identity, NULL, 0.7, steps[s]);
        EXPECT(slope == 1.0, "slope of x at 0.7 with step %g: %.17g", steps[s], slope);
    }
}

int main(void)
{
    test_complex_step_is_at_working_precision();
    test_central_difference_best_step();
    test_central_difference_divides_by_the_step_taken();
    return test_finish();
}
