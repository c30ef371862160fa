/* The softmax_topk program from the outside: --help lists the subcommands
 * and each lists its options; an option of another subcommand, like any
 * bad input, gets one line on stderr naming the subcommand, and exit
 * status 2; a failed write of standard output is exit status 1; apply
 * round-trips .npy files whose contents match the double reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "common/alloc.h"
#include "common/npy.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"
#include "tests/03-softmax-topk/run_program.h"
#include "tests/scratch_directory.h"

static const char *const COMMANDS[] = {"run",
                                       "apply",
                                       "sample",
                                       "hard-inputs",
                                       "traffic",
                                       "accuracy",
                                       "bench",
                                       "merge-demo",
                                       "admissions-data",
                                       "gpu-run",
                                       "gpu-apply",
                                       "gpu-sample",
                                       "gpu-check",
                                       "gpu-bench",
                                       "gpu-results",
                                       "merge-tree-diagram",
                                       "radix-data",
                                       "lanes-diagram"};

/* The subcommands that need CUDA: a build without it refuses them, --help
 * included. */
static bool needs_cuda(const char *command)
{
    return strncmp(command, "gpu-", 4) == 0 && strcmp(command, "gpu-results") != 0;
}

#ifdef HAVE_CUDA
static const bool BUILT_WITH_CUDA = true;
#else
static const bool BUILT_WITH_CUDA = false;
#endif

/* A subcommand that needs CUDA, refused as it must be where it cannot run:
 * without CUDA, or without a device, or for the reason `words`. */
static void expect_gpu_refusal(ChildResult r, const char *command, const char *words)
{
    expect_refusal(r, command, BUILT_WITH_CUDA ? words : "built without CUDA", "no CUDA device");
}

/* Success where a GPU is; elsewhere the one line that says why not. */
static void expect_success_or_no_gpu(ChildResult r, const char *command)
{
    if (r.exit_status != 0) {
        expect_gpu_refusal(r, command, "no CUDA device");
    }
}

static void test_help(void)
{
    ChildResult r = run("--help", NULL);
    EXPECT(r.exit_status == 0 && r.err[0] == '\0', "--help exits 0: %s", r.err);
    for (size_t c = 0; c < sizeof COMMANDS / sizeof COMMANDS[0]; c++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %s ", COMMANDS[c]);
        EXPECT(strstr(r.out, line) != NULL, "--help lists %s", COMMANDS[c]);
    }
    for (size_t c = 0; c < sizeof COMMANDS / sizeof COMMANDS[0]; c++) {
        r = run(COMMANDS[c], "--help", NULL);
        if (needs_cuda(COMMANDS[c]) && !BUILT_WITH_CUDA) {
            expect_refusal(r, COMMANDS[c], "built without CUDA", NULL);
            continue;
        }
        char first[64];
        snprintf(first, sizeof first, "softmax_topk %s: ", COMMANDS[c]);
        EXPECT(r.exit_status == 0 && strncmp(r.out, first, strlen(first)) == 0 && strstr(r.out, "--help") != NULL,
               "%s --help: exit %d: %s%s", COMMANDS[c], r.exit_status, r.out, r.err);
    }
    r = run("apply", "--help", NULL);
    EXPECT(strstr(r.out, "--load") != NULL && strstr(r.out, "--save") != NULL && strstr(r.out, "-k") != NULL,
           "apply --help lists --load, -k and --save");
}

