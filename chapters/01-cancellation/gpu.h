/* The GPU subcommands of chapter 1: the row statistics of kernels/welford.cu
 * validated against the CPU reference at launch configurations chosen to hit
 * the kernel's edge cases (gpu-check), then timed (gpu-bench). Without CUDA,
 * or without a device, each says so in one line and exits 2. */
#ifndef CHAPTERS_01_CANCELLATION_GPU_H
#define CHAPTERS_01_CANCELLATION_GPU_H

#include "common/cli.h"
#include "common/resource_table.h"

#ifdef HAVE_CUDA
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* cancellation gpu-check [--seed S]: 0 when every shape passes, 1 if not. */
CliCommandFunction gpu_check_command;

/* cancellation gpu-bench [--quick] [--results FILE] [--commit C]: validate,
 * then time; the stamped results file when --results is given. */
CliCommandFunction gpu_bench_command;

typedef struct {
    size_t rows, cols;
    int threads;     /* per block, one block per row */
    const char *why; /* the edge case this shape exercises */
} GpuCheckShape;

extern const GpuCheckShape gpu_check_shapes[];
extern const int gpu_check_shape_count;

/* The data offset of the checks: kappa about 100, float data. */
#define GPU_CHECK_OFFSET 100.0

/* Run the kernel on rows of GPU_CHECK_OFFSET + N(0, 1) floats, compare every
 * row's mean and variance with the exact ones, print a line for each, and
 * return whether both are within tolerance. */
bool check_gpu_rows(const GpuCheckShape *shape, uint64_t seed, FILE *out);

/* cancellation gpu-resources [--record FILE] [--markdown]: ptxas's registers, spills,
 * stack and shared memory of every kernel a launcher selects, with its
 * threads per block and the occupancy they allow (common/resource_table.h),
 * from welford.resources, the build's copy of kernels/welford.resources. */
CliCommandFunction gpu_resources_command;
#else
/* Built without CUDA: each GPU subcommand says so in one line and exits 2. */
#define gpu_check_command cli_without_cuda
#define gpu_bench_command cli_without_cuda
/* The resource table needs no GPU, but the record of a CUDA build: without
 * one it says there is none, exit 0. */
#define gpu_resources_command resource_table_without_cuda_command
#endif

#endif
