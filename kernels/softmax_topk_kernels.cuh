/* The kernels of kernels/softmax_topk.cu, as their launcher
 * (kernels/softmax_topk_launch.cu) sees them, with the sizes both sides
 * rely on. Every block has kBlockThreads threads. Versions 1 (selection),
 * 3 and 4 (first kernel) take `capacity` candidates per warp in dynamic
 * shared memory, version 4's merge 2k candidates per split. */
#ifndef KERNELS_SOFTMAX_TOPK_KERNELS_CUH
#define KERNELS_SOFTMAX_TOPK_KERNELS_CUH

#include <cstdint>

#include "kernels/softmax_topk.h"
#include "kernels/softmax_topk_sample.h"

namespace softmax_topk_kernels
{

constexpr int kWarpSize = 32;
constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / kWarpSize;
static_assert(kBlockWarps <= TOPK_MAX_WARPS_PER_ROW, "a row's warps fit topk_worst_quota_key's slots");
/* One step of a warp's scan offers at most 32 lanes x 4 logits. */
constexpr int kOffersPerStep = kWarpSize * 4;
constexpr int kRegisterMaxK = 32;
/* Version 5's list of K sits in shared memory (8 KiB at the limit). */
constexpr int kRadixMaxK = 1024;

/* Version 1, first kernel: every probability, into [rows, vocab]. */
__global__ void three_pass_softmax_kernel(const float *logits, int rows, int vocab, float *probabilities);

/* Version 2: a warp per row, k <= kListK. */
template <int kListK>
__global__ void warp_per_row_kernel(const float *logits, int rows, int vocab, int k, float *probs, int64_t *indices);

/* Version 3 (kSoftmax) and version 1's selection, which takes the
 * probabilities of the first kernel. */
template <bool kSoftmax>
__global__ void block_rows_kernel(const float *logits, int rows, int vocab, int k, int capacity, int warps_per_row,
                                  const float *probabilities, float *probs, int64_t *indices);

/* Version 4: a partial state per (row, split), then a block per row merges them. */
__global__ void slice_partials_kernel(const float *logits, int rows, int vocab, int k, int capacity, int splits,
                                      TopkEntry *partial_lists, SoftmaxState *partial_states);
__global__ void merge_partials_kernel(const TopkEntry *partial_lists, const SoftmaxState *partial_states, int rows,
                                      int k, int splits, float *probs, int64_t *indices);

/* Version 8: version 4's two kernels in one, the last block of a row to
 * finish merging it; row_tickets [rows] are 0 before a launch and after it.
 * Dynamic shared memory: the larger of version 4's two kernels'. */
__global__ void slice_and_merge_kernel(const float *logits, int rows, int vocab, int k, int capacity, int splits,
                                       TopkEntry *partial_lists, SoftmaxState *partial_states, unsigned *row_tickets,
                                       float *probs, int64_t *indices);

/* Version 7's draws, made by the block that found the row's top K:
 * `samples` tokens per row into tokens [rows, samples], and probs and
 * indices [rows, k] become the survivors' (softmax_topk_gpu_sample). */
struct FusedSampling {
    SamplingParams params;
    uint64_t seed;
    int samples;
    int64_t *tokens;
};

/* Versions 6 (kSample false: `sampling` unused) and 7, k >= 2: candidates
 * per warp in dynamic shared memory, after one threshold key per warp slot
 * (kBlockWarps of them): kept_size kept (a power of two >= k) then
 * fresh_size fresh (a power of two >= kept_size and >= 2 kOffersPerStep),
 * and an online state per warp. */
template <bool kSample>
__global__ void shared_threshold_kernel(const float *logits, int rows, int vocab, int k, int kept_size, int fresh_size,
                                        int warps_per_row, FusedSampling sampling, float *probs, int64_t *indices);

/* Version 9, k >= 2: version 6's dynamic shared memory, then 32 counters
 * per warp slot (kBlockWarps x 32 ints) and steps_per_row step keys per
 * row slot (kBlockWarps / warps_per_row of them). */
__global__ void step_floor_kernel(const float *logits, int rows, int vocab, int k, int kept_size, int fresh_size,
                                  int warps_per_row, int steps_per_row, float *probs, int64_t *indices);
static_assert(kBlockThreads == kBlockWarps * 32, "version 9 clears a row slot's 32 counters a thread each");

/* Versions 6, 7 and 9, k = 1. */
template <bool kSample>
__global__ void argmax_rows_kernel(const float *logits, int rows, int vocab, int warps_per_row, FusedSampling sampling,
                                   float *probs, int64_t *indices);

/* Sampling after the top K, k <= kSampleMaxK: one thread per row. */
constexpr int kSampleMaxK = 256;
__global__ void sample_candidates_kernel(const float *logits, int rows, int vocab, SamplingParams params, uint64_t seed,
                                         int samples, float *candidate_logits, float *probs, int64_t *indices,
                                         int64_t *tokens);

/* Version 5, k <= kRadixMaxK. */
__global__ void radix_select_kernel(const float *logits, int rows, int vocab, int k, float *probs, int64_t *indices);

} // namespace softmax_topk_kernels

#endif
