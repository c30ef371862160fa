#include "chapters/02-layernorm/gradcheck.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "chapters/01-cancellation/derivative.h"
#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/rng.h"

static size_t tensor_length(const GradProblem *p, GradTensor tensor)
{
    return tensor == TENSOR_X ? p->n * p->d : p->d;
}

static const double *tensor_values(const GradProblem *p, GradTensor tensor)
{
    const double *values[TENSOR_COUNT] = {p->x, p->gamma, p->beta};
    return values[tensor];
}

int grad_tensor_count(NormKind norm)
{
    return norm == NORM_RMS ? TENSOR_BETA : TENSOR_COUNT;
}

/* The forward pass of p's norm in double; mean is left alone by RMSNorm. */
static void norm_forward_f64(const GradProblem *p, double *y, double *mean, double *rstd, const double *x,
                             const double *gamma, const double *beta)
{
    if (p->norm == NORM_RMS)
        rmsnorm_forward_f64(y, rstd, x, gamma, p->n, p->d, p->eps);
    else
        layernorm_forward_f64(y, mean, rstd, x, gamma, beta, p->n, p->d, p->eps);
}

GradProblem grad_problem_random(NormKind norm, size_t n, size_t d, double eps, uint64_t seed)
{
    GradProblem p = {.norm = norm, .n = n, .d = d, .eps = eps};
    p.x = ALLOC_ARRAY(n * d, double);
    p.w = ALLOC_ARRAY(n * d, double);
    p.gamma = ALLOC_ARRAY(d, double);
    if (norm == NORM_LAYER)
        p.beta = ALLOC_ARRAY(d, double);
    for (int t = 0; t < grad_tensor_count(norm); t++)
        p.grad[t] = ALLOC_ARRAY(tensor_length(&p, (GradTensor)t), double);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f64(&rng, p.x, n * d, 0.0, 1.0);
    rng_fill_normal_f64(&rng, p.gamma, d, 1.0, 0.1);
    if (norm == NORM_LAYER)
        rng_fill_normal_f64(&rng, p.beta, d, 0.0, 0.1);
    rng_fill_normal_f64(&rng, p.w, n * d, 0.0, 1.0);
    double *y = ALLOC_ARRAY(n * d, double), *mean = ALLOC_ARRAY(n, double), *rstd = ALLOC_ARRAY(n, double);
    norm_forward_f64(&p, y, mean, rstd, p.x, p.gamma, p.beta);
    if (norm == NORM_RMS)
        rmsnorm_backward_f64(p.grad[TENSOR_X], p.grad[TENSOR_GAMMA], p.w, p.x, rstd, p.gamma, n, d);
    else
        layernorm_backward_f64(p.grad[TENSOR_X], p.grad[TENSOR_GAMMA], p.grad[TENSOR_BETA], p.w, p.x, mean, rstd,
                               p.gamma, n, d);
    array_free(y);
    array_free(mean);
    array_free(rstd);
    return p;
}

void grad_problem_free(GradProblem *p)
{
    double *arrays[] = {p->x, p->w, p->gamma, p->beta, p->grad[TENSOR_X], p->grad[TENSOR_GAMMA], p->grad[TENSOR_BETA]};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    *p = (GradProblem){0};
}

