/* The float kernels, layer norm's and RMSNorm's, against the double
 * reference, and their independence of the thread count; layer norm's of
 * alignment, and its node-by-node backward against the compact formula. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/problem.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"
#include "tests/02-layernorm/nonfinite_goal.h"
#include "tests/02-layernorm/offset_goal.h"
#include "tests/02-layernorm/overflow_goal.h"

static LnProblem random_problem(NormKind norm, size_t n, size_t d, uint64_t seed, double x_mean, double x_std)
{
    LnProblem p = ln_problem_new(n, d, 1e-5f);
    p.norm = norm;
    ln_problem_fill_random(&p, seed, x_mean, x_std);
    return p;
}

static void test_against_reference(NormKind norm, size_t n, size_t d, double x_mean, double x_std)
{
    LnProblem p = random_problem(norm, n, d, 3, x_mean, x_std);
    ln_problem_run_cpu(&p);
    LnReference ref = ln_reference_compute(&p);
    LnComparison c = ln_compare(&p, &ref);
    char label[80];
    snprintf(label, sizeof label, "%s norm, %zu x %zu, x ~ N(%g, %g^2):", norm_kind_name(norm), n, d, x_mean, x_std);
    EXPECT(ln_comparison_print(stdout, label, &c), "%s float kernels match the double reference", label);
    ln_reference_free(&ref);
    ln_problem_free(&p);
}

static bool same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

/* Rows are split over threads and dgamma, dbeta summed in fixed chunks:
 * one thread and all threads must give the same bits. */
static void test_thread_count_does_not_matter(NormKind norm)
{
#ifdef _OPENMP
    LnProblem one = random_problem(norm, 1000, 333, 4, 0.5, 2.0), all = random_problem(norm, 1000, 333, 4, 0.5, 2.0);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ln_problem_run_cpu(&one);
    omp_set_num_threads(threads > 1 ? threads : 2);
    ln_problem_run_cpu(&all);
    omp_set_num_threads(threads);
    EXPECT(same_bits(one.y, all.y, one.n * one.d) && same_bits(one.dx, all.dx, one.n * one.d),
           "%s norm: y and dx identical with 1 and %d threads", norm_kind_name(norm), threads > 1 ? threads : 2);
    EXPECT(same_bits(one.dgamma, all.dgamma, one.d) && same_bits(one.dbeta, all.dbeta, one.d),
           "%s norm: dgamma and dbeta identical with 1 and %d threads", norm_kind_name(norm),
           threads > 1 ? threads : 2);
    ln_problem_free(&one);
    ln_problem_free(&all);
#else
    (void)norm;
    EXPECT(true, "built without OpenMP: one thread only");
#endif
}

/* The streaming stores want 64-byte-aligned blocks; outputs that start
 * anywhere take the head and tail paths. Same bits wherever they start,
 * and whatever the scratch space held before (here NaN). */
static void test_alignment_and_scratch_do_not_matter(void)
{
    size_t n = 37, d = 200, scratch_floats = layernorm_backward_f32_scratch_floats(n, d);
    LnProblem p = ln_problem_new(n, d, 1e-5f);
    ln_problem_fill_random(&p, 5, 0.0, 1.0);
    ln_problem_run_cpu(&p);
    float *y_shifted = ALLOC_ARRAY(n * d + 16, float), *dx_shifted = ALLOC_ARRAY(n * d + 16, float);
    float *dgamma = ALLOC_ARRAY(d, float), *dbeta = ALLOC_ARRAY(d, float);
    float *scratch = ALLOC_ARRAY(scratch_floats, float);
    bool all_same = true;
    for (size_t shift = 1; shift < 16; shift += 7) {
        for (size_t i = 0; i < scratch_floats; i++)
            scratch[i] = NAN;
        layernorm_forward_f32(y_shifted + shift, p.mean, p.rstd, p.x, p.gamma, p.beta, n, d, p.eps);
        layernorm_backward_f32(dx_shifted + shift, dgamma, dbeta, scratch, p.dy, p.x, p.mean, p.rstd, p.gamma, n, d);
        all_same = all_same && same_bits(y_shifted + shift, p.y, n * d) && same_bits(dx_shifted + shift, p.dx, n * d) &&
                   same_bits(dgamma, p.dgamma, d) && same_bits(dbeta, p.dbeta, d);
    }
    EXPECT(all_same, "y, dx, dgamma, dbeta the same bits at every output alignment, from NaN-filled scratch");
    array_free(y_shifted);
    array_free(dx_shifted);
    array_free(dgamma);
    array_free(dbeta);
    array_free(scratch);
    ln_problem_free(&p);
}

/* The condition-aware bound still catches a defect at a large offset: y
 * recomputed for one row from a mean 8 ulps off (as a plain float sum's
 * mean is, chapter 1), where the kernel's is within one. */
static void test_bound_catches_a_worse_mean(void)
{
    LnProblem p = random_problem(NORM_LAYER, 64, 1024, 8, 1e4, 1.0);
    ln_problem_run_cpu(&p);
    LnReference ref = ln_reference_compute(&p);
    EXPECT(ln_compare(&p, &ref).ok, "offset 1e4: the kernel is within the condition-aware bound");
    float mean = p.mean[0], worse_mean = mean + 8.0f * (nextafterf(mean, INFINITY) - mean);
    for (size_t j = 0; j < p.d; j++)
        p.y[j] = p.gamma[j] * ((p.x[j] - worse_mean) * p.rstd[0]) + p.beta[j];
    LnComparison c = ln_compare(&p, &ref);
    EXPECT(!c.y.ok && !c.ok, "offset 1e4: a mean 8 ulps off is outside it (y used %.2f of its tolerance)",
           c.y.tolerance_used);
    ln_reference_free(&ref);
    ln_problem_free(&p);
}

