/* The GPU subcommands of the chapter program: every kernel version of
 * kernels/layernorm.cu validated against the double reference, the GPU
 * twin of `apply`, and the GPU benchmark. Without CUDA each subcommand says
 * so in one line and exits 2. */
#ifndef CHAPTERS_02_LAYERNORM_GPU_H
#define CHAPTERS_02_LAYERNORM_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/02-layernorm/problem.h"
#include "common/cli.h"
#include "common/hostdevice.h"
#include "common/resource_table.h"

COMMON_BEGIN_C

#ifdef HAVE_CUDA
/* layernorm gpu-check [--kernel N] [--n N] [--d D] [--seed S] [--eps E]:
 * every version (or version N) of both norms on gpu_check_shapes and on a
 * random n x d problem; 0 when all match the double reference, 1 when one
 * does not. */
CliCommandFunction gpu_check_command;

/* layernorm gpu-bench [--quick] [--results FILE] [--commit C]: validate
 * every version, then time them against the device-to-device copy, and
 * write the table, stamped, to FILE. */
CliCommandFunction gpu_bench_command;

/* layernorm gpu-apply --load DIR --save DIR [--eps E] [--norm N]: what
 * `apply` does, on the GPU: the results of the highest versions (or
 * version N), checked against the double reference, to DIR. */
CliCommandFunction gpu_apply_command;

/* Run forward version `forward` and backward version `backward` on the
 * GPU with p's inputs, results into p's outputs. With misalign > 0 every
 * device array starts that many floats past an aligned address, which
 * takes the kernels off their 16-byte-vector path. Returns NULL, or the
 * reason a version refused the arguments. */
const char *gpu_run_problem(LnProblem *p, int forward, int backward, int misalign);

typedef struct {
    size_t n, d;
    int misalign;
    const char *why;
} GpuCheckShape;

/* The shapes every version is validated on, chosen to break kernels. */
extern const GpuCheckShape gpu_check_shapes[];
extern const int gpu_check_shape_count;

/* Run (forward, backward) of a norm on a random problem of this shape, x
 * and dy rounded to `storage`, and compare with the double reference; for
 * a 16-bit storage type, y and dx also with the CPU's (gpu_meets_storage_goal).
 * One line to out (two for 16 bits). True when everything matched. */
bool gpu_check_versions(const GpuCheckShape *shape, NormKind norm, LnStorage storage, int forward, int backward,
                        uint64_t seed, FILE *out);

/* p's y and dx, computed on the GPU in a 16-bit storage type, against
 * the double reference ref (the accuracy goal, LN_STORAGE_GOAL_SHARE) and
 * against the CPU's on the same inputs (no more than 0.2% different, by
 * one ulp: gpu.c says why). One line to out; true for float32, whose check
 * is ln_compare. */
bool gpu_meets_storage_goal(const LnProblem *p, const LnReference *ref, FILE *out);

/* layernorm gpu-resources [--record FILE] [--markdown]: ptxas's registers, spills,
 * stack and shared memory of every kernel a launcher selects, with its
 * threads per block and the occupancy they allow (common/resource_table.h),
 * from layernorm.resources, the build's copy of kernels/layernorm.resources. */
CliCommandFunction gpu_resources_command;
#else
/* Built without CUDA: each GPU subcommand says so in one line and exits 2. */
#define gpu_check_command cli_without_cuda
#define gpu_bench_command cli_without_cuda
#define gpu_apply_command cli_without_cuda
/* The resource table needs no GPU, but the record of a CUDA build: without
 * one it says there is none, exit 0. */
#define gpu_resources_command resource_table_without_cuda_command
#endif

COMMON_END_C

#endif
