/* softmax_topk sample and apply --temperature from the outside: the files
 * sample writes (their shapes; the survivors against the reference in
 * double; every token one of its row's survivors; the rows without
 * survivors), the same tokens for a seed on any thread count and other
 * tokens for another seed, --method inverse-cdf (the default) and gumbel,
 * bad input (one line, exit 2) and failed writes
 * (exit 1); apply at T = 1 unchanged, and at T = 0.5 the top K of 2x. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/check.h"
#include "common/npy.h"
#include "common/rng.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"
#include "tests/03-softmax-topk/run_program.h"
#include "tests/scratch_directory.h"

enum { ROWS = 6, VOCAB = 300, K = 12, SAMPLES = 500 };
enum { NAN_ROW = 3, NEG_INF_ROW = 4, FEW_FINITE_ROW = 5, FEW_FINITE = 3 };

/* The options of the round trip: every step cuts something. */
static const SamplingParams PARAMS = {0.7, K, 0.9, 0.02};
#define PARAM_ARGS "-k", "12", "--temperature", "0.7", "--top-p", "0.9", "--min-p", "0.02"

/* Random rows, then the hard ones: a NaN, only -inf, and a row with fewer
 * finite logits than K, 1, 0.5 and 0 (the rest -inf, weight 0: top-p
 * cuts them; at T = 0.7 the three weigh 1, 0.49 and 0.24, and all three
 * are needed for 0.9 of the mass). */
static float *make_logits(void)
{
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    Rng rng;
    rng_seed(&rng, 11);
    rng_fill_normal_f32(&rng, logits, ROWS * VOCAB, 0.0, 2.0);
    logits[NAN_ROW * VOCAB + 17] = NAN;
    for (size_t i = 0; i < VOCAB; i++) {
        logits[NEG_INF_ROW * VOCAB + i] = -INFINITY;
        logits[FEW_FINITE_ROW * VOCAB + i] = i < FEW_FINITE ? 1.0f - 0.5f * (float)i : -INFINITY;
    }
    const size_t shape[2] = {ROWS, VOCAB}, finite_shape[2] = {NAN_ROW, VOCAB};
    save_or_fail(scratch_path("logits.npy"), NPY_FLOAT32, 2, shape, logits);
    /* The rows before the hard ones: a run with no note on stderr. */
    save_or_fail(scratch_path("finite.npy"), NPY_FLOAT32, 2, finite_shape, logits);
    return logits;
}

typedef struct {
    NpyArray tokens, probs, indices;
} Samples;

/* The three files of a run, of the shapes promised, or the test stops. */
static Samples load_samples(const char *dir)
{
    char path[3][256];
    const char *names[3] = {"tokens.npy", "probs.npy", "indices.npy"};
    for (int f = 0; f < 3; f++) {
        snprintf(path[f], sizeof path[f], "%s/%s", dir, names[f]);
    }
    const size_t token_shape[2] = {ROWS, SAMPLES}, candidate_shape[2] = {ROWS, K};
    Samples s = {npy_load_or_exit(path[0], NPY_INT64, 2, token_shape),
                 npy_load_or_exit(path[1], NPY_FLOAT32, 2, candidate_shape),
                 npy_load_or_exit(path[2], NPY_INT64, 2, candidate_shape)};
    return s;
}

static void free_samples(Samples *s)
{
    npy_free(&s->tokens);
    npy_free(&s->probs);
    npy_free(&s->indices);
}

/* method NULL: sample's default. */
static Samples run_sample(const char *method, const char *seed, const char *threads, const char *dir)
{
    ChildResult r = run("sample", "--load", scratch_path("logits.npy"), PARAM_ARGS, "--seed", seed, "--samples", "500",
                        "--threads", threads, "--save", dir, method != NULL ? "--method" : NULL, method, NULL);
    /* The NaN row, the -inf row and the row that is mostly -inf. */
    EXPECT(r.exit_status == 0 && r.err_lines == 1 && strstr(r.err, "3 of 6 rows held inf or NaN") != NULL,
           "sample --seed %s --threads %s: exit %d: %s%s", seed, threads, r.exit_status, r.out, r.err);
    return load_samples(dir);
}

/* Float probabilities from weights in double (test_sampling.c): 2^-24 for
 * the rounding, the rest for sums of a few terms. */
#define SURVIVOR_RTOL (4.0 * 0x1p-24)
#define SURVIVOR_ATOL (2.0 * (double)FLT_TRUE_MIN)

/* A row with finite logits: the survivors as the reference has them, the
 * places cut padded with probability 0 and index -1, and every token a
 * survivor. Returns the number of survivors. */
