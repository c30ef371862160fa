/* The non-finite policy (README, "Non-finite values") for the chapter's
 * kernels, shared by the CPU test and the GPU one: a NaN or an inf in a row
 * stays in its row. */
#ifndef TESTS_02_LAYERNORM_NONFINITE_GOAL_H
#define TESTS_02_LAYERNORM_NONFINITE_GOAL_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "chapters/02-layernorm/problem.h"
#include "common/testing.h"

static bool all_nan(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            return false;
    return true;
}

static bool rows_same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* A row holding a NaN or an inf: that row's y, dx, mean (layer norm) and
 * rstd are NaN, as PyTorch gives them, and every other row is the same bits
 * as without it. dgamma and dbeta sum over all rows and are NaN; they are
 * not compared. RMSNorm with an inf is left out: its sum of squares is
 * inf, rstd 0, as PyTorch's. */
static void expect_nonfinite_row_stays_in_its_row(LnRunKernels run, void *context, NormKind norm, float bad,
                                                  const char *label)
{
    size_t n = 5, d = 300, row = 2;
    LnProblem clean = ln_problem_new(n, d, 1e-5f), dirty = ln_problem_new(n, d, 1e-5f);
    clean.norm = dirty.norm = norm;
    ln_problem_fill_random(&clean, 7, 0.0, 1.0);
    ln_problem_fill_random(&dirty, 7, 0.0, 1.0);
    dirty.x[row * d + 17] = bad;
    const char *refused_clean = run(&clean, context), *refused_dirty = run(&dirty, context);
    bool row_nan = all_nan(dirty.y + row * d, d) && all_nan(dirty.dx + row * d, d) && isnan(dirty.rstd[row]) &&
                   (norm == NORM_RMS || isnan(dirty.mean[row]));
    EXPECT(refused_clean == NULL && refused_dirty == NULL && row_nan,
           "%s, %s norm, x holding %g: the row's y, dx, mean and rstd are NaN (rstd %.9g)", label, norm_kind_name(norm),
           bad, dirty.rstd[row]);
    bool others_same = true;
    for (size_t r = 0; r < n; r++) {
        if (r == row)
            continue;
        others_same = others_same && rows_same_bits(dirty.y + r * d, clean.y + r * d, d) &&
                      rows_same_bits(dirty.dx + r * d, clean.dx + r * d, d) && dirty.rstd[r] == clean.rstd[r] &&
                      dirty.mean[r] == clean.mean[r];
    }
    EXPECT(others_same, "%s, %s norm, x holding %g: every other row the same bits", label, norm_kind_name(norm), bad);
    ln_problem_free(&clean);
    ln_problem_free(&dirty);
}

/* NaN, inf and -inf for layer norm; NaN for RMSNorm (see above). */
static void expect_nonfinite_rows_stay_in_their_rows(LnRunKernels run, void *context, const char *label)
{
    expect_nonfinite_row_stays_in_its_row(run, context, NORM_LAYER, NAN, label);
    expect_nonfinite_row_stays_in_its_row(run, context, NORM_LAYER, INFINITY, label);
    expect_nonfinite_row_stays_in_its_row(run, context, NORM_LAYER, -INFINITY, label);
    expect_nonfinite_row_stays_in_its_row(run, context, NORM_RMS, NAN, label);
}

#endif
