#include "chapters/04-kv-cache/attend_npy.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "chapters/04-kv-cache/block_pool.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/rng.h"

typedef struct {
    int batch, n_heads, n_kv_heads, max_len, head_dim;
    const float *q, *k, *v;
    const int32_t *lens;
} AttendInput;

/* `option` names the directory's option in the error line. */
static void path_in(char *path, size_t size, const char *option, const char *dir, const char *name)
{
    if (snprintf(path, size, "%s/%s", dir, name) >= (int)size)
        cli_fail("%s: directory name too long: '%s'", option, dir);
}

static void require(bool ok, const char *name, const char *what, size_t got, size_t expected)
{
    if (!ok)
        cli_fail("%s: %s is %zu, expected %zu", name, what, got, expected);
}

/* The program indexes with int, as the kernels do: a dimension that does
 * not fit is refused, never wrapped. */
static void require_int_dimensions(const char *name, const NpyArray *array)
{
    for (int d = 0; d < array->ndim; d++)
        if (array->shape[d] > INT_MAX)
            cli_fail("%s: dimension %d is %zu, more than this program takes (%d)", name, d, array->shape[d], INT_MAX);
}

/* Shapes that agree with each other, and lengths in [1, max_len]. */
static AttendInput check_inputs(const NpyArray *q, const NpyArray *k, const NpyArray *v, const NpyArray *lens)
{
    require_int_dimensions("q.npy", q);
    require_int_dimensions("k.npy", k);
    require_int_dimensions("v.npy", v);
    require_int_dimensions("lens.npy", lens);
    AttendInput in = {
        .batch = (int)q->shape[0],
        .n_heads = (int)q->shape[1],
        .head_dim = (int)q->shape[2],
        .n_kv_heads = (int)k->shape[1],
        .max_len = (int)k->shape[2],
        .q = q->data,
        .k = k->data,
        .v = v->data,
        .lens = lens->data,
    };
    require(k->shape[0] == q->shape[0], "k.npy", "batch (dimension 0)", k->shape[0], q->shape[0]);
    require(k->shape[3] == q->shape[2], "k.npy", "head_dim (dimension 3)", k->shape[3], q->shape[2]);
    for (int d = 0; d < 4; d++)
        if (v->shape[d] != k->shape[d])
            cli_fail("v.npy: dimension %d is %zu, but k.npy's is %zu", d, v->shape[d], k->shape[d]);
    require(lens->shape[0] == q->shape[0], "lens.npy", "length", lens->shape[0], q->shape[0]);
    if (in.batch < 1 || in.n_heads < 1 || in.head_dim < 1 || in.n_kv_heads < 1 || in.max_len < 1)
        cli_fail("q.npy, k.npy, v.npy: every dimension must be at least 1");
    if (in.n_heads % in.n_kv_heads != 0)
        cli_fail("q.npy has %d heads, not a multiple of k.npy's %d kv heads", in.n_heads, in.n_kv_heads);
    for (int b = 0; b < in.batch; b++)
        if (in.lens[b] < 1 || in.lens[b] > in.max_len)
            cli_fail("lens.npy: lens[%d] = %d, expected 1..%d (k.npy's dimension 2)", b, in.lens[b], in.max_len);
    return in;
}

static const float *kv_row(const AttendInput *in, const float *kv, int b, int h, int p)
{
    return kv + (((size_t)b * in->n_kv_heads + h) * in->max_len + p) * in->head_dim;
}

static void attend_all_contiguous(const AttendInput *in, float *scores, float *out)
{
    int group = in->n_heads / in->n_kv_heads;
    for (int b = 0; b < in->batch; b++)
        for (int h = 0; h < in->n_kv_heads; h++) {
            size_t q = ((size_t)b * in->n_heads + (size_t)h * group) * in->head_dim;
            attend_contiguous(in->q + q, group, kv_row(in, in->k, b, h, 0), kv_row(in, in->v, b, h, 0), in->lens[b],
                              in->head_dim, scores, out + q);
        }
}

/* The largest magnitude of kv head h's rows (of every head: h = -1) within
 * the sequences' lengths. */