static void test_commands(void)
{
    expect_refusal(run(NULL), NULL, "no command given (see softmax_topk --help)", NULL);
    expect_refusal(run("show", NULL), NULL, "unknown command 'show'", NULL);
    expect_refusal(run("--hard-inputs", NULL), NULL, "'--hard-inputs': give a command first", NULL);
    /* An option of another subcommand is unknown to this one. */
    expect_refusal(run("hard-inputs", "--load", "/nonexistent.npy", NULL), "hard-inputs", "unknown option '--load'",
                   NULL);
    expect_refusal(run("run", "--load", "x.npy", NULL), "run", "unknown option '--load'", NULL);
    expect_refusal(run("run", "--save", "out", NULL), "run", "unknown option '--save'", NULL);
    expect_refusal(run("run", "--kernel", "2", NULL), "run", "unknown option '--kernel'", NULL);
    expect_refusal(run("run", "--quick", NULL), "run", "unknown option '--quick'", NULL);
    expect_refusal(run("apply", "--rows", "3", NULL), "apply", "unknown option '--rows'", NULL);
    expect_refusal(run("traffic", "--merge-demo", NULL), "traffic", "unknown option '--merge-demo'", NULL);
    expect_refusal(run("traffic", "merge-demo", NULL), "traffic", "unexpected argument 'merge-demo'", NULL);
    expect_refusal(run("accuracy", "--rows", "3", NULL), "accuracy", "unknown option '--rows'", NULL);
    expect_refusal(run("merge-demo", "-k", "3", NULL), "merge-demo", "unexpected argument '-k'", NULL);
    expect_refusal(run("bench", "--results", "r.md", NULL), "bench", "unknown option '--results'", NULL);
    expect_refusal(run("admissions-data", "--markdown", NULL), "admissions-data", "unknown option '--markdown'", NULL);
    expect_refusal(run("gpu-results", "--markdown", NULL), "gpu-results", "unknown option '--markdown'", NULL);
    expect_gpu_refusal(run("gpu-bench", "--threads", "2", NULL), "gpu-bench", "unknown option '--threads'");
    /* gpu-bench prints text and writes its results file in Markdown, as in
     * every chapter: it has no --markdown. */
    expect_gpu_refusal(run("gpu-bench", "--markdown", NULL), "gpu-bench", "unknown option '--markdown'");
    expect_gpu_refusal(run("gpu-run", "--threads", "2", NULL), "gpu-run", "unknown option '--threads'");
    expect_gpu_refusal(run("gpu-check", "--quick", NULL), "gpu-check", "unknown option '--quick'");
    /* The GPU draws by the inverse CDF on its own threads. */
    expect_gpu_refusal(run("gpu-sample", "--threads", "2", NULL), "gpu-sample", "unknown option '--threads'");
    expect_gpu_refusal(run("gpu-sample", "--method", "gumbel", NULL), "gpu-sample", "unknown option '--method'");
}

