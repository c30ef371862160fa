#include "common/testing.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks_made;
static int checks_failed;

bool test_expect(bool passed, const char *condition, const char *file, int line, const char *fmt, ...)
{
    checks_made++;
    if (!passed) {
        checks_failed++;
        printf("FAIL %s:%d: %s: ", file, line, condition);
        va_list args;
        va_start(args, fmt);
        vprintf(fmt, args);
        va_end(args);
        printf("\n");
        /* Flushed at once, so the line sits in the log next to what the
         * program wrote to stderr around it, and a child forked later does
         * not inherit (and print again) an unflushed copy. */
        fflush(stdout);
    }
    return passed;
}

bool test_same_float(float a, float b)
{
    if (isnan(a))
        return isnan(b) != 0;
    uint32_t a_bits, b_bits;
    memcpy(&a_bits, &a, sizeof a_bits);
    memcpy(&b_bits, &b, sizeof b_bits);
    return a_bits == b_bits;
}

int test_finish(void)
{
    printf("%d checks, %d failed\n", checks_made, checks_failed);
    if (checks_made == 0) {
        printf("FAIL: no checks were made, so this test proved nothing\n");
    }
    fflush(stdout);
    return checks_made > 0 && checks_failed == 0 ? 0 : 1;
}

_Noreturn void test_skip(const char *reason)
{
    printf("skipped: %s\n", reason);
    fflush(stdout);
    exit(TEST_EXIT_SKIPPED);
}

/* Copy the start of a capture file into `text` and count its lines. */
static int read_capture(FILE *capture, char *text, size_t size)
{
    rewind(capture);
    size_t length = fread(text, 1, size - 1, capture);
    text[length] = '\0';
    rewind(capture);
    int lines = 0;
    for (int c; (c = fgetc(capture)) != EOF;) {
        lines += c == '\n';
    }
    return lines;
}

ChildResult test_run_child(void (*body)(void *ctx), void *ctx)
{
    ChildResult result = {0};
    /* Temporary files rather than pipes: the child can write any amount
     * without waiting for the parent to read it. */
    FILE *out = tmpfile();
    FILE *err = tmpfile();
    if (out == NULL || err == NULL) {
        perror("test_run_child: tmpfile");
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("test_run_child: fork");
        exit(1);
    }
    if (pid == 0) {
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        checks_made = 0;
        checks_failed = 0;
        body(ctx);
        exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) {
        perror("test_run_child: waitpid");
        exit(1);
    }
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    read_capture(out, result.out, sizeof result.out);
    result.err_lines = read_capture(err, result.err, sizeof result.err);
    fclose(out);
    fclose(err);
    return result;
}

FILE *capture_output(CapturedOutput *captured)
{
    captured->text = NULL;
    captured->size = 0;
    captured->stream = open_memstream(&captured->text, &captured->size);
    if (captured->stream == NULL) {
        perror("open_memstream");
        exit(1);
    }
    return captured->stream;
}

char *captured_text(CapturedOutput *captured)
{
    if (fclose(captured->stream) != 0) {
        perror("captured output");
        exit(1);
    }
    return captured->text;
}
