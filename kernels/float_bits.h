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

#endif
