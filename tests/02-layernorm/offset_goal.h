/* The goal of "statistics that do not break" for a mean offset, shared by
 * the CPU test and the GPU one: rows of offset + N(0, 1) normalise as well
 * as rows of N(0, 1), and rows whose first mean is far off are centred
 * again. */
#ifndef TESTS_02_LAYERNORM_OFFSET_GOAL_H
#define TESTS_02_LAYERNORM_OFFSET_GOAL_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "chapters/02-layernorm/problem.h"
#include "common/testing.h"

/* Rows whose first float mean is several standard deviations off, where
 * the mean square of the deviations less the correction's square would
 * cancel: unit spread at offsets 3e7 (d = 4096) and 1e8 (d = 8192), where
 * the first mean's float sum rounds at several times the spread, and d - 1
 * equal values of 1e15 with one an ulp above, where a first mean an ulp off
 * is sqrt(d) standard deviations off. Layer norm only: RMSNorm centres
 * nothing. */
static void expect_far_first_means_are_centred_again(LnRunKernels run, void *context, const char *label)
{
    const struct {
        double offset;
        size_t d;
        bool one_ulp_apart;
    } rows[] = {
        {3e7,  4096, false},
        {1e8,  8192, false},
        {1e15, 8192, true }
    };
    for (int r = 0; r < 3; r++) {
        LnProblem p = ln_problem_new(4, rows[r].d, 1e-5f);
        ln_problem_fill_random(&p, 24, rows[r].offset, 1.0);
        for (size_t i = 0; rows[r].one_ulp_apart && i < p.n * p.d; i++)
            p.x[i] = i % p.d == p.d - 1 ? nextafterf((float)rows[r].offset, INFINITY) : (float)rows[r].offset;
        const char *refused = run(&p, context);
        LnReference ref = ln_reference_compute(&p);
        LnComparison c = ln_compare(&p, &ref);
        char what[128];
        snprintf(what, sizeof what, "%s, layer norm, %s %g, d = %zu:", label,
                 rows[r].one_ulp_apart ? "equal values and one an ulp above," : "offset", rows[r].offset, rows[r].d);
        EXPECT(refused == NULL && ln_comparison_print(stdout, what, &c),
               "%s within the tolerances (%s): rstd %.9g, reference %.9g", what, refused == NULL ? "ran" : refused,
               (double)p.rstd[0], ref.rstd[0]);
        ln_reference_free(&ref);
        ln_problem_free(&p);
    }
}

/* The max errors of y, dx and dgamma against the double reference (on the
 * same float inputs) at offsets 1e4, 1e5 and 1e6 times the spread stay
 * within 10 times their errors at offset 0. A kernel that centres on its
 * float mean is off by up to half an ulp of the offset (1e-3 times the
 * spread at 1e4, growing 10-fold per decade), where the errors at offset 0
 * are a few ulps of 1: it fails this by orders of magnitude, and one that
 * centres exactly passes with the spread of rounding alone. The comparison
 * is written so that a NaN fails it. */
static void expect_offset_costs_nothing(LnRunKernels run, void *context, const char *label)
{
    const char *refused = NULL;
    LnMaxErrors base = ln_errors_at_offset(0.0, run, context, &refused);
    EXPECT(refused == NULL, "%s: ran at offset 0 (%s)", label, refused);
    printf("%s, offset 0: max errors y %.3g, dx %.3g, dgamma %.3g\n", label, base.y, base.dx, base.dgamma);
    const double offsets[] = {1e4, 1e5, 1e6};
    for (int k = 0; k < 3; k++) {
        LnMaxErrors e = ln_errors_at_offset(offsets[k], run, context, &refused);
        printf("%s, offset %g: max errors y %.3g, dx %.3g, dgamma %.3g\n", label, offsets[k], e.y, e.dx, e.dgamma);
        bool within = e.y <= 10.0 * base.y && e.dx <= 10.0 * base.dx && e.dgamma <= 10.0 * base.dgamma;
        EXPECT(refused == NULL && within,
               "%s, offset %g: y, dx, dgamma errors within 10x those at offset 0 (%.2g, %.2g, %.2g times)", label,
               offsets[k], e.y / base.y, e.dx / base.dx, e.dgamma / base.dgamma);
    }
    expect_far_first_means_are_centred_again(run, context, label);
}

#endif
