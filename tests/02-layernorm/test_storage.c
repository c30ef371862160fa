/* Storage types: the kernels' conversions into fp16 and bf16 against the
 * rounding computed independently from a double, and the accuracy goal on
 * random rows (other shapes, seeds and offsets than the book's table). */
#include <math.h>
#include <stdio.h>

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

int main(void)
{
    test_narrowing_rounds_correctly(STORAGE_FP16);
    test_narrowing_rounds_correctly(STORAGE_BF16);
    test_accuracy_goal(STORAGE_FP16);
    test_accuracy_goal(STORAGE_BF16);
    test_bf16_rstd_breaks_the_goal();
    return test_finish();
}
