/* Row means and variances on the GPU with the Welford merge: the C-callable
 * launchers of kernels/welford_launch.cu. One version: one block of
 * `threads` threads per row.
 *
 * The launchers' convention, the same for every operation (README.md, "The
 * kernels' launchers"): versions are numbered 1 .. OP_GPU_VERSIONS, naive
 * first. A launcher or constructor that can refuse its arguments returns
 * NULL when it did the work, otherwise a one-line reason (gpu_refusal), and
 * then nothing was launched or allocated. A *_launch or *_device call only
 * queues work on the default stream, so that callers time it with
 * cuda_bench_run (common/cuda_util.h) and get its spread. CUDA errors end
 * the program. */
#ifndef KERNELS_WELFORD_GPU_H
#define KERNELS_WELFORD_GPU_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define WELFORD_GPU_VERSIONS 1
#define WELFORD_GPU_MAX_THREADS 1024

/* For each row of the rows x cols float matrix x (row-major), the mean and
 * the population variance, into arrays of `rows` floats. Refused: rows or
 * cols below 1, rows above 2^31 - 1 (a grid's x dimension), threads outside
 * [1, 1024]. This one takes host memory: it copies x in and the results
 * back, and waits for them. */
const char *welford_rows_gpu(const float *x, size_t rows, size_t cols, int threads, float *mean, float *variance);

/* The same on device memory: the launch alone, queued on the default
 * stream, which the chapter times. */
const char *welford_rows_gpu_device(const float *x, size_t rows, size_t cols, int threads, float *mean,
                                    float *variance);

COMMON_END_C

#endif
