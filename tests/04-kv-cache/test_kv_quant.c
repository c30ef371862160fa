/* The quantized block formats of kernels/kv_quant.h, which the CUDA kernels
 * share: INT4 packing, the choice of scale, rounding (to nearest, ties to
 * even), the error bound of half a step on every number, extreme values
 * (huge, tiny, infinite, NaN), all-zero groups, per-channel blocks, and the
 * sizes and offsets of the layout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/kv_quant.h"

static void int4_pairs_round_trip(void)
{
    bool all = true;
    for (int low = -8; low <= 7; low++)
        for (int high = -8; high <= 7; high++) {
            uint8_t byte = int4_pack(low, high);
            all = all && int4_low(byte) == low && int4_high(byte) == high;
        }
    EXPECT(all, "every pair of INT4 values packs into a byte and back");
    EXPECT(int4_pack(-8, -8) == 0x00 && int4_pack(7, 7) == 0xff && int4_pack(0, 0) == 0x88,
           "nibbles hold q + 8, the first value in the low nibble");
    EXPECT(int4_pack(1, -2) == 0x69, "1 goes low (9), -2 goes high (6)");
}

static void scale_is_the_next_half_up(void)
{
    Rng rng;
    rng_seed(&rng, 3);
    bool smallest_above = true;
    for (int i = 0; i < 100000; i++) {
        float largest = (float)exp(rng_uniform_range(&rng, -30, 25)); /* 1e-13 .. 7e10 */
        int qmax = i % 2 ? 127 : 7;
        float exact = largest / (float)qmax;
        uint16_t bits = kv_scale_for(largest, qmax);
        float scale = half_to_float(bits);
        bool above = scale >= exact;
        /* The half below is too small, unless the scale is already the smallest subnormal. */
        bool smallest = bits == 0x0001 || half_to_float((uint16_t)(bits - 1)) < exact;
        if (exact > HALF_MAX)
            smallest = isinf(scale);
        smallest_above = smallest_above && above && smallest;
    }
    EXPECT(smallest_above, "the scale is the smallest half at or above largest / qmax");
    EXPECT(kv_scale_for(127.0f, 127) == half_from_float(1.0f), "an exact scale is kept");
    EXPECT(kv_scale_for(0.0f, 127) == 0, "an all-zero group has scale 0");
    EXPECT(kv_scale_for(1e-30f, 7) == 0x0001, "a tiny group gets the smallest subnormal scale, not 0");
    EXPECT(isinf(half_to_float(kv_scale_for(127.0f * 65505.0f, 127))), "a group beyond fp16 gets an infinite scale");
    EXPECT(isnan(half_to_float(kv_scale_for(NAN, 7))), "a NaN group gets a NaN scale");
    const float with_nan[] = {1.0f, NAN, 3.0f}, with_inf[] = {1.0f, -INFINITY, 2.0f};
    EXPECT(isnan(kv_largest_magnitude(with_nan, 3, 1)), "a NaN wins the largest magnitude");
    EXPECT(isinf(kv_largest_magnitude(with_inf, 3, 1)), "an infinity is the largest magnitude");
}

static PagedKvShape shape_of(int block_size, int head_dim)
{
    PagedKvShape shape = {block_size, 1, head_dim};
    return shape;
}

/* Quantize `rows` rows through a per-token layout and check each number
 * against half a step of its own group's scale; the integers stay within
 * qmax, and every group's largest number uses the largest integer. */
