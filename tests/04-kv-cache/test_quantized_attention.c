/* Attention that reads quantized blocks and dequantizes them one block at a
 * time, against a double-precision reference over the very numbers the
 * blocks hold, for every format, irregular lengths (not multiples of the
 * block size), GQA groups and block sizes; and the float32 format through
 * the quantized path is bit-identical to the plain paged attention; the
 * table an FP8 pool is read through holds every code's value. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/attention.h"
#include "chapters/04-kv-cache/decode_batch.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/testing.h"

static void matches_reference(DecodeBatchShape shape, const int32_t *lengths)
{
    DecodeBatch b = decode_batch_create(&shape, lengths);
    size_t per_seq = (size_t)shape.n_heads * shape.head_dim;
    float *out = ALLOC_ARRAY(shape.batch * per_seq, float);
    double *ref = ALLOC_ARRAY(shape.batch * per_seq, double);
    decode_batch_attend_cpu(&b, out);
    for (int s = 0; s < shape.batch; s++)
        decode_batch_reference(&b, s, ref + s * per_seq);
    char what[160];
    snprintf(what, sizeof what, "%s%s, %d heads / %d kv heads of %d, blocks of %d, lengths %d %d %d",
             kv_format_name(shape.format), shape.fp8_per_head ? " (scales per kv head)" : "", shape.n_heads,
             shape.n_kv_heads, shape.head_dim, shape.block_size, lengths[0], lengths[1], lengths[2]);
    /* The same numbers in float arithmetic: values in [-1, 1] (times up to
     * 4, kv head h + 1, with FP8 scales per head), a float softmax over at
     * most 1000 positions. */
    CloseReport r = check_close_f32(out, ref, shape.batch * per_seq, ATTENTION_FLOAT_ATOL, ATTENTION_FLOAT_RTOL);
    EXPECT(close_report_print(stdout, what, &r), "%s: matches the double reference", what);
    array_free(out);
    array_free(ref);
    decode_batch_free(&b);
}

static void float32_through_the_quantized_path_is_bitwise(void)
{
    const int32_t lengths[3] = {1, 45, 100};
    DecodeBatchShape shape = {3, 8, 2, 16, 16, KV_FORMAT_FLOAT32, 32, 7, false};
    DecodeBatch b = decode_batch_create(&shape, lengths);
    int group = 4, d = 16;
    float plain[4 * 16], quantized_path[4 * 16], scores[4 * 112], tile[16 * 16];
    bool same = true;
    KvPool keys = {b.key_pool, b.key_layout}, values = {b.value_pool, b.value_layout};
    for (int s = 0; s < 3; s++)
        for (int kv = 0; kv < 2; kv++) {
            const float *q = b.queries + ((size_t)s * 8 + kv * group) * d;
            const int32_t *table = b.block_tables + (size_t)s * b.max_blocks;
            attend_paged(q, group, (const float *)b.key_pool, (const float *)b.value_pool, b.shape, table, kv,
                         lengths[s], scores, plain);
            attend_paged_quantized(q, group, keys, values, table, kv, lengths[s], tile, scores, quantized_path);
            same = same && memcmp(plain, quantized_path, sizeof plain) == 0;
        }
    EXPECT(same, "float32 blocks through the quantized path: bit-identical to attend_paged");
    decode_batch_free(&b);
}

/* What an FP8 code means, from its bit fields in double (OCP OFP8): the
 * independent check of the attention's table of 256 codes. */
static double fp8_from_fields(int code, int mantissa_bits, int bias, bool has_infinity)
{
    int sign = code >> 7, magnitude = code & 0x7f;
    int exponent = magnitude >> mantissa_bits, mantissa = magnitude & ((1 << mantissa_bits) - 1);
    int top = 0x7f >> mantissa_bits;
    double value;
    if (has_infinity && exponent == top)
        value = mantissa == 0 ? INFINITY : NAN;
    else if (!has_infinity && magnitude == 0x7f)
        value = NAN;
    else if (exponent == 0)
        value = ldexp(mantissa, 1 - bias - mantissa_bits);
    else
        value = ldexp(1.0 + ldexp(mantissa, -mantissa_bits), exponent - bias);
    return sign ? -value : value;
}

static void fp8_table_is_every_code_decoded(void)
{
    const float scales[] = {1.0f, 4.0f / 448.0f, 0.3f, 1.0f / 57344.0f};
    for (int number = KV_NUMBER_FP8_E4M3; number <= KV_NUMBER_FP8_E5M2; number++)
        for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
            KvBlockLayout l = {0};
            l.number = (KvNumber)number;
            l.axis = KV_SCALE_PER_TENSOR;
            l.tensor_scale = scales[i];
            float table[KV_FP8_CODES];
            kv_fp8_decode_table(l, table);
            bool e4m3 = number == KV_NUMBER_FP8_E4M3;
            int wrong = 0;
            for (int code = 0; code < KV_FP8_CODES; code++) {
                /* Each code is exact in float; times the scale it is one
                 * float multiplication, rounded once: the double product
                 * rounded to float is that same number. */
                float expected = (float)(fp8_from_fields(code, e4m3 ? 3 : 2, e4m3 ? 7 : 15, !e4m3) * scales[i]);
                bool same = isnan(expected) ? isnan(table[code]) : table[code] == expected;
                wrong += !same;
            }
            EXPECT(wrong == 0, "%s, scale %g: all 256 codes in the table as their bit fields say (%d wrong)",
                   e4m3 ? "E4M3" : "E5M2", scales[i], wrong);
        }
}

int main(void)
{
    const int32_t lengths[][3] = {
        {1,  37,  100 },
        {16, 17,  1000},
        {5,  333, 2   }
    };
    const int shapes[][4] = {
  /* heads, kv heads, head_dim, block size */
        {4, 4, 16,  16},
        {8, 2, 128, 16},
        {6, 1, 64,  5 },
        {4, 2, 12,  7 }
    };
    for (int format = 0; format < KV_FORMAT_COUNT; format++)
        for (int s = 0; s < 4; s++)
            for (int group = 32; group <= 64; group += 32) {
                if (group == 64 && format != KV_FORMAT_INT4 && format != KV_FORMAT_KIVI4)
                    continue;
                bool fp8 = format == KV_FORMAT_FP8_E4M3 || format == KV_FORMAT_FP8_E5M2;
                /* FP8 also with a scale per kv head. */
                for (int per_head = 0; per_head <= fp8; per_head++) {
                    DecodeBatchShape shape = {
                        3,     shapes[s][0],        shapes[s][1], shapes[s][2], shapes[s][3], (KvFormat)format,
                        group, (uint64_t)(100 + s), per_head};
                    matches_reference(shape, lengths[s % 3]);
                }
            }
    float32_through_the_quantized_path_is_bitwise();
    fp8_table_is_every_code_decoded();
    return test_finish();
}
