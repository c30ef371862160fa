/* Gradient checks of the layer-norm and RMSNorm backward passes, all in
 * double.
 *
 * The scalar being differentiated is the loss L = sum(w * y) with fixed
 * random weights w: its gradient with respect to y is w, so the backward
 * pass run with dy = w must return dL/dx, dL/dgamma and dL/dbeta (RMSNorm
 * has no beta, and its checks stop at dgamma). The
 * checks compare that analytic gradient with numbers taken from L alone:
 *
 *   central differences   (L(p + h) - L(p - h)) / 2h for every element:
 *                         two forward passes per element, small shapes only
 *   directional           the same along random directions v of a whole
 *                         tensor, against <gradient, v>: two forward passes
 *                         per direction, whatever the size
 *   complex step          Im L(p + i h v) / h (chapter 1): no subtraction,
 *                         so no cancellation, accurate to double rounding
 *
 * and the compact backward formula with the node-by-node backward. */
#ifndef CHAPTERS_02_LAYERNORM_GRADCHECK_H
#define CHAPTERS_02_LAYERNORM_GRADCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/02-layernorm/rmsnorm.h"
#include "common/check.h"

typedef enum { TENSOR_X, TENSOR_GAMMA, TENSOR_BETA, TENSOR_COUNT } GradTensor;

typedef struct {
    NormKind norm;
    size_t n, d;
    double eps;
    double *x, *gamma, *beta, *w; /* the point, and the loss weights; beta NULL for RMSNorm */
    double *grad[TENSOR_COUNT];   /* the gradient under test: dx, dgamma, dbeta (NULL for RMSNorm) */
} GradProblem;

/* The tensors that `norm` has a gradient for: x, gamma (and beta). */
int grad_tensor_count(NormKind norm);

/* x ~ N(0, 1), gamma ~ N(1, 0.1^2), beta ~ N(0, 0.1^2), w ~ N(0, 1); the
 * gradient from the compact formula (layernorm_backward_f64 or
 * rmsnorm_backward_f64). */
GradProblem grad_problem_random(NormKind norm, size_t n, size_t d, double eps, uint64_t seed);
void grad_problem_free(GradProblem *p);

typedef enum {
    CHECK_NODE_BY_NODE, /* compact formula vs the unfused node-by-node backward */
    CHECK_CENTRAL_EVERY_ELEMENT,
    CHECK_DIRECTIONAL,
    CHECK_COMPLEX_EVERY_ELEMENT,
    CHECK_COMPLEX_DIRECTIONAL,
} GradCheckMethod;

typedef struct {
    GradCheckMethod method;
    GradTensor tensor;
    CloseReport report; /* got: the analytic gradient (or <gradient, v>); ref: the numerical one */
    size_t evaluations; /* loss evaluations (0 for the node-by-node check) */
    double seconds;
} GradCheckResult;

/* Check one tensor's gradient. `directions` is used by the directional
 * methods (random N(0, 1) directions from `seed`). */
GradCheckResult grad_check(const GradProblem *p, GradCheckMethod method, GradTensor tensor, int directions,
                           uint64_t seed);

/* The chapter's gradient checks of `norm`, each method on the shapes it
 * suits (gradcheck.c), with directions and data from `seed`: every result
 * goes to report(context, n, d, result) as it comes. True when all passed. */
typedef void GradCheckReport(void *context, size_t n, size_t d, const GradCheckResult *result);
bool grad_check_plan_run(NormKind norm, uint64_t seed, GradCheckReport *report, void *context);

/* The probability that `directions` random directions of a directional
 * check catch one element of a gradient of `length` elements off by
 * `relative` times a typical element (|gradient| / sqrt(length)); an upper
 * bound (gradcheck.c says why). */
double grad_check_catch_probability(GradCheckMethod method, size_t length, double relative, int directions);

const char *grad_check_method_name(GradCheckMethod method);
/* The name without "every element" or "random directions": "complex step". */
const char *grad_check_method_kind(GradCheckMethod method);
/* Along random directions, one number per direction (not every element)? */
bool grad_check_is_directional(GradCheckMethod method);
const char *grad_tensor_name(GradTensor tensor);

#endif
