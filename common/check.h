/* NaN-safe closeness checks.
 *
 * An element passes when both values are finite and
 *     |got - ref| <= atol + rtol * |ref|.
 * The test is written so that a NaN anywhere fails it: `fabs(a - b) > tol` is
 * false for NaN, which is how checks in well-known kernel repositories let NaN
 * through. Any non-finite value in `got` or in `ref` is a failure, full stop;
 * code that must produce inf or NaN on purpose checks that explicitly.
 *
 * The report says how close the worst element came to the limit
 * (`tolerance_used`: 0.25 means a quarter of the allowed error was used),
 * which tells a reader whether a tolerance is tight or merely generous. */
#ifndef COMMON_CHECK_H
#define COMMON_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef struct {
    size_t count;                /* elements compared */
    size_t failures;             /* elements outside tolerance, non-finite ones included */
    size_t nonfinite;            /* elements where got or ref is inf or NaN */
    size_t worst_index;          /* element that used the largest share of the tolerance */
    double worst_got, worst_ref; /* the values at worst_index */
    double max_abs_error;        /* over finite elements */
    double max_rel_error;        /* |got - ref| / |ref| over finite elements with ref != 0 */
    double tolerance_used;       /* max of |got - ref| / (atol + rtol*|ref|); +inf if any non-finite */
    double atol, rtol;
    bool ok; /* failures == 0 */
} CloseReport;

/* Is one value within tolerance of a reference (and are both finite)? */
bool is_close(double got, double ref, double atol, double rtol);

/* Compare float results with a double reference (the usual case: the CPU
 * reference accumulates in double). A reference beyond float's range, one
 * that rounds to a float infinity, is matched by that infinity. */
CloseReport check_close_f32(const float *got, const double *ref, size_t n, double atol, double rtol);
/* Compare double results with a double reference. */
CloseReport check_close_f64(const double *got, const double *ref, size_t n, double atol, double rtol);

/* One line, e.g.
 *   "ok   dx: 4096 values, max abs 1.2e-07, max rel 3.4e-06, 12% of tolerance"
 *   "FAIL dx: 3 of 4096 values outside atol 1e-06 + rtol 1e-05 (1 not finite); worst [17] got nan, ref 0.5"
 * Returns report->ok. */
bool close_report_print(FILE *out, const char *what, const CloseReport *report);

/* The non-finite policy of every program (README, "Non-finite values"): a
 * row that holds an inf or a NaN gets what IEEE arithmetic gives it, the
 * other rows are unaffected, the outputs are written, the status is 0, and
 * one note on stderr says how many rows held non-finite inputs or outputs. */

/* Set flagged[r] for each row r of x [rows, cols] that holds an inf or a
 * NaN (flags already set stay set; `flagged` may be NULL). Returns how many
 * rows of x hold one. */
size_t mark_nonfinite_rows(const float *x, size_t rows, size_t cols, bool *flagged);

/* How many of `rows` flags are set. */
size_t count_flagged(const bool *flagged, size_t rows);

/* The policy's note, when `count` > 0, e.g.
 *   softmax_topk apply: note: 2 of 5 rows held inf or NaN in the logits or
 *   the probabilities (the README's "Non-finite values" says what they get) */
void note_nonfinite_rows(size_t count, size_t rows, const char *where);

COMMON_END_C

#endif
