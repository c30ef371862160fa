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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/float_bits.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

/* x86's F16C instructions convert 8 halves at a time, in one instruction
 * each way. They round to nearest even like the portable code below, and
 * narrowing gives its bits for every one of the 2^32 floats (NaN quieted,
 * the payload's top bits kept). Widening differs only for the 1022
 * signalling NaN halves, which F16C returns quiet: the same NaN to any
 * arithmetic that uses it. The portable code stays for every other
 * machine, and as the definition the F16C path is tested against
 * (tests/02-layernorm/test_vector_conversions.c). */
#if defined(__F16C__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#define FP16_F16C 1
#endif

#define HALF_MAX 65504.0f

HOST_DEVICE static inline float half_to_float(uint16_t h)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    // ANCHOR: widen_a_half_without_a_branch
    /* Without a branch, so that a loop of them becomes vector instructions.
     * Moved up 13 bits, the exponent and mantissa of a finite half read as
     * a float 2^-112 times the half (a subnormal half becomes a subnormal
     * float), and one multiplication, exact, puts it right. Infinities and
     * NaN (exponent 31) come out with the float exponent 143 and the
     * payload at the top of the float's; or-ing in the exponent 255 makes
     * them infinities and NaN again. */
    uint32_t magnitude = h & 0x7fffu, sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t scaled = float_bits(float_from_bits(magnitude << 13) * 0x1p112f);
    uint32_t infinite = magnitude >= 0x7c00u ? 0x7f800000u : 0u;
    return float_from_bits(sign | scaled | infinite);
    // ANCHOR_END: widen_a_half_without_a_branch
#endif
}

/* The portable rounding of a float to a half, on the host. */
static inline uint16_t half_from_float_portable(float x)
{
    /* Every case is computed and one selected, without a branch, so that a
     * loop of them becomes vector instructions. */
    uint32_t bits = float_bits(x);
    uint32_t sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
    /* NaN: a quiet NaN, with what fits of the payload. */
    uint32_t nan = 0x7e00u | (magnitude >> 13 & 0x3ffu);
    /* A normal half (2^-14 or more): 13 mantissa bits rounded off
     * (bits_rounded_off), then the exponent rebiased from 127 to 15. */
    uint32_t normal = bits_rounded_off(magnitude, 13) - ((uint32_t)(127 - 15) << 10);
    /* A subnormal half or zero: count units of 2^-24. Scaling by 2^24 is
     * exact, and rintf rounds to nearest even; 1024 units come out as the
     * smallest normal half, whose bits are the same number. (Only a value
     * below 2^-14 is scaled, so that the count fits an int.) */
    bool is_normal = magnitude >= 0x38800000u;
    uint32_t subnormal = (uint32_t)(int32_t)rintf((is_normal ? 0.0f : float_from_bits(magnitude)) * 0x1p24f);
    /* 65520 or more (infinity included): past the last half, 65504. */
    uint32_t finite = magnitude >= 0x477ff000u ? 0x7c00u : is_normal ? normal : subnormal;
    return (uint16_t)(sign | (magnitude > 0x7f800000u ? nan : finite));
}

HOST_DEVICE static inline uint16_t half_from_float(float x)
{
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(x));
#elif defined(FP16_F16C)
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
#else
    return half_from_float_portable(x);
#endif
}

/* AVX-512 has F16C's two conversions 16 wide, the same instructions with
 * the same rounding. */
#if defined(FP16_F16C) && defined(__AVX512F__)
#define FP16_AVX512 1
static inline __m256i halves16_from_floats(__m512 values)
{
    return _mm512_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

// ANCHOR: widen_halves_a_chunk_at_a_time
/* count halves widened to floats, and count floats rounded to halves: 16
 * at a time with AVX-512, 8 with F16C, else a loop the compiler
 * vectorises. (Only a signalling NaN half widens to other bits: quiet, see
 * above.) */
static inline void halves_to_floats(float *out, const uint16_t *in, size_t count)
{
    size_t k = 0;
#ifdef FP16_AVX512
    for (; k + 16 <= count; k += 16)
        _mm512_storeu_ps(out + k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + k))));
#endif
#ifdef FP16_F16C
    for (; k + 8 <= count; k += 8)
        _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + k))));
#endif
    for (; k < count; k++)
        out[k] = half_to_float(in[k]);
}
// ANCHOR_END: widen_halves_a_chunk_at_a_time

static inline void halves_from_floats(uint16_t *out, const float *in, size_t count)
{
    size_t k = 0;
#ifdef FP16_AVX512
    for (; k + 16 <= count; k += 16)
        _mm256_storeu_si256((__m256i *)(out + k), halves16_from_floats(_mm512_loadu_ps(in + k)));
#endif
#ifdef FP16_F16C
    for (; k + 8 <= count; k += 8)
        _mm_storeu_si128((__m128i *)(out + k), _mm256_cvtps_ph(_mm256_loadu_ps(in + k), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; k < count; k++)
        out[k] = half_from_float(in[k]);
}

#endif