static double dot(const double *a, const double *b, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

/* The loss as a function of one real number t: one element of a tensor
 * set to t, or the whole tensor moved by t along a direction. */
typedef struct {
    const GradProblem *p;
    GradTensor tensor;
    const double *direction; /* NULL: move only `element` */
    size_t element;
    double *moved;           /* the tensor after the move */
    double *y, *mean, *rstd; /* forward-pass scratch */
} RealLoss;

// ANCHOR: move_along_a_line
static double loss_along(double t, const void *context)
{
    const RealLoss *c = context;
    const GradProblem *p = c->p;
    const double *base = tensor_values(p, c->tensor);
    size_t length = tensor_length(p, c->tensor);
    if (c->direction != NULL) {
        for (size_t i = 0; i < length; i++)
            c->moved[i] = base[i] + t * c->direction[i];
    } else {
        memcpy(c->moved, base, length * sizeof *base);
        c->moved[c->element] = t;
    }
    const double *x = c->tensor == TENSOR_X ? c->moved : p->x;
    const double *gamma = c->tensor == TENSOR_GAMMA ? c->moved : p->gamma;
    const double *beta = c->tensor == TENSOR_BETA ? c->moved : p->beta;
    norm_forward_f64(p, c->y, c->mean, c->rstd, x, gamma, beta);
    return dot(p->w, c->y, p->n * p->d);
}
// ANCHOR_END: move_along_a_line

// ANCHOR: normalize_in_complex_arithmetic
/* The reference forward pass again, in complex arithmetic, summed into the
 * loss. Everything in it is analytic (no fabs, no comparisons of values),
 * which the complex step needs: sqrt's branch cut is on the negative real
 * axis, far from var + eps > 0. RMSNorm is the same without the centring
 * (beta NULL: no shift either). */
static double complex loss_complex(NormKind norm, const double complex *x, const double complex *gamma,
                                   const double complex *beta, const double *w, size_t n, size_t d, double eps)
{
    double complex loss = 0.0;
    for (size_t row = 0; row < n; row++) {
        const double complex *xr = x + row * d;
        double complex mean = 0.0, sum_sq = 0.0;
        if (norm == NORM_LAYER) {
            for (size_t j = 0; j < d; j++)
                mean += xr[j];
            mean /= (double)d;
        }
        for (size_t j = 0; j < d; j++)
            sum_sq += (xr[j] - mean) * (xr[j] - mean);
        double complex rstd = 1.0 / csqrt(sum_sq / (double)d + eps);
        for (size_t j = 0; j < d; j++)
            loss += w[row * d + j] * (gamma[j] * ((xr[j] - mean) * rstd) + (beta != NULL ? beta[j] : 0.0));
    }
    return loss;
}
// ANCHOR_END: normalize_in_complex_arithmetic

typedef struct {
    const GradProblem *p;
    GradTensor tensor;
    const double *direction;
    size_t element;
    double complex *values[TENSOR_COUNT]; /* complex copies of x, gamma, beta; one of them is moved */
} ComplexLoss;

static double complex complex_loss_along(double complex z, const void *context)
{
    const ComplexLoss *c = context;
    const double *base = tensor_values(c->p, c->tensor);
    double complex *moved = c->values[c->tensor];
    size_t length = tensor_length(c->p, c->tensor);
    for (size_t i = 0; i < length; i++)
        moved[i] = c->direction != NULL ? base[i] + z * c->direction[i] : base[i];
    if (c->direction == NULL)
        moved[c->element] = z;
    return loss_complex(c->p->norm, c->values[TENSOR_X], c->values[TENSOR_GAMMA], c->values[TENSOR_BETA], c->p->w,
                        c->p->n, c->p->d, c->p->eps);
}

// ANCHOR: set_gradient_check_tolerances
/* got = the analytic gradient, ref = the numerical one. */
typedef struct {
    double atol, rtol;
} Tolerance;

static const Tolerance check_tolerance[] = {
  /* Two exact formulas, both in double: they differ by rounding only,
     * a few ulps of the largest intermediate (|g| * rstd ~ 1). */
    [CHECK_NODE_BY_NODE] = {1e-13, 1e-12},
 /* Truncation h^2 |L'''| / 6 plus rounding DBL_EPSILON |L| / h, with
     * h = cbrt(DBL_EPSILON) ~ 6e-6: both ~1e-10 at unit scale. */
    [CHECK_CENTRAL_EVERY_ELEMENT] = {1e-8,  1e-6 },
 /* The same two errors, with L a sum over n*d terms: ~1e-9 relative
     * at 2 million elements. atol is scaled by |gradient| below. */
    [CHECK_DIRECTIONAL] = {1e-7,  1e-7 },
 /* No subtraction, hence no cancellation: what is left is the rounding
     * of the loss and of <gradient, v>, a few ulps times the terms. */
    [CHECK_COMPLEX_EVERY_ELEMENT] = {1e-13, 1e-11},
    [CHECK_COMPLEX_DIRECTIONAL] = {1e-13, 1e-11},
};
// ANCHOR_END: set_gradient_check_tolerances

bool grad_check_is_directional(GradCheckMethod method)
{
    return method == CHECK_DIRECTIONAL || method == CHECK_COMPLEX_DIRECTIONAL;
}

static bool is_complex(GradCheckMethod method)
{
    return method == CHECK_COMPLEX_EVERY_ELEMENT || method == CHECK_COMPLEX_DIRECTIONAL;
}

/* The numerical derivative of the loss along `direction`, or by one
 * element, at the current point. */
typedef struct {
    RealLoss real_loss;
    ComplexLoss complex_loss;
} LossContexts;

static LossContexts loss_contexts_new(const GradProblem *p, GradTensor tensor)
{
    size_t length = tensor_length(p, tensor);
    LossContexts c = {
        .real_loss = {.p = p, .tensor = tensor},
          .complex_loss = {.p = p, .tensor = tensor}
    };
    c.real_loss.moved = ALLOC_ARRAY(length, double);
    c.real_loss.y = ALLOC_ARRAY(p->n * p->d, double);
    c.real_loss.mean = ALLOC_ARRAY(p->n, double);
    c.real_loss.rstd = ALLOC_ARRAY(p->n, double);
    for (int t = 0; t < grad_tensor_count(p->norm); t++) {
        size_t count = tensor_length(p, (GradTensor)t);
        const double *values = tensor_values(p, (GradTensor)t);
        c.complex_loss.values[t] = ALLOC_ARRAY(count, double complex);
        for (size_t i = 0; i < count; i++)
            c.complex_loss.values[t][i] = values[i];
    }
    return c;
}

static void loss_contexts_free(LossContexts *c)
{
    array_free(c->real_loss.moved);
    array_free(c->real_loss.y);
    array_free(c->real_loss.mean);
    array_free(c->real_loss.rstd);
    for (int t = 0; t < TENSOR_COUNT; t++)
        array_free(c->complex_loss.values[t]);
}

// ANCHOR: differentiate_numerically
/* d/dt of the loss at t = start, where t is one element's value (start is
 * that value) or the distance moved along a direction (start = 0). */
static double numerical_derivative(LossContexts *c, GradCheckMethod method, double start)
{
    if (is_complex(method))
        return complex_step_derivative(complex_loss_along, &c->complex_loss, start, COMPLEX_STEP);
    /* The step that balances truncation (~h^2) against rounding (~1/h). */
    double h = cbrt(DBL_EPSILON) * fmax(1.0, fabs(start));
    return central_difference(loss_along, &c->real_loss, start, h);
}
// ANCHOR_END: differentiate_numerically

static void set_direction(LossContexts *c, const double *direction, size_t element)
{
    c->real_loss.direction = c->complex_loss.direction = direction;
    c->real_loss.element = c->complex_loss.element = element;
}

static CloseReport check_every_element(const GradProblem *p, GradCheckMethod method, GradTensor tensor,
                                       size_t *evaluations)
{
    size_t length = tensor_length(p, tensor);
    const double *values = tensor_values(p, tensor);
    double *numerical = ALLOC_ARRAY(length, double);
    LossContexts c = loss_contexts_new(p, tensor);
    for (size_t k = 0; k < length; k++) {
        set_direction(&c, NULL, k);
        numerical[k] = numerical_derivative(&c, method, values[k]);
    }
    loss_contexts_free(&c);
    *evaluations = (is_complex(method) ? 1 : 2) * length;
    Tolerance tol = check_tolerance[method];
    CloseReport report = check_close_f64(p->grad[tensor], numerical, length, tol.atol, tol.rtol);
    array_free(numerical);
    return report;
}

// ANCHOR: check_along_random_directions
static CloseReport check_directions(const GradProblem *p, GradCheckMethod method, GradTensor tensor, int directions,
                                    uint64_t seed, size_t *evaluations)
{
    size_t length = tensor_length(p, tensor);
    double *direction = ALLOC_ARRAY(length, double);
    double *analytic = ALLOC_ARRAY((size_t)directions, double);
    double *numerical = ALLOC_ARRAY((size_t)directions, double);
    LossContexts c = loss_contexts_new(p, tensor);
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < directions; i++) {
        rng_fill_normal_f64(&rng, direction, length, 0.0, 1.0);
        set_direction(&c, direction, 0);
        analytic[i] = dot(p->grad[tensor], direction, length);
        numerical[i] = numerical_derivative(&c, method, 0.0);
    }
    loss_contexts_free(&c);
    *evaluations = (size_t)directions * (is_complex(method) ? 1 : 2);
    /* <gradient, v> with v ~ N(0, 1) is of the size of |gradient|: errors
     * are measured against that, not against a value that may be near 0 by chance. */
    double scale = sqrt(dot(p->grad[tensor], p->grad[tensor], length));
    Tolerance tol = check_tolerance[method];
    CloseReport report =
        check_close_f64(analytic, numerical, (size_t)directions, tol.atol * fmax(1.0, scale), tol.rtol);
    array_free(direction);
    array_free(analytic);
    array_free(numerical);
    return report;
}
// ANCHOR_END: check_along_random_directions

