/* Row means and variances on the GPU with the Welford merge: the C-callable
 * launcher of kernels/welford_launch.cu. */
#ifndef KERNELS_WELFORD_GPU_H
#define KERNELS_WELFORD_GPU_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define WELFORD_GPU_MAX_THREADS 1024

/* For each row of the rows x cols float matrix x (host memory, row-major),
 * the mean and the population variance, into host arrays of `rows` floats.
 * One block of `threads` threads per row. Returns 0, or -1 without touching
 * the GPU when an argument is out of range: rows and cols must be >= 1, rows
 * at most 2^31 - 1 (a grid's x dimension), threads in [1, 1024]. CUDA errors
 * end the program (common/cuda_util.h). */
int welford_rows_gpu(const float *x, size_t rows, size_t cols, int threads, float *mean, float *variance);

COMMON_END_C

#endif
