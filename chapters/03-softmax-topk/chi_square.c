#include "chapters/03-softmax-topk/chi_square.h"

#include <math.h>

/* P(a, x) by its power series, which converges fast for x < a + 1. */
static double lower_gamma_series(double a, double x)
{
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-17; n++) {
        term *= x / (a + n);
        sum += term;
    }
    return sum * exp(-x + a * log(x) - lgamma(a));
}

/* Q(a, x) by its continued fraction (modified Lentz), for x >= a + 1. */
static double upper_gamma_fraction(double a, double x)
{
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        d = fabs(d) < tiny ? tiny : d;
        c = b + an / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1.0 / d;
        double step = d * c;
        h *= step;
        if (fabs(step - 1.0) < 1e-16) {
            break;
        }
    }
    return h * exp(-x + a * log(x) - lgamma(a));
}

double chi_square_survival(double x, int df)
{
    double a = 0.5 * df, half_x = 0.5 * x;
    if (!(x > 0.0)) {
        return x == 0.0 ? 1.0 : NAN;
    }
    return half_x < a + 1.0 ? 1.0 - lower_gamma_series(a, half_x) : upper_gamma_fraction(a, half_x);
}

ChiSquare chi_square_test(const int64_t *observed, const double *expected, int n, int64_t draws)
{
    ChiSquare result = {0.0, -1, NAN};
    double pooled_expected = 0.0, pooled_observed = 0.0;
    for (int i = 0; i < n; i++) {
        double e = expected[i] * (double)draws, o = (double)observed[i];
        if (e < 5.0) {
            pooled_expected += e;
            pooled_observed += o;
            continue;
        }
        result.statistic += (o - e) * (o - e) / e;
        result.df++;
    }
    if (pooled_expected > 0.0 || pooled_observed > 0.0) {
        /* A draw where nothing was expected makes the statistic infinite. */
        double e = pooled_expected;
        result.statistic += (pooled_observed - e) * (pooled_observed - e) / e;
        result.df++;
    }
    result.p_value = result.df > 0 ? chi_square_survival(result.statistic, result.df) : NAN;
    return result;
}
