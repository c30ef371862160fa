/* The softmax_topk program from the outside: bad input gets one line on
 * stderr and exit status 2; --load / --save round-trips .npy files whose
 * contents match the double reference. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chapters/03-softmax-topk/compare.h"
#include "common/alloc.h"
#include "common/npy.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"

static const char *const PROGRAM = "../../chapters/03-softmax-topk/softmax_topk";

typedef struct {
    const char *argv[16];
} Command;

static void exec_program(void *ctx)
{
    Command *command = ctx;
    execv(PROGRAM, (char *const *)command->argv);
    perror("execv");
    _exit(127);
}

/* Run the program with the arguments (NULL-terminated). */
static ChildResult run(const char *first, ...)
{
    Command command = {
        {PROGRAM, first}
    };
    va_list args;
    va_start(args, first);
    for (int i = 2; i < 15 && (command.argv[i - 1] != NULL); i++) {
        command.argv[i] = va_arg(args, const char *);
    }
    va_end(args);
    return test_run_child(exec_program, &command);
}

/* Exit 2, exactly one line on stderr, naming one of the expected words. */
static void expect_usage_error(ChildResult r, const char *what, const char *words, const char *other_words)
{
    bool named = strstr(r.err, words) != NULL || (other_words != NULL && strstr(r.err, other_words) != NULL);
    EXPECT(r.exit_status == 2 && r.err_lines == 1 && named, "%s: exit %d, %d stderr lines: %s", what, r.exit_status,
           r.err_lines, r.err);
}

static char directory[] = "/tmp/softmax_topk_cli_XXXXXX";

static const char *path_in_directory(const char *name)
{
    static char paths[8][4200];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", directory, name);
    return path;
}

static void save_or_fail(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data)
{
    char err[256];
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

static void test_bad_input(void)
{
    expect_usage_error(run("--bogus", NULL), "unknown flag", "unknown option '--bogus'", NULL);
    expect_usage_error(run("--vocab", "10", "-k", "11", NULL), "K > V", "larger than V = 10", NULL);
    expect_usage_error(run("-k", "0", NULL), "K = 0", "-k expects an integer", NULL);
    expect_usage_error(run("-k", "-3", NULL), "K < 0", "-k expects an integer", NULL);
    expect_usage_error(run("--rows", "abc", NULL), "non-numeric rows", "--rows expects an integer", NULL);
    expect_usage_error(run("-k", "12x", NULL), "trailing junk", "-k expects an integer", NULL);
    expect_usage_error(run("--vocab", NULL), "missing value", "--vocab expects a value", NULL);
    expect_usage_error(run("--kernel", "2", NULL), "--kernel without --gpu", "add --gpu", NULL);
    expect_usage_error(run("--quick", NULL), "--quick alone", "--quick goes with --bench", NULL);
    expect_usage_error(run("--traffic", "--merge-demo", NULL), "two modes", "exclude each other", NULL);
    /* Without CUDA, or without a device, or (on a GPU) K above kernel 2's limit. */
    expect_usage_error(run("--gpu", "--kernel", "2", "-k", "33", NULL), "--gpu K = 33 on kernel 2", "supports K <= 32",
                       "CUDA");
    expect_usage_error(run("--gpu", "--kernel", "6", NULL), "--kernel past the last", "--kernel expects an integer in",
                       NULL);
    expect_usage_error(run("--gpu", "--kernel", "5", "--vocab", "2000", "-k", "1025", NULL),
                       "--gpu K = 1025 on kernel 5", "supports K <= 1024", "CUDA");

    const size_t shape2[2] = {3, 4}, shape1[1] = {12}, shape3[3] = {1, 3, 4};
    double doubles[12] = {0};
    float floats[12] = {0};
    save_or_fail(path_in_directory("f64.npy"), NPY_FLOAT64, 2, shape2, doubles);
    save_or_fail(path_in_directory("rank1.npy"), NPY_FLOAT32, 1, shape1, floats);
    save_or_fail(path_in_directory("rank3.npy"), NPY_FLOAT32, 3, shape3, floats);
    FILE *text = fopen(path_in_directory("text.npy"), "w");
    fputs("not a numpy file\n", text);
    fclose(text);
    expect_usage_error(run("--load", path_in_directory("f64.npy"), NULL), "float64 logits", "expected float32", NULL);
    expect_usage_error(run("--load", path_in_directory("rank1.npy"), NULL), "rank 1", "expected float32", NULL);
    expect_usage_error(run("--load", path_in_directory("rank3.npy"), NULL), "rank 3", "expected float32", NULL);
    expect_usage_error(run("--load", path_in_directory("text.npy"), NULL), "not .npy", "text.npy", NULL);
    expect_usage_error(run("--load", path_in_directory("missing.npy"), NULL), "missing file", "missing.npy", NULL);
    save_or_fail(path_in_directory("small.npy"), NPY_FLOAT32, 2, shape2, floats);
    expect_usage_error(run("--load", path_in_directory("small.npy"), "-k", "5", NULL), "K > V of the file",
                       "larger than V = 4", NULL);
    expect_usage_error(run("--load", path_in_directory("small.npy"), "--vocab", "4", NULL), "--load with --vocab",
                       "come from the file", NULL);
}

static void test_round_trip(void)
{
    enum { ROWS = 5, VOCAB = 1003, K = 7 };
    float *logits = ALLOC_ARRAY(float, ROWS *VOCAB);
    fill_test_logits(logits, ROWS * VOCAB, 3);
    const size_t shape[2] = {ROWS, VOCAB};
    save_or_fail(path_in_directory("logits.npy"), NPY_FLOAT32, 2, shape, logits);
    ChildResult r = run("--load", path_in_directory("logits.npy"), "-k", "7", "--save", path_in_directory("out"), NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "matches the double reference") != NULL, "round trip run: %s%s", r.out,
           r.err);
    const size_t result_shape[2] = {ROWS, K};
    NpyArray probs = npy_load_or_exit(path_in_directory("out/probs.npy"), NPY_FLOAT32, 2, result_shape);
    NpyArray indices = npy_load_or_exit(path_in_directory("out/indices.npy"), NPY_INT64, 2, result_shape);
    EXPECT(
        topk_matches_reference("--save output", logits, ROWS, VOCAB, K, probs.data, indices.data, TOPK_RTOL_TREE_SUM),
        "probs.npy and indices.npy match the reference");
    npy_free(&probs);
    npy_free(&indices);
    array_free(logits);

    r = run("--help", NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "--load") != NULL, "--help exits 0 and lists --load");
    r = run("--rows", "3", "--vocab", "100", "-k", "5", "--version", "1", NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "matches the double reference") != NULL, "naive on random logits: %s",
           r.out);
}

int main(void)
{
    if (mkdtemp(directory) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_bad_input();
    test_round_trip();
    char command[200];
    snprintf(command, sizeof command, "rm -r '%s'", directory);
    if (system(command) != 0) {
        printf("could not remove %s\n", directory);
    }
    return test_finish();
}