// ANCHOR: predict_what_a_direction_catches
/* An error e in the analytic gradient moves <gradient, v> by <e, v>, for
 * v ~ N(0, I) a normal number Z1 |e|. The check fails when that passes its
 * tolerance, atol |gradient| + rtol |<gradient, v>| = |gradient| (atol +
 * rtol |Z2|), with |gradient| >= 1 at the chapter's sizes and Z2 another
 * normal number, independent of Z1 when e is one element of many. An
 * element off by `relative` times a typical element's size, |gradient| /
 * sqrt(N), has |e| = relative |gradient| / sqrt(N), and is caught along one
 * direction when |Z1| > sqrt(N) (atol + rtol |Z2|) / relative: with
 * probability the mean over Z2 of erfc(sqrt(N) (atol + rtol |Z2|) /
 * (relative sqrt 2)), and by `directions` independent directions with
 * 1 - (1 - P)^directions. The numerical derivative's own error, a few
 * percent of the tolerance, is left out. */
double grad_check_catch_probability(GradCheckMethod method, size_t length, double relative, int directions)
{
    Tolerance tol = check_tolerance[method];
    double scale = sqrt((double)length) / (relative * sqrt(2.0)), per_direction = 0.0;
    /* The mean over |Z2|, whose density is 2 phi(z) on z >= 0: the
     * midpoint rule on [0, 10] (the density beyond is below 1e-21). */
    const int steps = 4000;
    const double width = 10.0 / steps;
    for (int i = 0; i < steps; i++) {
        double z = (i + 0.5) * width, density = sqrt(2.0 / acos(-1.0)) * exp(-0.5 * z * z);
        per_direction += density * erfc(scale * (tol.atol + tol.rtol * z)) * width;
    }
    return 1.0 - pow(1.0 - per_direction, directions);
}
// ANCHOR_END: predict_what_a_direction_catches

