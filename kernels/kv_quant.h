/* Quantized KV-cache blocks: how a block stores its numbers, and the
 * quantize, dequantize, pack and unpack steps, shared by the CPU cache of
 * Chapter 4 and the CUDA decode kernels (kernels/paged_attention.cu).
 *
 * A block of one layer holds block_size positions of every kv head. Each kv
 * head's part of a block is one run of bytes:
 *
 *     [slot][row bytes]     the numbers, a row of head_dim per position
 *     [scales]              fp16 scales (quantized formats only)
 *
 * float32 and fp16 rows hold the numbers themselves. INT8 and INT4 rows hold
 * integers q, and a number reads back as q * scale: symmetric quantization,
 * with one scale shared by a group of numbers,
 *
 *   - per token: the `group` consecutive channels of one position share a
 *     scale (INT8: the whole row; INT4: 32 or 64 channels);
 *   - per channel: one channel of all the block's positions shares a scale
 *     (keys in the KIVI layout: their outliers live in fixed channels).
 *
 * FP8 rows hold E4M3 or E5M2 numbers (kernels/fp8.h) and no scales: a
 * number reads back as fp8 * scale, with the scale kept beside the layout,
 * not in the blocks: one for all the keys (or all the values) of a layer,
 * as vLLM keeps one k_scale and one v_scale per attention layer, or one per
 * kv head (head_scales), as vLLM does with per-attention-head scales.
 *
 * INT4 packs two numbers per byte. In quantized formats the scales start at
 * a multiple of 16 bytes from the start of the run, so a GPU thread can
 * load them 16 bytes at a time. */
#ifndef KERNELS_KV_QUANT_H
#define KERNELS_KV_QUANT_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/hostdevice.h"
#include "kernels/fp16.h"
#include "kernels/fp8.h"
#include "kernels/paged_kv.h"

/* How one number of a row is stored. */
typedef enum {
    KV_NUMBER_FLOAT32,
    KV_NUMBER_FP16,
    KV_NUMBER_INT8,
    KV_NUMBER_INT4,
    KV_NUMBER_FP8_E4M3,
    KV_NUMBER_FP8_E5M2
} KvNumber;

/* Which numbers share a scale. */
typedef enum {
    KV_SCALE_NONE,
    KV_SCALE_PER_TOKEN,
    KV_SCALE_PER_CHANNEL,
    KV_SCALE_PER_TENSOR,
    KV_SCALE_PER_HEAD
} KvScaleAxis;

typedef struct {
    KvNumber number;
    KvScaleAxis axis;
    int group;          /* per token: channels sharing a scale (the last group may be shorter) */
    PagedKvShape shape; /* block_size, n_kv_heads, head_dim */
    float tensor_scale; /* per tensor: what every stored number is multiplied by */
    /* Per head: head_scales[kv_head] for that head's numbers, n_kv_heads of
     * them, in the memory the pool is in (the GPU's for the kernels). */
    const float *head_scales;
} KvBlockLayout;

/* The formats of a whole cache: how its keys and its values are stored. */
typedef enum {
    KV_FORMAT_FLOAT32,
    KV_FORMAT_FP16,
    KV_FORMAT_INT8,     /* one scale per position and kv head */
    KV_FORMAT_INT4,     /* one scale per group of channels of a position */
    KV_FORMAT_KIVI4,    /* INT4: keys per channel, values per position (KIVI) */
    KV_FORMAT_FP8_E4M3, /* one scale for all keys, one for all values */
    KV_FORMAT_FP8_E5M2,
    KV_FORMAT_COUNT
} KvFormat;

HOST_DEVICE static inline int kv_number_bits(KvNumber number)
{
    return number == KV_NUMBER_FLOAT32 ? 32 : number == KV_NUMBER_FP16 ? 16 : number == KV_NUMBER_INT4 ? 4 : 8;
}

HOST_DEVICE static inline Fp8Format kv_fp8_format(KvNumber number)
{
    return number == KV_NUMBER_FP8_E4M3 ? fp8_e4m3() : fp8_e5m2();
}

HOST_DEVICE static inline bool kv_number_is_fp8(KvNumber number)
{
    return number == KV_NUMBER_FP8_E4M3 || number == KV_NUMBER_FP8_E5M2;
}

// ANCHOR: give_each_kv_head_its_fp8_scale
/* Scales per kv head: the layout's FP8 numbers of head h read back as
 * fp8 * scales[h]. `scales` must outlive the layout. */
