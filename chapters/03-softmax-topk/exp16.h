/* exp(x) of 16 floats at once with AVX-512, for the sum of the fused pass:
 * softmax_exp_in_sum (kernels/online_softmax.h) with a table of 16 powers
 * of two in place of three terms of its polynomial.
 *
 * softmax_exp_in_sum splits x = n ln2 + r with |r| <= ln2/2, and e^r needs
 * a polynomial of degree 6 to reach float accuracy over that range: with
 * the reduction and 2^n, ten multiplications and multiply-adds per logit,
 * all on the two units that do them, which is what limits the fused pass
 * on all cores. Split finer, x = (16 n + j) ln2/16 + r with 0 <= j < 16
 * and |r| <= ln2/32, and exp(x) = 2^n 2^(j/16) e^r: r is 16 times smaller,
 * so e^r - 1 = r + r^2/2 + r^3/6 is off by r^4/24 < 1e-8 of its value, and
 * the 16 values of 2^(j/16) fit one register, where one permute
 * instruction (vpermps, which takes its index from the low four bits of
 * each lane and runs on another unit) looks them up for 16 logits at once.
 * Seven multiplications and multiply-adds remain. The table's entries are
 * rounded to float, half an ulp each, so the result is within about 2 ulp
 * of exp(x), as softmax_exp's is (the test measures both). Results below
 * 2^-126 are flushed to 0, as softmax_exp_in_sum flushes them: a sum of
 * weights is at least 1. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_EXP16_H
#define CHAPTERS_03_SOFTMAX_TOPK_EXP16_H

#if defined(__AVX512F__)
#define EXP16_AVX512 1

#include <immintrin.h>

#include "kernels/online_softmax.h"

// ANCHOR: look_up_two_to_the_j_over_16
/* 2^(j/16) for j = 0 .. 15, rounded to float, each less j << 19 in its
 * bits (see exp16_in_sum); built once, outside the caller's loop. */
static inline __m512 exp16_powers(void)
{
    __m512 powers =
        _mm512_setr_ps(0x1p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f, 0x1.306fe0p+0f, 0x1.3dea64p+0f,
                       0x1.4bfdaep+0f, 0x1.5ab07ep+0f, 0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
                       0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f);
    __m512i j_shifted = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 19);
    return _mm512_castsi512_ps(_mm512_sub_epi32(_mm512_castps_si512(powers), j_shifted));
}

/* exp(x) for 16 values x <= 0 (or NaN, which comes out NaN) that only add
 * to a sum, as softmax_exp_in_sum: `powers` is exp16_powers(), loaded once
 * by the caller's loop. */
static inline __attribute__((always_inline)) __m512 exp16_in_sum(__m512 x, __m512 powers)
{
    /* Adding 1.5 * 2^23 rounds 16 x log2(e) to the integer 16 n + j and
     * leaves it in the low bits of t, as in exp_split. */
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(16 * 1.44269504f), shifter);
    __m512 m = _mm512_sub_ps(t, shifter);
    /* ln2/16 in exp_split's two parts, each divided by 16 exactly. */
    __m512 r = _mm512_fmadd_ps(m, _mm512_set1_ps(-0.693359375f / 16), x);
    r = _mm512_fmadd_ps(m, _mm512_set1_ps(2.12194440e-4f / 16), r);
    /* 2^(j/16) from the low four bits of t, times 2^n: t's bits are those
     * of 1.5 * 2^23 plus 16 n + j, so shifted left by 19 they hold n in the
     * exponent field and j below it (the rest falls off the top, modulo
     * 2^32), and the table's entries have j << 19 taken off. */
    __m512i bits = _mm512_castps_si512(t);
    __m512i n_and_j = _mm512_slli_epi32(bits, 19);
    __m512 power =
        _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(_mm512_permutexvar_ps(bits, powers)), n_and_j));
    /* e^r - 1 = r + r^2 (1/2 + r/6), then 2^(n + j/16) (1 + (e^r - 1)). */
    __m512 half_plus = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6), _mm512_set1_ps(0.5f));
    __m512 expm1_r = _mm512_fmadd_ps(half_plus, _mm512_mul_ps(r, r), r);
    __m512 scaled = _mm512_fmadd_ps(expm1_r, power, power);
    __mmask16 below_normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(SOFTMAX_EXP_LEAST_NORMAL), _CMP_LT_OQ);
    return _mm512_maskz_mov_ps((__mmask16)~below_normal, scaled);
}
// ANCHOR_END: look_up_two_to_the_j_over_16

#endif
#endif