static CloseReport check_node_by_node(const GradProblem *p, GradTensor tensor)
{
    double *unfused[TENSOR_COUNT];
    for (int t = 0; t < TENSOR_COUNT; t++)
        unfused[t] = ALLOC_ARRAY(tensor_length(p, (GradTensor)t), double);
    if (p->norm == NORM_RMS)
        rmsnorm_backward_unfused_f64(unfused[TENSOR_X], unfused[TENSOR_GAMMA], p->w, p->x, p->gamma, p->n, p->d,
                                     p->eps);
    else
        layernorm_backward_unfused_f64(unfused[TENSOR_X], unfused[TENSOR_GAMMA], unfused[TENSOR_BETA], p->w, p->x,
                                       p->gamma, p->n, p->d, p->eps);
    Tolerance tol = check_tolerance[CHECK_NODE_BY_NODE];
    CloseReport report =
        check_close_f64(p->grad[tensor], unfused[tensor], tensor_length(p, tensor), tol.atol, tol.rtol);
    for (int t = 0; t < TENSOR_COUNT; t++)
        array_free(unfused[t]);
    return report;
}

GradCheckResult grad_check(const GradProblem *p, GradCheckMethod method, GradTensor tensor, int directions,
                           uint64_t seed)
{
    GradCheckResult result = {.method = method, .tensor = tensor};
    double start = clock_seconds();
    if (method == CHECK_NODE_BY_NODE)
        result.report = check_node_by_node(p, tensor);
    else if (grad_check_is_directional(method))
        result.report = check_directions(p, method, tensor, directions, seed, &result.evaluations);
    else
        result.report = check_every_element(p, method, tensor, &result.evaluations);
    result.seconds = clock_seconds() - start;
    return result;
}

