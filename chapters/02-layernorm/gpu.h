/* The GPU side of the chapter program: every kernel version of
 * kernels/layernorm.cu validated against the double reference, and the GPU
 * benchmark. Built only with CUDA; C-callable. */
#ifndef CHAPTERS_02_LAYERNORM_GPU_H
#define CHAPTERS_02_LAYERNORM_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/02-layernorm/problem.h"
#include "common/hostdevice.h"
#include "common/table.h"

COMMON_BEGIN_C

typedef struct {
    size_t n, d;
    float eps;
    uint64_t seed;
    int kernel; /* 0: every version; N: forward N and backward min(N, 2) */
    bool bench, quick;
    const char *load, *save, *results, *commit;
    TableFormat format;
} GpuOptions;

/* --gpu: validate every version on gpu_check_shapes and on the --n x --d
 * (or --load) problem, then with --bench time them. Returns the exit status. */
int gpu_main(const GpuOptions *options);

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

/* Run (forward, backward) on a random problem of this shape and compare
 * with the double reference; one line to out. True when it matched. */
bool gpu_check_versions(const GpuCheckShape *shape, int forward, int backward, uint64_t seed, FILE *out);

COMMON_END_C

#endif
