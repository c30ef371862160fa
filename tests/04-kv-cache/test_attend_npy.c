/* The .npy interface of `kv_cache attend --load DIR --save DIR`: reads q,
 * k, v and lens from one directory, and writes to another the attention
 * computed through the contiguous and the paged layouts, and through INT8,
 * INT4, FP8 E4M3 and FP8 E5M2 blocks. Each is checked against a
 * double-precision reference computed here (over the numbers as the
 * quantized formats store them, for those: FP8 with the per-tensor scale
 * that puts each tensor's largest magnitude on the format's largest number);
 * inputs that disagree are refused with one line and exit status 2, and
 * outputs that cannot be written with one line and exit status 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chapters/04-kv-cache/attend_npy.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/npy.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/kv_quant.h"

enum { B = 3, H = 6, KVH = 2, L = 37, D = 12 };
static const char *const input_names[] = {"q.npy", "k.npy", "v.npy", "lens.npy"};
static const char *const output_names[] = {"out_contiguous.npy", "out_paged.npy",    "out_int8.npy",
                                           "out_int4.npy",       "out_fp8_e4m3.npy", "out_fp8_e5m2.npy"};

typedef struct {
    char dir[64];      /* --load */
    char save_dir[96]; /* --save: a directory inside dir */
    float q[B * H * D], k[B * KVH * L * D], v[B * KVH * L * D];
    int32_t lens[B];
} Inputs;

static void path_of(char *path, const Inputs *in, const char *name)
{
    snprintf(path, 128, "%s/%s", in->dir, name);
}

static void output_path_of(char *path, const Inputs *in, const char *name)
{
    snprintf(path, 128, "%s/%s", in->save_dir, name);
}

static void save(const Inputs *in, const char *name, NpyDtype dtype, int ndim, const size_t *shape, const void *data)
{
    char path[128];
    path_of(path, in, name);
    npy_save_or_exit(path, dtype, ndim, shape, data);
}

static void save_all(const Inputs *in)
{
    const size_t q_shape[] = {B, H, D}, kv_shape[] = {B, KVH, L, D}, lens_shape[] = {B};
    save(in, "q.npy", NPY_FLOAT32, 3, q_shape, in->q);
    save(in, "k.npy", NPY_FLOAT32, 4, kv_shape, in->k);
    save(in, "v.npy", NPY_FLOAT32, 4, kv_shape, in->v);
    save(in, "lens.npy", NPY_INT32, 1, lens_shape, in->lens);
}

static void reference(const Inputs *in, double *out)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = in->q + ((size_t)b * H + h) * D;
            const float *k = in->k + ((size_t)b * KVH + h / (H / KVH)) * L * D;
            const float *v = in->v + ((size_t)b * KVH + h / (H / KVH)) * L * D;
            double score[L], max = -INFINITY, sum = 0.0, *o = out + ((size_t)b * H + h) * D;
            for (int p = 0; p < in->lens[b]; p++) {
                score[p] = 0.0;
                for (int i = 0; i < D; i++)
                    score[p] += (double)q[i] * k[p * D + i];
                score[p] /= sqrt(D);
                max = fmax(max, score[p]);
            }
            for (int p = 0; p < in->lens[b]; p++)
                sum += score[p] = exp(score[p] - max);
            for (int i = 0; i < D; i++)
                o[i] = 0.0;
            for (int p = 0; p < in->lens[b]; p++)
                for (int i = 0; i < D; i++)
                    o[i] += score[p] / sum * v[p * D + i];
        }
}

static NpyArray load_output(const Inputs *in, const char *name)
{
    char path[128];
    const size_t shape[] = {B, H, D};
    output_path_of(path, in, name);
    return npy_load_or_exit(path, NPY_FLOAT32, 3, shape);
}

/* The largest |x| of kv head h's rows (every head's: h = -1) within the
 * sequences' lengths. */
static double largest_within_lengths(const Inputs *in, const float *kv, int h)
{
    double largest = 0.0;
    for (int b = 0; b < B; b++)
        for (int head = 0; head < KVH; head++)
            for (int i = 0; i < in->lens[b] * D && (h < 0 || head == h); i++)
                largest = fmax(largest, fabs(kv[((size_t)b * KVH + head) * L * D + i]));
    return largest;
}

/* FP8's scale for kv head h: that head's largest magnitude (or the whole
 * tensor's) on the format's largest number. */