static void test_bad_input(void)
{
    expect_refusal(run("run", "--bogus", NULL), "run", "unknown option '--bogus'", NULL);
    expect_refusal(run("run", "--vocab", "10", "-k", "11", NULL), "run", "larger than V = 10", NULL);
    expect_refusal(run("run", "-k", "0", NULL), "run", "-k expects an integer", NULL);
    expect_refusal(run("run", "-k", "-3", NULL), "run", "-k expects an integer", NULL);
    expect_refusal(run("run", "--rows", "abc", NULL), "run", "--rows expects an integer", NULL);
    expect_refusal(run("run", "-k", "12x", NULL), "run", "-k expects an integer", NULL);
    expect_refusal(run("run", "--vocab", NULL), "run", "--vocab expects a value", NULL);
    expect_refusal(run("run", "--version", "4", NULL), "run", "--version expects an integer in [1, 3]", NULL);
    expect_refusal(run("merge-tree-diagram", "--rows-per-block", "3", NULL), "merge-tree-diagram",
                   "--rows-per-block must be 1, 2, 4 or 8, got 3", NULL);
    expect_refusal(run("merge-tree-diagram", "--rows-per-block", "16", NULL), "merge-tree-diagram",
                   "--rows-per-block expects an integer", NULL);
    expect_refusal(run("radix-data", "--vocab", "10", "-k", "11", NULL), "radix-data", "larger than V = 10", NULL);
    expect_refusal(run("lanes-diagram", "--warps", "9", NULL), "lanes-diagram", "--warps expects an integer", NULL);
    expect_refusal(run("lanes-diagram", "--warps", "3", NULL), "lanes-diagram", "--warps must be 1, 2, 4 or 8, got 3",
                   NULL);
    expect_gpu_refusal(run("gpu-run", "--version", "2", "-k", "33", NULL), "gpu-run", "supports K <= 32");
    expect_gpu_refusal(run("gpu-run", "--version", "8", NULL), "gpu-run", "--version expects an integer in [1, 7]");
    expect_gpu_refusal(run("gpu-run", "--version", "5", "--vocab", "2000", "-k", "1025", NULL), "gpu-run",
                       "supports K <= 1024");

    const size_t shape2[2] = {3, 4}, shape1[1] = {12}, shape3[3] = {1, 3, 4};
    double doubles[12] = {0};
    float floats[12] = {0};
    save_or_fail(scratch_path("f64.npy"), NPY_FLOAT64, 2, shape2, doubles);
    save_or_fail(scratch_path("rank1.npy"), NPY_FLOAT32, 1, shape1, floats);
    save_or_fail(scratch_path("rank3.npy"), NPY_FLOAT32, 3, shape3, floats);
    save_or_fail(scratch_path("small.npy"), NPY_FLOAT32, 2, shape2, floats);
    FILE *text = fopen(scratch_path("text.npy"), "w");
    fputs("not a numpy file\n", text);
    fclose(text);
    const char *out = scratch_path("bad_out");
    const struct {
        const char *file, *words;
    } refused_files[] = {
        {"f64.npy",     "expected float32"},
        {"rank1.npy",   "expected float32"},
        {"rank3.npy",   "expected float32"},
        {"text.npy",    "text.npy"        },
        {"missing.npy", "missing.npy"     },
        {".",           "regular file"    },
    };
    for (size_t f = 0; f < sizeof refused_files / sizeof refused_files[0]; f++) {
        expect_refusal(run("apply", "--load", scratch_path(refused_files[f].file), "--save", out, NULL), "apply",
                       refused_files[f].words, NULL);
    }
    const char *small = scratch_path("small.npy");
    expect_refusal(run("apply", "--load", small, "-k", "5", "--save", out, NULL), "apply", "larger than V = 4", NULL);
    expect_refusal(run("apply", "--load", small, "--vocab", "4", "--save", out, NULL), "apply",
                   "unknown option '--vocab'", NULL);
    expect_refusal(run("apply", "--load", small, NULL), "apply", "--save DIR is required", NULL);
    expect_refusal(run("apply", "--save", out, NULL), "apply", "--load FILE is required", NULL);
    expect_gpu_refusal(run("gpu-apply", "--save", out, NULL), "gpu-apply", "--load FILE is required");

    /* "/./" repeated: a directory whose name fits, but not with "/indices.npy" after it. */
    static char long_dir[4096];
    snprintf(long_dir, sizeof long_dir, "%s", scratch_directory);
    while (strlen(long_dir) + strlen("/out") < 4090) {
        strcat(long_dir, "/.");
    }
    strcat(long_dir, "/out");
    expect_refusal(run("apply", "--load", small, "-k", "2", "--save", long_dir, NULL), "apply", "name is too long",
                   NULL);
    ChildResult r = run("apply", "--load", small, "-k", "2", "--save", "/dev/null/out", NULL);
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "cannot create the directory") != NULL,
           "--save under a file: exit %d: %s", r.exit_status, r.err);
    /* A directory where probs.npy should go: the write fails. */
    if (mkdir(scratch_path("blocked"), 0777) != 0 || mkdir(scratch_path("blocked/probs.npy"), 0777) != 0) {
        perror("mkdir");
        exit(1);
    }
    r = run("apply", "--load", small, "-k", "2", "--save", scratch_path("blocked"), NULL);
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "probs.npy") != NULL,
           "probs.npy not writable: exit %d: %s", r.exit_status, r.err);
    /* All or nothing: with a directory where indices.npy goes, probs.npy,
     * which could be written, is not left behind either. */
    if (mkdir(scratch_path("blocked-second"), 0777) != 0 ||
        mkdir(scratch_path("blocked-second/indices.npy"), 0777) != 0) {
        perror("mkdir");
        exit(1);
    }
    r = run("apply", "--load", small, "-k", "2", "--save", scratch_path("blocked-second"), NULL);
    struct stat info;
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && stat(scratch_path("blocked-second/probs.npy"), &info) != 0 &&
               stat(scratch_path("blocked-second/.probs.npy.partial"), &info) != 0,
           "indices.npy not writable: exit %d, and no probs.npy or partial file left: %s", r.exit_status, r.err);
}

