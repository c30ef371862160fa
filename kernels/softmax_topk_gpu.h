/* Softmax + top-K on a CUDA GPU: five numbered versions, naive to best.
 *
 *   1  naive: one kernel makes three passes over each row (max, sum, then
 *      writes every probability to a [rows, V] array), a second kernel
 *      selects the top K from the logits and gathers their probabilities;
 *   2  one warp per row, online and fused in one pass, each lane keeping a
 *      sorted top-K list in registers, K <= 32;
 *   3  a block per row (several rows per block when V is small): each warp
 *      keeps an online state and a candidate buffer in shared memory, read
 *      with 16-byte loads; the warps' partial states are merged in a tree,
 *      K <= 256;
 *   4  for small batches: several blocks per row, each producing the partial
 *      state of a slice, merged by a second kernel, K <= 256;
 *   5  for large K: a block per row finds the K-th largest key by radix
 *      select (a histogram of 8 bits at a time), then collects the winners
 *      in index order and sorts them in shared memory, K <= 1024.
 *
 * All of them return, for each row, the K largest probabilities and their
 * indices in the order of kernels/softmax_topk.h (which holds the logic they
 * share with the CPU code). C-callable, so the chapter program (plain C) and
 * the tests can use them. */
#ifndef KERNELS_SOFTMAX_TOPK_GPU_H
#define KERNELS_SOFTMAX_TOPK_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define GPU_KERNEL_COUNT 5

/* The largest K kernel `kernel` (1 .. GPU_KERNEL_COUNT) supports. */
int softmax_topk_gpu_max_k(int kernel);

/* One line describing the version, e.g. "one warp per row, registers". */
const char *softmax_topk_gpu_name(int kernel);

typedef struct {
    /* Cap on the number of blocks (0: as many as the rows need). A small cap
     * makes every block loop over several rows, which tests need: bugs in
     * reusing shared memory between rows only show up then. */
    int max_blocks;
    /* Version 4: blocks per row (0: chosen from the rows and V). */
    int splits;
} SoftmaxTopkGpuConfig;

/* A kernel bound to its device arrays: logits [rows, vocab] (copied in
 * once), probs and indices [rows, k], and its workspace. */
typedef struct SoftmaxTopkGpuRun SoftmaxTopkGpuRun;

/* Check the arguments, allocate and copy the logits; on a bad argument
 * return NULL with one line in err (K > V, K above the version's limit, ...). */
SoftmaxTopkGpuRun *softmax_topk_gpu_run_new(int kernel, const float *logits, size_t rows, size_t vocab, int k,
                                            const SoftmaxTopkGpuConfig *config, char *err, size_t err_size);
void softmax_topk_gpu_run_free(SoftmaxTopkGpuRun *run);

/* Blocks per row that version 4 uses (1 for the others). */
int softmax_topk_gpu_run_splits(const SoftmaxTopkGpuRun *run);

/* Launch once and copy the results to probs and indices [rows, k]. */
void softmax_topk_gpu_run_once(SoftmaxTopkGpuRun *run, float *probs, int64_t *indices);

/* Median milliseconds per launch over `runs` launches, after warm-up. */
double softmax_topk_gpu_run_time_ms(SoftmaxTopkGpuRun *run, int runs);

/* All in one: copy in, launch, copy out. 0 on success, -1 with err. */
int softmax_topk_gpu(int kernel, const float *logits, size_t rows, size_t vocab, int k,
                     const SoftmaxTopkGpuConfig *config, float *probs, int64_t *indices, char *err, size_t err_size);

COMMON_END_C

#endif
