/* The goal of "statistics that do not break" for a mean offset, shared by
 * the CPU test and the GPU one: rows of offset + N(0, 1) normalise as well
 * as rows of N(0, 1). */
#ifndef TESTS_02_LAYERNORM_OFFSET_GOAL_H
#define TESTS_02_LAYERNORM_OFFSET_GOAL_H

#include <stdio.h>

#include "chapters/02-layernorm/problem.h"
#include "common/testing.h"

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
}

#endif