static void check_per_token_rows(KvFormat format, int group, int head_dim, const float *x, int rows, const char *what)
{
    KvBlockLayout l = kv_layout(format, true, shape_of(rows, head_dim), group);
    uint8_t *head = ALLOC_ARRAY(kv_head_bytes(l), uint8_t);
    double worst_share = 0.0;
    bool within_qmax = true;
    for (int s = 0; s < rows; s++)
        kv_store_row(l, head, s, x + (size_t)s * head_dim);
    for (int s = 0; s < rows; s++)
        for (int c = 0; c < head_dim; c++) {
            float scale = kv_load_scale(l, head, kv_scale_index(l, s, c));
            float got = kv_load(l, head, s, c), want = x[(size_t)s * head_dim + c];
            double error = fabs((double)got - want);
            int q = kv_load_integer(l, head + (size_t)s * kv_row_bytes(l), c);
            within_qmax = within_qmax && q >= -kv_qmax(l.number) && q <= kv_qmax(l.number);
            if (scale > 0) {
                worst_share = fmax(worst_share, error / (scale / 2));
            } else {
                worst_share = fmax(worst_share, error == 0.0 ? 0.0 : INFINITY);
            }
        }
    /* Rounding x / scale to an integer is off by at most half a step; the
     * float division x / scale and the product q * scale add at most
     * 127 * 2^-24 of a step each (|q| <= 127): 1.5e-5 of half a step. */
    EXPECT(worst_share <= 1.0 + 4e-5, "%s: every number within half a step (worst %.6f of it)", what, worst_share);
    EXPECT(within_qmax, "%s: integers within [-qmax, qmax]", what);
    array_free(head);
}

static void round_trips_within_half_a_step(void)
{
    enum { ROWS = 16, HEAD_DIM = 128 };
    Rng rng;
    rng_seed(&rng, 4);
    float *x = ALLOC_ARRAY(ROWS * HEAD_DIM, float);
    const double magnitudes[] = {1e-6, 1.0, 300.0, 1e5};
    for (size_t m = 0; m < 4; m++) {
        rng_fill_normal_f32(&rng, x, ROWS * HEAD_DIM, 0, magnitudes[m]);
        x[5] = (float)(40 * magnitudes[m]); /* an outlier in row 0 */
        char what[64];
        snprintf(what, sizeof what, "INT8, magnitude %g", magnitudes[m]);
        check_per_token_rows(KV_FORMAT_INT8, 0, HEAD_DIM, x, ROWS, what);
        snprintf(what, sizeof what, "INT4 group 32, magnitude %g", magnitudes[m]);
        check_per_token_rows(KV_FORMAT_INT4, 32, HEAD_DIM, x, ROWS, what);
        snprintf(what, sizeof what, "INT4 group 64, magnitude %g", magnitudes[m]);
        check_per_token_rows(KV_FORMAT_INT4, 64, HEAD_DIM, x, ROWS, what);
    }
    /* head_dim 12 with groups of 32: one short group per row; odd head_dim
     * leaves half a byte unused. */
    rng_fill_normal_f32(&rng, x, ROWS * HEAD_DIM, 0, 1);
    check_per_token_rows(KV_FORMAT_INT4, 32, 12, x, ROWS, "INT4, head_dim 12, one short group");
    check_per_token_rows(KV_FORMAT_INT4, 4, 13, x, ROWS, "INT4, head_dim 13, groups of 4");
    check_per_token_rows(KV_FORMAT_INT8, 0, 13, x, ROWS, "INT8, head_dim 13");
    array_free(x);
}

/* A row whose largest magnitude is qmax has scale exactly 1, so it reads
 * back its integers: x.5 must come back as the even integer. */
static void check_ties(KvFormat format, const float *x, const float *want, int n, const char *what)
{
    KvBlockLayout l = kv_layout(format, true, shape_of(1, n), 32);
    uint8_t head[64] = {0};
    kv_store_row(l, head, 0, x);
    bool all = kv_load_scale(l, head, 0) == 1.0f;
    for (int c = 0; c < n; c++)
        all = all && kv_load(l, head, 0, c) == want[c];
    EXPECT(all, "%s", what);
}

static void ties_round_to_even(void)
{
    const float x[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, -127.0f};
    const float want[8] = {127.0f, 0.0f, 2.0f, 2.0f, 0.0f, -2.0f, 126.0f, -127.0f};
    check_ties(KV_FORMAT_INT8, x, want, 8, "INT8 with scale 1: ties round to even, +-127 exact");
    const float y[4] = {7.0f, 3.5f, -2.5f, 0.49f}, want_y[4] = {7.0f, 4.0f, -2.0f, 0.0f};
    check_ties(KV_FORMAT_INT4, y, want_y, 4, "INT4 with scale 1: 3.5 -> 4, -2.5 -> -2, 0.49 -> 0");
}

