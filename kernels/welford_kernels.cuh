/* The kernel of kernels/welford.cu, as its launcher
 * (kernels/welford_launch.cu) sees it. */
#ifndef KERNELS_WELFORD_KERNELS_CUH
#define KERNELS_WELFORD_KERNELS_CUH

#include <cstddef>

/* Block b writes the mean and variance of row b of the rows x cols matrix x;
 * at most WELFORD_GPU_MAX_THREADS threads per block. */
__global__ void welford_rows_kernel(const float *x, size_t cols, float *mean, float *variance);

#endif
