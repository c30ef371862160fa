#include "tests/03-softmax-topk/run_program.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const PROGRAM = "../../chapters/03-softmax-topk/softmax_topk";

typedef struct {
    const char *argv[MAX_ARGUMENTS + 2];
    bool stdout_to_full_disk;
} Command;

static void exec_program(void *ctx)
{
    Command *command = ctx;
    if (command->stdout_to_full_disk) {
        int full = open("/dev/full", O_WRONLY);
        if (full < 0 || dup2(full, STDOUT_FILENO) < 0) {
            perror("/dev/full");
            _exit(127);
        }
    }
    execv(PROGRAM, (char *const *)command->argv);
    perror("execv");
    _exit(127);
}

/* Run the program with the NULL-terminated arguments, its standard output
 * on a full disk (/dev/full) if asked. */
ChildResult run_arguments(const char *const arguments[], bool stdout_to_full_disk)
{
    Command command = {{PROGRAM}, stdout_to_full_disk};
    for (int i = 0; i < MAX_ARGUMENTS && arguments[i] != NULL; i++) {
        command.argv[i + 1] = arguments[i];
    }
    return test_run_child(exec_program, &command);
}

/* Run the program with the arguments (NULL-terminated; run(NULL) gives none). */
ChildResult run(const char *first, ...)
{
    const char *arguments[MAX_ARGUMENTS + 1] = {first};
    va_list args;
    va_start(args, first);
    for (int i = 1; i < MAX_ARGUMENTS && arguments[i - 1] != NULL; i++) {
        arguments[i] = va_arg(args, const char *);
    }
    va_end(args);
    return run_arguments(arguments, false);
}

/* Exit 2, nothing on stdout, one line on stderr: "softmax_topk COMMAND:
 * error: ..." (command NULL: "softmax_topk: error: ..."), naming one of the
 * expected words. */
void expect_refusal(ChildResult r, const char *command, const char *words, const char *other_words)
{
    char prefix[64];
    if (command == NULL) {
        snprintf(prefix, sizeof prefix, "softmax_topk: error: ");
    } else {
        snprintf(prefix, sizeof prefix, "softmax_topk %s: error: ", command);
    }
    bool named = strstr(r.err, words) != NULL || (other_words != NULL && strstr(r.err, other_words) != NULL);
    EXPECT(r.exit_status == 2 && r.err_lines == 1 && r.out[0] == '\0' && strncmp(r.err, prefix, strlen(prefix)) == 0 &&
               named,
           "expected '%s... %s': exit %d, %d stderr lines: %s", prefix, words, r.exit_status, r.err_lines, r.err);
}

/* With standard output on a full disk the program must not claim success:
 * exit 1 and one line on stderr. */
void expect_write_failure(ChildResult r, const char *what)
{
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "error: ") != NULL,
           "%s > /dev/full: exit %d, %d stderr lines: %s", what, r.exit_status, r.err_lines, r.err);
}

void save_or_fail(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data)
{
    char err[256];
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}
