/* The three gradient checks pass on the real backward passes of layer norm
 * and RMSNorm, at the sizes the chapter uses, and fail on wrong ones: a
 * check that cannot fail proves nothing. */
#include <math.h>
#include <stdio.h>

#include "chapters/02-layernorm/gradcheck.h"
#include "common/testing.h"

static bool check_all(const GradProblem *p, GradCheckMethod method, const char *what)
{
    bool ok = true;
    for (int t = 0; t < grad_tensor_count(p->norm); t++) {
        GradCheckResult r = grad_check(p, method, (GradTensor)t, 4, 9);
        char label[160];
        snprintf(label, sizeof label, "%s norm, %s, %s, %zu x %zu, %s", norm_kind_name(p->norm), what,
                 grad_check_method_name(method), p->n, p->d, grad_tensor_name((GradTensor)t));
        ok = close_report_print(stdout, label, &r.report) && ok;
    }
    return ok;
}

static void test_checks_pass(NormKind norm, size_t n, size_t d, const GradCheckMethod *methods, int count)
{
    GradProblem p = grad_problem_random(norm, n, d, 1e-5, 8);
    for (int m = 0; m < count; m++)
        EXPECT(check_all(&p, methods[m], "correct gradient"), "%s norm: %s passes at %zu x %zu", norm_kind_name(norm),
               grad_check_method_name(methods[m]), n, d);
    grad_problem_free(&p);
}

/* Break the gradient in two ways a real bug would: one element off by
 * 1e-4 relative (a typo in one term), and dx without the projection onto
 * xhat (a forgotten term of the derivation). */
static void test_checks_fail_on_wrong_gradients(NormKind norm, size_t n, size_t d, const GradCheckMethod *methods,
                                                int count)
{
    for (int m = 0; m < count; m++) {
        GradProblem p = grad_problem_random(norm, n, d, 1e-5, 8);
        p.grad[TENSOR_X][n * d / 2] *= 1.0 + 1e-4;
        p.grad[TENSOR_GAMMA][d / 2] *= 1.0 + 1e-4;
        if (norm == NORM_LAYER)
            p.grad[TENSOR_BETA][0] *= 1.0 + 1e-4;
        for (int t = 0; t < grad_tensor_count(norm); t++) {
            GradCheckResult r = grad_check(&p, methods[m], (GradTensor)t, 4, 9);
            EXPECT(!r.report.ok, "%s norm: %s notices one %s element off by 1e-4 (used %.3g of tolerance)",
                   norm_kind_name(norm), grad_check_method_name(methods[m]), grad_tensor_name((GradTensor)t),
                   r.report.tolerance_used);
        }
        grad_problem_free(&p);
    }
}

static void test_checks_fail_without_projection(NormKind norm, size_t n, size_t d, const GradCheckMethod *methods,
                                                int count)
{
    GradProblem p = grad_problem_random(norm, n, d, 1e-5, 8);
    /* dx = rstd (g - mean(g) - xhat mean(g xhat)) without its last term:
     * subtract back rstd * xhat * mean(g xhat), recomputed here in double
     * (RMSNorm: the same with mean = 0, and no mean(g) term to begin with). */
    for (size_t row = 0; row < n; row++) {
        double mean = 0, var = 0, g_xhat = 0;
        for (size_t j = 0; j < d && norm == NORM_LAYER; j++)
            mean += p.x[row * d + j] / (double)d;
        for (size_t j = 0; j < d; j++)
            var += (p.x[row * d + j] - mean) * (p.x[row * d + j] - mean) / (double)d;
        double rstd = 1.0 / sqrt(var + p.eps);
        for (size_t j = 0; j < d; j++)
            g_xhat += p.gamma[j] * p.w[row * d + j] * (p.x[row * d + j] - mean) * rstd / (double)d;
        for (size_t j = 0; j < d; j++)
            p.grad[TENSOR_X][row * d + j] += rstd * (p.x[row * d + j] - mean) * rstd * g_xhat;
    }
    for (int m = 0; m < count; m++) {
        GradCheckResult r = grad_check(&p, methods[m], TENSOR_X, 4, 9);
        EXPECT(!r.report.ok, "%s norm: %s notices the missing projection onto xhat", norm_kind_name(norm),
               grad_check_method_name(methods[m]));
    }
    grad_problem_free(&p);
}

