/* exp(x) of 16 floats at once with AVX-512, for the sum of the fused pass:
 * softmax_exp_in_sum (kernels/online_softmax.h) with a table of 32 powers
 * of two in place of most of its polynomial.
 *
 * softmax_exp_in_sum splits x = n ln2 + r with |r| <= ln2/2, and e^r needs
 * a polynomial of degree 6 to reach float accuracy over that range: with
 * the reduction and 2^n, ten multiplications and multiply-adds per logit.
 * Split finer, x = (32 n + j) ln2/32 + r with 0 <= j < 32 and
 * |r| <= ln2/64, and exp(x) = 2^n 2^(j/32) e^r: r is 32 times smaller, and
 * e^r - 1 = r (c1 + c2 r), with c1 and c2 fitted to that range, is off by
 * at most 0.894 * 2^-24 of e^r. The 32 values of 2^(j/32) fit two
 * registers, where one permute instruction (vpermt2ps, which takes its
 * index from the low five bits of each lane and runs on another unit)
 * looks them up for 16 logits at once. The split subtracts 32 n times one
 * float for ln2/32, not exp_split's two parts: that float is
 * 0.0459 * 2^-24 of itself too large, so r is off by |x| * 0.0459 * 2^-24,
 * which matters only for the small weights (|x| < 17 wherever the weight
 * is 2^-24 of the maximum's or more). Five multiplications and
 * multiply-adds remain. With the table's entry and the last multiply-add
 * half an ulp each, the result is within (2.9 + |x|/20) * 2^-24 of exp(x)
 * (the test measures it). Results below 2^-126 are flushed to 0, as
 * softmax_exp_in_sum flushes them: a sum of weights is at least 1. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_EXP16_H
#define CHAPTERS_03_SOFTMAX_TOPK_EXP16_H

#if defined(__AVX512F__)
#define EXP16_AVX512 1

#include <immintrin.h>

#include "kernels/online_softmax.h"

// ANCHOR: look_up_two_to_the_j_over_32
/* 2^(j/32) for j = 0 .. 31, rounded to float, each less j << 18 in its
 * bits (see exp16_in_sum), in two registers; built once, outside the
 * caller's loop. */
typedef struct {
    __m512 low, high; /* j = 0 .. 15, 16 .. 31 */
} Exp16Powers;

static inline __m512 exp16_powers_from(__m512 powers, int first_j)
{
    __m512i j = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                 _mm512_set1_epi32(first_j));
    return _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_castps_si512(powers), _mm512_slli_epi32(j, 18)));
}

static inline Exp16Powers exp16_powers(void)
{
    __m512 low = _mm512_setr_ps(0x1p+0f, 0x1.059b0ep+0f, 0x1.0b5586p+0f, 0x1.11301ep+0f, 0x1.172b84p+0f, 0x1.1d4874p+0f,
                                0x1.2387a6p+0f, 0x1.29e9e0p+0f, 0x1.306fe0p+0f, 0x1.371a74p+0f, 0x1.3dea64p+0f,
                                0x1.44e086p+0f, 0x1.4bfdaep+0f, 0x1.5342b6p+0f, 0x1.5ab07ep+0f, 0x1.6247ecp+0f);
    __m512 high =
        _mm512_setr_ps(0x1.6a09e6p+0f, 0x1.71f75ep+0f, 0x1.7a1148p+0f, 0x1.82589ap+0f, 0x1.8ace54p+0f, 0x1.93737cp+0f,
                       0x1.9c4918p+0f, 0x1.a5503cp+0f, 0x1.ae89fap+0f, 0x1.b7f770p+0f, 0x1.c199bep+0f, 0x1.cb720ep+0f,
                       0x1.d5818ep+0f, 0x1.dfc974p+0f, 0x1.ea4afap+0f, 0x1.f50766p+0f);
    return (Exp16Powers){exp16_powers_from(low, 0), exp16_powers_from(high, 16)};
}
// ANCHOR_END: look_up_two_to_the_j_over_32

// ANCHOR: exp_of_sixteen_logits
/* exp(x) for 16 values x <= 0 (or NaN, which comes out NaN) that only add
 * to a sum, as softmax_exp_in_sum: `powers` is exp16_powers(), loaded once
 * by the caller's loop. */
static inline __attribute__((always_inline)) __m512 exp16_in_sum(__m512 x, Exp16Powers powers)
{
    /* Adding 1.5 * 2^23 rounds 32 x log2(e) to the integer 32 n + j and
     * leaves it in the low bits of t, as in exp_split; r = x - (32 n + j)
     * ln2/32 in one multiply-add, ln2 rounded to float. */
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(32 * 1.44269504f), shifter);
    __m512 m = _mm512_sub_ps(t, shifter);
    __m512 r = _mm512_fmadd_ps(m, _mm512_set1_ps(-0x1.62e430p-1f / 32), x);
    /* 2^(j/32) from the low five bits of t, times 2^n: t's bits are those
     * of 1.5 * 2^23 plus 32 n + j, so shifted left by 18 they hold n in the
     * exponent field and j below it (the rest falls off the top, modulo
     * 2^32), and the table's entries have j << 18 taken off. */
    __m512i bits = _mm512_castps_si512(t);
    __m512i n_and_j = _mm512_slli_epi32(bits, 18);
    __m512 power = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_castps_si512(_mm512_permutex2var_ps(powers.low, bits, powers.high)), n_and_j));
    /* e^r - 1 = r (c1 + c2 r), then 2^(n + j/32) (1 + (e^r - 1)), or 0
     * below 2^-126; NaN stays NaN (not less than: unordered is true). */
    __m512 coefficient = _mm512_fmadd_ps(r, _mm512_set1_ps(0x1.fffffep-2f), _mm512_set1_ps(0x1.0000f6p+0f));
    __m512 expm1_r = _mm512_mul_ps(coefficient, r);
    __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(SOFTMAX_EXP_LEAST_NORMAL), _CMP_NLT_UQ);
    return _mm512_maskz_fmadd_ps(normal, expm1_r, power, power);
}
// ANCHOR_END: exp_of_sixteen_logits

#endif
#endif