static float largest_within_lengths(const AttendInput *in, const float *kv, int h)
{
    float largest = 0.0f;
    for (int b = 0; b < in->batch; b++)
        for (int head = h < 0 ? 0 : h; head < (h < 0 ? in->n_kv_heads : h + 1); head++)
            for (int p = 0; p < in->lens[b]; p++) {
                float row = kv_largest_magnitude(kv_row(in, kv, b, head, p), in->head_dim, 1);
                largest = row > largest || row != row ? row : largest;
            }
    return largest;
}

/* FP8 scales calibrated on the tensors themselves: the largest magnitude
 * (of the whole tensor, or of each kv head) lands on the format's largest
 * number. `head_scales` has room for n_kv_heads and must outlive the layout. */
static KvBlockLayout calibrate_fp8(const AttendInput *in, KvBlockLayout l, const float *kv, KvScaleAxis axis,
                                   float *head_scales)
{
    if (axis == KV_SCALE_PER_TENSOR) {
        l.tensor_scale = kv_fp8_scale_for(largest_within_lengths(in, kv, -1), l.number);
        return l;
    }
    for (int h = 0; h < in->n_kv_heads; h++)
        head_scales[h] = kv_fp8_scale_for(largest_within_lengths(in, kv, h), l.number);
    return kv_fp8_per_head(l, head_scales);
}

/* Store each sequence in blocks of the format, handed out from a shuffled
 * pool, then attend through the block tables. FP8 takes its scales per
 * tensor or per kv head, as `fp8_scales` says. */
static void attend_all_paged(const AttendInput *in, int block_size, KvFormat format, int int4_group,
                             KvScaleAxis fp8_scales, float *scores, float *out)
{
    PagedKvShape shape = {block_size, in->n_kv_heads, in->head_dim};
    KvBlockLayout keys = kv_layout(format, true, shape, int4_group),
                  values = kv_layout(format, false, shape, int4_group);
    float *key_head_scales = ALLOC_ARRAY(in->n_kv_heads, float),
          *value_head_scales = ALLOC_ARRAY(in->n_kv_heads, float);
    if (keys.axis == KV_SCALE_PER_TENSOR) {
        keys = calibrate_fp8(in, keys, in->k, fp8_scales, key_head_scales);
        values = calibrate_fp8(in, values, in->v, fp8_scales, value_head_scales);
    }
    int blocks = 0;
    for (int b = 0; b < in->batch; b++)
        blocks += paged_kv_blocks_for(in->lens[b], block_size);
    BlockPool pool = block_pool_create(blocks, block_size, false);
    Rng rng;
    rng_seed(&rng, 1);
    block_pool_shuffle(&pool, &rng);
    uint8_t *key_pool = ALLOC_ARRAY((size_t)blocks * kv_block_bytes(keys), uint8_t);
    uint8_t *value_pool = ALLOC_ARRAY((size_t)blocks * kv_block_bytes(values), uint8_t);
    float *tile = ALLOC_ARRAY((size_t)block_size * in->head_dim, float);
    int group = in->n_heads / in->n_kv_heads;
    for (int b = 0; b < in->batch; b++) {
        BlockTable table = block_table_create(paged_kv_blocks_for(in->lens[b], block_size));
        BlockCopy no_copy;
        block_table_reserve(&pool, &table, in->lens[b], &no_copy);
        for (int h = 0; h < in->n_kv_heads; h++) {
            for (int p = 0; p < in->lens[b]; p++) {
                int32_t block = table.blocks[p / block_size];
                kv_store_row(kv_head_layout(keys, h), key_pool + kv_head_offset(keys, block, h), p % block_size,
                             kv_row(in, in->k, b, h, p));
                kv_store_row(kv_head_layout(values, h), value_pool + kv_head_offset(values, block, h), p % block_size,
                             kv_row(in, in->v, b, h, p));
            }
            size_t q = ((size_t)b * in->n_heads + (size_t)h * group) * in->head_dim;
            if (format == KV_FORMAT_FLOAT32)
                attend_paged(in->q + q, group, (const float *)key_pool, (const float *)value_pool, shape, table.blocks,
                             h, in->lens[b], scores, out + q);
            else
                attend_paged_quantized(in->q + q, group, (KvPool){key_pool, keys}, (KvPool){value_pool, values},
                                       table.blocks, h, in->lens[b], tile, scores, out + q);
        }
        block_table_release(&pool, &table);
        block_table_free(&table);
    }
    array_free(key_pool);
    array_free(value_pool);
    array_free(tile);
    array_free(key_head_scales);
    array_free(value_head_scales);
    block_pool_free(&pool);
}