/* One row of 64 channels, groups of 32: each case fills group 0 and leaves
 * group 1 ordinary, which must not be disturbed by group 0. */
static void extreme_values(void)
{
    KvBlockLayout l = kv_layout(KV_FORMAT_INT4, true, shape_of(1, 64), 32);
    KvBlockLayout l8 = kv_layout(KV_FORMAT_INT8, true, shape_of(1, 64), 0);
    uint8_t head[256];
    float x[64];
    for (int c = 32; c < 64; c++)
        x[c] = (float)(c - 48) / 16.0f;

    struct {
        const char *what;
        float first, rest;
        bool nan_expected;
    } cases[] = {
        {"all zero",                                      0.0f,     0.0f,    false},
        {"huge but within fp16 scales (4e5 / 7 < 65504)", 4e5f,     -3e5f,   false},
        {"beyond fp16 scales (1e6 / 7 > 65504)",          1e6f,     1.0f,    true },
        {"tiny (1e-9)",                                   1e-9f,    -5e-10f, false},
        {"an infinity",                                   INFINITY, 1.0f,    true },
        {"a NaN",                                         NAN,      1.0f,    true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        x[0] = cases[i].first;
        for (int c = 1; c < 32; c++)
            x[c] = cases[i].rest * (float)c / 31.0f;
        memset(head, 0, sizeof head);
        kv_store_row(l, head, 0, x);
        float scale = kv_load_scale(l, head, 0);
        bool group0 = true, group1 = true;
        for (int c = 0; c < 32; c++) {
            float got = kv_load(l, head, 0, c);
            group0 = group0 && (cases[i].nan_expected ? isnan(got) : fabsf(got - x[c]) <= scale / 2);
        }
        float scale1 = kv_load_scale(l, head, 1);
        for (int c = 32; c < 64; c++)
            group1 = group1 && fabsf(kv_load(l, head, 0, c) - x[c]) <= scale1 / 2;
        EXPECT(group0, "INT4 group %s: %s", cases[i].what,
               cases[i].nan_expected ? "reads back as NaN" : "within half a step");
        EXPECT(group1, "INT4 group after one that is %s: undisturbed", cases[i].what);
        if (strcmp(cases[i].what, "all zero") == 0) {
            bool zeros = scale == 0.0f;
            for (int c = 0; c < 32; c++)
                zeros = zeros && kv_load(l, head, 0, c) == 0.0f;
            EXPECT(zeros, "an all-zero group: scale 0, reads back exactly 0 (not NaN)");
        }
    }
    /* INT8: one scale for the row, so a NaN anywhere spoils the whole row. */
    x[0] = NAN;
    memset(head, 0, sizeof head);
    kv_store_row(l8, head, 0, x);
    bool all_nan = true;
    for (int c = 0; c < 64; c++)
        all_nan = all_nan && isnan(kv_load(l8, head, 0, c));
    EXPECT(all_nan, "INT8: a NaN in a row makes the whole row NaN");
}

static void per_channel_blocks(void)
{
    enum { BLOCK = 16, HEAD_DIM = 64 };
    Rng rng;
    rng_seed(&rng, 8);
    float rows[BLOCK * HEAD_DIM];
    rng_fill_normal_f32(&rng, rows, BLOCK * HEAD_DIM, 0, 1);
    for (int s = 0; s < BLOCK; s++)
        rows[s * HEAD_DIM + 60] *= 50.0f; /* an outlier channel */
    for (int s = 0; s < BLOCK; s++)
        rows[s * HEAD_DIM + 7] = 0.0f; /* an all-zero channel */
    KvBlockLayout l = kv_layout(KV_FORMAT_KIVI4, true, shape_of(BLOCK, HEAD_DIM), 32);
    EXPECT(l.axis == KV_SCALE_PER_CHANNEL, "KIVI keys are quantized per channel");
    EXPECT(kv_layout(KV_FORMAT_KIVI4, false, shape_of(BLOCK, HEAD_DIM), 32).axis == KV_SCALE_PER_TOKEN,
           "KIVI values are quantized per token");
    uint8_t *head = ALLOC_ARRAY(kv_head_bytes(l), uint8_t);
    const int counts[] = {1, 5, BLOCK};
    for (int i = 0; i < 3; i++) {
        kv_store_block_per_channel(l, head, rows, counts[i]);
        double worst = 0.0;
        bool zero_channel = kv_load_scale(l, head, 7) == 0.0f;
        for (int c = 0; c < HEAD_DIM; c++) {
            float scale = kv_load_scale(l, head, c);
            /* The scale comes from the channel's own numbers. */
            worst = fmax(worst, fabs(scale - (double)kv_largest_magnitude(rows + c, counts[i], HEAD_DIM) / 7) /
                                    (scale > 0 ? scale : 1));
            for (int s = 0; s < counts[i]; s++) {
                double error = fabs((double)kv_load(l, head, s, c) - rows[s * HEAD_DIM + c]);
                if (scale > 0)
                    worst = fmax(worst, error / (scale / 2) - 1.0);
                zero_channel = zero_channel && (c != 7 || kv_load(l, head, s, c) == 0.0f);
            }
        }
        EXPECT(worst <= 1e-3, "per channel, %d positions: scales from each channel, errors within half a step",
               counts[i]);
        EXPECT(zero_channel, "per channel, %d positions: an all-zero channel reads back 0", counts[i]);
    }
    array_free(head);
}

static void unquantized_rows(void)
{
    const float x[5] = {1.0f, -0.1f, 65519.0f, 1e-7f, 3.14159265f};
    KvBlockLayout l32 = kv_layout(KV_FORMAT_FLOAT32, true, shape_of(2, 5), 32);
    KvBlockLayout l16 = kv_layout(KV_FORMAT_FP16, true, shape_of(2, 5), 32);
    uint8_t head[64] = {0}, head16[64] = {0};
    kv_store_row(l32, head, 1, x);
    kv_store_row(l16, head16, 1, x);
    float back[5];
    kv_load_row(l32, head, 1, back);
    EXPECT(memcmp(back, x, sizeof x) == 0, "float32 rows are stored bit for bit");
    bool halves = true;
    for (int c = 0; c < 5; c++)
        halves = halves && kv_load(l16, head16, 1, c) == half_to_float(half_from_float(x[c]));
    EXPECT(halves, "fp16 rows hold each number rounded to fp16");
}

/* FP8 rows with a scale per tensor: the scale puts the largest magnitude on
 * the format's largest number; each number reads back within half a step
 * relative to itself (2^-4 for E4M3's 3 mantissa bits, 2^-3 for E5M2's 2,
 * in the normal range, where all of these lie); a number past the range
 * saturates at the largest, and a NaN stays NaN. */
static void fp8_rows(void)
{
    const KvFormat formats[] = {KV_FORMAT_FP8_E4M3, KV_FORMAT_FP8_E5M2};
    const double largest_code[] = {448.0, 57344.0}, half_step[] = {0x1p-4, 0x1p-3};
    static const float x[6] = {0.75f, -2.5f, 1.1f, -0.3f, 3.0f, 0.0f},
                       past[6] = {10.0f, -1e30f, NAN, 0.0f, 3.0f, -3.0f};
    for (int f = 0; f < 2; f++) {
        KvBlockLayout l = kv_layout(formats[f], false, shape_of(2, 6), 32);
        l.tensor_scale = kv_fp8_scale_for(3.0f, l.number);
        EXPECT(l.tensor_scale == (float)(3.0 / largest_code[f]), "%s: scale = largest / %g", kv_format_name(formats[f]),
               largest_code[f]);
        uint8_t head[64] = {0};
        kv_store_row(l, head, 1, x);
        bool within = true;
        for (int c = 0; c < 6; c++)
            within = within && fabs((double)kv_load(l, head, 1, c) - x[c]) <= half_step[f] * fabs((double)x[c]);
        EXPECT(within, "%s: every number within %g of itself", kv_format_name(formats[f]), half_step[f]);
        kv_store_row(l, head, 1, past);
        float top = (float)(largest_code[f] * l.tensor_scale);
        EXPECT(kv_load(l, head, 1, 0) == top && kv_load(l, head, 1, 1) == -top,
               "%s: past the range, the largest number (saturated, not inf or NaN)", kv_format_name(formats[f]));
        EXPECT(isnan(kv_load(l, head, 1, 2)), "%s: NaN stays NaN", kv_format_name(formats[f]));
    }
    EXPECT(kv_fp8_scale_for(0.0f, KV_NUMBER_FP8_E4M3) == 1.0f && kv_fp8_scale_for(NAN, KV_NUMBER_FP8_E5M2) == 1.0f,
           "an all-zero or NaN tensor gets scale 1");
}

/* FP8 scales per kv head, for two heads whose numbers lie 2^40 apart, more
 * than either format's normal range spans (E4M3 2^-6 to 448, near 2^15;
 * E5M2 2^-14 to 57344, near 2^30): with a scale each (kv_head_layout), every
 * number reads back within half a step of itself; with the larger head's
 * scale for both, as one per-tensor scale would be, the smaller head's
 * numbers all read back as 0. A per-head layout not narrowed to one head
 * reads NaN. */
static void fp8_scales_per_head(void)
{
    const KvFormat formats[] = {KV_FORMAT_FP8_E4M3, KV_FORMAT_FP8_E5M2};
    const double half_step[] = {0x1p-4, 0x1p-3};
    static const float x[6] = {0.75f, -2.5f, 1.1f, -0.3f, 3.0f, 0.0f};
    const float gains[2] = {0x1p-20f, 0x1p20f};
    for (int f = 0; f < 2; f++) {
        const char *name = kv_format_name(formats[f]);
        KvBlockLayout tensor = kv_layout(formats[f], true, shape_of(1, 6), 32);
        float scales[2];
        for (int h = 0; h < 2; h++)
            scales[h] = kv_fp8_scale_for(3.0f * gains[h], tensor.number);
        KvBlockLayout per_head = kv_fp8_per_head(tensor, scales);
        tensor.tensor_scale = scales[1];
        bool within = true, flushed = true;
        for (int h = 0; h < 2; h++) {
            float rows[6] = {0}; /* {0}: gcc 13 cannot see that the loop fills it */
            for (int c = 0; c < 6; c++)
                rows[c] = x[c] * gains[h];
            uint8_t head[16] = {0}, shared[16] = {0};
            KvBlockLayout own = kv_head_layout(per_head, h);
            within = within && own.tensor_scale == scales[h];
            kv_store_row(own, head, 0, rows);
            kv_store_row(tensor, shared, 0, rows);
            for (int c = 0; c < 6; c++) {
                double error = fabs((double)kv_load(own, head, 0, c) - rows[c]);
                within = within && error <= half_step[f] * fabs((double)rows[c]);
                flushed = flushed && (h == 1 || kv_load(tensor, shared, 0, c) == 0.0f);
            }
        }
        EXPECT(within, "%s: with a scale per kv head, both heads' numbers within %g of themselves", name, half_step[f]);
        EXPECT(flushed, "%s: with one scale for both, the smaller head reads back as zeros", name);
        uint8_t head[16] = {0};
        EXPECT(isnan(kv_load(per_head, head, 0, 0)), "%s: a per-head layout used without its head reads NaN", name);
    }
}

/* kv_load_row (fast, a scale per group) reads what kv_load reads number by
 * number, for every format, odd head_dims, odd and short groups. */
static void rows_read_like_numbers(void)
{
    const int head_dims[] = {2, 13, 64, 130}, groups[] = {3, 5, 32, 64};
    Rng rng;
    rng_seed(&rng, 9);
    bool same = true;
    for (int format = 0; format < KV_FORMAT_COUNT; format++)
        for (int d = 0; d < 4; d++)
            for (int g = 0; g < 4; g++) {
                PagedKvShape shape = {5, 1, head_dims[d]};
                KvBlockLayout l = kv_layout((KvFormat)format, true, shape, groups[g]);
                uint8_t *head = ALLOC_ARRAY(kv_head_bytes(l), uint8_t);
                float *rows = ALLOC_ARRAY(5 * (size_t)head_dims[d], float), row[130];
                rng_fill_normal_f32(&rng, rows, 5 * (size_t)head_dims[d], 0, 1);
                if (l.axis == KV_SCALE_PER_CHANNEL)
                    kv_store_block_per_channel(l, head, rows, 5);
                else
                    for (int s = 0; s < 5; s++)
                        kv_store_row(l, head, s, rows + (size_t)s * head_dims[d]);
                for (int s = 0; s < 5; s++) {
                    kv_load_row(l, head, s, row);
                    for (int c = 0; c < head_dims[d]; c++)
                        same = same && row[c] == kv_load(l, head, s, c);
                }
                array_free(head);
                array_free(rows);
            }
    EXPECT(same, "a row read whole equals its numbers read one by one, in every layout");
}

static double bits_per_number(KvBlockLayout l)
{
    return 8.0 * (double)kv_head_bytes(l) / ((double)l.shape.block_size * l.shape.head_dim);
}

static void sizes_and_offsets(void)
{
    PagedKvShape llama = {16, 8, 128};
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_FLOAT32, true, llama, 32)) == 32.0, "float32: 32 bits");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_FP16, true, llama, 32)) == 16.0, "fp16: 16 bits");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_INT8, true, llama, 32)) == 8.125, "INT8, head_dim 128: 8 + 16/128");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_INT4, true, llama, 32)) == 4.5, "INT4, groups of 32: 4 + 16/32");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_INT4, true, llama, 64)) == 4.25, "INT4, groups of 64: 4 + 16/64");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_FP8_E4M3, true, llama, 32)) == 8.0 &&
               bits_per_number(kv_layout(KV_FORMAT_FP8_E5M2, false, llama, 32)) == 8.0,
           "FP8: 8 bits, its scales (two per layer) outside the blocks");
    PagedKvShape block32 = {32, 8, 128};
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_KIVI4, true, block32, 32)) == 4.5, "KIVI keys, blocks of 32: 4 + 16/32");
    EXPECT(bits_per_number(kv_layout(KV_FORMAT_KIVI4, true, llama, 32)) == 5.0, "KIVI keys, blocks of 16: 4 + 16/16");

    /* A float32 block is the layout of kernels/paged_kv.h, in bytes. */
    const PagedKvShape shapes[] = {
        {1,  1, 2  },
        {3,  2, 5  },
        {16, 8, 128},
        {7,  3, 13 }
    };
    bool same = true;
    for (int i = 0; i < 4; i++) {
        KvBlockLayout l = kv_layout(KV_FORMAT_FLOAT32, true, shapes[i], 32);
        for (int b = 0; b < 5; b++)
            for (int h = 0; h < shapes[i].n_kv_heads; h++)
                same = same && kv_head_offset(l, b, h) == 4 * paged_kv_offset(shapes[i], b, h, 0);
    }
    EXPECT(same, "float32 blocks are where kernels/paged_kv.h puts them");

    /* Scales in the blocks: rows and scales inside the head's bytes, 16-byte aligned. */
    bool inside = true;
    for (int format = KV_FORMAT_INT8; format < KV_FORMAT_COUNT; format++)
        for (int i = 0; i < 4; i++) {
            KvBlockLayout l = kv_layout((KvFormat)format, true, shapes[i], 4);
            if (!kv_scales_in_block(l))
                continue;
            size_t end = kv_scales_offset(l) + 2 * (size_t)kv_scale_count(l);
            inside = inside && kv_scales_offset(l) % 16 == 0 && kv_head_bytes(l) % 16 == 0 &&
                     kv_scales_offset(l) >= (size_t)shapes[i].block_size * kv_row_bytes(l) && end <= kv_head_bytes(l);
        }
    EXPECT(inside, "quantized rows and scales fit their head's bytes, 16-byte aligned");
}

int main(void)
{
    int4_pairs_round_trip();
    scale_is_the_next_half_up();
    round_trips_within_half_a_step();
    ties_round_to_even();
    extreme_values();
    per_channel_blocks();
    unquantized_rows();
    fp8_rows();
    fp8_scales_per_head();
    rows_read_like_numbers();
    sizes_and_offsets();
    return test_finish();
}