HOST_DEVICE static inline KvBlockLayout kv_fp8_per_head(KvBlockLayout l, const float *scales)
{
    l.axis = KV_SCALE_PER_HEAD;
    l.head_scales = scales;
    return l;
}

/* The layout one kv head's rows are read and written with: with scales per
 * head, that head's scale becomes the scale of the whole (per tensor), so
 * that the row functions below need no head number. */
HOST_DEVICE static inline KvBlockLayout kv_head_layout(KvBlockLayout l, int kv_head)
{
    if (l.axis == KV_SCALE_PER_HEAD) {
        l.axis = KV_SCALE_PER_TENSOR;
        l.tensor_scale = l.head_scales[kv_head];
    }
    return l;
}

/* The scale of an FP8 row. A layout with scales per head that was not
 * narrowed to one head by kv_head_layout has none: NaN, so that the mistake
 * shows in every number rather than reading the wrong scale. */
HOST_DEVICE static inline float kv_fp8_row_scale(KvBlockLayout l)
{
    return l.axis == KV_SCALE_PER_TENSOR ? l.tensor_scale : NAN;
}
// ANCHOR_END: give_each_kv_head_its_fp8_scale

/* The largest integer a quantized number uses: symmetric, so INT4 uses
 * -7..7 (and leaves -8 unused), INT8 -127..127. */
HOST_DEVICE static inline int kv_qmax(KvNumber number)
{
    return number == KV_NUMBER_INT8 ? 127 : 7;
}

HOST_DEVICE static inline KvBlockLayout kv_layout(KvFormat format, bool keys, PagedKvShape shape, int int4_group)
{
    KvBlockLayout layout = {KV_NUMBER_FLOAT32, KV_SCALE_NONE, shape.head_dim, shape, 1.0f, NULL};
    switch (format) {
    case KV_FORMAT_FLOAT32:
    case KV_FORMAT_COUNT:
        break;
    case KV_FORMAT_FP16:
        layout.number = KV_NUMBER_FP16;
        break;
    case KV_FORMAT_INT8:
        layout.number = KV_NUMBER_INT8;
        layout.axis = KV_SCALE_PER_TOKEN;
        break;
    case KV_FORMAT_INT4:
    case KV_FORMAT_KIVI4:
        layout.number = KV_NUMBER_INT4;
        layout.axis = format == KV_FORMAT_KIVI4 && keys ? KV_SCALE_PER_CHANNEL : KV_SCALE_PER_TOKEN;
        layout.group = int4_group;
        break;
    case KV_FORMAT_FP8_E4M3:
    case KV_FORMAT_FP8_E5M2:
        /* A scale of 1 until the cache's owner calibrates one (kv_fp8_scale_for):
         * what vLLM uses when a checkpoint ships no k_scale and v_scale. */
        layout.number = format == KV_FORMAT_FP8_E4M3 ? KV_NUMBER_FP8_E4M3 : KV_NUMBER_FP8_E5M2;
        layout.axis = KV_SCALE_PER_TENSOR;
        break;
    }
    return layout;
}

HOST_DEVICE static inline size_t kv_round_up_16(size_t bytes)
{
    return (bytes + 15) / 16 * 16;
}

/* Bytes of one position's row of numbers (scales excluded). */
HOST_DEVICE static inline size_t kv_row_bytes(KvBlockLayout l)
{
    return ((size_t)l.shape.head_dim * kv_number_bits(l.number) + 7) / 8;
}

HOST_DEVICE static inline int kv_groups_per_row(KvBlockLayout l)
{
    return (l.shape.head_dim + l.group - 1) / l.group;
}

/* The channel after the last of the group that starts at channel `first`:
 * a group's width on, or the end of the row for a last group cut short. */
HOST_DEVICE static inline int kv_group_end(KvBlockLayout l, int first)
{
    return first + l.group < l.shape.head_dim ? first + l.group : l.shape.head_dim;
}

/* Whether a block holds scales of its own (per token or per channel). */
HOST_DEVICE static inline bool kv_scales_in_block(KvBlockLayout l)
{
    return l.axis == KV_SCALE_PER_TOKEN || l.axis == KV_SCALE_PER_CHANNEL;
}

