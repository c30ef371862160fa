/* The goal of "statistics that do not break" for overflow, shared by the
 * CPU test and the GPU one: rows whose squares overflow float, or are
 * subnormal in it, normalise as well as rows of unit scale, and the
 * rescaled path that takes them is exact. */
#ifndef TESTS_02_LAYERNORM_OVERFLOW_GOAL_H
#define TESTS_02_LAYERNORM_OVERFLOW_GOAL_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/problem.h"
#include "common/testing.h"

/* x = scale * N(0, 1) at scales 1e20 and 1e30 (whose squares, 1e40 and
 * 1e60, no float holds), and at 1e-20 and 1e-30 with eps 0 (whose squares,
 * 1e-40 and 1e-60, are subnormal or 0 in float; eps 1e-5 would swamp
 * them), d = 1024 and an irregular d beyond 4096, against the double
 * reference with ln_compare's tolerances: the same as at scale 1, because
 * they scale the tolerances of x, mean, dx with the row's spread and rstd,
 * and those of rstd with its size (relative). */
static void expect_rows_far_from_unit_scale_normalise(LnRunKernels run, void *context, NormKind norm, const char *label)
{
    const struct {
        double scale;
        float eps;
    } cases[] = {
        {1e20,  1e-5f},
        {1e30,  1e-5f},
        {1e-20, 0.0f },
        {1e-30, 0.0f }
    };
    const size_t widths[] = {1024, 4099};
    for (int s = 0; s < 4; s++)
        for (int w = 0; w < 2; w++) {
            LnProblem p = ln_problem_new(8, widths[w], cases[s].eps);
            p.norm = norm;
            ln_problem_fill_random(&p, 21, 0.0, cases[s].scale);
            const char *refused = run(&p, context);
            LnReference ref = ln_reference_compute(&p);
            LnComparison c = ln_compare(&p, &ref);
            char what[128];
            snprintf(what, sizeof what, "%s, %s norm, x ~ %g N(0, 1), eps %g, d = %zu:", label, norm_kind_name(norm),
                     cases[s].scale, (double)cases[s].eps, widths[w]);
            EXPECT(refused == NULL && ln_comparison_print(stdout, what, &c), "%s within the unit-scale tolerances (%s)",
                   what, refused == NULL ? "ran" : refused);
            ln_reference_free(&ref);
            ln_problem_free(&p);
        }
}

/* Rows of one huge value: the variance is 0, but the first mean's rounding
 * (an ulp of 1e26 is 2^63) makes the float sums of squared deviations
 * overflow, or the sum of the row itself does (4 x 3e38), and the rescaled
 * path takes them. eps 2^-2k underflows to 0 there, so it cannot be scaled
 * with the row: rstd must still be 1/sqrt(eps), not 1/sqrt(0) = inf, and
 * layer norm's y beta. d = 4099 is irregular. */
static void expect_constant_huge_rows_keep_eps(LnRunKernels run, void *context, NormKind norm, const char *label)
{
    const struct {
        float value;
        size_t d;
    } rows[] = {
        {1e26f,  1024},
        {-3e38f, 4   },
        {1e30f,  4099}
    };
    const float eps_values[] = {1e-5f, 1.0f};
    for (int r = 0; r < 3; r++)
        for (int e = 0; e < 2; e++) {
            LnProblem p = ln_problem_new(2, rows[r].d, eps_values[e]);
            p.norm = norm;
            ln_problem_fill_random(&p, 23, 0.0, 1.0);
            for (size_t i = 0; i < p.n * p.d; i++)
                p.x[i] = rows[r].value;
            const char *refused = run(&p, context);
            LnReference ref = ln_reference_compute(&p);
            LnComparison c = ln_compare(&p, &ref);
            char what[128];
            snprintf(what, sizeof what, "%s, %s norm, rows of %zu x %g, eps %g:", label, norm_kind_name(norm),
                     rows[r].d, (double)rows[r].value, (double)eps_values[e]);
            EXPECT(refused == NULL && ln_comparison_print(stdout, what, &c) && isfinite(p.rstd[0]),
                   "%s rstd %.9g (reference %.9g), within the unit-scale tolerances (%s)", what, (double)p.rstd[0],
                   ref.rstd[0], refused == NULL ? "ran" : refused);
            /* Layer norm's xhat is 0 exactly: the corrected mean of a constant row is exact. */
            if (norm == NORM_LAYER)
                EXPECT(memcmp(p.y, p.beta, p.d * sizeof *p.y) == 0, "%s y of the first row is beta, bit for bit", what);
            ln_reference_free(&ref);
            ln_problem_free(&p);
        }
}

/* Is b, element by element, a times 2^k, to the bit? */
static bool scaled_by_power_of_two(const float *a, const float *b, size_t count, int k)
{
    for (size_t i = 0; i < count; i++) {
        float scaled = ldexpf(a[i], k);
        if (memcmp(&scaled, &b[i], sizeof scaled) != 0)
            return false;
    }
    return true;
}

