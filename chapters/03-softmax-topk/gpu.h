/* The program's GPU side: running a kernel on given logits, the GPU
 * benchmark with its stamped results file, and showing such a file. In a
 * build without CUDA every GPU request ends with one clear line (exit 2). */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_GPU_H
#define CHAPTERS_03_SOFTMAX_TOPK_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/table.h"
#include "kernels/softmax_topk_gpu.h" /* GPU_KERNEL_COUNT */

/* Return if this build has CUDA and a device is there; else exit 2 with one line. */
void gpu_require(void);

const char *gpu_kernel_name(int kernel);

/* Kernel `kernel` on logits [rows, vocab] -> probs, indices [rows, k]; a K
 * the kernel cannot do (above its limit) is a usage error: exit 2. */
void gpu_softmax_topk(int kernel, const float *logits, size_t rows, size_t vocab, int k, float *probs,
                      int64_t *indices);

/* Every kernel at V in {32000, 50257, 128256, 151936} (quick: 128256), K in
 * {1, 8, 64, 256}, 4096 rows, each validated against the double reference
 * before it is timed, as GB/s and as a share of the device-to-device copy
 * bandwidth measured in the same run; then one row (a decode step). With
 * results_path, also writes the tables there, stamped with the device, the
 * CUDA version, the date and `commit` (or $GIT_COMMIT). */
void gpu_bench(bool quick, const char *results_path, const char *commit, TableFormat format);

#endif
