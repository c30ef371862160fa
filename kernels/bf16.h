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
 * finite value gives infinity, as it should. NaN stays a quiet NaN (the
 * addition could carry a NaN with a small payload into infinity).
 * tests/common/test_npy_as_float32.c checks every one of the 65536 against
 * the value its bit fields define. */
#ifndef KERNELS_BF16_H
#define KERNELS_BF16_H

#include <stdint.h>

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
    uint32_t quiet_nan = bits >> 16 | 0x0040u, rounded = (bits + 0x7fffu + (bits >> 16 & 1u)) >> 16;
    return (uint16_t)((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

#endif
