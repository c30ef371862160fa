/* RMSNorm's own arithmetic: the shared row helpers (kernels/rmsnorm_row.h)
 * and the double reference on inputs whose results are exact small
 * numbers, and the compact backward formula against the node-by-node one.
 * The float kernels against the reference, and the gradient checks, run
 * for both norms in test_layernorm.c and test_gradcheck.c. */
#include <math.h>
#include <stdio.h>

#include "chapters/02-layernorm/rmsnorm.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/rmsnorm_row.h"

static void test_row_helpers(void)
{
    /* sum(x^2) = 12 over d = 4, eps = 1: 1 / sqrt(3 + 1) = 0.5, every step exact. */
    EXPECT(rms_rstd(12.0f, 4.0f, 1.0f) == 0.5f, "rstd of mean square 3, eps 1: got %.9g", rms_rstd(12.0f, 4.0f, 1.0f));
    /* dx = rstd (g - xhat mean(g xhat)) = 2 (3 - 0.5 * 2) = 4: no mean(g) term. */
    EXPECT(rms_dx(3.0f, 0.5f, 2.0f, 2.0f) == 4.0f, "compact formula, exact small numbers: got %.9g",
           rms_dx(3.0f, 0.5f, 2.0f, 2.0f));
}

/* x = {3, -3, 3, -3}, eps = 0: mean square 9, rstd 1/3, xhat = {1, -1, 1, -1},
 * y = gamma * xhat. With dy = {1, 0, 0, 0} and gamma = 1: g xhat sums to 1,
 * mean(g xhat) = 1/4, dx = (1/3) (dy - xhat / 4) = {1/4, 1/12, -1/12, 1/12},
 * dgamma = dy * xhat = {1, 0, 0, 0}. Worked by hand, not by the code. */
static void test_reference_by_hand(void)
{
    const double x[4] = {3, -3, 3, -3}, gamma[4] = {2, 1, 1, 0.5}, ones[4] = {1, 1, 1, 1}, dy[4] = {1, 0, 0, 0};
    double y[4], rstd, dx[4], dgamma[4];
    rmsnorm_forward_f64(y, &rstd, x, gamma, 1, 4, 0.0);
    EXPECT(rstd == 1.0 / 3.0, "rstd = 1/3, got %.17g", rstd);
    EXPECT(y[0] == 2.0 && y[1] == -1.0 && y[2] == 1.0 && y[3] == -0.5, "y = gamma * xhat: %g %g %g %g", y[0], y[1],
           y[2], y[3]);
    rmsnorm_backward_f64(dx, dgamma, dy, x, &rstd, ones, 1, 4);
    const double want_dx[4] = {0.25, 1.0 / 12, -1.0 / 12, 1.0 / 12}, want_dgamma[4] = {1, 0, 0, 0};
    /* A handful of roundings on numbers below 1. */
    CloseReport rx = check_close_f64(dx, want_dx, 4, 1e-15, 1e-15);
    CloseReport rg = check_close_f64(dgamma, want_dgamma, 4, 1e-15, 1e-15);
    EXPECT(close_report_print(stdout, "dx by hand", &rx), "dx = (dy - xhat mean(dy xhat)) / 3");
    EXPECT(close_report_print(stdout, "dgamma by hand", &rg), "dgamma = dy * xhat");
}

/* The compact formula and the node-by-node chain rule, both in double,
 * agree to rounding. */
static void test_node_by_node_agrees(size_t n, size_t d)
{
    double *x = ALLOC_ARRAY(n * d, double), *dy = ALLOC_ARRAY(n * d, double), *y = ALLOC_ARRAY(n * d, double);
    double *gamma = ALLOC_ARRAY(d, double), *rstd = ALLOC_ARRAY(n, double);
    double *dx[2] = {ALLOC_ARRAY(n * d, double), ALLOC_ARRAY(n * d, double)};
    double *dgamma[2] = {ALLOC_ARRAY(d, double), ALLOC_ARRAY(d, double)};
    Rng rng;
    rng_seed(&rng, 12);
    rng_fill_normal_f64(&rng, x, n * d, 1.0, 3.0);
    rng_fill_normal_f64(&rng, dy, n * d, 0.0, 1.0);
    rng_fill_normal_f64(&rng, gamma, d, 1.0, 0.1);
    rmsnorm_forward_f64(y, rstd, x, gamma, n, d, 1e-5);
    rmsnorm_backward_f64(dx[0], dgamma[0], dy, x, rstd, gamma, n, d);
    rmsnorm_backward_unfused_f64(dx[1], dgamma[1], dy, x, gamma, n, d, 1e-5);
    /* dx ~ rstd |g| ~ 1/3, dgamma a sum of n terms of order 1: both formulas
     * round a few times per element and sum d (or n) terms, d * 1e-16 << 1e-12. */
    CloseReport rx = check_close_f64(dx[0], dx[1], n * d, 1e-12, 1e-12);
    CloseReport rg = check_close_f64(dgamma[0], dgamma[1], d, 1e-12, 1e-12);
    EXPECT(close_report_print(stdout, "rms node-by-node dx", &rx), "%zu x %zu", n, d);
    EXPECT(close_report_print(stdout, "rms node-by-node dgamma", &rg), "%zu x %zu", n, d);
    double *arrays[] = {x, dy, y, gamma, rstd, dx[0], dx[1], dgamma[0], dgamma[1]};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

int main(void)
{
    test_row_helpers();
    test_reference_by_hand();
    test_node_by_node_agrees(64, 768);
    test_node_by_node_agrees(7, 1);
    return test_finish();
}
