/* The numerical failure modes of layer norm, each shown by running it:
 *
 *   zero-variance   a constant row: eps is what keeps rstd finite
 *   huge-mean       a row far from 0: one-pass variance vs two-pass
 *   tiny-eps        a nearly constant row: eps sets the gain on noise
 *   overflow        squares of large values overflow float
 *   rsqrt           how rstd is computed: 1/sqrt vs an approximate rsqrt
 */
#ifndef CHAPTERS_02_LAYERNORM_STABILITY_H
#define CHAPTERS_02_LAYERNORM_STABILITY_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"

/* The names, for --help and error messages: "zero-variance, huge-mean, ..." */
extern const char failure_mode_names[];

/* Print the demonstration `name` as a table; false if there is no such mode. */
bool failure_mode_print(const char *name, FILE *out, TableFormat format);

/* tiny-eps, for the tests: rows 1 + 1e-6 N(0, 1) normalised with eps. */
enum { TINY_EPS_COUNT = 6 };
extern const float TINY_EPS_VALUES[TINY_EPS_COUNT];

typedef struct {
    double rstd_min, rstd_max, max_xhat, max_dx;
    double min_correlation; /* of xhat with the exact row, over the rows */
} TinyEpsRun;

TinyEpsRun tiny_eps_run(float eps);
void tiny_eps_exact_rows(double *exact, size_t count);

/* The correlation that rounding the rows to float leaves, predicted from
 * the spacing of the floats they were rounded to. */
double tiny_eps_predicted_correlation(void);

#endif
