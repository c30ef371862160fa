/* Softmax + top-K on a CUDA GPU: nine numbered versions, naive to best.
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
 *      in index order and sorts them in shared memory, K <= 1024;
 *   6  version 3 within the budget of its machine code: the row's warps share
 *      one threshold, each float4 updates the online state without a
 *      branch, fresh candidates are sorted alone and merged into the kept
 *      K, and K = 1 is an argmax with no buffer, K <= 256;
 *   7  sampling fused into version 6: the block that found a row's top K
 *      draws its tokens from the candidates in shared memory, with no
 *      second launch and no sum over V (the draws need only the K); a
 *      top K alone (no sampling set) is version 6's, K <= 256;
 *   8  version 4 in one kernel, for a single row (a decode step): the
 *      last block to finish a slice of a row, told by an atomic ticket,
 *      merges the row's partial states, K <= 256;
 *   9  the floor of the steps' maxima: version 6's scan keeps only the
 *      online state and each step's maximum, the row's warps take the K-th
 *      largest of those maxima as a floor, and read again only the steps
 *      that reach it, with version 6's candidates and merges; K = 1 is
 *      version 6's argmax, K <= 256, and the step keys (4 bytes per 128
 *      logits of a row) must fit a block's shared memory.
 *
 * All of them return, for each row, the K largest probabilities and their
 * indices in the order of kernels/softmax_topk.h (which holds the logic they
 * share with the CPU code). C-callable, so the chapter program (plain C) and
 * the tests can use them.
 *
 * The launchers' convention, the same for every operation (README.md, "The
 * kernels' launchers"): versions are numbered 1 .. OP_GPU_VERSIONS, naive
 * first. A launcher or constructor that can refuse its arguments returns
 * NULL when it did the work, otherwise a one-line reason (gpu_refusal), and
 * then nothing was launched or allocated. A *_launch or *_device call only
 * queues work on the default stream, so that callers time it with
 * cuda_bench_run (common/cuda_util.h) and get its spread. CUDA errors end
 * the program. */
#ifndef KERNELS_SOFTMAX_TOPK_GPU_H
#define KERNELS_SOFTMAX_TOPK_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/softmax_topk_sample.h"

COMMON_BEGIN_C

#define SOFTMAX_TOPK_GPU_VERSIONS 9

/* The largest K version `version` (1 .. SOFTMAX_TOPK_GPU_VERSIONS) takes. */
int softmax_topk_gpu_max_k(int version);

/* The threads per block of every kernel of every version. */
int softmax_topk_gpu_threads_per_block(void);

/* The dynamic shared memory a block asks for at launch: a block that scans
 * logits (version 1's selection, version 3, version 4's first kernel) at
 * this K; version 4's merge for this shape on a GPU of `multiprocessors`
 * SMs (it holds every slice's list). */
size_t softmax_topk_gpu_scan_shared_bytes(int k);
size_t softmax_topk_gpu_merge_shared_bytes(int rows, int vocab, int k, int multiprocessors);
/* Version 8's, whose one kernel scans then merges: the larger of the two. */
size_t softmax_topk_gpu_slice_and_merge_shared_bytes(int rows, int vocab, int k, int multiprocessors);
/* Versions 3, 4 and 8: the entries of a warp's candidate buffer at this K,
 * and the blocks per row that versions 4 and 8 choose for this shape. */
int softmax_topk_gpu_candidate_capacity(int k);
int softmax_topk_gpu_splits_for(int rows, int vocab, int k, int multiprocessors);
/* Version 6's at this K (0 for K = 1, the argmax). */
size_t softmax_topk_gpu_shared_threshold_bytes(int k);

/* Version 9's for rows of `vocab` logits at this K (0 for K = 1, the
 * argmax), and the most a block may have: above it, version 9 refuses V. */
size_t softmax_topk_gpu_step_floor_bytes(int vocab, int k);
size_t softmax_topk_gpu_shared_limit(void);

/* Version 6's launch for rows of `vocab` logits at `k`: the warps that
 * share a row, and the entries of a warp's kept list and fresh buffer. */
int softmax_topk_gpu_warps_per_row(int vocab);
int softmax_topk_gpu_kept_size(int k);
int softmax_topk_gpu_fresh_size(int k);

/* The slow paths of version 6's scan (and of version 9's revisits, the
 * same code) as the kernels ran them, added up
 * over every launch since the last reset: the float4 steps whose vote let
 * a logit through (so the warp offered its four), and the candidate
 * buffers sorted (versions 3 and 6), with the candidates and the entries
 * they held, padding included. Counted only where the kernels run on the
 * CUDA emulator (tests/emulator), to check the replay on the CPU
 * (chapters/03-softmax-topk/slow_paths.h): on a GPU nothing counts, and
 * softmax_topk_gpu_counts_slow_paths is false. */