static int check_finite_row(size_t row, const float *logits, const Samples *s)
{
    double ref_probs[K];
    int64_t ref_indices[K];
    const float *probs = (const float *)s->probs.data + row * K;
    const int64_t *indices = (const int64_t *)s->indices.data + row * K;
    const int64_t *tokens = (const int64_t *)s->tokens.data + row * SAMPLES;
    int count = reference_survivors(logits + row * VOCAB, VOCAB, PARAMS, ref_probs, ref_indices);
    int wrong = 0, strangers = 0;
    for (int j = 0; j < K; j++) {
        wrong += indices[j] != ref_indices[j] || !is_close(probs[j], ref_probs[j], SURVIVOR_ATOL, SURVIVOR_RTOL);
    }
    for (int d = 0; d < SAMPLES; d++) {
        bool survivor = false;
        for (int j = 0; j < count; j++) {
            survivor |= tokens[d] == ref_indices[j];
        }
        strangers += !survivor;
    }
    EXPECT(wrong == 0 && strangers == 0, "row %zu: %d of %d places differ from the reference, %d tokens not survivors",
           row, wrong, K, strangers);
    return count;
}

/* A row without survivors: every token -1, every index -1, every
 * probability NaN (the sampler's definition). */
static void check_row_without_survivors(size_t row, const Samples *s)
{
    const float *probs = (const float *)s->probs.data + row * K;
    const int64_t *indices = (const int64_t *)s->indices.data + row * K;
    const int64_t *tokens = (const int64_t *)s->tokens.data + row * SAMPLES;
    int wrong = 0;
    for (int j = 0; j < K; j++) {
        wrong += !isnan(probs[j]) || indices[j] != -1;
    }
    for (int d = 0; d < SAMPLES; d++) {
        wrong += tokens[d] != -1;
    }
    EXPECT(wrong == 0, "row %zu (no survivors): %d values are not NaN, -1 and -1", row, wrong);
}

static size_t count_differences(const NpyArray *a, const NpyArray *b)
{
    size_t differences = 0;
    for (size_t i = 0; i < npy_element_count(a); i++) {
        differences += ((const int64_t *)a->data)[i] != ((const int64_t *)b->data)[i];
    }
    return differences;
}

static void test_round_trip(void)
{
    float *logits = make_logits();
    Samples s = run_sample(NULL, "5", "3", scratch_path("seed5"));
    for (size_t row = 0; row < ROWS; row++) {
        if (row == NAN_ROW || row == NEG_INF_ROW) {
            check_row_without_survivors(row, &s);
            continue;
        }
        int count = check_finite_row(row, logits, &s);
        EXPECT(count > 1 && count < K, "row %zu: %d survivors, want some cut and more than one left", row, count);
    }
    /* The same seed on one thread: the same tokens. Another seed: other
     * tokens (4 rows of 500 draws among several survivors: all equal would
     * be a broken generator, not bad luck). */
    Samples same = run_sample(NULL, "5", "1", scratch_path("seed5-one-thread"));
    Samples other = run_sample(NULL, "6", "3", scratch_path("seed6"));
    EXPECT(count_differences(&s.tokens, &same.tokens) == 0, "seed 5 on 1 and on 3 threads: %zu tokens differ",
           count_differences(&s.tokens, &same.tokens));
    size_t differences = count_differences(&s.tokens, &other.tokens);
    EXPECT(differences > SAMPLES, "seeds 5 and 6: only %zu of %d tokens differ", differences, ROWS * SAMPLES);
    free_samples(&s);
    free_samples(&same);
    free_samples(&other);
    array_free(logits);
}

/* The tokens of sample_rows, the library's function, called here. */
static bool same_tokens_as_library(const float *logits, DrawMethod method, const Samples *s)
{
    int64_t *tokens = ALLOC_ARRAY(ROWS * SAMPLES, int64_t), indices[ROWS * K];
    float probs[ROWS * K];
    sample_rows(float32_logits(logits), ROWS, VOCAB, PARAMS, method, 5, SAMPLES, 2, tokens, probs, indices);
    bool same = memcmp(tokens, s->tokens.data, sizeof(int64_t) * ROWS * SAMPLES) == 0;
    array_free(tokens);
    return same;
}

/* --method: the default is the inverse CDF; gumbel draws Gumbel-max, the
 * same tokens on any thread count, the survivors' tokens only, and other
 * tokens than the inverse CDF from the same uniforms' seed. */
