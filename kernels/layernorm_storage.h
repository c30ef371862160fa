/* The storage types of a layer norm's rows (x, dy, y and dx), shared by the
 * CPU code of chapter 2 and the GPU kernels: float32, or 16 bits (fp16 or
 * bf16, kernels/fp16.h and kernels/bf16.h) widened exactly to float for the
 * arithmetic and rounded once, to nearest even, on the way back. The
 * statistics, the parameters and their gradients are float32 in every
 * storage type. */
#ifndef KERNELS_LAYERNORM_STORAGE_H
#define KERNELS_LAYERNORM_STORAGE_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef enum LnStorage { STORAGE_FLOAT32, STORAGE_FP16, STORAGE_BF16 } LnStorage;

/* Bytes of one stored value: 4, or 2 for the 16-bit types. */
HOST_DEVICE static inline size_t ln_storage_bytes(LnStorage storage)
{
    return storage == STORAGE_FLOAT32 ? 4 : 2;
}

/* Significant bits of a stored value, the implicit one counted: 24, 11, 8. */
HOST_DEVICE static inline int ln_storage_significant_bits(LnStorage storage)
{
    return storage == STORAGE_FLOAT32 ? 24 : storage == STORAGE_FP16 ? 11 : 8;
}

COMMON_END_C

#endif
