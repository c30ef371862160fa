#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/testing.h"

/* The boundary values below are exact in binary (1, 0.25, 0.5, 1.75), so
 * |got - ref| and atol + rtol * |ref| are computed without rounding and the
 * test sits exactly on the limit. */
static const double ATOL = 0.25, RTOL = 0.5;

static void test_is_close_boundary(void)
{
    EXPECT(is_close(1.75, 1.0, ATOL, RTOL), "an error exactly at atol + rtol*|ref| passes");
    EXPECT(is_close(0.25, 1.0, ATOL, RTOL), "the same error below the reference passes");
    EXPECT(!is_close(nextafter(1.75, 2.0), 1.0, ATOL, RTOL), "one ulp beyond the limit fails");
    /* Below the reference the error 1 - got must itself be exact: 0.75 + 2^-53
     * is one ulp above 0.75 (a smaller step would round back to 0.75). */
    EXPECT(!is_close(0.25 - 0x1.0p-53, 1.0, ATOL, RTOL), "one ulp beyond the limit below fails");
    EXPECT(is_close(-1.75, -1.0, ATOL, RTOL), "rtol scales with |ref| for negative references");
    EXPECT(is_close(0.25, 0.0, ATOL, RTOL) && !is_close(0.2500001, 0.0, ATOL, RTOL), "at ref 0 only atol counts");
    EXPECT(is_close(3.0, 3.0, 0.0, 0.0) && !is_close(nextafter(3.0, 4.0), 3.0, 0.0, 0.0),
           "zero tolerance asks for equality");
}

static void test_is_close_nonfinite(void)
{
    const double values[] = {NAN, -NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 4; i++) {
        double v = values[i];
        EXPECT(!is_close(v, 1.0, 1e300, 1e300), "got %g fails against 1 with any tolerance", v);
        EXPECT(!is_close(1.0, v, 1e300, 1e300), "ref %g fails for got 1 with any tolerance", v);
        EXPECT(!is_close(v, v, 1e300, 1e300), "got %g equal to ref %g still fails", v, v);
    }
    /* Finite values whose difference overflows to inf must fail too. */
    EXPECT(!is_close(1e308, -1e308, 1.0, 0.5), "a difference that overflows fails");
}

static void test_report(void)
{
    /* Shares of the tolerance: 0.5, 0, 1 (the limit), 0.25. */
    const double ref[] = {1.0, 2.0, 1.0, 0.0};
    const double got[] = {1.375, 2.0, 1.75, 0.0625};
    CloseReport report = check_close_f64(got, ref, 4, ATOL, RTOL);
    EXPECT(report.ok && report.failures == 0 && report.nonfinite == 0, "all four within tolerance");
    EXPECT(report.count == 4, "count is 4, got %zu", report.count);
    EXPECT(report.tolerance_used == 1.0, "the worst uses all the tolerance, got %g", report.tolerance_used);
    EXPECT(report.worst_index == 2 && report.worst_got == 1.75 && report.worst_ref == 1.0,
           "the worst is element 2, got %zu", report.worst_index);
    EXPECT(report.max_abs_error == 0.75, "max abs error 0.75, got %g", report.max_abs_error);
    /* 0.0625 against ref 0 has no relative error; the largest is 0.75 / 1. */
    EXPECT(report.max_rel_error == 0.75, "max rel error 0.75 (ref 0 left out), got %g", report.max_rel_error);

    const double failing_got[] = {1.0, 2.5, 1.0};
    const double failing_ref[] = {1.0, 1.0, 1.0};
    report = check_close_f64(failing_got, failing_ref, 3, ATOL, RTOL);
    EXPECT(!report.ok && report.failures == 1 && report.worst_index == 1, "one element outside fails the report");
    EXPECT(report.tolerance_used == 2.0, "1.5 against 0.75 allowed uses 200%%, got %g", report.tolerance_used);

    const double exact[] = {5.0, -5.0};
    report = check_close_f64(exact, exact, 2, 0.0, 0.0);
    EXPECT(report.ok && report.tolerance_used == 0.0, "equal values with zero tolerance: 0 used, got %g",
           report.tolerance_used);

    report = check_close_f64(NULL, NULL, 0, ATOL, RTOL);
    EXPECT(report.ok && report.count == 0, "comparing nothing finds no failure");
}

static void test_report_nonfinite(void)
{
    const float got[] = {1.0f, NAN, 2.0f, INFINITY, 3.0f};
    const double ref[] = {1.0, 1.0, NAN, 1.0, -INFINITY};
    CloseReport report = check_close_f32(got, ref, 5, 1e300, 1e300);
    EXPECT(!report.ok, "NaN and inf fail even with a huge tolerance");
    EXPECT(report.failures == 4 && report.nonfinite == 4, "4 failures, all not finite: got %zu and %zu",
           report.failures, report.nonfinite);
    EXPECT(isinf(report.tolerance_used), "tolerance_used is inf, got %g", report.tolerance_used);
    EXPECT(report.worst_index == 1 && isnan(report.worst_got), "the first non-finite is the worst, got [%zu]",
           report.worst_index);
    EXPECT(report.max_abs_error == 0.0, "errors are taken over finite elements only, got %g", report.max_abs_error);

    const double nan_ref[] = {NAN};
    const double one[] = {1.0};
    EXPECT(!check_close_f64(one, nan_ref, 1, 1.0, 1.0).ok, "a NaN reference fails");
    EXPECT(!check_close_f64(nan_ref, one, 1, 1.0, 1.0).ok, "a NaN result fails");
}

