/* Central differences, the complex step, and test functions for both. */
#include "chapters/01-cancellation/derivative.h"

#include <math.h>
#include <stddef.h>

// ANCHOR: step_both_ways_and_subtract
double central_difference(RealFunction f, const void *context, double x, double h)
{
    /* x + h is rounded: divide by the distance actually stepped, which
     * the subtraction below computes exactly (the two points are within
     * a factor 2 of each other), so that only the rounding of f remains. */
    double forward = x + h, backward = x - h;
    double rise = f(forward, context) - f(backward, context);
    return rise / (forward - backward);
}
// ANCHOR_END: step_both_ways_and_subtract

// ANCHOR: step_into_the_complex_plane
double complex_step_derivative(ComplexFunction f, const void *context, double x, double h)
{
    return cimag(f(CMPLX(x, h), context)) / h;
}
// ANCHOR_END: step_into_the_complex_plane

double worst_relative_error(const TestFunction *function, DerivativeMethod method, double h, int points)
{
    double worst = 0.0;
    for (int j = 0; j < points; j++) {
        double x = function->lo + (function->hi - function->lo) * j / (points - 1);
        double estimate = method == CENTRAL_DIFFERENCE ? central_difference(function->f, NULL, x, h)
                                                       : complex_step_derivative(function->f_complex, NULL, x, h);
        long double exact = function->derivative(x);
        double error = (double)fabsl((estimate - exact) / exact);
        if (!(error <= worst)) { /* also takes a NaN, and keeps it */
            worst = error;
        }
    }
    return worst;
}

// ANCHOR: predict_the_best_step
/* For exp, f = f' = f''': the central difference's relative error is
 * at most h^2/6 (truncation) + u/h (the rounding of f, magnified by
 * 1/h), smallest at h = (3u)^(1/3), where it is (3u)^(2/3)/2. */
double predicted_error(double h, double u)
{
    return h * h / 6 + u / h;
}

double predicted_best_step(double u)
{
    return cbrt(3 * u);
}
// ANCHOR_END: predict_the_best_step

double derivative_grid_step(int k)
{
    return pow(10.0, -(double)k / DERIVATIVE_STEPS_PER_DECADE);
}

BestStep best_grid_step(const TestFunction *function, DerivativeMethod method, int points)
{
    BestStep best = {0.0, INFINITY};
    for (int k = 0; k < DERIVATIVE_STEP_COUNT; k++) {
        double error = worst_relative_error(function, method, derivative_grid_step(k), points);
        if (error < best.error) {
            best = (BestStep){derivative_grid_step(k), error};
        }
    }
    return best;
}

/* The real function and its complex extension, from a pair of C library
 * functions (exp and cexp, ...). */
#define LIBRARY_PAIR(name, real_function, complex_function)                     \
    static double name##_real(double x, const void *context)                    \
    {                                                                           \
        (void)context;                                                          \
        return real_function(x);                                                \
    }                                                                           \
    static double complex name##_complex(double complex z, const void *context) \
    {                                                                           \
        (void)context;                                                          \
        return complex_function(z);                                             \
    }

LIBRARY_PAIR(exp, exp, cexp)
LIBRARY_PAIR(sin, sin, csin)
LIBRARY_PAIR(tanh, tanh, ctanh)

static long double exp_derivative(long double x)
{
    return expl(x);
}
static long double sin_derivative(long double x)
{
    return cosl(x);
}
static long double tanh_derivative(long double x)
{
    long double t = tanhl(x);
    return 1.0L - t * t;
}

/* Squire and Trapp's test function, e^x / sqrt(sin^3 x + cos^3 x). */
static double squire_trapp_real(double x, const void *context)
{
    (void)context;
    double s = sin(x), c = cos(x);
    return exp(x) / sqrt(s * s * s + c * c * c);
}
static double complex squire_trapp_complex(double complex z, const void *context)
{
    (void)context;
    double complex s = csin(z), c = ccos(z);
    return cexp(z) / csqrt(s * s * s + c * c * c);
}
/* f' = f (1 - g' / 2g) with g = sin^3 + cos^3, g' = 3 sin cos (sin - cos). */
static long double squire_trapp_derivative(long double x)
{
    long double s = sinl(x), c = cosl(x);
    long double g = s * s * s + c * c * c;
    long double g_prime = 3.0L * s * c * (s - c);
    return expl(x) / sqrtl(g) * (1.0L - g_prime / (2.0L * g));
}

const TestFunction test_functions[] = {
    {"exp(x)",                        0.0, 1.0, exp_real,          exp_complex,          exp_derivative         },
    {"sin(x)",                        0.0, 1.0, sin_real,          sin_complex,          sin_derivative         },
    {"tanh(x)",                       0.0, 1.0, tanh_real,         tanh_complex,         tanh_derivative        },
    {"e^x / sqrt(sin^3 x + cos^3 x)", 1.0, 1.5, squire_trapp_real, squire_trapp_complex, squire_trapp_derivative},
};
const int test_function_count = (int)(sizeof test_functions / sizeof test_functions[0]);
