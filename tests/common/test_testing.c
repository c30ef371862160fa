/* The harness itself: a failing check must fail the test, visibly. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/testing.h"

static void one_failing_check(void *ctx)
{
    (void)ctx;
    EXPECT(1 + 1 == 2, "arithmetic");
    EXPECT(1 + 1 == 3, "wrong on purpose: %d", 42);
    exit(test_finish());
}

static void all_checks_pass(void *ctx)
{
    (void)ctx;
    bool returned = EXPECT(true, "fine");
    exit(returned ? test_finish() : 99);
}

static void no_checks(void *ctx)
{
    (void)ctx;
    exit(test_finish());
}

static void skips(void *ctx)
{
    (void)ctx;
    test_skip("no CUDA device");
}

static void two_error_lines(void *ctx)
{
    (void)ctx;
    fprintf(stderr, "first\nsecond\n");
}

static void killed(void *ctx)
{
    (void)ctx;
    abort();
}

int main(void)
{
    ChildResult child = test_run_child(one_failing_check, NULL);
    EXPECT(child.exit_status == 1, "a failed check makes the test exit 1, got %d", child.exit_status);
    EXPECT(strstr(child.out, "FAIL test_testing.c:") == child.out, "the failure names file and line:\n%s", child.out);
    EXPECT(strstr(child.out, ": 1 + 1 == 3: wrong on purpose: 42\n") != NULL,
           "the failure shows the condition and the message:\n%s", child.out);
    EXPECT(strstr(child.out, "arithmetic") == NULL, "passing checks print nothing:\n%s", child.out);
    EXPECT(strstr(child.out, "\n2 checks, 1 failed\n") != NULL, "the count ends the output:\n%s", child.out);

    child = test_run_child(all_checks_pass, NULL);
    EXPECT(child.exit_status == 0 && strcmp(child.out, "1 checks, 0 failed\n") == 0,
           "passing checks exit 0 (EXPECT returns the verdict): status %d, output:\n%s", child.exit_status, child.out);

    child = test_run_child(no_checks, NULL);
    EXPECT(child.exit_status == 1 && strstr(child.out, "0 checks, 0 failed\nFAIL: no checks were made") == child.out,
           "a test without checks fails: status %d, output:\n%s", child.exit_status, child.out);

    child = test_run_child(skips, NULL);
    EXPECT(child.exit_status == 2 && strcmp(child.out, "skipped: no CUDA device\n") == 0,
           "test_skip prints the reason and exits 2: status %d, output:\n%s", child.exit_status, child.out);

    child = test_run_child(two_error_lines, NULL);
    EXPECT(child.exit_status == 0 && child.err_lines == 2 && strcmp(child.err, "first\nsecond\n") == 0,
           "stderr is captured and its lines counted: %d lines:\n%s", child.err_lines, child.err);

    child = test_run_child(killed, NULL);
    EXPECT(child.exit_status == -1 && child.signal == SIGABRT, "a child killed by a signal reports it: %d %d",
           child.exit_status, child.signal);
    return test_finish();
}