/* Scales in one kv head's part of a block. */
HOST_DEVICE static inline int kv_scale_count(KvBlockLayout l)
{
    switch (l.axis) {
    case KV_SCALE_PER_TOKEN:
        return l.shape.block_size * kv_groups_per_row(l);
    case KV_SCALE_PER_CHANNEL:
        return l.shape.head_dim;
    case KV_SCALE_NONE:
    case KV_SCALE_PER_TENSOR:
    case KV_SCALE_PER_HEAD:
        break;
    }
    return 0;
}

/* Where the scales start in one kv head's part of a block; rows without
 * scales need no padding, so that a float32 block is laid out as
 * kernels/paged_kv.h says. */
HOST_DEVICE static inline size_t kv_scales_offset(KvBlockLayout l)
{
    size_t rows = (size_t)l.shape.block_size * kv_row_bytes(l);
    return kv_scales_in_block(l) ? kv_round_up_16(rows) : rows;
}

// ANCHOR: size_one_kv_head_of_a_block
/* Bytes of one kv head's part of a block: its rows, then its fp16 scales. */
HOST_DEVICE static inline size_t kv_head_bytes(KvBlockLayout l)
{
    if (!kv_scales_in_block(l)) {
        return kv_scales_offset(l);
    }
    return kv_round_up_16(kv_scales_offset(l) + 2 * (size_t)kv_scale_count(l));
}

HOST_DEVICE static inline size_t kv_block_bytes(KvBlockLayout l)
{
    return (size_t)l.shape.n_kv_heads * kv_head_bytes(l);
}

/* Offset in bytes of (physical block, kv head) in one layer's pool. */
HOST_DEVICE static inline size_t kv_head_offset(KvBlockLayout l, int32_t physical_block, int kv_head)
{
    return ((size_t)physical_block * l.shape.n_kv_heads + kv_head) * kv_head_bytes(l);
}
// ANCHOR_END: size_one_kv_head_of_a_block

/* Which scale a number of (slot, channel) uses. */
HOST_DEVICE static inline int kv_scale_index(KvBlockLayout l, int slot, int channel)
{
    if (l.axis == KV_SCALE_PER_CHANNEL) {
        return channel;
    }
    return slot * kv_groups_per_row(l) + channel / l.group;
}

HOST_DEVICE static inline float kv_load_scale(KvBlockLayout l, const uint8_t *head, int index)
{
    uint16_t bits;
    memcpy(&bits, head + kv_scales_offset(l) + 2 * (size_t)index, sizeof bits);
    return half_to_float(bits);
}

HOST_DEVICE static inline void kv_store_scale(KvBlockLayout l, uint8_t *head, int index, uint16_t bits)
{
    memcpy(head + kv_scales_offset(l) + 2 * (size_t)index, &bits, sizeof bits);
}

// ANCHOR: pack_two_int4_in_a_byte
/* Two INT4 numbers per byte: channel 2i in the low nibble, 2i + 1 in the
 * high one, each stored as q + 8 (0..15 for q in -8..7). */
HOST_DEVICE static inline uint8_t int4_pack(int low, int high)
{
    return (uint8_t)((low + 8) | (high + 8) << 4);
}

HOST_DEVICE static inline int int4_low(uint8_t byte)
{
    return (byte & 0xf) - 8;
}

HOST_DEVICE static inline int int4_high(uint8_t byte)
{
    return (byte >> 4) - 8;
}
// ANCHOR_END: pack_two_int4_in_a_byte

// ANCHOR: find_the_largest_magnitude_of_a_group
/* The larger of a magnitude and the largest so far, where a NaN wins (and
 * then stays: nothing compares above it), so that a group holding one gets
 * a NaN scale. */
HOST_DEVICE static inline float kv_larger_or_nan(float magnitude, float largest)
{
    return magnitude > largest || magnitude != magnitude ? magnitude : largest;
}

/* The largest magnitude of n numbers, `stride` floats apart. */
HOST_DEVICE static inline float kv_largest_magnitude(const float *x, int n, int stride)
{
    float largest = 0.0f;
    for (int i = 0; i < n; i++) {
        largest = kv_larger_or_nan(fabsf(x[(size_t)i * stride]), largest);
    }
    return largest;
}
// ANCHOR_END: find_the_largest_magnitude_of_a_group