static float fp8_scale(const Inputs *in, const float *kv, KvFormat format, KvScaleAxis axis, int h)
{
    double largest_code = format == KV_FORMAT_FP8_E4M3 ? 448.0 : 57344.0;
    return (float)(largest_within_lengths(in, kv, axis == KV_SCALE_PER_HEAD ? h : -1) / largest_code);
}

/* Keys and values as a format stores them: each row quantized and read back
 * (FP8 with its scales per tensor or per kv head, as `axis` says). */
static Inputs *as_stored(const Inputs *in, KvFormat format, KvScaleAxis axis)
{
    Inputs *stored = ALLOC_ARRAY(1, Inputs);
    *stored = *in;
    PagedKvShape one_row = {1, 1, D};
    KvBlockLayout keys = kv_layout(format, true, one_row, 32), values = kv_layout(format, false, one_row, 32);
    bool fp8 = format == KV_FORMAT_FP8_E4M3 || format == KV_FORMAT_FP8_E5M2;
    uint8_t *head = ALLOC_ARRAY(kv_head_bytes(keys), uint8_t);
    for (size_t r = 0; r < (size_t)B * KVH * L; r++) {
        int h = (int)(r / L % KVH);
        if (fp8) {
            keys.tensor_scale = fp8_scale(in, in->k, format, axis, h);
            values.tensor_scale = fp8_scale(in, in->v, format, axis, h);
        }
        kv_store_row(keys, head, 0, in->k + r * D);
        kv_load_row(keys, head, 0, stored->k + r * D);
        kv_store_row(values, head, 0, in->v + r * D);
        kv_load_row(values, head, 0, stored->v + r * D);
    }
    array_free(head);
    return stored;
}

static void quantized_output_matches(const Inputs *in, KvFormat format, const char *name, const double *exact,
                                     double within)
{
    Inputs *stored = as_stored(in, format, KV_SCALE_PER_TENSOR);
    double *ref = ALLOC_ARRAY((size_t)B * H * D, double);
    reference(stored, ref);
    NpyArray got = load_output(in, name);
    CloseReport r = check_close_f32(got.data, ref, (size_t)B * H * D, 1e-5, 1e-5);
    EXPECT(close_report_print(stdout, name, &r), "%s matches the double reference over the stored numbers", name);
    CloseReport loose = check_close_f32(got.data, exact, (size_t)B * H * D, within, 0);
    EXPECT(close_report_print(stdout, name, &loose), "%s is within %g of the unquantized attention", name, within);
    npy_free(&got);
    array_free(ref);
    array_free(stored);
}

static void outputs_match_reference(Inputs *in)
{
    save_all(in);
    attend_npy(in->dir, in->save_dir, 16, 32, KV_SCALE_PER_TENSOR);
    char path[128];
    path_of(path, in, output_names[0]);
    EXPECT(access(path, F_OK) != 0, "the outputs go to --save, not to --load");
    NpyArray contiguous = load_output(in, "out_contiguous.npy"), paged = load_output(in, "out_paged.npy");
    double *ref = ALLOC_ARRAY((size_t)B * H * D, double);
    reference(in, ref);
    /* Outputs are weighted means of values in [-1, 1]; float scores and
     * softmax over at most 37 positions: well inside 1e-5. */
    CloseReport r = check_close_f32(contiguous.data, ref, (size_t)B * H * D, 1e-5, 1e-5);
    EXPECT(close_report_print(stdout, "out_contiguous.npy", &r), "contiguous output matches double");
    EXPECT(memcmp(contiguous.data, paged.data, sizeof(float) * B * H * D) == 0,
           "out_paged.npy is bit-identical to out_contiguous.npy");
    /* Values in [-1, 1] off by at most half a step: 1/254 (INT8), 1/14 (INT4),
     * plus what the keys' rounding does to the weights: a few times that. */
    quantized_output_matches(in, KV_FORMAT_INT8, "out_int8.npy", ref, 0.02);
    quantized_output_matches(in, KV_FORMAT_INT4, "out_int4.npy", ref, 0.3);
    /* FP8 rounds each number to within half a step of it relative to itself:
     * 2^-4 (E4M3, 3 mantissa bits), 2^-3 (E5M2, 2): four times that, as for INT4. */
    quantized_output_matches(in, KV_FORMAT_FP8_E4M3, "out_fp8_e4m3.npy", ref, 0.25);
    quantized_output_matches(in, KV_FORMAT_FP8_E5M2, "out_fp8_e5m2.npy", ref, 0.5);
    array_free(ref);
    npy_free(&contiguous);
    npy_free(&paged);
}

