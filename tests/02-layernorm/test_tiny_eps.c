/* The tiny-eps demonstration's claims: normalising a nearly constant row
 * keeps what rounding left of its signal at every eps, and that is what
 * the spacing of the floats predicts. */
#include <math.h>
#include <stdio.h>

#include "chapters/02-layernorm/stability.h"
#include "common/testing.h"

int main(void)
{
    double predicted = tiny_eps_predicted_correlation();
    /* sigma = 1e-6 is 8 to 17 float spacings of 1: noise of a few percent
     * of the signal, a correlation within about 1e-3 of 1. */
    EXPECT(predicted > 0.999 && predicted < 0.99999, "predicted correlation %.6f", predicted);
    for (int e = 0; e < TINY_EPS_COUNT; e++) {
        TinyEpsRun run = tiny_eps_run(TINY_EPS_VALUES[e]);
        /* A row's noise-to-signal ratio is the mean over 768 values: its
         * relative spread is about sqrt(2/768) = 5%, so the worst of 64
         * rows loses at most about 1.5 times the predicted 1 - correlation
         * (NaN fails both comparisons). */
        double lost = 1.0 - run.min_correlation, predicted_lost = 1.0 - predicted;
        EXPECT(lost >= 0.0 && lost <= 1.5 * predicted_lost, "eps %g: min correlation %.6f, predicted %.6f",
               TINY_EPS_VALUES[e], run.min_correlation, predicted);
        /* The gain: rstd is 1/sqrt(var + eps), between 1/sqrt(eps) (eps >> var) and 1/sigma; a row's
         * sample variance lies within +-50% of sigma^2 (its spread is sqrt(2/768) = 5%), and float
         * rounds rstd by a few u = 2^-24 (1e-6 relative allowed). */
        double sigma = 1e-6, eps = TINY_EPS_VALUES[e];
        double low = (1.0 - 1e-6) / sqrt(sigma * sigma * 1.5 + eps),
               high = (1.0 + 1e-6) / sqrt(sigma * sigma * 0.5 + eps);
        EXPECT(run.rstd_min >= low && run.rstd_max <= high, "eps %g: rstd %.4g ... %.4g outside [%.4g, %.4g]",
               TINY_EPS_VALUES[e], run.rstd_min, run.rstd_max, low, high);
    }
    return test_finish();
}
