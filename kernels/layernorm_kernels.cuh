/* The kernels of kernels/layernorm.cu, as their launchers
 * (kernels/layernorm_launch.cu) see them. Arguments as in kernels/layernorm.h;
 * n rows of d values. Every kernel but backward 3's finalize (which sums
 * floats of either norm) is a template on the norm, its last template
 * argument: RMS false for layer norm, true for RMSNorm, which takes mean,
 * beta, dbeta and backward 1's residual as NULL. All but the finalize
 * kernels are templates on the storage type S of x, dy, y and dx too, the
 * argument before the norm. The row kernels (forward 3, backward 2 and 3)
 * are templates on the row plan (ln_row_plan) as well: WIDTH values per
 * vector, ITEMS vectors per thread; layernorm.cu instantiates every plan
 * for each storage type and norm. */
#ifndef KERNELS_LAYERNORM_KERNELS_CUH
#define KERNELS_LAYERNORM_KERNELS_CUH

#include <stdint.h>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/fp16.h"
#include "kernels/layernorm_storage.h"

/* Forward 2 takes a row per warp: its launch gives each block whole warps. */
#define WARP_SIZE 32

// ANCHOR: store_rows_in_16_bits
/* A storage type: the C type of its values (a 16-bit type's bits in a
 * uint16_t), and their conversions to and from float, exact one way and
 * rounding to nearest even the other (kernels/fp16.h, kernels/bf16.h). */
template <LnStorage S> struct Storage {
    using Value = std::conditional_t<S == STORAGE_FLOAT32, float, uint16_t>;
    HOST_DEVICE static float widen(Value v)
    {
        if constexpr (S == STORAGE_FLOAT32)
            return v;
        else
            return S == STORAGE_FP16 ? half_to_float(v) : bf16_to_float(v);
    }
    HOST_DEVICE static Value narrow(float v)
    {
        if constexpr (S == STORAGE_FLOAT32)
            return v;
        else
            return S == STORAGE_FP16 ? half_from_float(v) : bf16_from_float(v);
    }
};
// ANCHOR_END: store_rows_in_16_bits

template <LnStorage S> using Stored = typename Storage<S>::Value;

/* Call launch(tag) with the storage type as a constant, tag's `value`: the
 * one place a storage type chosen at run time becomes a template argument. */
template <typename Launch> static inline void with_storage(LnStorage storage, Launch launch)
{
    if (storage == STORAGE_FP16)
        launch(std::integral_constant<LnStorage, STORAGE_FP16>());
    else if (storage == STORAGE_BF16)
        launch(std::integral_constant<LnStorage, STORAGE_BF16>());
    else
        launch(std::integral_constant<LnStorage, STORAGE_FLOAT32>());
}

/* Backward 2's partial sums per block, each d floats: dgamma and dbeta, or
 * RMSNorm's dgamma alone. */
template <bool RMS> constexpr int ln_parameter_gradients = RMS ? 1 : 2;

/* Thread i of the grid takes row i. */
template <LnStorage S, bool RMS>
__global__ void layernorm_forward_v1(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                                     const float *beta, int n, int d, float eps);

/* Warp i of the grid takes row i. */
template <LnStorage S, bool RMS>
__global__ void layernorm_forward_v2(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                                     const float *beta, int n, int d, float eps);

/* Block i takes row i, with the plan's threads per block. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void layernorm_forward_v3(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                                     const float *beta, int d, float eps);

/* Thread i of the grid takes row i; it leaves the row's mean residual in
 * residual[i] for the column kernel (layer norm only). */
template <LnStorage S, bool RMS>
__global__ void layernorm_backward_v1_dx(Stored<S> *dx, float *residual, const Stored<S> *dy, const Stored<S> *x,
                                         const float *mean, const float *rstd, const float *gamma, int n, int d);

/* Thread j of the grid takes column j. */
template <LnStorage S, bool RMS>
__global__ void layernorm_backward_v1_params(float *dgamma, float *dbeta, const Stored<S> *dy, const Stored<S> *x,
                                             const float *mean, const float *residual, const float *rstd, int n, int d);

/* Any number of blocks, each writing ln_parameter_gradients<RMS> d floats
 * of partials (its dgamma, then its dbeta), with the plan's threads per
 * block. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void layernorm_backward_v2(Stored<S> *dx, float *partials, const Stored<S> *dy, const Stored<S> *x,
                                      const float *mean, const float *rstd, const float *gamma, int n, int d);

/* Thread j of the grid adds column j of the `blocks` partials. */
template <bool RMS>
__global__ void layernorm_backward_v2_finalize(float *dgamma, float *dbeta, const float *partials, int blocks, int d);

/* Backward 3 holds two rows at once only where a thread's share of a row
 * is small: at most 4 values in at most 2 vectors (one float4, or 1 or 2
 * single values). Two rows of more need more registers than two blocks of
 * 512 threads per SM leave a thread (64), and ptxas spills; there the
 * launcher runs version 2's kernel in version 3's grid. */
template <int WIDTH, int ITEMS> constexpr bool overlaps_next_row = ITEMS <= 2 && (WIDTH * ITEMS) <= 4;

/* Backward 2's arguments; any number of blocks, and only the plans that
 * overlap the next row. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void layernorm_backward_v3(Stored<S> *dx, float *partials, const Stored<S> *dy, const Stored<S> *x,
                                      const float *mean, const float *rstd, const float *gamma, int n, int d);

/* Block b adds columns b * LN_FINALIZE_COLUMNS, ... of the `blocks`
 * partial rows of `width` floats (2d, RMSNorm d; dbeta NULL), in
 * LN_FINALIZE_THREADS threads. */
__global__ void layernorm_backward_v3_finalize(float *dgamma, float *dbeta, const float *partials, int blocks, int d,
                                               int width);

#endif
