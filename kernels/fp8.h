/* The two 8-bit floating-point formats of the OCP specification (OFP8,
 * 2023), to and from float, stored as uint8_t:
 *
 *   E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities:
 *         the exponent field 1111 holds normal numbers too, all but
 *         S.1111.111, which is NaN. Largest 448, smallest normal 2^-6,
 *         smallest subnormal 2^-9.
 *   E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, laid out as
 *         IEEE 754 lays out its formats: S.11111.00 is infinity, S.11111.xx
 *         NaN. Largest 57344, smallest normal 2^-14, smallest subnormal 2^-16.
 *
 * E4M3 has one more bit of precision (a relative step of 2^-3 against
 * 2^-2), E5M2 a wider range. Both read back exactly as floats.
 *
 * Encoding rounds to nearest, ties to even, and SATURATES: a float past the
 * largest finite number, infinity included, becomes the largest finite
 * number of its sign; NaN stays NaN. That is what vLLM's FP8 cache does (it
 * converts with cuda_fp8.h's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...)).
 * A cache must saturate rather than overflow: a key stored as NaN (or as an
 * infinity, whose score then meets another infinity in the softmax) turns
 * every later attention of its sequence into NaN, whereas a saturated one is
 * one number off, by the amount it exceeded the range its scale chose.
 *
 * The same functions run on the CPU and the GPU: integer steps on the bits,
 * and one exact multiplication by a power of two. */
#ifndef KERNELS_FP8_H
#define KERNELS_FP8_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

/* What tells the two formats apart. */
typedef struct {
    int mantissa_bits;
    int bias;
    uint8_t largest; /* the code (sign clear) of the largest finite number */
    uint8_t nan;     /* the code (sign clear) a NaN becomes */
    bool has_infinity;
} Fp8Format;

HOST_DEVICE static inline Fp8Format fp8_e4m3(void)
{
    Fp8Format f = {3, 7, 0x7e, 0x7f, false};
    return f;
}

HOST_DEVICE static inline Fp8Format fp8_e5m2(void)
{
    Fp8Format f = {2, 15, 0x7b, 0x7e, true};
    return f;
}

// ANCHOR: decode_an_fp8_number
HOST_DEVICE static inline float fp8_to_float(uint8_t code, Fp8Format f)
{
    uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    uint32_t magnitude = code & 0x7fu;
    uint32_t exponent = magnitude >> f.mantissa_bits, mantissa = magnitude & ((1u << f.mantissa_bits) - 1);
    uint32_t top_exponent = 0x7fu >> f.mantissa_bits;
    if (f.has_infinity ? exponent == top_exponent : magnitude == f.nan) {
        /* E5M2's infinities and NaNs; E4M3's one NaN per sign. */
        return float_from_bits(sign | (mantissa == 0 && f.has_infinity ? 0x7f800000u : 0x7fc00000u));
    }
    if (exponent == 0) {
        /* Zero or subnormal: mantissa units of 2^(1 - bias - mantissa_bits), exact in float. */
        float unit = float_from_bits((uint32_t)(127 + 1 - f.bias - f.mantissa_bits) << 23);
        return float_from_bits(sign | float_bits((float)mantissa * unit));
    }
    /* Normal: rebias the exponent, move the mantissa to the top of the float's. */
    return float_from_bits(sign | (exponent + 127u - (uint32_t)f.bias) << 23 | mantissa << (23 - f.mantissa_bits));
}
// ANCHOR_END: decode_an_fp8_number

// ANCHOR: encode_a_float_as_fp8
HOST_DEVICE static inline uint8_t fp8_from_float(float x, Fp8Format f)
{
    uint32_t bits = float_bits(x);
    uint8_t sign = (uint8_t)(bits >> 24 & 0x80u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
        return (uint8_t)(sign | f.nan);
    }
    uint32_t smallest_normal = (uint32_t)(127 + 1 - f.bias) << 23;
    if (magnitude >= smallest_normal) {
        /* 23 - mantissa_bits bits rounded off (bits_rounded_off), then
         * the exponent rebiased from 127 to bias. Anything that rounds
         * past the largest finite code saturates. */
        uint32_t rebias = (uint32_t)(127 - f.bias) << f.mantissa_bits;
        uint32_t code = bits_rounded_off(magnitude, 23 - f.mantissa_bits) - rebias;
        return (uint8_t)(sign | (code > f.largest ? f.largest : code));
    }
    /* Subnormal or zero: count units of 2^(1 - bias - mantissa_bits). The
     * scaling is exact, and rintf rounds to nearest even; 2^mantissa_bits
     * units come out as the smallest normal, whose code is the same number. */
    float units_per_one = float_from_bits((uint32_t)(127 - 1 + f.bias + f.mantissa_bits) << 23);
    return (uint8_t)(sign | (uint8_t)rintf(float_from_bits(magnitude) * units_per_one));
}
// ANCHOR_END: encode_a_float_as_fp8

// ANCHOR: decode_two_fp8_numbers_in_hardware
/* Two FP8 numbers, the one in the low byte of `pair` first. From sm_89 on
 * (Ada, Hopper), one instruction converts both to fp16 and two more widen
 * those to float; elsewhere, on the CPU and in the emulator, fp8_to_float
 * decodes each. Both routes give the same floats, because the step through
 * fp16 rounds nothing:
 *
 *   E5M2 is fp16 cut short: the same sign, the same 5 exponent bits with
 *   the same bias 15, and the top 2 of fp16's 10 mantissa bits. code << 8
 *   is the fp16 of the same value, infinities, NaNs and subnormals alike.
 *   E4M3's values are m 2^e with an integer m < 16, from 2^-9 to 448 in
 *   magnitude; fp16 holds 11 significant bits and normal numbers from
 *   2^-14 to 65504, so every one of them exactly. Its NaN becomes a NaN.
 *
 * fp16 to float is exact too. test_fp8 checks both facts on every code,
 * and test_fp8_vs_cuda checks cuda_fp8.h's pair conversion, which runs
 * this instruction on the GPU, against fp8_to_float. */
HOST_DEVICE static inline void fp8_pair_to_floats(uint16_t pair, Fp8Format f, float *first, float *second)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint32_t halves;
    if (f.has_infinity) {
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(halves) : "h"(pair));
    } else {
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
    }
    *first = half_to_float((uint16_t)halves);
    *second = half_to_float((uint16_t)(halves >> 16));
#else
    *first = fp8_to_float((uint8_t)pair, f);
    *second = fp8_to_float((uint8_t)(pair >> 8), f);
#endif
}
// ANCHOR_END: decode_two_fp8_numbers_in_hardware

HOST_DEVICE static inline float fp8_e4m3_to_float(uint8_t code)
{
    return fp8_to_float(code, fp8_e4m3());
}

HOST_DEVICE static inline float fp8_e5m2_to_float(uint8_t code)
{
    return fp8_to_float(code, fp8_e5m2());
}

HOST_DEVICE static inline uint8_t fp8_e4m3_from_float(float x)
{
    return fp8_from_float(x, fp8_e4m3());
}

HOST_DEVICE static inline uint8_t fp8_e5m2_from_float(float x)
{
    return fp8_from_float(x, fp8_e5m2());
}

#endif
