/* softmax_topk apply and sample on logits stored in 16 bits: fp16 ('<f2')
 * and bf16 bits ('<u2', '<i2' with --dtype bf16) give, to the bit, the
 * files that the same values stored as float32 give (the conversion is
 * exact, so there is nothing to tolerate); and the combinations that do not
 * fit are one line and exit 2. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/npy.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"
#include "tests/03-softmax-topk/run_program.h"
#include "tests/scratch_directory.h"

enum { ROWS = 5, VOCAB = 1001 };

/* The same random logits three ways: as fp16, as bf16 bits (the top half
 * of each float), and each as the float32 values those bits stand for. */
static void make_files(void)
{
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float), *as_fp16 = ALLOC_ARRAY(ROWS * VOCAB, float),
          *as_bf16 = ALLOC_ARRAY(ROWS * VOCAB, float);
    uint16_t *fp16 = ALLOC_ARRAY(ROWS * VOCAB, uint16_t), *bf16 = ALLOC_ARRAY(ROWS * VOCAB, uint16_t);
    Rng rng;
    rng_seed(&rng, 31);
    rng_fill_normal_f32(&rng, logits, ROWS * VOCAB, 0.0, 3.0);
    for (size_t i = 0; i < ROWS * VOCAB; i++) {
        fp16[i] = half_from_float(logits[i]);
        as_fp16[i] = half_to_float(fp16[i]);
        bf16[i] = (uint16_t)(float_bits(logits[i]) >> 16);
        as_bf16[i] = float_from_bits((uint32_t)bf16[i] << 16);
    }
    const size_t shape[2] = {ROWS, VOCAB};
    save_or_fail(scratch_path("fp16.npy"), NPY_FLOAT16, 2, shape, fp16);
    save_or_fail(scratch_path("fp16-as-float32.npy"), NPY_FLOAT32, 2, shape, as_fp16);
    save_or_fail(scratch_path("bf16-u2.npy"), NPY_UINT16, 2, shape, bf16);
    save_or_fail(scratch_path("bf16-i2.npy"), NPY_INT16, 2, shape, bf16);
    save_or_fail(scratch_path("bf16-as-float32.npy"), NPY_FLOAT32, 2, shape, as_bf16);
    array_free(logits);
    array_free(as_fp16);
    array_free(as_bf16);
    array_free(fp16);
    array_free(bf16);
}

/* The bytes of DIR/NAME, or NULL. */
static char *read_output(const char *dir, const char *name, size_t *size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", scratch_path(dir), name);
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    rewind(file);
    char *bytes = array_alloc(*size + 1, 1);
    *size = fread(bytes, 1, *size, file);
    fclose(file);
    return bytes;
}

static bool same_output(const char *dir_a, const char *dir_b, const char *name)
{
    size_t size_a = 0, size_b = 0;
    char *a = read_output(dir_a, name, &size_a), *b = read_output(dir_b, name, &size_b);
    bool same = a != NULL && b != NULL && size_a == size_b && memcmp(a, b, size_a) == 0;
    array_free(a);
    array_free(b);
    return same;
}

/* `COMMAND --load FILE [--dtype DTYPE] ... --save DIR` with apply's or
 * sample's other options; it must succeed. */
static void run_on(const char *command, const char *file, const char *dtype, const char *dir)
{
    const char *load = scratch_path(file), *save = scratch_path(dir);
    ChildResult r = strcmp(command, "apply") == 0
                        ? run("apply", "--load", load, "-k", "7", "--temperature", "0.8", "--save", save,
                              dtype != NULL ? "--dtype" : NULL, dtype, NULL)
                        : run("sample", "--load", load, "-k", "20", "--top-p", "0.9", "--seed", "3", "--samples", "200",
                              "--save", save, dtype != NULL ? "--dtype" : NULL, dtype, NULL);
    bool ok = r.exit_status == 0 && r.err[0] == '\0' &&
              (strcmp(command, "sample") == 0 || strstr(r.out, "matches the double reference") != NULL);
    EXPECT(ok, "%s on %s%s%s: exit %d: %s%s", command, file, dtype != NULL ? " --dtype " : "",
           dtype != NULL ? dtype : "", r.exit_status, r.out, r.err);
}

static void same_as_float32(void)
{
    const struct {
        const char *file, *dtype, *float32_file;
    } cases[] = {
        {"fp16.npy",    NULL,   "fp16-as-float32.npy"},
        {"fp16.npy",    "auto", "fp16-as-float32.npy"},
        {"bf16-u2.npy", "bf16", "bf16-as-float32.npy"},
        {"bf16-i2.npy", "bf16", "bf16-as-float32.npy"},
    };
    const char *commands[] = {"apply", "sample"};
    for (size_t m = 0; m < 2; m++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            run_on(commands[m], cases[c].file, cases[c].dtype, "narrow");
            run_on(commands[m], cases[c].float32_file, NULL, "wide");
            const char *names[] = {"probs.npy", "indices.npy", "tokens.npy"};
            for (size_t f = 0; f < (m == 0 ? 2u : 3u); f++) {
                EXPECT(same_output("narrow", "wide", names[f]), "%s on %s: %s differs from the float32 file's",
                       commands[m], cases[c].file, names[f]);
            }
        }
    }
}

static void refusals(void)
{
    const char *out = scratch_path("refused");
    expect_refusal(run("apply", "--load", scratch_path("bf16-u2.npy"), "--save", out, NULL), "apply",
                   "uint16: if these are bfloat16 bits, say --dtype bf16", NULL);
    expect_refusal(
        run("sample", "--load", scratch_path("bf16-i2.npy"), "--seed", "1", "--samples", "5", "--save", out, NULL),
        "sample", "int16: if these are bfloat16 bits, say --dtype bf16", NULL);
    expect_refusal(run("apply", "--load", scratch_path("fp16-as-float32.npy"), "--dtype", "bf16", "--save", out, NULL),
                   "apply", "--dtype bf16 reads bfloat16 bits from int16 or uint16, not from float32", NULL);
    expect_refusal(run("sample", "--load", scratch_path("fp16.npy"), "--dtype", "bf16", "--seed", "1", "--samples", "5",
                       "--save", out, NULL),
                   "sample", "not from float16", NULL);
    expect_refusal(run("apply", "--load", scratch_path("fp16.npy"), "--dtype", "fp16", "--save", out, NULL), "apply",
                   "--dtype expects auto", NULL);
}

int main(void)
{
    if (!scratch_directory_make("/tmp/softmax_topk_logits_dtype_XXXXXX")) {
        return 1;
    }
    make_files();
    same_as_float32();
    refusals();
    scratch_directory_remove();
    return test_finish();
}