/* The largest error, against the unquantized attention, of the outputs of
 * the query heads that read kv head 1, relative to their largest magnitude
 * (normwise: an output near zero would make an element's own relative
 * error meaningless). */
static double error_of_head_1(const float *got, const double *exact)
{
    double worst = 0.0, largest = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = H / KVH; h < 2 * H / KVH; h++)
            for (int i = 0; i < D; i++) {
                size_t at = ((size_t)b * H + h) * D + i;
                worst = fmax(worst, fabs(got[at] - exact[at]));
                largest = fmax(largest, fabs(exact[at]));
            }
    return worst / largest;
}

/* --fp8-scales head: kv head 1's keys and values shrunk by 2^-16 (exactly).
 * A scale for the whole tensor, set by head 0's magnitude, puts head 1's
 * numbers among E4M3's subnormals, with few bits left; a scale per head puts
 * them back in the normal range. The per-head outputs must match the
 * reference over the numbers as stored with scales per head, and be more
 * accurate for head 1 than the per-tensor ones. */
static void fp8_scales_per_head(const Inputs *original)
{
    Inputs *in = ALLOC_ARRAY(1, Inputs);
    *in = *original;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < (size_t)L * D; i++) {
            in->k[((size_t)b * KVH + 1) * L * D + i] = ldexpf(in->k[((size_t)b * KVH + 1) * L * D + i], -16);
            in->v[((size_t)b * KVH + 1) * L * D + i] = ldexpf(in->v[((size_t)b * KVH + 1) * L * D + i], -16);
        }
    save_all(in);
    double *exact = ALLOC_ARRAY((size_t)B * H * D, double), *ref = ALLOC_ARRAY((size_t)B * H * D, double);
    reference(in, exact);
    attend_npy(in->dir, in->save_dir, 16, 32, KV_SCALE_PER_TENSOR);
    NpyArray per_tensor = load_output(in, "out_fp8_e4m3.npy");
    attend_npy(in->dir, in->save_dir, 16, 32, KV_SCALE_PER_HEAD);
    NpyArray per_head = load_output(in, "out_fp8_e4m3.npy");
    Inputs *stored = as_stored(in, KV_FORMAT_FP8_E4M3, KV_SCALE_PER_HEAD);
    reference(stored, ref);
    CloseReport r = check_close_f32(per_head.data, ref, (size_t)B * H * D, 1e-5, 1e-5);
    EXPECT(close_report_print(stdout, "out_fp8_e4m3.npy, scales per head", &r),
           "FP8 E4M3 with scales per kv head matches the double reference over the numbers so stored");
    /* The tolerance above is absolute at 1e-5, larger than kv head 1's
     * outputs: check those relative to their own size, as closely. */
    double stored_error = error_of_head_1(per_head.data, ref);
    EXPECT(stored_error < 1e-5, "kv head 1, scales per head: normwise error %.3g against the stored numbers' attention",
           stored_error);
    double tensor_error = error_of_head_1(per_tensor.data, exact);
    double head_error = error_of_head_1(per_head.data, exact);
    /* Per head, head 1 keeps E4M3's 3 mantissa bits; per tensor, its numbers
     * fall 16 binades lower, mostly subnormal: at least 4 times the error. */
    EXPECT(head_error * 4 < tensor_error,
           "kv head 1 scaled by 2^-16: normwise relative error %.3g with scales per head, %.3g per tensor", head_error,
           tensor_error);
    npy_free(&per_tensor);
    npy_free(&per_head);
    array_free(stored);
    array_free(exact);
    array_free(ref);
    array_free(in);
}

static void attend_in_child(void *inputs)
{
    const Inputs *in = inputs;
    attend_npy(in->dir, in->save_dir, 16, 32, KV_SCALE_PER_TENSOR);
}

/* Save a broken file in place of a good one: the run must end with status 2
 * and one line naming what is wrong; then restore the good inputs. */
