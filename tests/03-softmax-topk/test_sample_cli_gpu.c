/* softmax_topk gpu-sample against sample: the two subcommands, called as
 * the program calls them, on the same .npy file of logits (ties, a NaN
 * row, an all -inf row, a row with fewer finite logits than K) with the
 * same options and seed, after every GPU version that takes the K; their
 * tokens.npy and indices.npy must be the same bytes, probs.npy the same
 * header and values (see PROB_RTOL). test_cli checks what gpu-sample
 * refuses. Needs a GPU; skipped without (its emulated twin runs everywhere). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/03-softmax-topk/commands.h"
#include "chapters/03-softmax-topk/gpu.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/cuda_util.h"
#include "common/npy.h"
#include "common/testing.h"
#include "kernels/softmax_topk_gpu.h"
#include "tests/scratch_directory.h"

enum { ROWS = 7, VOCAB = 301 };

/* Both sides compute the survivors' weights in double and round each
 * ratio to float once: the emulator's exp is the CPU's, so there the
 * files are the same bytes; CUDA's double exp is within 1 ulp of a
 * double, so on a GPU a probability may land one float ulp away when the
 * double sits next to a rounding boundary: 2^-23 relative. */
#define PROB_RTOL 0x1p-23

static void save_logits(void)
{
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    fill_tied_logits(logits, ROWS * VOCAB, 41);
    logits[1 * VOCAB + 150] = NAN;
    for (size_t i = 0; i < VOCAB; i++) {
        logits[3 * VOCAB + i] = -INFINITY;
        logits[5 * VOCAB + i] = i % 100 == 7 ? (float)i / 100.0f : -INFINITY;
    }
    const size_t shape[2] = {ROWS, VOCAB};
    npy_save_or_exit(scratch_path("logits.npy"), NPY_FLOAT32, 2, shape, logits);
    array_free(logits);
}

/* Run a subcommand in this process, as main's table runs it; the
 * arguments are copied, as argv is writable. */
static int run_in_process(CliCommandFunction *command, const char *const *arguments)
{
    char copies[24][512];
    char *argv[25];
    int argc = 0;
    for (; arguments[argc] != NULL; argc++) {
        snprintf(copies[argc], sizeof copies[argc], "%s", arguments[argc]);
        argv[argc] = copies[argc];
    }
    argv[argc] = NULL;
    fflush(stdout);
    return command(argc, argv);
}

static NpyArray load_file(const char *dir, const char *name)
{
    char path[4300], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    NpyArray array;
    if (npy_load(path, &array, err, sizeof err) != 0) {
        printf("FAIL %s\n", err);
        exit(1);
    }
    return array;
}

static bool same_shape(const NpyArray *a, const NpyArray *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof a->shape) == 0;
}

/* 0 when the files are the same bytes of the same shape. */
static size_t differing_elements(const NpyArray *a, const NpyArray *b, size_t element_bytes)
{
    if (!same_shape(a, b)) {
        return (size_t)-1;
    }
    size_t differ = 0;
    for (size_t i = 0; i < npy_element_count(a); i++) {
        differ += memcmp((const char *)a->data + i * element_bytes, (const char *)b->data + i * element_bytes,
                         element_bytes) != 0;
    }
    return differ;
}

static size_t far_probs(const NpyArray *a, const NpyArray *b)
{
    if (!same_shape(a, b)) {
        return (size_t)-1;
    }
    size_t far = 0;
    const float *x = a->data, *y = b->data;
    for (size_t i = 0; i < npy_element_count(a); i++) {
        far += !(isnan(x[i]) && isnan(y[i])) && !is_close(x[i], y[i], 0.0, PROB_RTOL);
    }
    return far;
}

static void compare_runs(const char *cpu_dir, const char *gpu_dir, const char *what)
{
    const char *names[3] = {"tokens.npy", "indices.npy", "probs.npy"};
    NpyArray cpu[3], gpu[3];
    for (int f = 0; f < 3; f++) {
        cpu[f] = load_file(cpu_dir, names[f]);
        gpu[f] = load_file(gpu_dir, names[f]);
    }
    size_t tokens = differing_elements(&cpu[0], &gpu[0], sizeof(int64_t));
    size_t indices = differing_elements(&cpu[1], &gpu[1], sizeof(int64_t));
    size_t probs = far_probs(&cpu[2], &gpu[2]);
    size_t prob_bits = differing_elements(&cpu[2], &gpu[2], sizeof(float));
    EXPECT(tokens == 0 && indices == 0 && probs == 0,
           "%s: %zu tokens, %zu indices and %zu probabilities differ from sample's", what, tokens, indices, probs);
    printf("%s: tokens and indices the same bytes, %zu probabilities not to the bit\n", what, prob_bits);
    for (int f = 0; f < 3; f++) {
        npy_free(&cpu[f]);
        npy_free(&gpu[f]);
    }
}

typedef struct {
    const char *k, *top_p, *min_p, *temperature;
} SampleCase;

static void check_case(SampleCase c, int case_number)
{
    char cpu_dir[64], gpu_dir[64];
    snprintf(cpu_dir, sizeof cpu_dir, "cpu%d", case_number);
    char logits[4200]; /* scratch_path's buffers are taken in turn: keep a copy */
    snprintf(logits, sizeof logits, "%s", scratch_path("logits.npy"));
    char cpu_save[4200];
    snprintf(cpu_save, sizeof cpu_save, "%s", scratch_path(cpu_dir));
    const char *sample[] = {"sample",      "--load", logits,   "-k",        c.k,         "--top-p", c.top_p,
                            "--min-p",     c.min_p,  "--seed", "17",        "--samples", "300",     "--temperature",
                            c.temperature, "--save", cpu_save, "--threads", "2",         NULL};
    EXPECT(run_in_process(sample_command, sample) == 0, "sample -k %s failed", c.k);
    for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
        if (atoi(c.k) > softmax_topk_gpu_max_k(version)) {
            continue;
        }
        char version_text[16], what[128], gpu_save[4200];
        snprintf(version_text, sizeof version_text, "%d", version);
        snprintf(gpu_dir, sizeof gpu_dir, "gpu%d-%d", case_number, version);
        snprintf(gpu_save, sizeof gpu_save, "%s", scratch_path(gpu_dir));
        const char *gpu_sample[] = {
            "gpu-sample",  "--load", logits,   "-k",        c.k,          "--top-p", c.top_p,
            "--min-p",     c.min_p,  "--seed", "17",        "--samples",  "300",     "--temperature",
            c.temperature, "--save", gpu_save, "--version", version_text, NULL};
        snprintf(what, sizeof what, "version %d, K %s, top-p %s, min-p %s, T %s", version, c.k, c.top_p, c.min_p,
                 c.temperature);
        EXPECT(run_in_process(gpu_sample_command, gpu_sample) == 0, "%s: gpu-sample failed", what);
        compare_runs(cpu_save, gpu_save, what);
    }
}

static void test_same_files_as_sample(void)
{
    const SampleCase cases[] = {
        {"1",   "1",   "0",    "1"  },
        {"8",   "0.9", "0.02", "0.7"},
        {"64",  "0.5", "0",    "2"  },
        {"256", "1",   "0.1",  "1"  },
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        check_case(cases[c], c);
    }
}

int main(void)
{
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }
    if (!scratch_directory_make("/tmp/softmax_topk_gpu_sample_XXXXXX")) {
        return 1;
    }
    save_logits();
    test_same_files_as_sample();
    scratch_directory_remove();
    return test_finish();
}