// ANCHOR: choose_a_scale_and_round
/* The scale of a group whose largest magnitude is `largest`: largest / qmax,
 * rounded UP to the next fp16. Rounding up keeps |x| / scale <= qmax for
 * every x of the group, so no integer ever needs clamping; it also keeps a
 * tiny nonzero group from getting a zero scale. A group too large for fp16
 * (largest > qmax * 65504) gets an infinite scale, and a group with a NaN or
 * an infinity a NaN or infinite one: such a group reads back as NaN, loudly. */
HOST_DEVICE static inline uint16_t kv_scale_for(float largest, int qmax)
{
    float scale = largest / (float)qmax;
    uint16_t bits = half_from_float(scale);
    if (half_to_float(bits) < scale) {
        bits++; /* the next half up: positive halves are ordered like their bits */
    }
    return bits;
}

/* The integer that stores x: x / scale rounded to nearest (ties to even).
 * A zero scale (an all-zero group) and a non-finite one store 0. */
HOST_DEVICE static inline int kv_quantize(float x, float scale)
{
    if (!(scale > 0.0f && scale <= FLT_MAX)) {
        return 0;
    }
    return (int)rintf(x / scale);
}
// ANCHOR_END: choose_a_scale_and_round

/* The integer stored for `channel` in a quantized row. */
HOST_DEVICE static inline int kv_load_integer(KvBlockLayout l, const uint8_t *row, int channel)
{
    if (l.number == KV_NUMBER_INT8) {
        return (int8_t)row[channel];
    }
    return channel % 2 == 0 ? int4_low(row[channel / 2]) : int4_high(row[channel / 2]);
}

/* Number `channel` of row `slot` as a float. */
HOST_DEVICE static inline float kv_load(KvBlockLayout l, const uint8_t *head, int slot, int channel)
{
    const uint8_t *row = head + (size_t)slot * kv_row_bytes(l);
    if (l.number == KV_NUMBER_FLOAT32) {
        float x;
        memcpy(&x, row + 4 * (size_t)channel, sizeof x);
        return x;
    }
    if (l.number == KV_NUMBER_FP16) {
        uint16_t bits;
        memcpy(&bits, row + 2 * (size_t)channel, sizeof bits);
        return half_to_float(bits);
    }
    if (kv_number_is_fp8(l.number)) {
        return fp8_to_float(row[channel], kv_fp8_format(l.number)) * kv_fp8_row_scale(l);
    }
    return (float)kv_load_integer(l, row, channel) * kv_load_scale(l, head, kv_scale_index(l, slot, channel));
}

/* A whole row (head_dim numbers) as floats; a scale is read once per group. */
HOST_DEVICE static inline void kv_load_row(KvBlockLayout l, const uint8_t *head, int slot, float *out)
{
    const uint8_t *row = head + (size_t)slot * kv_row_bytes(l);
    int head_dim = l.shape.head_dim;
    if (l.number == KV_NUMBER_FLOAT32) {
        memcpy(out, row, kv_row_bytes(l));
    } else if (l.number == KV_NUMBER_FP16) {
        for (int c = 0; c < head_dim; c++) {
            out[c] = kv_load(l, head, slot, c);
        }
    } else if (kv_number_is_fp8(l.number)) {
        Fp8Format format = kv_fp8_format(l.number);
        float scale = kv_fp8_row_scale(l);
        for (int c = 0; c < head_dim; c++) {
            out[c] = fp8_to_float(row[c], format) * scale;
        }
    } else if (l.axis == KV_SCALE_PER_CHANNEL) {
        for (int c = 0; c < head_dim; c++) {
            out[c] = (float)kv_load_integer(l, row, c) * kv_load_scale(l, head, c);
        }
    } else {
        for (int first = 0; first < head_dim; first += l.group) {
            int end = kv_group_end(l, first);
            float scale = kv_load_scale(l, head, kv_scale_index(l, slot, first));
            int c = first;
            /* INT4 two at a time, a byte each, from an even channel on. */
            for (; l.number == KV_NUMBER_INT4 && c % 2 == 0 && c + 1 < end; c += 2) {
                out[c] = (float)int4_low(row[c / 2]) * scale;
                out[c + 1] = (float)int4_high(row[c / 2]) * scale;
            }
            for (; c < end; c++) {
                out[c] = (float)kv_load_integer(l, row, c) * scale;
            }
        }
    }
}

/* Write integer q for (slot, channel) of a quantized row. Writing INT4
 * rewrites the channel's nibble and keeps its neighbour's. */