/* Commands that print, run with their standard output on a full disk. */
static void test_failed_writes(void)
{
    static const struct {
        const char *what;
        const char *arguments[6];
    } writers[] = {
        {"--help",             {"--help"}                                                       },
        {"run --help",         {"run", "--help"}                                                },
        {"run",                {"run", "--rows", "2", "--vocab", "100"}                         },
        {"hard-inputs",        {"hard-inputs", "--markdown"}                                    },
        {"merge-demo",         {"merge-demo"}                                                   },
        {"admissions-data",    {"admissions-data"}                                              },
        {"merge-tree-diagram", {"merge-tree-diagram", "--across-block", "--rows-per-block", "4"}},
        {"radix-data",         {"radix-data", "--vocab", "5000", "-k", "20"}                    },
        {"lanes-diagram",      {"lanes-diagram", "--vocab", "1000", "--row", "3"}               },
    };
    for (size_t w = 0; w < sizeof writers / sizeof writers[0]; w++) {
        expect_write_failure(run_arguments(writers[w].arguments, true), writers[w].what);
    }
}

static void test_round_trip(void)
{
    enum { ROWS = 5, VOCAB = 1003, K = 7 };
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    fill_tied_logits(logits, ROWS * VOCAB, 3);
    const size_t shape[2] = {ROWS, VOCAB};
    save_or_fail(scratch_path("logits.npy"), NPY_FLOAT32, 2, shape, logits);
    ChildResult r = run("apply", "--load", scratch_path("logits.npy"), "-k", "7", "--save", scratch_path("out"), NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "matches the double reference") != NULL, "apply: %s%s", r.out, r.err);
    const size_t result_shape[2] = {ROWS, K};
    NpyArray probs = npy_load_or_exit(scratch_path("out/probs.npy"), NPY_FLOAT32, 2, result_shape);
    NpyArray indices = npy_load_or_exit(scratch_path("out/indices.npy"), NPY_INT64, 2, result_shape);
    EXPECT(topk_matches_reference("apply --save", logits, ROWS, VOCAB, K, probs.data, indices.data, TOPK_RTOL_TREE_SUM),
           "probs.npy and indices.npy match the reference");
    npy_free(&probs);
    npy_free(&indices);
    array_free(logits);
    const char *apply[] = {"apply", "--load", scratch_path("logits.npy"), "--save", scratch_path("out"), NULL};
    expect_write_failure(run_arguments(apply, true), "apply");

    r = run("run", "--rows", "3", "--vocab", "100", "-k", "5", "--version", "1", NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "matches the double reference") != NULL, "naive on random logits: %s",
           r.out);
    r = run("gpu-results", "--file", scratch_path("none.md"), NULL);
    EXPECT(r.exit_status == 0 && r.out[0] != '\0', "gpu-results without a file says so: %s", r.err);
    /* The chapter's prose reads its verdicts off the committed results file
     * (every goal missed): a file that changes them must change the prose. */
    r = run("gpu-results", "--goals", "--file", "../../chapters/03-softmax-topk/gpu-results.md", NULL);
    int missed = 0;
    for (const char *at = r.out; (at = strstr(at, "| missed")) != NULL; at++)
        missed++;
    EXPECT(r.exit_status == 0 && missed == 6, "the committed results miss all 6 goals, as the chapter says: %s", r.out);
    expect_success_or_no_gpu(run("gpu-run", "--rows", "3", "--vocab", "1000", NULL), "gpu-run");
    expect_success_or_no_gpu(run("gpu-check", NULL), "gpu-check");
}

/* apply -k 3 --temperature T on one row of three logits gives these
 * probabilities, exactly. */