static void test_methods(void)
{
    float *logits = make_logits();
    Samples by_default = run_sample(NULL, "5", "3", scratch_path("default"));
    Samples inverse_cdf = run_sample("inverse-cdf", "5", "1", scratch_path("inverse-cdf"));
    Samples gumbel = run_sample("gumbel", "5", "3", scratch_path("gumbel"));
    Samples gumbel_one_thread = run_sample("gumbel", "5", "1", scratch_path("gumbel-one-thread"));
    EXPECT(same_tokens_as_library(logits, DRAW_INVERSE_CDF, &by_default), "the default is not the inverse CDF");
    EXPECT(count_differences(&by_default.tokens, &inverse_cdf.tokens) == 0, "--method inverse-cdf is not the default");
    EXPECT(same_tokens_as_library(logits, DRAW_GUMBEL_MAX, &gumbel), "--method gumbel is not Gumbel-max");
    EXPECT(count_differences(&gumbel.tokens, &gumbel_one_thread.tokens) == 0,
           "gumbel, seed 5, on 1 and on 3 threads: %zu tokens differ",
           count_differences(&gumbel.tokens, &gumbel_one_thread.tokens));
    for (size_t row = 0; row < NAN_ROW; row++) {
        check_finite_row(row, logits, &gumbel);
    }
    size_t differences = count_differences(&by_default.tokens, &gumbel.tokens);
    EXPECT(differences > SAMPLES, "inverse CDF and Gumbel-max: only %zu of %d tokens differ", differences,
           ROWS * SAMPLES);
    free_samples(&by_default);
    free_samples(&inverse_cdf);
    free_samples(&gumbel);
    free_samples(&gumbel_one_thread);
    array_free(logits);
}

/* --method rejection: sample_rows' tokens, the same on any thread count,
 * survivors' tokens only, and -1 for the rows without survivors. */
static void test_rejection_method(void)
{
    float *logits = make_logits();
    Samples rejection = run_sample("rejection", "5", "3", scratch_path("rejection"));
    Samples one_thread = run_sample("rejection", "5", "1", scratch_path("rejection-one-thread"));
    EXPECT(same_tokens_as_library(logits, DRAW_REJECTION, &rejection), "--method rejection is not DRAW_REJECTION");
    EXPECT(count_differences(&rejection.tokens, &one_thread.tokens) == 0,
           "rejection, seed 5, on 1 and on 3 threads: %zu tokens differ",
           count_differences(&rejection.tokens, &one_thread.tokens));
    for (size_t row = 0; row < ROWS; row++) {
        if (row == NAN_ROW || row == NEG_INF_ROW) {
            check_row_without_survivors(row, &rejection);
            continue;
        }
        check_finite_row(row, logits, &rejection);
    }
    free_samples(&rejection);
    free_samples(&one_thread);
    array_free(logits);
}

static void test_bad_input(void)
{
    const char *logits = scratch_path("logits.npy"), *out = scratch_path("bad_out");
    const struct {
        const char *option, *value, *words;
    } refused[] = {
        {"--top-p",       "0",          "--top-p expects a finite decimal number in (0, 1], got '0'"           },
        {"--top-p",       "1.5",        "--top-p expects a finite decimal number in (0, 1]"                    },
        {"--top-p",       "nan",        "--top-p expects a finite decimal number"                              },
        {"--min-p",       "-0.1",       "--min-p expects a finite decimal number in [0, 1]"                    },
        {"--min-p",       "2",          "--min-p expects a finite decimal number in [0, 1]"                    },
        {"--temperature", "0",          "--temperature expects a finite decimal number in (0, 1e+300], got '0'"},
        {"--temperature", "-1",         "--temperature expects a finite decimal number"                        },
        {"--temperature", "inf",        "--temperature expects a finite decimal number"                        },
        {"-k",            "301",        "-k 301 is larger than V = 300"                                        },
        {"--method",      "gumbel-max", "--method expects inverse-cdf, gumbel or rejection, got 'gumbel-max'"  },
    };
    for (size_t c = 0; c < sizeof refused / sizeof refused[0]; c++) {
        expect_refusal(run("sample", "--load", logits, "--seed", "1", "--samples", "10", "--save", out,
                           refused[c].option, refused[c].value, NULL),
                       "sample", refused[c].words, NULL);
    }
    expect_refusal(run("sample", "--load", logits, "--seed", "1", "--samples", "0", "--save", out, NULL), "sample",
                   "--samples expects an integer in [1,", NULL);
    expect_refusal(run("sample", "--load", logits, "--samples", "10", "--save", out, NULL), "sample",
                   "--seed S is required", NULL);
    expect_refusal(run("sample", "--load", logits, "--seed", "1", "--samples", "10", NULL), "sample",
                   "--save DIR is required", NULL);
    expect_refusal(run("sample", "--load", logits, "--seed", "1", "--save", out, NULL), "sample",
                   "--samples N is required", NULL);
    expect_refusal(run("sample", "--seed", "1", "--samples", "10", "--save", out, NULL), "sample",
                   "--load FILE is required", NULL);
    expect_refusal(run("apply", "--load", logits, "--save", out, "--temperature", "0", NULL), "apply",
                   "--temperature expects a finite decimal number in (0, 1e+300], got '0'", NULL);
    struct stat info;
    EXPECT(stat(out, &info) != 0, "a refused run made its --save directory");
}

