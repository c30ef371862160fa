/* The row kernels convert 16-bit rows 8 or 16 values at a time
 * (halves_to_floats, halves_from_floats with F16C; bf16s_from_floats with
 * AVX-512, through AVX512-BF16's one instruction where there is one and the
 * integer path for 16 values holding a subnormal, and with AVX2). Each must
 * give the bits of the one-value conversions (kernels/fp16.h, bf16.h),
 * which tests/04-kv-cache/test_fp16.c and
 * tests/common/test_npy_as_float32.c check against the formats'
 * definitions. Widening: every one of the 65536 halves. Narrowing: every
 * rounding boundary, i.e. every float whose low 13 bits are a tie, one
 * either side of it, or the ends of the dropped range (the boundaries of
 * subnormal halves and of bf16 lie among these), with every pattern of the
 * 19 bits above them; infinities and NaN with their payloads included.
 * Where the machine lacks F16C, AVX-512 or AVX2 the same calls run the
 * portable loops, and the test still holds. Calls of 29 values use the
 * 16-at-a-time path, the 8-at-a-time one and the one-value tail; with
 * AVX-512, bf16s32_from_floats rounds them 32 at a time as well. */
#include <stdint.h>
#include <stdio.h>

#include "common/alloc.h"
#include "common/testing.h"
#include "kernels/bf16.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"

/* Calls of 29 values: 16 at a time (where there is AVX-512), 8 at a time,
 * then 5 the one-value way, so that every path of each call is used. */
enum { PIECE = 29 };

static size_t piece_at(size_t first, size_t count)
{
    return count - first < PIECE ? count - first : PIECE;
}

/* Quiet: the bits of a NaN with its quiet bit set, else the bits. */
static uint32_t quieted(uint32_t bits)
{
    return (bits & 0x7fffffffu) > 0x7f800000u ? bits | 0x00400000u : bits;
}

static void every_half_widens_to_its_bits(void)
{
    uint16_t *halves = ALLOC_ARRAY(65536, uint16_t);
    float *floats = ALLOC_ARRAY(65536, float);
    for (uint32_t h = 0; h < 65536; h++)
        halves[h] = (uint16_t)h;
    for (size_t first = 0; first < 65536; first += PIECE)
        halves_to_floats(floats + first, halves + first, piece_at(first, 65536));
    int wrong = 0, quiet_nans = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t got = float_bits(floats[h]), expected = float_bits(half_to_float((uint16_t)h));
        /* F16C returns a signalling NaN half quiet (kernels/fp16.h). */
        quiet_nans += got != expected && got == quieted(expected);
        wrong += got != expected && got != quieted(expected);
    }
    EXPECT(wrong == 0, "%d of 65536 halves widen to other bits (besides %d signalling NaN quieted)", wrong, quiet_nans);
    array_free(halves);
    array_free(floats);
}

enum { LOW_PATTERNS = 6 };

/* Every float at or next to a boundary of the dropped 13 (fp16) or 16
 * (bf16) bits: LOW_PATTERNS low 13-bit patterns under every 19 high bits. */
static size_t boundary_floats(float *out)
{
    const uint32_t low[LOW_PATTERNS] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
    size_t count = 0;
    for (uint32_t high = 0; high < (1u << 19); high++)
        for (int k = 0; k < LOW_PATTERNS; k++)
            out[count++] = float_from_bits(high << 13 | low[k]);
    return count;
}

static void every_boundary_narrows_to_its_bits(void)
{
    size_t capacity = (size_t)LOW_PATTERNS << 19;
    float *floats = ALLOC_ARRAY(capacity, float);
    uint16_t *halves = ALLOC_ARRAY(capacity, uint16_t), *bf16s = ALLOC_ARRAY(capacity, uint16_t);
    size_t count = boundary_floats(floats);
    for (size_t first = 0; first < count; first += PIECE) {
        halves_from_floats(halves + first, floats + first, piece_at(first, count));
        bf16s_from_floats(bf16s + first, floats + first, piece_at(first, count));
    }
    size_t wrong_half = 0, wrong_bf16 = 0;
    for (size_t i = 0; i < count; i++) {
        wrong_half += halves[i] != half_from_float_portable(floats[i]);
        wrong_bf16 += bf16s[i] != bf16_from_float(floats[i]);
    }
    EXPECT(wrong_half == 0, "%zu of %zu floats round to other fp16 bits in blocks", wrong_half, count);
    EXPECT(wrong_bf16 == 0, "%zu of %zu floats round to other bf16 bits in blocks", wrong_bf16, count);
#if defined(BF16_AVX512)
    /* A line at a time, as the forward passes stream them: 32 values from
     * two vectors, one instruction or (a subnormal among them) integers. */
    size_t wrong_line = 0;
    for (size_t first = 0; first + 32 <= count; first += 32) {
        uint16_t line[32];
        _mm512_storeu_si512(line,
                            bf16s32_from_floats(_mm512_loadu_ps(floats + first), _mm512_loadu_ps(floats + first + 16)));
        for (int k = 0; k < 32; k++)
            wrong_line += line[k] != bf16_from_float(floats[first + k]);
    }
    EXPECT(wrong_line == 0, "%zu of %zu floats round to other bf16 bits a line at a time", wrong_line,
           count - count % 32);
#endif
    array_free(floats);
    array_free(halves);
    array_free(bf16s);
}

int main(void)
{
#if defined(FP16_AVX512)
    printf("fp16: AVX-512, 16 at a time, then F16C, 8 at a time\n");
#elif defined(FP16_F16C)
    printf("fp16: F16C, 8 at a time\n");
#else
    printf("fp16: portable loops\n");
#endif
#if defined(__AVX512BW__) && defined(__AVX512BF16__)
    printf("bf16 rounding: AVX512-BF16 (integers where a subnormal is), 16 at a time, then AVX2\n");
#elif defined(__AVX512BW__)
    printf("bf16 rounding: AVX-512, 16 at a time, then AVX2\n");
#elif defined(__AVX2__)
    printf("bf16 rounding: AVX2, 8 at a time\n");
#else
    printf("bf16 rounding: portable loop\n");
#endif
    every_half_widens_to_its_bits();
    every_boundary_narrows_to_its_bits();
    return test_finish();
}