static const char *run_cpu(LnProblem *p, void *context)
{
    (void)context;
    ln_problem_run_cpu(p);
    return NULL;
}

/* The two double backward passes: the compact formula and the
 * node-by-node chain rule agree to rounding, about 1e-12 relative. */
static void test_node_by_node_agrees(size_t n, size_t d)
{
    double *x = ALLOC_ARRAY(n * d, double), *dy = ALLOC_ARRAY(n * d, double), *y = ALLOC_ARRAY(n * d, double);
    double *gamma = ALLOC_ARRAY(d, double), *beta = ALLOC_ARRAY(d, double);
    double *mean = ALLOC_ARRAY(n, double), *rstd = ALLOC_ARRAY(n, double);
    double *dx[2], *dgamma[2], *dbeta[2];
    for (int k = 0; k < 2; k++) {
        dx[k] = ALLOC_ARRAY(n * d, double);
        dgamma[k] = ALLOC_ARRAY(d, double);
        dbeta[k] = ALLOC_ARRAY(d, double);
    }
    Rng rng;
    rng_seed(&rng, 6);
    rng_fill_normal_f64(&rng, x, n * d, 1.0, 3.0);
    rng_fill_normal_f64(&rng, dy, n * d, 0.0, 1.0);
    rng_fill_normal_f64(&rng, gamma, d, 1.0, 0.1);
    layernorm_forward_f64(y, mean, rstd, x, gamma, beta, n, d, 1e-5);
    layernorm_backward_f64(dx[0], dgamma[0], dbeta[0], dy, x, mean, rstd, gamma, n, d);
    layernorm_backward_unfused_f64(dx[1], dgamma[1], dbeta[1], dy, x, gamma, n, d, 1e-5);
    /* dx is of order rstd |g| ~ 1/3 here; both formulas round a few times per
     * element and sum d terms: 1e-12 leaves room for d * 1e-16 and more. */
    CloseReport rx = check_close_f64(dx[0], dx[1], n * d, 1e-12, 1e-12);
    CloseReport rg = check_close_f64(dgamma[0], dgamma[1], d, 1e-12, 1e-12);
    CloseReport rb = check_close_f64(dbeta[0], dbeta[1], d, 0.0, 0.0); /* the same sums in the same order */
    EXPECT(close_report_print(stdout, "node-by-node dx", &rx), "%zu x %zu", n, d);
    EXPECT(close_report_print(stdout, "node-by-node dgamma", &rg), "%zu x %zu", n, d);
    EXPECT(close_report_print(stdout, "node-by-node dbeta", &rb), "%zu x %zu", n, d);
    double *arrays[] = {x, dy, y, gamma, beta, mean, rstd, dx[0], dx[1], dgamma[0], dgamma[1], dbeta[0], dbeta[1]};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

/* The double reference follows the kernels on a row with an inf or a NaN:
 * its mean, rstd and y are NaN (a variance clamped with fmax would give
 * rstd = 1/sqrt(eps)), and the other row is untouched. */
static void test_reference_keeps_nan_rows(void)
{
    enum { D = 4 };
    const double gamma[D] = {1, 1, 1, 1}, beta[D] = {0, 0, 0, 0};
    const double bad[2] = {INFINITY, NAN};
    for (int b = 0; b < 2; b++) {
        double x[2 * D] = {1, 2, bad[b], 4, 1, 2, 3, 4}, y[2 * D], mean[2], rstd[2];
        layernorm_forward_f64(y, mean, rstd, x, gamma, beta, 2, D, 1e-5);
        EXPECT(isnan(mean[0]) && isnan(rstd[0]) && isnan(y[0]), "a row with %g: mean %g, rstd %g, y[0] %g", bad[b],
               mean[0], rstd[0], y[0]);
        EXPECT(mean[1] == 2.5 && isfinite(rstd[1]), "the other row: mean %g, rstd %g", mean[1], rstd[1]);
    }
}

int main(void)
{
    const NormKind norms[] = {NORM_LAYER, NORM_RMS};
    for (int k = 0; k < 2; k++) {
        test_against_reference(norms[k], 1823, 781, 0.0, 1.0);
        test_against_reference(norms[k], 64, 4096, 0.0, 1.0);
        test_against_reference(norms[k], 300, 768, 0.3, 5.0);
        test_against_reference(norms[k], 5, 3, 0.0, 1.0);
        test_against_reference(norms[k], 3, 1, 0.0, 1.0);
        /* Offsets of 1e4 and 1e6 sigma: within the bound that counts the mean's rounding. */
        test_against_reference(norms[k], 64, 1024, 1e4, 1.0);
        test_against_reference(norms[k], 64, 1024, 1e6, 1.0);
        test_thread_count_does_not_matter(norms[k]);
        expect_rows_far_from_unit_scale_normalise(run_cpu, NULL, norms[k], "CPU");
        expect_rescaling_is_exact(run_cpu, NULL, norms[k], "CPU");
        expect_constant_huge_rows_keep_eps(run_cpu, NULL, norms[k], "CPU");
    }
    expect_nonfinite_rows_stay_in_their_rows(run_cpu, NULL, "CPU");
    expect_y_fits_where_gamma_xhat_does_not(run_cpu, NULL, "CPU");
    test_bound_catches_a_worse_mean();
    expect_offset_costs_nothing(run_cpu, NULL, "CPU");
    test_alignment_and_scratch_do_not_matter();
    test_node_by_node_agrees(64, 768);
    test_node_by_node_agrees(7, 2);
    test_reference_keeps_nan_rows();
    return test_finish();
}
