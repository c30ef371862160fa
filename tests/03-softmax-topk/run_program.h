/* The softmax_topk program run from a test, as a reader runs it: with
 * arguments, its standard output on a full disk if asked, and what it
 * printed and returned checked against the README's rules (bad input: one
 * line and exit 2; a failed write: one line and exit 1). */
#ifndef TESTS_03_SOFTMAX_TOPK_RUN_PROGRAM_H
#define TESTS_03_SOFTMAX_TOPK_RUN_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/npy.h"
#include "common/testing.h"

/* At most this many arguments after the program's name; more are dropped. */
enum { MAX_ARGUMENTS = 24 };

/* Run the program with the NULL-terminated arguments, its standard output
 * on a full disk (/dev/full) if asked. */
ChildResult run_arguments(const char *const arguments[], bool stdout_to_full_disk);

/* Run the program with the arguments (NULL-terminated; run(NULL) gives none). */
ChildResult run(const char *first, ...);

/* Exit 2, nothing on stdout, one line on stderr: "softmax_topk COMMAND:
 * error: ..." (command NULL: "softmax_topk: error: ..."), naming one of the
 * expected words (other_words may be NULL). */
void expect_refusal(ChildResult r, const char *command, const char *words, const char *other_words);

/* A write that failed must not claim success: exit 1 and one line on
 * stderr. */
void expect_write_failure(ChildResult r, const char *what);

/* Save an .npy file the test needs, or stop the test. */
void save_or_fail(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data);

#endif