/* Rows x (the plain path) and x 2^K (K = 66 and 100: 7e19 and 1.3e30;
 * K = -66 and -100: 1.4e-20 and 7.9e-31, whose squares are subnormal or 0
 * in float; the rescaled path), eps = 0 so that eps needs no scaling: the rescaled path
 * computes on 2^(K-k) x what the plain one computes on x, exactly, so y,
 * dgamma and dbeta are the same bits, the mean 2^K times, rstd and dx 2^-K
 * times theirs. Whatever the plain path's accuracy at scale 1 (rstd
 * included, in ulps), the rescaled path has the same at 1e30. */
static void expect_rescaling_is_exact(LnRunKernels run, void *context, NormKind norm, const char *label)
{
    const int exponents[] = {66, 100, -66, -100};
    for (int e = 0; e < 4; e++) {
        int big = exponents[e];
        LnProblem unit = ln_problem_new(64, 1024, 0.0f), scaled = ln_problem_new(64, 1024, 0.0f);
        unit.norm = scaled.norm = norm;
        ln_problem_fill_random(&unit, 22, 0.0, 1.0);
        ln_problem_fill_random(&scaled, 22, 0.0, 1.0);
        for (size_t i = 0; i < scaled.n * scaled.d; i++)
            scaled.x[i] = ldexpf(scaled.x[i], big);
        const char *refused_unit = run(&unit, context), *refused_scaled = run(&scaled, context);
        size_t n = unit.n, d = unit.d;
        bool forward = scaled_by_power_of_two(unit.y, scaled.y, n * d, 0) &&
                       scaled_by_power_of_two(unit.mean, scaled.mean, n, big) &&
                       scaled_by_power_of_two(unit.rstd, scaled.rstd, n, -big);
        bool backward = scaled_by_power_of_two(unit.dx, scaled.dx, n * d, -big) &&
                        scaled_by_power_of_two(unit.dgamma, scaled.dgamma, d, 0) &&
                        scaled_by_power_of_two(unit.dbeta, scaled.dbeta, d, 0);
        EXPECT(refused_unit == NULL && refused_scaled == NULL && forward,
               "%s, %s norm, x times 2^%d: y the same bits, mean 2^%d times, rstd 2^%d times (rstd %.9g, %.9g)", label,
               norm_kind_name(norm), big, big, -big, unit.rstd[0], scaled.rstd[0]);
        EXPECT(backward, "%s, %s norm, x times 2^%d: dgamma, dbeta the same bits, dx 2^%d times", label,
               norm_kind_name(norm), big, -big);
        ln_problem_free(&unit);
        ln_problem_free(&scaled);
    }
}

/* y = gamma xhat + beta where gamma = +-3e38 (alternating) and beta =
 * -gamma, so y = gamma (xhat - 1): for xhat between 1.13 and 2.13 (one
 * element in nine of N(0, 1) rows), gamma xhat alone is beyond FLT_MAX but
 * y fits, and a y computed as a rounded product plus beta would be inf.
 * Every y whose reference fits must come out finite and within the float
 * path's error of gamma xhat (the rstd tolerance of ln_compare plus a few
 * roundings, relative) and y's own rounding; every y whose reference does not fit must be the
 * infinity of its sign. Layer norm only (RMSNorm has no beta); the
 * backward pass's sums of such g overflow, a limit the chapter states. */
static void expect_y_fits_where_gamma_xhat_does_not(LnRunKernels run, void *context, const char *label)
{
    LnProblem p = ln_problem_new(4, 1031, 1e-5f);
    ln_problem_fill_random(&p, 24, 0.0, 1.0);
    for (size_t j = 0; j < p.d; j++) {
        p.gamma[j] = j % 2 == 0 ? 3e38f : -3e38f;
        p.beta[j] = -p.gamma[j];
    }
    const char *refused = run(&p, context);
    LnReference ref = ln_reference_compute(&p);
    double tolerance = ((double)p.d / 32.0 + 24.0) * 0x1p-24;
    size_t wrong = 0, beyond_product = 0;
    for (size_t i = 0; i < p.n * p.d; i++) {
        double product = ref.y[i] - (double)p.beta[i % p.d], y = (double)p.y[i];
        bool fits = fabs(ref.y[i]) <= (double)FLT_MAX;
        beyond_product += fits && fabs(product) > (double)FLT_MAX;
        wrong += fits ? !(fabs(y - ref.y[i]) <= tolerance * fabs(product) + 0x1p-24 * fabs(ref.y[i]))
                      : !(isinf(p.y[i]) && !signbit(p.y[i]) == !signbit(ref.y[i]));
    }
    EXPECT(refused == NULL && wrong == 0 && beyond_product > 0,
           "%s, layer norm, gamma = +-3e38, beta = -gamma: every y within %.2g of gamma xhat and u of y where it fits, "
           "+-inf where it does not (%zu wrong; %zu fit where gamma xhat does not)",
           label, tolerance, wrong, beyond_product);
    ln_reference_free(&ref);
    ln_problem_free(&p);
}

#endif
