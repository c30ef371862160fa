/* bfloat16 ("brain float", bf16) to float, stored as uint16_t.
 *
 * A bf16 is the top half of a float: the same sign, the same 8 exponent
 * bits, and the top 7 of the 23 mantissa bits. So widening it is exact and
 * is only a shift: every bf16, subnormals, infinities and NaN (payload and
 * sign kept) included, is the float whose low 16 bits are zero. The range
 * is float's; the precision is 8 significant bits (u = 2^-8).
 *
 * Narrowing drops the low 16 bits, rounding to nearest with ties to even:
 * add just under half of the dropped unit, plus one if the kept part is
 * odd; a carry into the exponent is correct, and one out of the largest
 * finite value gives infinity, as it should. NaN stays a quiet NaN: the
 * bits dropped could be all of a NaN's payload (0x7f800001 would become
 * infinity), and the addition could carry 0x7fffffff into the sign bit.
 * tests/common/test_npy_as_float32.c checks every one of the 65536 against
 * the value its bit fields define. */
#ifndef KERNELS_BF16_H
#define KERNELS_BF16_H

#include <stddef.h>
#include <stdint.h>

#if defined(__AVX2__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif

#include "common/hostdevice.h"
#include "kernels/float_bits.h"

HOST_DEVICE static inline float bf16_to_float(uint16_t b)
{
    return float_from_bits((uint32_t)b << 16);
}

HOST_DEVICE static inline uint16_t bf16_from_float(float x)
{
    /* A select, not a branch, so that a loop of them vectorises. */
    uint32_t bits = float_bits(x);
    uint32_t quiet_nan = bits >> 16 | 0x0040u, rounded = bits_rounded_off(bits, 16);
    return (uint16_t)((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

#if defined(__AVX2__) && !defined(__CUDA_ARCH__)
/* Eight bf16s to floats in a register: bf16_to_float's shift, 8 lanes wide
 * (each 16 bits widened to 32, then moved to the top). */
static inline __m256 floats8_from_bf16s(__m128i bits)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
#endif

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
/* The same for sixteen. */
static inline __m512 floats16_from_bf16s(__m256i bits)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
#endif

#if defined(__AVX512BW__) && !defined(__CUDA_ARCH__)
#define BF16_AVX512 1
/* 16 floats rounded to bf16: bf16_from_float's operations, 16 lanes wide.
 * The NaN test is a mask, the select a masked or, and the narrowing to 16
 * bits one instruction. */
static inline __m256i bf16s16_from_floats_by_integers(__m512 values)
{
    __m512i bits = _mm512_castps_si512(values), top = _mm512_srli_epi32(bits, 16);
    __m512i odd = _mm512_and_si512(top, _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd), 16);
    __mmask16 is_nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i result = _mm512_mask_or_epi32(rounded, is_nan, top, _mm512_set1_epi32(0x0040));
    return _mm512_cvtepi32_epi16(result);
}

/* Where there is AVX512-BF16, its vcvtneps2bf16 rounds 16 floats in one
 * instruction, to nearest even, and makes a NaN quiet the way
 * bf16_from_float does; but it treats a subnormal input as zero. So 16
 * values with a subnormal among them (vfpclassps, category 0x20) take the
 * integer path. In the layer norm kernels, busy with vector arithmetic,
 * this cut a bf16 row's forward pass by an eighth (measured on Zen 4). */
static inline __m256i bf16s16_from_floats(__m512 values)
{
#ifdef __AVX512BF16__
    enum { SUBNORMAL = 0x20 };
    if (_mm512_fpclass_ps_mask(values, SUBNORMAL) == 0)
        return (__m256i)_mm512_cvtneps_pbh(values);
#endif
    return bf16s16_from_floats_by_integers(values);
}

/* 32 floats rounded to bf16, `low`'s 16 in the low half: a 64-byte line
 * of results. vcvtne2ps2bf16 rounds both vectors in one instruction,
 * where two vcvtneps2bf16 and the insert that joins their halves take
 * three: on rows in L2, a bf16 RMSNorm forward pass took 0.89 of the time
 * (one thread, 15 runs each way, taken in turns), the same bits. */
static inline __m512i bf16s32_from_floats(__m512 low, __m512 high)
{
#ifdef __AVX512BF16__
    enum { SUBNORMAL = 0x20 };
    if ((_mm512_fpclass_ps_mask(low, SUBNORMAL) | _mm512_fpclass_ps_mask(high, SUBNORMAL)) == 0)
        return (__m512i)_mm512_cvtne2ps_pbh(high, low);
#endif
    return _mm512_inserti64x4(_mm512_castsi256_si512(bf16s16_from_floats_by_integers(low)),
                              bf16s16_from_floats_by_integers(high), 1);
}
#endif

/* count floats rounded to bf16. bf16_from_float's integer arithmetic,
 * 16 lanes at a time where there is AVX-512 and 8 where there is AVX2: in a
 * loop of 8 or 16 values (a block of a row) the compiler leaves the select
 * scalar, and the block then reaches memory a value at a time. Same bits:
 * the same operations, or (bf16s16_from_floats) the one instruction that
 * gives the same bits. */
static inline void bf16s_from_floats(uint16_t *out, const float *in, size_t count)
{
    size_t k = 0;
#ifdef BF16_AVX512
    for (; k + 16 <= count; k += 16)
        _mm256_storeu_si256((__m256i *)(out + k), bf16s16_from_floats(_mm512_loadu_ps(in + k)));
#endif
#if defined(__AVX2__) && !defined(__CUDA_ARCH__)
    const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff), infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i just_under_half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i quiet_bit = _mm256_set1_epi32(0x0040);
    /* count - k, not k + 8 <= count: on a call with count 16, gcc 12 then
     * sees that this loop leaves k at 16, and does not warn that the loop
     * below could run 2^62 times (-Waggressive-loop-optimizations), which
     * stopped a -Werror build for AVX2 without AVX-512 (--march=x86-64-v3). */
    for (; count - k >= 8; k += 8) {
        __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(in + k)), top = _mm256_srli_epi32(bits, 16);
        __m256i odd = _mm256_and_si256(top, one);
        __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, just_under_half), odd), 16);
        __m256i quiet_nan = _mm256_or_si256(top, quiet_bit);
        __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude_mask), infinity);
        __m256i result = _mm256_blendv_epi8(rounded, quiet_nan, is_nan); /* 8 values below 2^16 */
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(result), _mm256_extracti128_si256(result, 1));
        _mm_storeu_si128((__m128i *)(out + k), packed);
    }
#endif
    for (; k < count; k++)
        out[k] = bf16_from_float(in[k]);
}

#endif