// ANCHOR: plan_the_gradient_checks
/* Which check runs on which shape: every element on small shapes, random
 * directions on a transformer-sized batch (B x T x D = 4 x 512 x 1024). */
typedef struct {
    GradCheckMethod method;
    size_t n, d;
} GradCheckPlan;

static const GradCheckPlan gradcheck_plan[] = {
    {CHECK_NODE_BY_NODE,          4 * 512, 1024},
    {CHECK_CENTRAL_EVERY_ELEMENT, 3,       5   },
    {CHECK_CENTRAL_EVERY_ELEMENT, 8,       64  },
    {CHECK_COMPLEX_EVERY_ELEMENT, 8,       64  },
    {CHECK_DIRECTIONAL,           4 * 512, 1024},
    {CHECK_COMPLEX_DIRECTIONAL,   4 * 512, 1024},
};
enum { GRADCHECK_DIRECTIONS = 4 };
// ANCHOR_END: plan_the_gradient_checks

bool grad_check_plan_run(NormKind norm, uint64_t seed, GradCheckReport *report, void *context)
{
    bool ok = true;
    for (size_t i = 0; i < sizeof gradcheck_plan / sizeof gradcheck_plan[0]; i++) {
        const GradCheckPlan *plan = &gradcheck_plan[i];
        GradProblem p = grad_problem_random(norm, plan->n, plan->d, 1e-5, seed);
        for (int t = 0; t < grad_tensor_count(norm); t++) {
            GradCheckResult r = grad_check(&p, plan->method, (GradTensor)t, GRADCHECK_DIRECTIONS, seed);
            ok = ok && r.report.ok;
            report(context, plan->n, plan->d, &r);
        }
        grad_problem_free(&p);
    }
    return ok;
}

const char *grad_check_method_name(GradCheckMethod method)
{
    static const char *const names[] = {
        [CHECK_NODE_BY_NODE] = "node-by-node backward",
        [CHECK_CENTRAL_EVERY_ELEMENT] = "central differences, every element",
        [CHECK_DIRECTIONAL] = "central differences, random directions",
        [CHECK_COMPLEX_EVERY_ELEMENT] = "complex step, every element",
        [CHECK_COMPLEX_DIRECTIONAL] = "complex step, random directions",
    };
    if (method < 0 || (size_t)method >= sizeof names / sizeof names[0])
        return "?";
    return names[method];
}

const char *grad_check_method_kind(GradCheckMethod method)
{
    if (method == CHECK_NODE_BY_NODE)
        return grad_check_method_name(method);
    return is_complex(method) ? "complex step" : "central differences";
}

const char *grad_tensor_name(GradTensor tensor)
{
    static const char *const names[TENSOR_COUNT] = {"dx", "dgamma", "dbeta"};
    if (tensor < 0 || tensor >= TENSOR_COUNT)
        return "?";
    return names[tensor];
}