HOST_DEVICE static inline void kv_store_integer(KvBlockLayout l, uint8_t *head, int slot, int channel, int q)
{
    uint8_t *row = head + (size_t)slot * kv_row_bytes(l);
    if (l.number == KV_NUMBER_INT8) {
        row[channel] = (uint8_t)(int8_t)q;
        return;
    }
    uint8_t *byte = &row[channel / 2];
    *byte = channel % 2 == 0 ? int4_pack(q, int4_high(*byte)) : int4_pack(int4_low(*byte), q);
}

// ANCHOR: scale_and_round_to_fp8
/* The per-tensor scale of FP8 numbers whose largest magnitude is `largest`:
 * the largest then lands on the format's largest finite number, as vLLM's
 * calibrated k_scale and v_scale do. No scale for an all-zero (or non-finite)
 * tensor: 1, which stores zeros as zeros. */
HOST_DEVICE static inline float kv_fp8_scale_for(float largest, KvNumber number)
{
    float scale = largest / (number == KV_NUMBER_FP8_E4M3 ? FP8_E4M3_MAX : FP8_E5M2_MAX);
    return scale > 0.0f && scale <= FLT_MAX ? scale : 1.0f;
}

/* One row of FP8 numbers: x / scale, rounded to nearest even and saturated
 * (kernels/fp8.h), so a number past the calibrated range is clipped, and a
 * NaN stays NaN. */
HOST_DEVICE static inline void kv_store_fp8_row(KvBlockLayout l, uint8_t *row, const float *x)
{
    Fp8Format format = kv_fp8_format(l.number);
    float scale = kv_fp8_row_scale(l);
    for (int c = 0; c < l.shape.head_dim; c++) {
        row[c] = fp8_from_float(x[c] / scale, format);
    }
}
// ANCHOR_END: scale_and_round_to_fp8

// ANCHOR: quantize_one_position
/* Store one position's row of head_dim floats, in a layout whose scales do
 * not span positions (unquantized, or quantized per token). */
HOST_DEVICE static inline void kv_store_row(KvBlockLayout l, uint8_t *head, int slot, const float *x)
{
    uint8_t *row = head + (size_t)slot * kv_row_bytes(l);
    if (l.number == KV_NUMBER_FLOAT32) {
        memcpy(row, x, kv_row_bytes(l));
        return;
    }
    if (l.number == KV_NUMBER_FP16) {
        for (int c = 0; c < l.shape.head_dim; c++) {
            uint16_t bits = half_from_float(x[c]);
            memcpy(row + 2 * (size_t)c, &bits, sizeof bits);
        }
        return;
    }
    if (kv_number_is_fp8(l.number)) {
        kv_store_fp8_row(l, row, x);
        return;
    }
    int qmax = kv_qmax(l.number);
    for (int first = 0; first < l.shape.head_dim; first += l.group) {
        int end = kv_group_end(l, first);
        uint16_t scale_bits = kv_scale_for(kv_largest_magnitude(x + first, end - first, 1), qmax);
        kv_store_scale(l, head, kv_scale_index(l, slot, first), scale_bits);
        float scale = half_to_float(scale_bits);
        for (int c = first; c < end; c++) {
            kv_store_integer(l, head, slot, c, kv_quantize(x[c], scale));
        }
    }
}
// ANCHOR_END: quantize_one_position

// ANCHOR: quantize_a_block_per_channel
/* Store the rows of slots 0..count-1 (count <= block_size) of a block whose
 * scales are per channel: each channel's scale comes from its `count`
 * numbers, so the block is rewritten whole whenever a position is added. */
HOST_DEVICE static inline void kv_store_block_per_channel(KvBlockLayout l, uint8_t *head, const float *rows, int count)
{
    int head_dim = l.shape.head_dim, qmax = kv_qmax(l.number);
    for (int c = 0; c < head_dim; c++) {
        uint16_t scale_bits = kv_scale_for(kv_largest_magnitude(rows + c, count, head_dim), qmax);
        kv_store_scale(l, head, c, scale_bits);
        float scale = half_to_float(scale_bits);
        for (int slot = 0; slot < count; slot++) {
            kv_store_integer(l, head, slot, c, kv_quantize(rows[(size_t)slot * head_dim + c], scale));
        }
    }
}
// ANCHOR_END: quantize_a_block_per_channel

#endif
