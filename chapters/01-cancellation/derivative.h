/* Numerical derivatives of a real function of one variable: the central
 * finite difference, which subtracts two nearly equal values and so loses
 * accuracy to cancellation as the step shrinks, and the complex step
 * (Squire & Trapp 1998), which subtracts nothing and is accurate to the
 * working precision for any small step.
 *
 * The complex step needs f written for complex arguments, and analytic:
 * built from +, -, *, /, exp, log, sqrt, sin, ... but not from fabs, fmax or
 * comparisons, which have no complex-analytic extension. Later chapters use
 * it for gradient checks. */
#ifndef CHAPTERS_01_CANCELLATION_DERIVATIVE_H
#define CHAPTERS_01_CANCELLATION_DERIVATIVE_H

#include <complex.h>

typedef double (*RealFunction)(double x, const void *context);
typedef double complex (*ComplexFunction)(double complex z, const void *context);

/* 2^-66, about 1.4e-20: small enough that the truncation error h^2 f'''/6
 * is nothing next to the rounding of f' itself (1e-40 relative when f''' and
 * f' are of a size), large enough that h f' is nowhere near underflow, and a
 * power of two, so that dividing by it is exact. */
#define COMPLEX_STEP 0x1p-66

/* (f(x + h) - f(x - h)) / (2h), dividing by the step actually taken. */
double central_difference(RealFunction f, const void *context, double x, double h);

/* Im f(x + ih) / h. */
double complex_step_derivative(ComplexFunction f, const void *context, double x, double h);

/* Functions with known derivatives, to measure both methods against. The
 * derivative is computed in long double, so that the reference is exact to
 * well below the double rounding of the results it judges. */
typedef struct {
    const char *name;
    double lo, hi; /* the interval the errors are measured on; f' != 0 there */
    RealFunction f;
    ComplexFunction f_complex;
    long double (*derivative)(long double x);
} TestFunction;

/* exp(x) first: the finite-difference experiments use it, because all its
 * derivatives equal f, which makes the error model the same at every x. */
extern const TestFunction test_functions[];
extern const int test_function_count;

typedef enum { CENTRAL_DIFFERENCE, COMPLEX_STEP_DERIVATIVE } DerivativeMethod;

/* The largest relative error of a method with step h over `points` >= 2
 * evenly spaced x in [lo, hi]. Taking the worst of many points turns the
 * round-off, which is noise at any one x, into a smooth envelope that can be
 * compared with its bound. NaN if any derivative came out NaN. */
double worst_relative_error(const TestFunction *function, DerivativeMethod method, double h, int points);

/* The error model of the central difference for exp with unit roundoff u:
 * the relative error at step h, and the step where it is smallest. */
double predicted_error(double h, double u);
double predicted_best_step(double u);

/* The experiments measure the worst error over DERIVATIVE_POINTS points at
 * the steps of a grid, h = 10^(-k / DERIVATIVE_STEPS_PER_DECADE) for
 * k = 0, 1, ..., DERIVATIVE_STEP_COUNT - 1: from 1 down to 1e-16. */
enum {
    DERIVATIVE_POINTS = 101,
    DERIVATIVE_STEPS_PER_DECADE = 8,
    DERIVATIVE_STEP_COUNT = 16 * DERIVATIVE_STEPS_PER_DECADE + 1
};
double derivative_grid_step(int k);

typedef struct {
    double step, error;
} BestStep;

/* The step of the grid with the smallest worst_relative_error over `points`
 * points; of equal ones, the largest. */
BestStep best_grid_step(const TestFunction *function, DerivativeMethod method, int points);

#endif
