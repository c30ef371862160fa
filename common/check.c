#include "common/check.h"

#include <math.h>

#include "common/cli.h"

bool is_close(double got, double ref, double atol, double rtol)
{
    /* Written as "within", not "not outside": every comparison with NaN is
     * false, so a NaN fails here instead of slipping through. */
    return isfinite(got) && isfinite(ref) && fabs(got - ref) <= atol + rtol * fabs(ref);
}

/* The share of the allowed error that |got - ref| uses: 1 is the limit. */
static double tolerance_share(double abs_error, double allowed)
{
    if (allowed > 0) {
        return abs_error / allowed;
    }
    /* A zero tolerance asks for exact equality: 0/0 would be NaN. */
    return abs_error == 0 ? 0.0 : INFINITY;
}

/* A float holds nothing beyond its range: where the reference itself
 * rounds to a float infinity, a float result of that infinity is the
 * float's answer (a sum of float terms that overflows), not an error. */
static bool is_float_overflow_of(double got, double ref)
{
    return isinf(got) && isfinite(ref) && (float)ref == got;
}

static void report_add(CloseReport *report, size_t i, double got, bool got_is_f32, double ref)
{
    double share;
    if (got_is_f32 && is_float_overflow_of(got, ref)) {
        share = 0.0;
    } else if (isfinite(got) && isfinite(ref)) {
        double abs_error = fabs(got - ref);
        share = tolerance_share(abs_error, report->atol + report->rtol * fabs(ref));
        report->max_abs_error = fmax(report->max_abs_error, abs_error);
        if (ref != 0) {
            report->max_rel_error = fmax(report->max_rel_error, abs_error / fabs(ref));
        }
    } else {
        report->nonfinite++;
        share = INFINITY;
    }
    /* is_close decides pass or fail, so the verdict is the documented test
     * exactly, whatever rounding the share went through. */
    if (!is_close(got, ref, report->atol, report->rtol) && !(got_is_f32 && is_float_overflow_of(got, ref))) {
        report->failures++;
    }
    /* The first element with the largest share is the worst; `i == 0` makes
     * element 0 the worst until another uses more. */
    if (i == 0 || share > report->tolerance_used) {
        report->tolerance_used = share;
        report->worst_index = i;
        report->worst_got = got;
        report->worst_ref = ref;
    }
}

/* got is float or double; one loop serves both, and a float converts to
 * double exactly. */
static CloseReport check_close(const void *got, bool got_is_f32, const double *ref, size_t n, double atol, double rtol)
{
    CloseReport report = {.count = n, .atol = atol, .rtol = rtol};
    for (size_t i = 0; i < n; i++) {
        double value = got_is_f32 ? ((const float *)got)[i] : ((const double *)got)[i];
        report_add(&report, i, value, got_is_f32, ref[i]);
    }
    report.ok = report.failures == 0;
    return report;
}

CloseReport check_close_f32(const float *got, const double *ref, size_t n, double atol, double rtol)
{
    return check_close(got, true, ref, n, atol, rtol);
}

CloseReport check_close_f64(const double *got, const double *ref, size_t n, double atol, double rtol)
{
    return check_close(got, false, ref, n, atol, rtol);
}

bool close_report_print(FILE *out, const char *what, const CloseReport *report)
{
    if (report->ok) {
        fprintf(out, "ok   %s: %zu values, max abs %.2g, max rel %.2g, %.0f%% of tolerance\n", what, report->count,
                report->max_abs_error, report->max_rel_error, 100.0 * report->tolerance_used);
        return true;
    }
    fprintf(out, "FAIL %s: %zu of %zu values outside atol %g + rtol %g", what, report->failures, report->count,
            report->atol, report->rtol);
    if (report->nonfinite > 0) {
        fprintf(out, " (%zu not finite)", report->nonfinite);
    }
    fprintf(out, "; worst [%zu] got %.9g, ref %.9g\n", report->worst_index, report->worst_got, report->worst_ref);
    return false;
}

size_t mark_nonfinite_rows(const float *x, size_t rows, size_t cols, bool *flagged)
{
    size_t count = 0;
    for (size_t r = 0; r < rows; r++) {
        bool nonfinite = false;
        for (size_t c = 0; c < cols && !nonfinite; c++) {
            nonfinite = !isfinite(x[r * cols + c]);
        }
        count += nonfinite;
        if (flagged != NULL) {
            flagged[r] = flagged[r] || nonfinite;
        }
    }
    return count;
}

size_t count_flagged(const bool *flagged, size_t rows)
{
    size_t count = 0;
    for (size_t r = 0; r < rows; r++) {
        count += flagged[r];
    }
    return count;
}

void note_nonfinite_rows(size_t count, size_t rows, const char *where)
{
    if (count > 0) {
        cli_note("%zu of %zu rows held inf or NaN in %s (the README's \"Non-finite values\" says what they get)", count,
                 rows, where);
    }
}