static void refused(Inputs *in, const char *name, NpyDtype dtype, int ndim, const size_t *shape, const void *data,
                    const char *expected)
{
    save_all(in);
    save(in, name, dtype, ndim, shape, data);
    ChildResult r = test_run_child(attend_in_child, in);
    EXPECT(r.exit_status == 2 && r.err_lines == 1 && strstr(r.err, expected) != NULL,
           "%s: exit 2 and one line mentioning '%s'; got status %d, %d lines: %s", name, expected, r.exit_status,
           r.err_lines, r.err);
}

static void bad_inputs_are_refused(Inputs *in)
{
    const size_t q_shape[] = {B, H, D}, short_batch[] = {B - 1, KVH, L, D}, wide[] = {B, KVH, L, D + 1};
    const size_t other_len[] = {B, KVH, L - 1, D}, lens_shape[] = {B}, heads5[] = {B, 5, D};
    static double q_as_double[B * H * D];
    refused(in, "k.npy", NPY_FLOAT32, 4, short_batch, in->k, "k.npy: batch");
    refused(in, "k.npy", NPY_FLOAT32, 4, wide, in->k, "k.npy: head_dim");
    refused(in, "v.npy", NPY_FLOAT32, 4, other_len, in->v, "v.npy");
    refused(in, "q.npy", NPY_FLOAT64, 3, q_shape, q_as_double, "float32");
    refused(in, "q.npy", NPY_FLOAT32, 3, heads5, in->q, "multiple");
    const int32_t zero_length[B] = {5, 0, 5}, too_long[B] = {5, L + 1, 5};
    refused(in, "lens.npy", NPY_INT32, 1, lens_shape, zero_length, "lens[1] = 0");
    refused(in, "lens.npy", NPY_INT32, 1, lens_shape, too_long, "lens[1] = 38");
    char path[128];
    save_all(in);
    path_of(path, in, "v.npy");
    unlink(path);
    ChildResult r = test_run_child(attend_in_child, in);
    EXPECT(r.exit_status == 2 && r.err_lines == 1, "a missing v.npy: exit 2, one line: %s", r.err);
}

/* A --save directory whose parent does not exist: nothing can be written,
 * status 1 (not the user's input) and one line. */
static void unwritable_output_fails(const Inputs *in)
{
    save_all(in);
    Inputs *missing = ALLOC_ARRAY(1, Inputs);
    *missing = *in;
    snprintf(missing->save_dir, sizeof missing->save_dir, "%s/missing/out", in->dir);
    ChildResult r = test_run_child(attend_in_child, missing);
    EXPECT(r.exit_status == 1 && r.err_lines == 1 && strstr(r.err, "cannot create the directory") != NULL,
           "--save under a missing directory: exit 1 and one line; got status %d, %d lines: %s", r.exit_status,
           r.err_lines, r.err);
    array_free(missing);
}

static void remove_files(const Inputs *in)
{
    char path[128];
    for (size_t i = 0; i < sizeof input_names / sizeof input_names[0]; i++) {
        path_of(path, in, input_names[i]);
        unlink(path);
    }
    for (size_t i = 0; i < sizeof output_names / sizeof output_names[0]; i++) {
        output_path_of(path, in, output_names[i]);
        unlink(path);
    }
}

int main(void)
{
    Inputs *in = ALLOC_ARRAY(1, Inputs);
    snprintf(in->dir, sizeof in->dir, "/tmp/kv_cache_attend_XXXXXX");
    if (!mkdtemp(in->dir))
        test_skip("cannot make a temporary directory in /tmp");
    snprintf(in->save_dir, sizeof in->save_dir, "%s/out", in->dir);
    if (mkdir(in->save_dir, 0700) != 0)
        test_skip("cannot make a directory in the temporary directory");
    Rng rng;
    rng_seed(&rng, 21);
    rng_fill_normal_f32(&rng, in->q, B * H * D, 0, 1);
    rng_fill_normal_f32(&rng, in->k, B * KVH * L * D, 0, 1);
    rng_fill_uniform_f32(&rng, in->v, B * KVH * L * D, -1, 1);
    const int32_t lens[B] = {1, L, 20};
    memcpy(in->lens, lens, sizeof lens);
    outputs_match_reference(in);
    fp8_scales_per_head(in);
    bad_inputs_are_refused(in);
    unwritable_output_fails(in);
    remove_files(in);
    EXPECT(rmdir(in->save_dir) == 0 && rmdir(in->dir) == 0, "the temporary directories are left empty");
    array_free(in);
    return test_finish();
}
