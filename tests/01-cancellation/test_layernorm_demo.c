/* Layer norm in float with the naive and the two-pass variance: the claims
 * of chapter 1 about rows with a large mean. */
#include <float.h>
#include <math.h>

#include "chapters/01-cancellation/layernorm_demo.h"
#include "chapters/01-cancellation/variance.h"
#include "common/testing.h"

enum { N = 4096, SEED = 1 }; /* the program's defaults, which the chapter runs */

static void test_small_row(void)
{
    float x[4] = {1, 2, 3, 4}, y[4];
    layernorm_row_f32(x, y, 4, variance_two_pass_f32);
    for (int i = 0; i < 4; i++) {
        double exact = (x[i] - 2.5) / sqrt(1.25 + LAYERNORM_EPS);
        /* Five roundings (x - mean, + eps, sqrt, 1/sqrt, the product), each
         * at most u = 2^-24 relative: 5u plus a margin, 8u. */
        EXPECT(fabs(y[i] - exact) <= 8 * FLT_EPSILON / 2 * fabs(exact), "y[%d] = %.9g, exact %.9g", i, y[i], exact);
    }
}

/* At every offset of the demo the two-pass outputs are finite and within the
 * first-order bound the analysis gives (loose at large offsets, but a bound). */
static void test_two_pass_within_its_bound(void)
{
    for (double offset = 1.0; offset <= 1e5; offset *= 10) {
        LayerNormTrial trial = run_layernorm_trial(offset, N, SEED);
        EXPECT(trial.two_pass.nonfinite == 0, "offset %g: %zu two-pass outputs not finite", offset,
               trial.two_pass.nonfinite);
        EXPECT(trial.two_pass.max_abs_error <= trial.two_pass_bound, "offset %g: two-pass error %.2e, bound %.2e",
               offset, trial.two_pass.max_abs_error, trial.two_pass_bound);
    }
}

static void test_naive_fails(void)
{
    /* Offset 1e3: the naive variance is finite but wrong, and its outputs
     * are off by more than anything the two-pass bound allows. */
    LayerNormTrial modest = run_layernorm_trial(1e3, N, SEED);
    EXPECT(modest.naive.nonfinite == 0, "offset 1e3: naive outputs are finite");
    EXPECT(modest.naive.max_abs_error > modest.two_pass_bound, "offset 1e3: naive error %.2e, two-pass bound %.2e",
           modest.naive.max_abs_error, modest.two_pass_bound);
    /* Offset 1e4: the naive variance is negative, variance + eps too, and
     * its square root NaN: every output is NaN. */
    LayerNormTrial large = run_layernorm_trial(1e4, N, SEED);
    EXPECT(large.naive.variance + LAYERNORM_EPS < 0.0f, "offset 1e4: naive variance %g", large.naive.variance);
    EXPECT(large.naive.nonfinite == N, "offset 1e4: %zu of %d naive outputs not finite", large.naive.nonfinite, N);
}

int main(void)
{
    test_small_row();
    test_two_pass_within_its_bound();
    test_naive_fails();
    return test_finish();
}
