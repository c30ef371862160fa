/* A float's bit pattern and back, without breaking the aliasing rules:
 * memcpy is the portable way, and compilers turn it into a plain register
 * move on the CPU and on the GPU. Shared by the float-format conversions
 * (fp16, bf16, FP8) and the softmax. */
#ifndef KERNELS_FLOAT_BITS_H
#define KERNELS_FLOAT_BITS_H

#include <stdint.h>
#include <string.h>

#include "common/hostdevice.h"

HOST_DEVICE static inline uint32_t float_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

HOST_DEVICE static inline float float_from_bits(uint32_t bits)
{
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

// ANCHOR: round_off_the_low_bits
/* `bits` with its low `dropped` bits (1 to 31) rounded off, to nearest
 * with ties to even, and shifted out: add just under half of the dropped
 * unit, plus one if the kept part is odd. A carry out of the mantissa
 * into the exponent is the right result: the significand rounded up to
 * the next power of two. Every narrowing of a float (bf16, fp16, FP8)
 * rounds so; each deals with NaN, overflow and subnormal results itself. */
HOST_DEVICE static inline uint32_t bits_rounded_off(uint32_t bits, int dropped)
{
    uint32_t kept_is_odd = bits >> dropped & 1u;
    return (bits + ((1u << (dropped - 1)) - 1u) + kept_is_odd) >> dropped;
}
// ANCHOR_END: round_off_the_low_bits

#endif