/* The catch probability the chapter prints is what the check does. One
 * element of dx is moved by `relative` times a typical element's size,
 * |gradient| / sqrt(N), with `relative` chosen (by bisection) where the
 * prediction for one direction is 1/2; 400 single directions then catch it
 * at a rate within 4 binomial standard deviations (0.1) of 1/2. */
static void test_catch_probability_matches_the_check(void)
{
    const size_t n = 64, d = 256, length = n * d;
    const int trials = 400;
    double low = 1e-8, high = 1e-2;
    for (int step = 0; step < 100; step++) {
        double mid = sqrt(low * high);
        if (grad_check_catch_probability(CHECK_DIRECTIONAL, length, mid, 1) < 0.5)
            low = mid;
        else
            high = mid;
    }
    double relative = sqrt(low * high),
           predicted = grad_check_catch_probability(CHECK_DIRECTIONAL, length, relative, 1);
    GradProblem p = grad_problem_random(NORM_LAYER, n, d, 1e-5, 8);
    double norm = 0.0;
    for (size_t i = 0; i < length; i++)
        norm += p.grad[TENSOR_X][i] * p.grad[TENSOR_X][i];
    p.grad[TENSOR_X][length / 2] += relative * sqrt(norm / (double)length);
    int caught = 0;
    for (int trial = 0; trial < trials; trial++)
        caught += !grad_check(&p, CHECK_DIRECTIONAL, TENSOR_X, 1, (uint64_t)trial + 100).report.ok;
    double rate = (double)caught / trials;
    EXPECT(fabs(rate - predicted) <= 0.1,
           "one element off by %.3g: caught by %d of %d directions (%.3f), predicted %.3f", relative, caught, trials,
           rate, predicted);
    /* And the prediction itself: more directions catch more, a larger error is caught more often. */
    EXPECT(grad_check_catch_probability(CHECK_DIRECTIONAL, length, relative, 4) > predicted &&
               grad_check_catch_probability(CHECK_DIRECTIONAL, length, 2 * relative, 1) > predicted,
           "the catch probability grows with the directions and the error");
    grad_problem_free(&p);
}

int main(void)
{
    test_catch_probability_matches_the_check();
    const GradCheckMethod elementwise[] = {CHECK_NODE_BY_NODE, CHECK_CENTRAL_EVERY_ELEMENT,
                                           CHECK_COMPLEX_EVERY_ELEMENT};
    const GradCheckMethod directional[] = {CHECK_DIRECTIONAL, CHECK_COMPLEX_DIRECTIONAL};
    /* Small shapes, every element; d = 1 and 2 are the degenerate rows. */
    const size_t small[][2] = {
        {3, 5 },
        {8, 64},
        {4, 1 },
        {5, 2 }
    };
    const NormKind norms[] = {NORM_LAYER, NORM_RMS};
    for (int k = 0; k < 2; k++) {
        for (size_t s = 0; s < sizeof small / sizeof small[0]; s++)
            test_checks_pass(norms[k], small[s][0], small[s][1], elementwise, 3);
        /* The transformer-sized batch: B x T x D = 4 x 512 x 1024. */
        test_checks_pass(norms[k], 4 * 512, 1024, directional, 2);
        test_checks_fail_on_wrong_gradients(norms[k], 8, 64, elementwise + 1, 2);
        test_checks_fail_on_wrong_gradients(norms[k], 64, 256, directional, 2);
        test_checks_fail_without_projection(norms[k], 8, 64, elementwise + 1, 2);
        test_checks_fail_without_projection(norms[k], 64, 256, directional, 2);
    }
    return test_finish();
}
