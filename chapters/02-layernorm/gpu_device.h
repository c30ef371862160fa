/* A layer-norm or RMSNorm problem in GPU memory: the part of the chapter's GPU
 * harness that needs the CUDA runtime (gpu_device.cu). Everything that
 * decides what to run and how to report it is plain C, in gpu.c. */
#ifndef CHAPTERS_02_LAYERNORM_GPU_DEVICE_H
#define CHAPTERS_02_LAYERNORM_GPU_DEVICE_H

#include <stddef.h>

#include "chapters/02-layernorm/problem.h"
#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef struct DeviceProblem DeviceProblem;

/* Device arrays for an n x d problem of either norm, x, dy, y and dx in
 * `storage`, with the scratch space their backward versions need. misalign
 * > 0 starts every array that many values past an aligned address (which
 * takes the kernels off their 16-byte-vector path). */
DeviceProblem *device_problem_new(size_t n, size_t d, int misalign, LnStorage storage);
void device_problem_free(DeviceProblem *g);

/* Copy p's inputs (x, gamma, beta, dy) to the GPU, or the outputs of
 * p->norm back (RMSNorm's: y, rstd, dx, dgamma); x, dy, y and dx travel
 * in the problem's storage type, 16-bit values as their 16 bits. */
void device_problem_upload(DeviceProblem *g, const LnProblem *p);
void device_problem_download(const DeviceProblem *g, LnProblem *p);

/* Fill the inputs on the GPU with a cheap pattern, for timing. */
void device_problem_fill_pattern(DeviceProblem *g);

/* Run one kernel version of a norm; NULL, or the reason the version refused. */
const char *device_problem_forward(DeviceProblem *g, NormKind norm, int version, float eps);
const char *device_problem_backward(DeviceProblem *g, NormKind norm, int version);

COMMON_END_C

#endif