typedef struct {
    long long offer_steps, sorts, sorted_candidates, sorted_entries;
} SoftmaxTopkSlowPathTally;

bool softmax_topk_gpu_counts_slow_paths(void);
SoftmaxTopkSlowPathTally softmax_topk_gpu_slow_path_tally(void);
void softmax_topk_gpu_slow_path_tally_reset(void);

/* Does the version draw in its top-K kernel (true), or after it, in a
 * second kernel? */
bool softmax_topk_gpu_fuses_sampling(int version);

/* One line describing the version, e.g. "one warp per row, registers". */
const char *softmax_topk_gpu_version_name(int version);

typedef struct {
    /* Cap on the number of blocks (0: as many as the rows need). A small cap
     * makes every block loop over several rows, which tests need: bugs in
     * reusing shared memory between rows only show up then. */
    int max_blocks;
    /* Versions 4 and 8: blocks per row (0: chosen from the rows and V). */
    int splits;
} SoftmaxTopkGpuConfig;

/* A version bound to its device arrays: logits [rows, vocab] (copied in
 * once), probs and indices [rows, k], and its workspace. */
typedef struct SoftmaxTopkGpuRun SoftmaxTopkGpuRun;

/* Check the arguments (K > V, K above the version's limit, ...), then
 * allocate, copy the logits and set *run; refused, *run is NULL. */
const char *softmax_topk_gpu_run_new(SoftmaxTopkGpuRun **run, int version, const float *logits, size_t rows,
                                     size_t vocab, int k, const SoftmaxTopkGpuConfig *config);
void softmax_topk_gpu_run_free(SoftmaxTopkGpuRun *run);

/* Blocks per row that versions 4 and 8 use (1 for the others). */
int softmax_topk_gpu_run_splits(const SoftmaxTopkGpuRun *run);

/* Queue one launch, results left on the device: what cuda_bench_run times.
 * The arguments were checked by softmax_topk_gpu_run_new: it cannot refuse. */
void softmax_topk_gpu_run_launch(SoftmaxTopkGpuRun *run);
/* The same on a stream (a cudaStream_t): what cuda_bench_graph captures. */
void softmax_topk_gpu_run_launch_on(SoftmaxTopkGpuRun *run, void *stream);

/* Launch once and copy the results to probs and indices [rows, k]. */
void softmax_topk_gpu_run_once(SoftmaxTopkGpuRun *run, float *probs, int64_t *indices);

/* From now on every launch of `run` also draws `samples` tokens per row
 * from its K candidates, as softmax_topk_gpu_sample below (params.top_k is
 * the run's K); refused as there, and then the run is unchanged. */
const char *softmax_topk_gpu_run_sample(SoftmaxTopkGpuRun *run, SamplingParams params, uint64_t seed, int samples);

/* After a launch of a sampling run: its tokens [rows, samples] and the
 * survivors' probs and indices [rows, K]. */
void softmax_topk_gpu_run_tokens(const SoftmaxTopkGpuRun *run, int64_t *tokens, float *probs, int64_t *indices);

/* All in one: copy in, launch, copy out into host memory. */
const char *softmax_topk_gpu(int version, const float *logits, size_t rows, size_t vocab, int k,
                             const SoftmaxTopkGpuConfig *config, float *probs, int64_t *indices);

/* Sampling on the GPU: the top K by `version`, then, on the device (in
 * the same kernel for version 7), the steps and the draws of the CPU's
 * sample_rows (inverse CDF) over each row's K candidates: tokens [rows, samples] (-1 for a row without
 * survivors), and the survivors' probs and indices [rows, K] (cut places:
 * 0 and -1). The same logits, parameters and seed give sample_rows' tokens.
 * Refuses K above SOFTMAX_TOPK_GPU_SAMPLE_MAX_K or the version's limit,
 * parameters out of range (sampling.h), and samples < 1. */
#define SOFTMAX_TOPK_GPU_SAMPLE_MAX_K 256
const char *softmax_topk_gpu_sample(int version, const float *logits, size_t rows, size_t vocab, SamplingParams params,
                                    uint64_t seed, int samples, const SoftmaxTopkGpuConfig *config, int64_t *tokens,
                                    float *probs, int64_t *indices);

COMMON_END_C

#endif
