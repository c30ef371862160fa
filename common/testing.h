/* A very small test harness for the programs in tests/.
 *
 * Exit codes follow NVIDIA's cuda-samples: 0 pass, 1 fail, 2 waived. The
 * test runner counts a program as skipped only when it exits 2 AND printed
 * a line starting "skipped:", so a crash that happens to exit 2 is a failure.
 *
 *     EXPECT(report.ok, "dx matches the double reference");
 *     return test_finish();
 */
#ifndef COMMON_TESTING_H
#define COMMON_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define TEST_EXIT_SKIPPED 2

/* Record one check. On failure print "FAIL file:line: condition: message". */
#define EXPECT(condition, ...) test_expect((condition), #condition, __FILE__, __LINE__, __VA_ARGS__)

bool test_expect(bool passed, const char *condition, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Print "N checks, M failed" and return the exit status (0 if none failed, 1
 * otherwise). A test that made no checks at all fails: it proved nothing. */
int test_finish(void);

/* The same float to the bit, or NaN both (whatever their payloads): how
 * results that must be bitwise equal are compared where a NaN is a right
 * answer. */
bool test_same_float(float a, float b);

/* Print "skipped: <reason>" and exit 2. */
COMMON_NORETURN void test_skip(const char *reason);

/* What a child process did: for testing code that must exit, e.g. that bad
 * input ends with exit status 2 and one line on stderr. */
typedef struct {
    int exit_status; /* the status it exited with, or -1 if a signal killed it */
    int signal;      /* the signal that killed it, or 0 */
    char out[4096];  /* the start of its stdout, NUL-terminated */
    char err[4096];  /* the start of its stderr, NUL-terminated */
    int err_lines;   /* newline-terminated lines on its stderr (all of it) */
} ChildResult;

/* Run body(ctx) in a forked child with stdout and stderr captured; a body
 * that returns makes the child exit 0. The child starts with no checks
 * counted, so a body may make its own EXPECTs and end with exit(test_finish()). */
ChildResult test_run_child(void (*body)(void *ctx), void *ctx);

/* What a function prints to a FILE *, kept in memory for a test to read:
 *
 *     CapturedOutput captured;
 *     table_print(table, capture_output(&captured), TABLE_TEXT);
 *     char *text = captured_text(&captured);   (free(text) when done)
 */
typedef struct {
    FILE *stream;
    char *text;
    size_t size;
} CapturedOutput;

/* The stream to print into; if memory for it cannot be had, the test
 * cannot run, and the program exits with status 1. */
FILE *capture_output(CapturedOutput *captured);

/* Close the stream and return what was printed, NUL-terminated. */
char *captured_text(CapturedOutput *captured);

COMMON_END_C

#endif