/* A reference beyond float's range (4e38, -1e39) is matched by the float
 * infinity of its sign, and by nothing else; one within it (3e38) is not. */
static void test_float_overflow(void)
{
    const float got[] = {INFINITY, -INFINITY, INFINITY, -INFINITY, INFINITY};
    const double ref[] = {4e38, -1e39, 3e38, 4e38, NAN};
    CloseReport report = check_close_f32(got, ref, 5, 1e-6, 1e-5);
    EXPECT(report.failures == 3, "only 3e38, a sign mismatch and a NaN reference fail: %zu failures", report.failures);
    EXPECT(check_close_f32(got, ref, 2, 1e-6, 1e-5).ok, "inf for 4e38 and -inf for -1e39 pass");
    const double finite_ref[] = {1.0};
    EXPECT(!check_close_f64((const double[]){INFINITY}, (const double[]){4e38}, 1, 1e-6, 1e-5).ok &&
               !check_close_f32(got, finite_ref, 1, 1e-6, 1e-5).ok,
           "a double result of inf, or inf for 1, fails");
}

/* What close_report_print writes, as a string the caller frees. */
static char *printed(const char *what, const CloseReport *report, bool *returned)
{
    CapturedOutput captured;
    *returned = close_report_print(capture_output(&captured), what, report);
    return captured_text(&captured);
}

static void test_print(void)
{
    const float got[] = {1.0f, 2.0f, 3.5f};
    const double ref[] = {1.0, 2.0, 4.0};
    bool returned;
    CloseReport report = check_close_f32(got, ref, 3, 0.5, 0.25);
    char *text = printed("dx", &report, &returned);
    const char *expected = "ok   dx: 3 values, max abs 0.5, max rel 0.12, 33% of tolerance\n";
    EXPECT(returned && strcmp(text, expected) == 0, "ok line:\n  got      %s  expected %s", text, expected);
    free(text);

    const float bad[] = {1.0f, NAN, 2.0f, 9.0f};
    const double bad_ref[] = {1.0, 0.5, 2.0, 4.0};
    report = check_close_f32(bad, bad_ref, 4, 1e-06, 1e-05);
    text = printed("y", &report, &returned);
    expected = "FAIL y: 2 of 4 values outside atol 1e-06 + rtol 1e-05 (1 not finite); worst [1] got nan, ref 0.5\n";
    EXPECT(!returned && strcmp(text, expected) == 0, "FAIL line:\n  got      %s  expected %s", text, expected);
    free(text);
}

/* The non-finite policy's helpers: which rows hold an inf or a NaN, and the
 * one note line (none when no row does). */
static void test_nonfinite_rows(void)
{
    const float x[] = {1, 2, 3, /* */ NAN, 0, 0, /* */ 0, 0, 0, /* */ 0, -INFINITY, 0};
    bool flagged[4] = {false, false, true, false};
    size_t count = mark_nonfinite_rows(x, 4, 3, flagged);
    EXPECT(count == 2 && !flagged[0] && flagged[1] && flagged[2] && flagged[3],
           "rows 1 and 3 hold a non-finite value (row 2 was flagged before): count %zu, flags %d%d%d%d", count,
           flagged[0], flagged[1], flagged[2], flagged[3]);
    EXPECT(count_flagged(flagged, 4) == 3, "three rows flagged: %zu", count_flagged(flagged, 4));
    EXPECT(mark_nonfinite_rows(x, 1, 3, NULL) == 0, "a finite row, no flags to set");
}

static void note_in_child(void *ctx)
{
    note_nonfinite_rows(*(const size_t *)ctx, 5, "x");
}

static void test_nonfinite_note(void)
{
    size_t two = 2, none = 0;
    ChildResult child = test_run_child(note_in_child, &two);
    EXPECT(child.exit_status == 0 && child.err_lines == 1 &&
               strstr(child.err, ": note: 2 of 5 rows held inf or NaN in x") != NULL,
           "one note line: status %d, stderr:\n%s", child.exit_status, child.err);
    child = test_run_child(note_in_child, &none);
    EXPECT(child.exit_status == 0 && child.err[0] == '\0', "no note when no row is flagged: %s", child.err);
}

int main(void)
{
    test_is_close_boundary();
    test_is_close_nonfinite();
    test_report();
    test_report_nonfinite();
    test_float_overflow();
    test_print();
    test_nonfinite_rows();
    test_nonfinite_note();
    return test_finish();
}