static void test_failed_writes(void)
{
    const char *logits = scratch_path("finite.npy");
    ChildResult r = run("sample", "--load", logits, "--seed", "1", "--samples", "10", "--save", "/dev/null/out", NULL);
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "cannot create the directory") != NULL,
           "--save under a file: exit %d: %s", r.exit_status, r.err);
    /* A directory where tokens.npy goes: nothing is left behind. */
    if (mkdir(scratch_path("blocked"), 0777) != 0 || mkdir(scratch_path("blocked/tokens.npy"), 0777) != 0) {
        perror("mkdir");
        exit(1);
    }
    r = run("sample", "--load", logits, "--seed", "1", "--samples", "10", "--save", scratch_path("blocked"), NULL);
    struct stat info;
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "tokens.npy") != NULL &&
               stat(scratch_path("blocked/probs.npy"), &info) != 0,
           "tokens.npy not writable: exit %d, and no probs.npy left: %s", r.exit_status, r.err);
    const char *sample[] = {
        "sample", "--load", logits, "--seed", "1", "--samples", "10", "--save", scratch_path("full"), NULL};
    expect_write_failure(run_arguments(sample, true), "sample");
}

/* apply's probabilities, written to DIR/probs.npy: a byte-exact copy for
 * comparing two runs. */
static NpyArray apply_probs(const char *load, const char *temperature, const char *dir)
{
    char probs[256];
    ChildResult r = temperature == NULL
                        ? run("apply", "--load", load, "-k", "9", "--save", dir, NULL)
                        : run("apply", "--load", load, "-k", "9", "--temperature", temperature, "--save", dir, NULL);
    EXPECT(r.exit_status == 0 && strstr(r.out, "matches the double reference") != NULL, "apply --temperature %s: %s%s",
           temperature == NULL ? "(none)" : temperature, r.out, r.err);
    snprintf(probs, sizeof probs, "%s/probs.npy", dir);
    const size_t shape[2] = {3, 9};
    return npy_load_or_exit(probs, NPY_FLOAT32, 2, shape);
}

static bool same_floats(const NpyArray *a, const NpyArray *b)
{
    return memcmp(a->data, b->data, npy_element_count(a) * sizeof(float)) == 0;
}

/* T = 1 changes nothing; T = 0.5 is the same as doubling the logits, which
 * is exact in float, so the files must agree to the bit. */
static void test_apply_temperature(void)
{
    enum { APPLY_ROWS = 3 };
    float *logits = ALLOC_ARRAY(APPLY_ROWS * VOCAB, float);
    Rng rng;
    rng_seed(&rng, 12);
    rng_fill_normal_f32(&rng, logits, APPLY_ROWS * VOCAB, 0.0, 2.0);
    const size_t shape[2] = {APPLY_ROWS, VOCAB};
    save_or_fail(scratch_path("apply.npy"), NPY_FLOAT32, 2, shape, logits);
    for (size_t i = 0; i < APPLY_ROWS * VOCAB; i++) {
        logits[i] *= 2.0f;
    }
    save_or_fail(scratch_path("apply-doubled.npy"), NPY_FLOAT32, 2, shape, logits);
    NpyArray plain = apply_probs(scratch_path("apply.npy"), NULL, scratch_path("plain"));
    NpyArray at_one = apply_probs(scratch_path("apply.npy"), "1", scratch_path("at-one"));
    NpyArray at_half = apply_probs(scratch_path("apply.npy"), "0.5", scratch_path("at-half"));
    NpyArray doubled = apply_probs(scratch_path("apply-doubled.npy"), NULL, scratch_path("doubled"));
    EXPECT(same_floats(&plain, &at_one), "apply --temperature 1 changes the probabilities");
    EXPECT(same_floats(&at_half, &doubled), "apply --temperature 0.5 differs from apply on 2x");
    EXPECT(!same_floats(&plain, &at_half), "apply --temperature 0.5 changes nothing");
    npy_free(&plain);
    npy_free(&at_one);
    npy_free(&at_half);
    npy_free(&doubled);
    array_free(logits);
}

int main(void)
{
    if (!scratch_directory_make("/tmp/softmax_topk_sample_cli_XXXXXX")) {
        return 1;
    }
    test_round_trip();
    test_methods();
    test_rejection_method();
    test_bad_input();
    test_failed_writes();
    test_apply_temperature();
    scratch_directory_remove();
    return test_finish();
}
