/* The kernels of kernels/layernorm.cu, as their launchers
 * (kernels/layernorm_launch.cu) see them. Arguments as in kernels/layernorm.h;
 * n rows of d floats. Every kernel is a template on the norm, its last
 * template argument: RMS false for layer norm, true for RMSNorm, which
 * takes mean, beta, dbeta and backward 1's residual as NULL. The row
 * kernels (forward 3, backward 2) are templates on the row plan
 * (ln_row_plan) too: WIDTH floats per vector, ITEMS vectors per thread;
 * layernorm.cu instantiates every plan for each norm. */
#ifndef KERNELS_LAYERNORM_KERNELS_CUH
#define KERNELS_LAYERNORM_KERNELS_CUH

/* Forward 2 takes a row per warp: its launch gives each block whole warps. */
#define WARP_SIZE 32

/* Backward 2's partial sums per block, each d floats: dgamma and dbeta, or
 * RMSNorm's dgamma alone. */
template <bool RMS> constexpr int ln_parameter_gradients = RMS ? 1 : 2;

/* Thread i of the grid takes row i. */
template <bool RMS>
__global__ void layernorm_forward_v1(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                                     const float *beta, int n, int d, float eps);

/* Warp i of the grid takes row i. */
template <bool RMS>
__global__ void layernorm_forward_v2(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                                     const float *beta, int n, int d, float eps);

/* Block i takes row i, with the plan's threads per block. */
template <int WIDTH, int ITEMS, bool RMS>
__global__ void layernorm_forward_v3(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                                     const float *beta, int d, float eps);

/* Thread i of the grid takes row i; it leaves the row's mean residual in
 * residual[i] for the column kernel (layer norm only). */
template <bool RMS>
__global__ void layernorm_backward_v1_dx(float *dx, float *residual, const float *dy, const float *x, const float *mean,
                                         const float *rstd, const float *gamma, int n, int d);

/* Thread j of the grid takes column j. */
template <bool RMS>
__global__ void layernorm_backward_v1_params(float *dgamma, float *dbeta, const float *dy, const float *x,
                                             const float *mean, const float *residual, const float *rstd, int n, int d);

/* Any number of blocks, each writing ln_parameter_gradients<RMS> d floats
 * of partials (its dgamma, then its dbeta), with the plan's threads per
 * block. */
template <int WIDTH, int ITEMS, bool RMS>
__global__ void layernorm_backward_v2(float *dx, float *partials, const float *dy, const float *x, const float *mean,
                                      const float *rstd, const float *gamma, int n, int d);

/* Thread j of the grid adds column j of the `blocks` partials. */
template <bool RMS>
__global__ void layernorm_backward_v2_finalize(float *dgamma, float *dbeta, const float *partials, int blocks, int d);

#endif
