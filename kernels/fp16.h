/* IEEE 754 binary16 ("half", fp16) to and from float, stored as uint16_t.
 *
 * C11 has no half type, so on the CPU the conversions are written out on
 * the bits: rounding to nearest with ties to even, subnormal halves (down to
 * 2^-24), infinities, and NaN (kept NaN, sign kept). On the GPU the same
 * functions use the hardware conversions, which follow the same standard;
 * tests/04-kv-cache/test_fp16.c checks the CPU side on every one of the
 * 65536 halves and on the rounding boundaries between each pair of them.
 *
 * Range: the largest half is 65504; a float from 65520 up (the midpoint to
 * the next power of two) rounds to infinity. The smallest subnormal half is
 * 2^-24, about 6.0e-8; below half of that, a float rounds to zero. */
#ifndef KERNELS_FP16_H
#define KERNELS_FP16_H

#include <math.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/float_bits.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

#define HALF_MAX 65504.0f

HOST_DEVICE static inline float half_to_float(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) {
        /* Infinity, or NaN with its payload moved to the top of the float's. */
        return float_from_bits(sign | 0x7f800000u | mantissa << 13);
    }
    if (exponent == 0) {
        /* Zero or subnormal: mantissa * 2^-24, exact in float. */
        return float_from_bits(sign | float_bits((float)mantissa * 0x1p-24f));
    }
    /* Normal: the exponent bias goes from 15 to 127. */
    return float_from_bits(sign | (exponent + 112u) << 23 | mantissa << 13);
#endif
}

HOST_DEVICE static inline uint16_t half_from_float(float x)
{
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(x));
#else
    uint32_t bits = float_bits(x);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
        /* NaN: a quiet NaN, with what fits of the payload. */
        return (uint16_t)(sign | 0x7e00u | (magnitude >> 13 & 0x3ffu));
    }
    if (magnitude >= 0x477ff000u) {
        /* 65520 or more (infinity included): past the last half, 65504. */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (magnitude >= 0x38800000u) {
        /* A normal half (2^-14 or more). Drop 13 mantissa bits, rounding to
         * nearest even: add just under half of the dropped unit, plus one if
         * the kept part is odd. A carry into the exponent is correct. Then
         * rebias the exponent from 127 to 15. */
        uint32_t rounded = magnitude + 0xfffu + (magnitude >> 13 & 1u);
        return (uint16_t)(sign | (rounded - 0x38000000u) >> 13);
    }
    /* A subnormal half or zero: count units of 2^-24. Scaling by 2^24 is
     * exact, and rintf rounds to nearest even; 1024 units come out as the
     * smallest normal half, whose bits are the same number. */
    float units = rintf(float_from_bits(magnitude) * 0x1p24f);
    return (uint16_t)(sign | (uint16_t)units);
#endif
}

#endif