/* Set flagged[b * n_heads + h] for each query head whose query, or whose
 * keys and values within the sequence's length, hold an inf or a NaN. */
static void flag_nonfinite_inputs(const AttendInput *in, bool *flagged)
{
    int group = in->n_heads / in->n_kv_heads;
    mark_nonfinite_rows(in->q, (size_t)in->batch * in->n_heads, (size_t)in->head_dim, flagged);
    for (int b = 0; b < in->batch; b++)
        for (int h = 0; h < in->n_kv_heads; h++) {
            size_t positions = (size_t)in->lens[b], width = (size_t)in->head_dim;
            bool nonfinite = mark_nonfinite_rows(kv_row(in, in->k, b, h, 0), positions, width, NULL) > 0 ||
                             mark_nonfinite_rows(kv_row(in, in->v, b, h, 0), positions, width, NULL) > 0;
            if (nonfinite)
                for (int g = 0; g < group; g++)
                    flagged[(size_t)b * in->n_heads + (size_t)h * group + g] = true;
        }
}

/* One output per cache format, all written together or none (npy_output_dir);
 * the query heads with non-finite inputs or outputs are counted in a note. */
static void attend_and_save(const AttendInput *in, const char *save_dir, int block_size, int int4_group,
                            KvScaleAxis fp8_scales)
{
    NpyOutputDir save = npy_output_dir_open(save_dir);
    size_t heads = (size_t)in->batch * in->n_heads;
    size_t out_shape[3] = {(size_t)in->batch, (size_t)in->n_heads, (size_t)in->head_dim};
    float *scores = ALLOC_ARRAY((size_t)(in->n_heads / in->n_kv_heads) * in->max_len, float);
    float *out = ALLOC_ARRAY(heads * in->head_dim, float);
    bool *flagged = ALLOC_ARRAY(heads, bool);
    flag_nonfinite_inputs(in, flagged);
    attend_all_contiguous(in, scores, out);
    mark_nonfinite_rows(out, heads, (size_t)in->head_dim, flagged);
    npy_output_dir_add(&save, "out_contiguous.npy", NPY_FLOAT32, 3, out_shape, out);
    const KvFormat formats[] = {KV_FORMAT_FLOAT32, KV_FORMAT_INT8, KV_FORMAT_INT4, KV_FORMAT_FP8_E4M3,
                                KV_FORMAT_FP8_E5M2};
    const char *names[] = {"out_paged.npy", "out_int8.npy", "out_int4.npy", "out_fp8_e4m3.npy", "out_fp8_e5m2.npy"};
    for (int f = 0; f < 5; f++) {
        attend_all_paged(in, block_size, formats[f], int4_group, fp8_scales, scores, out);
        mark_nonfinite_rows(out, heads, (size_t)in->head_dim, flagged);
        npy_output_dir_add(&save, names[f], NPY_FLOAT32, 3, out_shape, out);
    }
    npy_output_dir_commit(&save);
    note_nonfinite_rows(count_flagged(flagged, heads), heads, "q, k, v or the outputs");
    array_free(flagged);
    array_free(scores);
    array_free(out);
}

void attend_npy(const char *load_dir, const char *save_dir, int block_size, int int4_group, KvScaleAxis fp8_scales)
{
    char path[4096];
    const size_t any3[3] = {0, 0, 0}, any4[4] = {0, 0, 0, 0}, any1[1] = {0};
    path_in(path, sizeof path, "--load", load_dir, "q.npy");
    NpyArray q = npy_load_or_exit(path, NPY_FLOAT32, 3, any3);
    path_in(path, sizeof path, "--load", load_dir, "k.npy");
    NpyArray k = npy_load_or_exit(path, NPY_FLOAT32, 4, any4);
    path_in(path, sizeof path, "--load", load_dir, "v.npy");
    NpyArray v = npy_load_or_exit(path, NPY_FLOAT32, 4, any4);
    path_in(path, sizeof path, "--load", load_dir, "lens.npy");
    NpyArray lens = npy_load_or_exit(path, NPY_INT32, 1, any1);
    AttendInput in = check_inputs(&q, &k, &v, &lens);
    attend_and_save(&in, save_dir, block_size, int4_group, fp8_scales);
    npy_free(&q);
    npy_free(&k);
    npy_free(&v);
    npy_free(&lens);
}
