/* The accuracy experiment: data with a large offset and a small spread,
 * stored in float or double, the variance computed by each method in that
 * precision, and each result's relative error against the exact variance of
 * the stored data; with the error bound each method's analysis gives. */
#ifndef CHAPTERS_01_CANCELLATION_ACCURACY_H
#define CHAPTERS_01_CANCELLATION_ACCURACY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/01-cancellation/variance.h"

typedef enum { PRECISION_FLOAT, PRECISION_DOUBLE } Precision;

typedef enum {
    METHOD_NAIVE,
    METHOD_TWO_PASS,
    METHOD_WELFORD,
    METHOD_CORRECTED_TWO_PASS,
    METHOD_BLOCKED,
    METHOD_COUNT
} Method;

/* The chapter's accuracy sections (one data set, the offset sweep, the
 * theory figure) compare the first four; the blocked method, the payoff at
 * the end, has a table of its own. */
enum { TEXTBOOK_METHOD_COUNT = METHOD_BLOCKED };

extern const char *const method_names[METHOD_COUNT];
const char *precision_name(Precision precision);

/* u: half the distance from 1 to the next number, 2^-24 or 2^-53. */
double unit_roundoff(Precision precision);

/* The data are offset + z * DATA_SPREAD with z standard normal. */
#define DATA_SPREAD 1.0

/* Distance from offset to the next larger number of the format. */
double format_spacing(Precision precision, double offset);

/* Does rounding offset + N(0, DATA_SPREAD^2) to the format leave a spread to
 * measure? Once the spacing exceeds 2 * DATA_SPREAD the stored values take
 * only a few distinct values, most of them the same: the experiments stop
 * there. */
bool spread_survives_rounding(Precision precision, double offset);

typedef struct {
    size_t n;
    double offset;
    VarianceReference reference;   /* exact statistics of the stored data */
    double variance[METHOD_COUNT]; /* computed in the precision, widened to double */
    double relative_error[METHOD_COUNT];
} AccuracyTrial;

/* n >= 1 values offset + N(0, DATA_SPREAD^2) from the seed, in the precision. */
AccuracyTrial run_accuracy_trial(Precision precision, double offset, size_t n, uint64_t seed);

/* The grid of the theory figure: offsets 10^(step / FIGURE_STEPS_PER_DECADE)
 * for step = 0, 1, ... while the spread survives rounding, FIGURE_SEEDS data
 * sets each (seeds 1, 2, ...). */
#define FIGURE_STEPS_PER_DECADE 4
#define FIGURE_SEEDS 4
double figure_offset(int step);

/* gamma_k = k u / (1 - k u) bounds the relative error of k roundings in a
 * row (Higham, Lemma 3.1); +inf once k u reaches 1. */
double gamma_bound(double k, double u);

/* The computed mean of n values is off by at most gamma_n * mean|x|, and
 * mean|x| <= kappa * sigma: this is that bound in units of sigma. */
double mean_error_bound(size_t n, double kappa, double u);

/* First-order bound on a method's relative error for the trial's data, in
 * the trial's precision (derived in chapter.md). */
double error_bound(Method method, Precision precision, const AccuracyTrial *trial);

#endif
