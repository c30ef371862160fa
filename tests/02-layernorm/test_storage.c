/* Storage types: the kernels' conversions into fp16 and bf16 against the
 * rounding computed independently from a double, and the accuracy goal on
 * random rows (other shapes, seeds and offsets than the book's table). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/problem.h"
#include "chapters/02-layernorm/storage.h"
#include "chapters/02-layernorm/storage_accuracy.h"
#include "common/rng.h"
#include "common/testing.h"

/* Floats on both sides of every rounding boundary of the storage type over
 * [2^-20, 2^20] (one float ulp below, at and above each midpoint), and
 * random ones: the kernels' narrowing must equal the exact rounding. */
static void test_narrowing_rounds_correctly(LnStorage storage)
{
    size_t mismatches = 0, checked = 0;
    for (int e = -20; e < 20; e++) {
        double ulp = ln_storage_ulp(storage, ldexp(1.0, e));
        for (double v = ldexp(1.0, e); v < ldexp(1.0, e + 1); v += ulp) {
            float midpoint = (float)(v + 0.5 * ulp),
                  around[3] = {nextafterf(midpoint, 0.0f), midpoint, nextafterf(midpoint, INFINITY)};
            for (int k = 0; k < 3; k++, checked++)
                mismatches += ln_storage_narrow(storage, -around[k]) != ln_storage_round_exact(storage, -around[k]);
            if (storage == STORAGE_FP16 && e >= 15)
                break;
        }
    }
    EXPECT(mismatches == 0, "%s: %zu of %zu boundary floats rounded otherwise than exactly", ln_storage_name(storage),
           mismatches, checked);
}

static void expect_goal(const StorageAccuracy *a, LnStorage storage, const char *what, const StorageCase *c)
{
    /* At least 99.9% correctly rounded: the goal. */
    EXPECT(ln_storage_correct_share(a) >= LN_STORAGE_GOAL_SHARE, "%s %s, %ld x %ld offset %g: %.4f%% correctly rounded",
           ln_storage_name(storage), what, c->n, c->d, c->offset, 100.0 * ln_storage_correct_share(a));
    EXPECT(a->largest_beyond < ln_storage_unresolved_below(storage),
           "%s %s, %ld x %ld offset %g: %zu elements beyond one ulp, one at |value| %.3g (allowed below %.3g)",
           ln_storage_name(storage), what, c->n, c->d, c->offset, a->beyond_one_ulp, a->largest_beyond,
           ln_storage_unresolved_below(storage));
}

static void test_accuracy_goal(LnStorage storage)
{
    const StorageCase cases[] = {
        {300,  1023, 21, 0.0 },
        {200,  2304, 22, 1.0 },
        {100,  5120, 23, 0.0 },
        {400,  257,  24, -7.0},
        {1000, 64,   25, 0.5 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        StoredResultsAccuracy layer = storage_case_accuracy(&cases[i], NORM_LAYER, storage, RSTD_SAVED_FLOAT32);
        expect_goal(&layer.y, storage, "layer norm y", &cases[i]);
        /* Statistics in double and the guard (kernels/layernorm_row.h):
         * within one ulp everywhere, cancellation or not. */
        EXPECT(layer.y.max_ulps <= 1.0, "%s layer norm y, %ld x %ld offset %g: %.3g ulp at %.3g (%zu beyond one)",
               ln_storage_name(storage), cases[i].n, cases[i].d, cases[i].offset, layer.y.max_ulps, layer.y.worst_ref,
               layer.y.beyond_one_ulp);
        expect_goal(&layer.dx, storage, "layer norm dx", &cases[i]);
        StoredResultsAccuracy rms = storage_case_accuracy(&cases[i], NORM_RMS, storage, RSTD_SAVED_FLOAT32);
        expect_goal(&rms.dx, storage, "RMSNorm dx", &cases[i]);
        /* RMSNorm's y = gamma x rstd is a product: a few u of relative
         * error, within one ulp of any 16-bit type everywhere. */
        EXPECT(rms.y.max_ulps <= 1.0, "%s RMSNorm y, %ld x %ld: %.3g ulp at %.3g", ln_storage_name(storage), cases[i].n,
               cases[i].d, rms.y.max_ulps, rms.y.worst_ref);
    }
}

/* The rstd saved in bf16 instead: the point of float32 statistics is that
 * this fails the goal by far (with fp16's 11 bits, more so). */
static void test_bf16_rstd_breaks_the_goal(void)
{
    const StorageCase c = {256, 1024, 26, 0.0};
    StoredResultsAccuracy a = storage_case_accuracy(&c, NORM_LAYER, STORAGE_BF16, RSTD_SAVED_BF16);
    EXPECT(ln_storage_correct_share(&a.dx) < 0.99, "bf16 rstd: dx still %.3f%% correctly rounded",
           100.0 * ln_storage_correct_share(&a.dx));
}

/* Rows that cancel in every column: copies of one row, and beta chosen so
 * that y = gamma xhat + beta is about 2^-20 of gamma xhat. The float
 * path's few u of gamma xhat are then many ulps of y (seen failing with
 * the guard's double path switched off: most elements beyond one ulp); the
 * guard sends them to double, and every y is within one ulp. */
static void test_forced_cancellation(LnStorage storage)
{
    enum { N = 8, D = 1000 };
    LnProblem p = ln_problem_new(N, D, 1e-5f);
    ln_problem_fill_random(&p, 27, 1.5, 1.0);
    p.storage = storage;
    ln_problem_narrow_inputs(&p);
    for (size_t row = 1; row < N; row++)
        memcpy(p.x + row * D, p.x, D * sizeof *p.x);
    LnReference first = ln_reference_compute(&p);
    for (size_t j = 0; j < D; j++) {
        double t = p.gamma[j] * ((p.x[j] - first.mean[0]) * first.rstd[0]);
        p.beta[j] = (float)(-t + (j % 2 ? 0x1p-20 : -0x1p-20) * fabs(t));
    }
    ln_reference_free(&first);
    ln_problem_run_cpu(&p);
    ln_problem_narrow_results(&p);
    LnReference ref = ln_reference_compute(&p);
    StorageAccuracy a = ln_storage_accuracy(storage, p.y, ref.y, (size_t)N * D);
    EXPECT(a.max_ulps <= 1.0, "%s, rows that cancel: %zu of %d y beyond one ulp, up to %.3g ulp",
           ln_storage_name(storage), a.beyond_one_ulp, N * D, a.max_ulps);
    ln_reference_free(&ref);
    ln_problem_free(&p);
}

int main(void)
{
    test_narrowing_rounds_correctly(STORAGE_FP16);
    test_narrowing_rounds_correctly(STORAGE_BF16);
    test_accuracy_goal(STORAGE_FP16);
    test_forced_cancellation(STORAGE_FP16);
    test_forced_cancellation(STORAGE_BF16);
    test_accuracy_goal(STORAGE_BF16);
    test_bf16_rstd_breaks_the_goal();
    return test_finish();
}
