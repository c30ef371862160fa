/* Pearson's chi-square goodness-of-fit test, for the sampler's tests. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_CHI_SQUARE_H
#define CHAPTERS_03_SOFTMAX_TOPK_CHI_SQUARE_H

#include <stddef.h>
#include <stdint.h>

/* P(X >= x) for X chi-square distributed with df degrees of freedom: the
 * regularized upper incomplete gamma function Q(df/2, x/2). */
double chi_square_survival(double x, int df);

typedef struct {
    double statistic;
    int df;
    double p_value;
} ChiSquare;

/* Observed counts against expected probabilities (summing to 1) over n
 * categories, `draws` in all. Categories expected fewer than 5 times are
 * pooled into one, as the chi-square approximation needs. */
ChiSquare chi_square_test(const int64_t *observed, const double *expected, int n, int64_t draws);

#endif