static void expect_probabilities_at_temperature(const float logits[3], const char *temperature, const float want[3],
                                                const char *name)
{
    const size_t shape[2] = {1, 3};
    char file[64], dir[64];
    snprintf(file, sizeof file, "%s.npy", name);
    snprintf(dir, sizeof dir, "%s", name);
    save_or_fail(scratch_path(file), NPY_FLOAT32, 2, shape, logits);
    ChildResult r = run("apply", "--load", scratch_path(file), "-k", "3", "--temperature", temperature, "--save",
                        scratch_path(dir), NULL);
    EXPECT(r.exit_status == 0, "apply at T = %s: exit %d: %s%s", temperature, r.exit_status, r.out, r.err);
    NpyArray probs = npy_load_or_exit(scratch_path(strcat(dir, "/probs.npy")), NPY_FLOAT32, 2, shape);
    const float *p = probs.data;
    EXPECT(p[0] == want[0] && p[1] == want[1] && p[2] == want[2], "T = %s: probabilities %g %g %g, expected %g %g %g",
           temperature, (double)p[0], (double)p[1], (double)p[2], (double)want[0], (double)want[1], (double)want[2]);
    npy_free(&probs);
}

/* A temperature so small that 10 / T overflows float: the softmax of
 * [10, 9, 0] / T is still [1, 0, 0] (the shifted logits [0, -1, -10] / T),
 * where dividing first gave two +inf that shared it, 0.5 and 0.5. And a
 * row whose largest logit is +inf, which cannot be shifted: [inf, 3e38, 0]
 * / 0.5 gives [1, 0, 0], as at T = 1 (a finite logit next to +inf weighs
 * 0), where 3e38 / 0.5 rounded to +inf shared it. */
static void test_quotients_that_overflow(void)
{
    const float one_first[3] = {1.0f, 0.0f, 0.0f};
    expect_probabilities_at_temperature((const float[3]){10.0f, 9.0f, 0.0f}, "1e-38", one_first, "cold");
    expect_probabilities_at_temperature((const float[3]){INFINITY, 3e38f, 0.0f}, "0.5", one_first, "infinite");
}

/* apply -k K --temperature T on one row of logits gives these indices. */
static void expect_indices_at_temperature(const float *logits, size_t vocab, const char *k, const char *temperature,
                                          const int64_t *want, const char *name)
{
    const size_t shape[2] = {1, vocab}, result_shape[2] = {1, (size_t)atoi(k)};
    char file[64], dir[64];
    snprintf(file, sizeof file, "%s.npy", name);
    snprintf(dir, sizeof dir, "%s", name);
    save_or_fail(scratch_path(file), NPY_FLOAT32, 2, shape, logits);
    ChildResult r = run("apply", "--load", scratch_path(file), "-k", k, "--temperature", temperature, "--save",
                        scratch_path(dir), NULL);
    EXPECT(r.exit_status == 0, "apply at T = %s: exit %d: %s%s", temperature, r.exit_status, r.out, r.err);
    NpyArray indices = npy_load_or_exit(scratch_path(strcat(dir, "/indices.npy")), NPY_INT64, 2, result_shape);
    const int64_t *got = indices.data;
    for (size_t i = 0; i < result_shape[1]; i++)
        EXPECT(got[i] == want[i], "T = %s: index %zu is %lld, expected %lld", temperature, i, (long long)got[i],
               (long long)want[i]);
    npy_free(&indices);
}

/* The top K at temperature T are the top K at temperature 1, even where
 * the quotients tie: [4, 1, 1, 1, 1, 1, 1, 3] at T = 1e-40, whose quotients
 * below the largest are all held at -FLT_MAX, take 0 and then 7 (logit 3),
 * not 1; [1, 2, 1.5, 0.5] at T = 1e300, whose quotients all round to 0
 * (equal probabilities), take 1, 2, 0 by their logits. */
static void test_ties_of_the_quotients_go_by_logit(void)
{
    const float cold[8] = {4, 1, 1, 1, 1, 1, 1, 3}, hot[4] = {1, 2, 1.5f, 0.5f};
    expect_indices_at_temperature(cold, 8, "2", "1e-40", (const int64_t[]){0, 7}, "cold_ties");
    expect_indices_at_temperature(hot, 4, "3", "1e300", (const int64_t[]){1, 2, 0}, "hot_ties");
}

int main(void)
{
    if (!scratch_directory_make("/tmp/softmax_topk_cli_XXXXXX")) {
        return 1;
    }
    test_help();
    test_commands();
    test_bad_input();
    test_failed_writes();
    test_round_trip();
    test_quotients_that_overflow();
    test_ties_of_the_quotients_go_by_logit();
    scratch_directory_remove();
    return test_finish();
}
