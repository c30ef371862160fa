/* Softmax + top-K kernels, versions 1 to 9 (see kernels/softmax_topk_gpu.h;
 * their launcher is kernels/softmax_topk_launch.cu). The arithmetic and the
 * order of logits come from kernels/softmax_topk.h, the same functions the
 * CPU code and its tests use. */
#include "common/rng.h"
#include "kernels/softmax_topk.h"
#include "kernels/softmax_topk_gpu.h"
#include "kernels/softmax_topk_kernels.cuh"
#include "kernels/softmax_topk_sample.h"

namespace softmax_topk_kernels
{

constexpr unsigned kFullMask = 0xffffffffu;
/* Version 5 selects with 8-bit digits, 4 for a 32-bit key. */
constexpr int kRadixBits = TOPK_RADIX_BITS;
constexpr int kRadixDigits = TOPK_RADIX_DIGITS;

/* ---- Warp-level pieces ------------------------------------------------ */

__device__ int lane_id()
{
    return static_cast<int>(threadIdx.x) % kWarpSize;
}

__device__ int warp_id()
{
    return static_cast<int>(threadIdx.x) / kWarpSize;
}

/* What the emulator counts of the slow paths (softmax_topk_gpu.h): a
 * host variable, which only the emulator's kernels, run on the host, can
 * reach; compiled for a GPU, tally_slow_path is nothing. */
SoftmaxTopkSlowPathTally emulated_slow_path_tally;

__device__ void tally_slow_path(long long SoftmaxTopkSlowPathTally::*counter, long long amount)
{
#ifdef __CUDA_ARCH__
    (void)counter;
    (void)amount;
#else
    if (lane_id() == 0) {
        emulated_slow_path_tally.*counter += amount;
    }
#endif
}

// ANCHOR: merge_states_across_a_warp
/* Butterfly merge of the lanes' online states. Lanes merge in different
 * orders and may round differently, so lane 0's result is broadcast: every
 * lane then normalises with the same sum. */
__device__ SoftmaxState warp_merge_states(SoftmaxState state)
{
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        SoftmaxState other;
        other.max = __shfl_xor_sync(kFullMask, state.max, offset);
        other.sum = __shfl_xor_sync(kFullMask, state.sum, offset);
        state = softmax_state_merge(state, other);
    }
    state.max = __shfl_sync(kFullMask, state.max, 0);
    state.sum = __shfl_sync(kFullMask, state.sum, 0);
    return state;
}
// ANCHOR_END: merge_states_across_a_warp

/* The best entry held by any lane; the order is strict and total, so every
 * lane ends with the same one. */
__device__ TopkEntry warp_best(TopkEntry entry)
{
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        TopkEntry other;
        other.value = __shfl_xor_sync(kFullMask, entry.value, offset);
        other.index = __shfl_xor_sync(kFullMask, entry.index, offset);
        if (topk_ranks_before(other, entry)) {
            entry = other;
        }
    }
    return entry;
}

/* ---- Version 1: three passes, then a selection -------------------------- */

/* Block-wide reduction through shared scratch (one slot per warp). The
 * syncs on both sides let the caller reuse the scratch right away. */
template <typename Combine> __device__ float block_reduce(float value, float *scratch, Combine combine)
{
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
        value = combine(value, __shfl_xor_sync(kFullMask, value, offset));
    }
    __syncthreads();
    if (lane_id() == 0) {
        scratch[warp_id()] = value;
    }
    __syncthreads();
    value = scratch[0];
    for (int w = 1; w < kBlockWarps; w++) {
        value = combine(value, scratch[w]);
    }
    return value;
}

// ANCHOR: make_three_passes_on_the_gpu
__global__ void three_pass_softmax_kernel(const float *logits, int rows, int vocab, float *probabilities)
{
    __shared__ float scratch[kBlockWarps];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *x = logits + static_cast<size_t>(row) * vocab;
        float *p = probabilities + static_cast<size_t>(row) * vocab;
        float max = -INFINITY;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            max = fmaxf(max, x[i]); /* fmaxf ignores NaN, as the max must */
        }
        max = block_reduce(max, scratch, [](float a, float b) { return fmaxf(a, b); });
        float sum = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            sum += softmax_weight(x[i], max);
        }
        sum = block_reduce(sum, scratch, [](float a, float b) { return a + b; });
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            p[i] = softmax_weight(x[i], max) / sum;
        }
    }
}
// ANCHOR_END: make_three_passes_on_the_gpu

/* ---- Version 2: a warp per row, top K in registers ---------------------- */

template <int kListK> __device__ void list_pop_front(TopkEntry (&list)[kListK])
{
    TOPK_UNROLL
    for (int j = 0; j + 1 < kListK; j++) {
        list[j] = list[j + 1];
    }
    list[kListK - 1] = topk_sentinel();
}

// ANCHOR: give_each_row_a_warp
/* Each lane reads every 32nd logit of the row (consecutive lanes read
 * consecutive addresses), keeps its own online state and its own sorted list
 * of its best kListK >= k logits. Then the warp merges the states and picks
 * the k winners one at a time: the best head of all lanes' lists wins, and
 * its lane pops it. */
template <int kListK>
__global__ void warp_per_row_kernel(const float *logits, int rows, int vocab, int k, float *probs, int64_t *indices)
{
    const int lane = lane_id();
    for (int row = blockIdx.x * kBlockWarps + warp_id(); row < rows; row += gridDim.x * kBlockWarps) {
        const float *x = logits + static_cast<size_t>(row) * vocab;
        SoftmaxState state = softmax_state_empty();
        TopkEntry list[kListK];
        TOPK_UNROLL
        for (int j = 0; j < kListK; j++) {
            list[j] = topk_sentinel();
        }
        for (int i = lane; i < vocab; i += kWarpSize) {
            float value = x[i];
            state = softmax_state_push(state, value);
            topk_list_insert(list, kListK, topk_entry(value, i));
        }
        state = warp_merge_states(state);
        // ANCHOR: pick_the_winners_one_at_a_time
        for (int j = 0; j < k; j++) {
            TopkEntry winner = warp_best(list[0]);
            if (list[0].index == winner.index) {
                list_pop_front(list);
            }
            if (lane == 0) {
                size_t out = static_cast<size_t>(row) * k + j;
                probs[out] = softmax_probability(state, winner.value);
                indices[out] = winner.index;
            }
        }
        // ANCHOR_END: pick_the_winners_one_at_a_time
    }
}
// ANCHOR_END: give_each_row_a_warp

/* ---- Versions 3 and 4: candidate buffers in shared memory --------------- */

/* A warp's candidates for the top K: a buffer in shared memory, filled
 * without order; when it might overflow, the warp sorts it, keeps the best
 * k, and raises the threshold to the k-th. count and threshold are the same
 * in every lane. */
struct WarpCandidates {
    TopkEntry *buffer;
    int capacity; /* a power of two >= k + kOffersPerStep */
    int k;
    int count;
    TopkEntry threshold;
};

// ANCHOR: offer_candidates_with_a_ballot
/* Every lane offers one logit (or none); the ones that beat the threshold
 * are packed into buffer[count ..] in lane order: a ballot says who, a
 * popcount of the lanes below says where. */
__device__ void warp_append(TopkEntry *buffer, int &count, TopkEntry threshold, TopkEntry entry, bool valid)
{
    bool admit = valid && topk_ranks_before(entry, threshold);
    unsigned ballot = __ballot_sync(kFullMask, admit);
    if (ballot == 0) {
        return;
    }
    unsigned lanes_below = (1u << lane_id()) - 1u;
    if (admit) {
        buffer[count + __popc(ballot & lanes_below)] = entry;
    }
    count += __popc(ballot);
}

__device__ void warp_offer(WarpCandidates &candidates, TopkEntry entry, bool valid)
{
    warp_append(candidates.buffer, candidates.count, candidates.threshold, entry, valid);
}
// ANCHOR_END: offer_candidates_with_a_ballot

/* Fill buffer[count .. size) with sentinels, which rank after every
 * candidate, then sort buffer[0 .. size) best first (size a power of two)
 * with a bitonic network, the warp's lanes taking its pairs. */
__device__ void warp_pad_and_sort(TopkEntry *buffer, int count, int size)
{
    const int lane = lane_id();
    tally_slow_path(&SoftmaxTopkSlowPathTally::sorts, 1);
    tally_slow_path(&SoftmaxTopkSlowPathTally::sorted_candidates, count);
    tally_slow_path(&SoftmaxTopkSlowPathTally::sorted_entries, size);
    __syncwarp();
    for (int i = count + lane; i < size; i += kWarpSize) {
        buffer[i] = topk_sentinel();
    }
    __syncwarp();
    for (int run = 2; run <= size; run *= 2) {
        for (int stride = run / 2; stride > 0; stride /= 2) {
            for (int pair = lane; pair < size / 2; pair += kWarpSize) {
                topk_bitonic_step(buffer, pair, run, stride);
            }
            __syncwarp();
        }
    }
}

/* Sort the candidates (sentinels after them, up to topk_sort_size: the
 * whole buffer when it is nearly full, a few entries after a short scan),
 * keep the best k and take the k-th as the new threshold. */
__device__ void warp_keep_best(WarpCandidates &candidates)
{
    warp_pad_and_sort(candidates.buffer, candidates.count, topk_sort_size(candidates.count, candidates.k));
    candidates.count = min(candidates.count, candidates.k);
    candidates.threshold = candidates.count == candidates.k ? candidates.buffer[candidates.k - 1] : topk_sentinel();
}

/* Room for the next step's offers (offers_to_come, at most), or sort
 * first; and sort early, while
 * the threshold is still the sentinel, when the candidates are enough to
 * set a useful one (topk_buffer_needs_sort): waiting would let the next
 * step's logits all in, and a sort of the whole buffer follow. */
__device__ void warp_keep_best_if_nearly_full(WarpCandidates &candidates, int offers_to_come)
{
    if (topk_buffer_needs_sort(candidates.count, candidates.capacity, candidates.k, candidates.threshold,
                               offers_to_come)) {
        warp_keep_best(candidates);
    }
}

// ANCHOR: scan_a_slice_with_vector_loads
/* One warp's share of the slice [begin, end) of a row: member `member` of
 * `members` warps on the slice. The bulk is read as float4 (16 bytes), which
 * needs 16-byte aligned addresses: a row starts anywhere when V is not a
 * multiple of 4, so the up to 3 logits before the first aligned address (the
 * head) and the up to 3 after the last whole float4 (the tail) are read one
 * by one, after the bulk, by the last member, which has the fewest
 * float4s (float4_reads_scalars; they get the full comparison: the head's
 * indices are smaller than the threshold's). The visit of a float4 is told
 * how many offers the warp's next step can make (float4_offers_at).
 * kSoftmax = false only selects (version 1). */
template <typename VisitVector, typename VisitScalar>
__device__ void warp_scan_float4s(const float *row, int begin, int end, int member, int members,
                                  VisitVector visit_vector, VisitScalar visit_scalar)
{
    const int lane = lane_id();
    const float *slice = row + begin;
    int length = end - begin;
    Float4Split split = float4_split(reinterpret_cast<uintptr_t>(slice), length);
    const float4 *body = reinterpret_cast<const float4 *>(slice + split.head);

    const int step = members * kWarpSize;
    const bool reads_scalars = float4_reads_scalars(member, members);
    const int scalar_offers = reads_scalars ? float4_scalar_count(split, length) : 0;
    for (int base = member * kWarpSize; base < split.vectors; base += step) {
        int v = base + lane;
        bool valid = v < split.vectors;
        float4 q = valid ? body[v] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        /* Called only by a visit that offers: the fast path skips it. */
        auto offers_to_come = [&] {
            return float4_offers_at(base + step, split.vectors, kOffersPerStep, scalar_offers);
        };
        visit_vector(q, begin + split.head + 4 * v, valid, offers_to_come);
    }
    if (reads_scalars) {
        int local = float4_scalar_index(split, length, lane);
        bool valid = local >= 0;
        visit_scalar(valid ? slice[local] : 0.0f, begin + local, valid);
    }
}
// ANCHOR_END: scan_a_slice_with_vector_loads

// ANCHOR: offer_each_float4_of_the_scan
/* Version 3's visit of a float4 and of a scalar: every lane of the warp
 * calls them (the offers are collective), `valid` says if it holds data. */
template <bool kSoftmax>
__device__ void warp_scan_slice(const float *row, int begin, int end, int member, int members,
                                WarpCandidates &candidates, SoftmaxState &state)
{
    // ANCHOR: offer_a_float4_after_one_vote
    auto visit_vector = [&](float4 q, int first, bool valid, auto offers_to_come) {
        float values[4] = {q.x, q.y, q.z, q.w};
        if (kSoftmax && valid) {
            for (int e = 0; e < 4; e++) {
                state = softmax_state_push(state, values[e]);
            }
        }
        /* Most steps hold no candidate. Once the buffer has k, only a logit
         * above the threshold's can enter (an equal one has a larger index:
         * this warp's earlier steps hold smaller ones), or a NaN, which
         * !(x <= t) lets through: one vote skips the four offers. */
        float t = candidates.threshold.value;
        bool maybe = valid && (topk_is_sentinel(candidates.threshold) || !(q.x <= t) || !(q.y <= t) || !(q.z <= t) ||
                               !(q.w <= t));
        if (__any_sync(kFullMask, maybe)) {
            for (int e = 0; e < 4; e++) {
                warp_offer(candidates, topk_entry(values[e], first + e), valid);
            }
            warp_keep_best_if_nearly_full(candidates, offers_to_come());
        }
    };
    // ANCHOR_END: offer_a_float4_after_one_vote
    auto visit_scalar = [&](float value, int index, bool valid) {
        if (kSoftmax && valid) {
            state = softmax_state_push(state, value);
        }
        warp_offer(candidates, topk_entry(value, index), valid);
    };
    warp_scan_float4s(row, begin, end, member, members, visit_vector, visit_scalar);
}
// ANCHOR_END: offer_each_float4_of_the_scan

// ANCHOR: merge_two_lists_with_a_warp
/* One merge of two sorted lists: `kept` absorbs `other`. */
struct ListMerge {
    TopkEntry *kept;
    const TopkEntry *other;
};

/* A warp's `merges` list merges, merge_of(0 .. merges - 1), each as
 * topk_list_merge makes it, in place: both lists sorted best first, `size`
 * entries (a power of two), and the kept list ends with the best `size` of
 * the two. The better of each reversed pair, then the last stage of a
 * bitonic sort: 1 + log2(size) steps, each a compare-exchange per lane
 * (per 32 pairs) and one wait for shared memory. The merges take each step
 * together, so that a warp with several waits once per step for all of
 * them. */
template <typename MergeOf> __device__ void warp_merge_sorted(int merges, MergeOf merge_of, int size)
{
    const int lane = lane_id();
    for (int m = 0; m < merges; m++) {
        ListMerge merge = merge_of(m);
        for (int i = lane; i < size; i += kWarpSize) {
            topk_keep_better_of_pair(merge.kept, merge.other, size, i);
        }
    }
    __syncwarp();
    for (int stride = size / 2; stride > 0; stride /= 2) {
        for (int m = 0; m < merges; m++) {
            ListMerge merge = merge_of(m);
            for (int pair = lane; pair < size / 2; pair += kWarpSize) {
                topk_bitonic_step(merge.kept, pair, size, stride);
            }
        }
        __syncwarp();
    }
}
// ANCHOR_END: merge_two_lists_with_a_warp

// ANCHOR: merge_partial_states_in_shared_memory
/* Merge `count` partial states (an online state and a sorted list,
 * list i at lists + i * list_stride: the topk_list_size(k) entries that
 * warp_merge_sorted merges, sentinels after the k if fewer) in groups of
 * `group_size` consecutive partials, one group per row: partial i only ever
 * absorbs partials of its own group. Warps take the merges of each round in
 * turn, by their number (merge_tree_target), so that a round of many
 * merges (the slices of a row) keeps every warp busy, and a warp makes its
 * merges of a round together; the whole block takes part in every round
 * (it syncs). */
__device__ void block_merge_partials(TopkEntry *lists, int list_stride, SoftmaxState *states, int count, int group_size,
                                     int k)
{
    const int warp = warp_id(), groups = count / group_size;
    for (int span = 1; span < group_size; span *= 2) {
        const int merges = groups * merge_tree_merges(group_size, span);
        /* This warp's merges, numbers warp, warp + kBlockWarps, ...: evenly
         * spaced, since groups divides kBlockWarps (one row's slices, or a
         * power of two of rows of warps). */
        const int mine = (merges - warp + kBlockWarps - 1) / kBlockWarps;
        const int first = merge_tree_target(warp, span, group_size, groups);
        const int spacing = kBlockWarps / groups * 2 * span;
        auto list = [&](int i) { return lists + static_cast<size_t>(i) * list_stride; };
        auto merge_of = [&](int m) {
            int i = first + m * spacing;
            return ListMerge{list(i), list(i + span)};
        };
        warp_merge_sorted(mine, merge_of, topk_list_size(k));
        for (int m = lane_id(); m < mine; m += kWarpSize) {
            int i = first + m * spacing;
            states[i] = softmax_state_merge(states[i], states[i + span]);
        }
        __syncthreads();
    }
}
// ANCHOR_END: merge_partial_states_in_shared_memory

/* The probability of a winner: from the online state, or (version 1) from
 * the [rows, V] array the first kernel wrote. */
template <bool kSoftmax>
__device__ float winner_probability(SoftmaxState state, TopkEntry winner, const float *probabilities)
{
    return kSoftmax ? softmax_probability(state, winner.value) : probabilities[winner.index];
}

/* The row's k winners (sorted) and their probabilities, written by a warp. */
template <bool kSoftmax>
__device__ void warp_write_row(int row, int k, SoftmaxState state, const TopkEntry *best,
                               const float *row_probabilities, float *probs, int64_t *indices)
{
    for (int j = lane_id(); j < k; j += kWarpSize) {
        size_t out = static_cast<size_t>(row) * k + j;
        probs[out] = winner_probability<kSoftmax>(state, best[j], row_probabilities);
        indices[out] = best[j].index;
    }
}

// ANCHOR: scan_and_merge_in_a_block
/* The block's warps scan their shares (member `member` of `members` warps
 * on the slice [begin, end) of `row`; inactive warps have no row), then the
 * partial states of each group of `members` consecutive warps are merged:
 * the first warp of each group ends with the group's online state in
 * states[warp] and its sorted top k at the start of its buffer. */
template <bool kSoftmax>
__device__ void block_scan_and_merge(const float *row, bool active, int begin, int end, int member, int members,
                                     TopkEntry *buffers, int capacity, SoftmaxState *states, int k)
{
    const int warp = warp_id();
    WarpCandidates candidates = {buffers + warp * capacity, capacity, k, 0, topk_sentinel()};
    SoftmaxState state = softmax_state_empty();
    if (active) {
        warp_scan_slice<kSoftmax>(row, begin, end, member, members, candidates, state);
    }
    warp_keep_best(candidates);
    state = warp_merge_states(state);
    if (lane_id() == 0) {
        states[warp] = state;
    }
    __syncthreads();
    block_merge_partials(buffers, capacity, states, kBlockWarps, members, k);
}
// ANCHOR_END: scan_and_merge_in_a_block

// ANCHOR: give_each_row_a_block
/* Versions 3 (and 1's selection): `warps_per_row` warps share a row, so a
 * block holds kBlockWarps / warps_per_row rows at once; blocks loop over
 * groups of rows. Each warp scans its share, sorts its candidates, and the
 * row's warps merge their partial states; the first warp of each row writes
 * it out. */
template <bool kSoftmax>
__global__ void block_rows_kernel(const float *logits, int rows, int vocab, int k, int capacity, int warps_per_row,
                                  const float *probabilities, float *probs, int64_t *indices)
{
    extern __shared__ __align__(16) unsigned char shared[];
    TopkEntry *buffers = reinterpret_cast<TopkEntry *>(shared);
    SoftmaxState *states = reinterpret_cast<SoftmaxState *>(buffers + kBlockWarps * capacity);
    const int warp = warp_id();
    const int rows_per_block = kBlockWarps / warps_per_row;
    const int member = warp % warps_per_row;
    const int groups = (rows + rows_per_block - 1) / rows_per_block;
    for (int group = blockIdx.x; group < groups; group += gridDim.x) {
        int row = group * rows_per_block + warp / warps_per_row;
        block_scan_and_merge<kSoftmax>(logits + static_cast<size_t>(row < rows ? row : 0) * vocab, row < rows, 0, vocab,
                                       member, warps_per_row, buffers, capacity, states, k);
        if (member == 0 && row < rows) {
            const float *row_probabilities = kSoftmax ? nullptr : probabilities + static_cast<size_t>(row) * vocab;
            warp_write_row<kSoftmax>(row, k, states[warp], buffers + warp * capacity, row_probabilities, probs,
                                     indices);
        }
        /* The next group reuses the buffers and states. */
        __syncthreads();
    }
}
// ANCHOR_END: give_each_row_a_block

// ANCHOR: write_the_partial_state_of_a_slice
/* Work item `item` = (row, split): the block scans slice `split` of the row
 * with all its warps and writes the slice's partial state (online state and
 * sorted top k) to global memory, at place `item`. Returns the row. */
__device__ int block_write_slice_partial(const float *logits, int vocab, int k, int capacity, int splits,
                                         long long item, TopkEntry *buffers, SoftmaxState *states,
                                         TopkEntry *partial_lists, SoftmaxState *partial_states)
{
    const int warp = warp_id(), lane = lane_id();
    const int slice_length = (vocab + splits - 1) / splits;
    int row = static_cast<int>(item / splits), split = static_cast<int>(item % splits);
    int begin = min(vocab, split * slice_length), end = min(vocab, begin + slice_length);
    block_scan_and_merge<true>(logits + static_cast<size_t>(row) * vocab, true, begin, end, warp, kBlockWarps, buffers,
                               capacity, states, k);
    if (warp == 0) {
        for (int j = lane; j < k; j += kWarpSize) {
            partial_lists[item * k + j] = buffers[j];
        }
        if (lane == 0) {
            partial_states[item] = states[0];
        }
    }
    return row;
}
// ANCHOR_END: write_the_partial_state_of_a_slice

// ANCHOR: split_rows_across_blocks
/* Version 4, first kernel: a block per (row, split) item. */
__global__ void slice_partials_kernel(const float *logits, int rows, int vocab, int k, int capacity, int splits,
                                      TopkEntry *partial_lists, SoftmaxState *partial_states)
{
    extern __shared__ __align__(16) unsigned char shared[];
    TopkEntry *buffers = reinterpret_cast<TopkEntry *>(shared);
    SoftmaxState *states = reinterpret_cast<SoftmaxState *>(buffers + kBlockWarps * capacity);
    const long long items = static_cast<long long>(rows) * splits;
    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        block_write_slice_partial(logits, vocab, k, capacity, splits, item, buffers, states, partial_lists,
                                  partial_states);
        __syncthreads();
    }
}
// ANCHOR_END: split_rows_across_blocks

// ANCHOR: merge_the_slices_of_a_row
/* The `splits` partial states of `row`, copied from global memory into
 * `shared` (each list padded with sentinels to topk_list_size(k) entries,
 * then the states), merged by the whole block, and the row's top k written
 * out. */
__device__ void block_merge_row(const TopkEntry *partial_lists, const SoftmaxState *partial_states, int row, int k,
                                int splits, unsigned char *shared, float *probs, int64_t *indices)
{
    const int list_size = topk_list_size(k);
    TopkEntry *lists = reinterpret_cast<TopkEntry *>(shared);
    SoftmaxState *states = reinterpret_cast<SoftmaxState *>(lists + static_cast<size_t>(splits) * list_size);
    const TopkEntry *row_lists = partial_lists + static_cast<size_t>(row) * splits * k;
    for (int i = threadIdx.x; i < splits * list_size; i += blockDim.x) {
        int split = i / list_size, j = i % list_size;
        lists[i] = j < k ? row_lists[split * k + j] : topk_sentinel();
    }
    for (int i = threadIdx.x; i < splits; i += blockDim.x) {
        states[i] = partial_states[static_cast<size_t>(row) * splits + i];
    }
    __syncthreads();
    block_merge_partials(lists, list_size, states, splits, splits, k);
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        size_t out = static_cast<size_t>(row) * k + j;
        probs[out] = softmax_probability(states[0], lists[j].value);
        indices[out] = lists[j].index;
    }
}
// ANCHOR_END: merge_the_slices_of_a_row

// ANCHOR: merge_each_row_in_a_block
/* Version 4, second kernel: a block per row merges the row's partials. */
__global__ void merge_partials_kernel(const TopkEntry *partial_lists, const SoftmaxState *partial_states, int rows,
                                      int k, int splits, float *probs, int64_t *indices)
{
    extern __shared__ __align__(16) unsigned char shared[];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        block_merge_row(partial_lists, partial_states, row, k, splits, shared, probs, indices);
        /* The next row reuses the lists and states. */
        __syncthreads();
    }
}
// ANCHOR_END: merge_each_row_in_a_block

// ANCHOR: merge_in_the_last_block
/* Version 8: version 4 in one kernel. A block writes its slice's partial as
 * version 4's first kernel does, then takes a ticket, one per slice of the
 * row: the block that draws the last one, splits - 1, knows that every
 * other slice of the row has been written, and merges the row as version
 * 4's second kernel does, with no second launch. No block waits for
 * another, so any grid works. */
__global__ void slice_and_merge_kernel(const float *logits, int rows, int vocab, int k, int capacity, int splits,
                                       TopkEntry *partial_lists, SoftmaxState *partial_states, unsigned *row_tickets,
                                       float *probs, int64_t *indices)
{
    extern __shared__ __align__(16) unsigned char shared[];
    __shared__ bool last_of_row;
    TopkEntry *buffers = reinterpret_cast<TopkEntry *>(shared);
    SoftmaxState *states = reinterpret_cast<SoftmaxState *>(buffers + kBlockWarps * capacity);
    const long long items = static_cast<long long>(rows) * splits;
    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        int row = block_write_slice_partial(logits, vocab, k, capacity, splits, item, buffers, states, partial_lists,
                                            partial_states);
        // ANCHOR: take_a_ticket_of_the_row
        /* The fences make the partials visible before the ticket that
         * counts them: each thread that wrote fences before the barrier
         * that lets thread 0 take the ticket, and the merging block fences
         * after it, before reading. atomicInc wraps at splits - 1: the last
         * ticket leaves the row's count at 0, ready for the next launch. */
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned ticket = atomicInc(&row_tickets[row], static_cast<unsigned>(splits - 1));
            last_of_row = ticket == static_cast<unsigned>(splits - 1);
            __threadfence();
        }
        __syncthreads();
        // ANCHOR_END: take_a_ticket_of_the_row
        if (last_of_row) {
            block_merge_row(partial_lists, partial_states, row, k, splits, shared, probs, indices);
        }
        /* The next item reuses the buffers, states and flag. */
        __syncthreads();
    }
}
// ANCHOR_END: merge_in_the_last_block

/* ---- Version 5: radix select, K <= 1024 --------------------------------- */

/* The online state of the whole block, the same in every thread: the warps
 * merge their lanes, then every thread merges the warps' states in the same
 * order. The syncs on both sides let the caller reuse `states` right away. */
__device__ SoftmaxState block_merge_states(SoftmaxState state, SoftmaxState *states)
{
    state = warp_merge_states(state);
    __syncthreads();
    if (lane_id() == 0) {
        states[warp_id()] = state;
    }
    __syncthreads();
    SoftmaxState block = states[0];
    for (int w = 1; w < kBlockWarps; w++) {
        block = softmax_state_merge(block, states[w]);
    }
    __syncthreads();
    return block;
}

/* Count the keys of the row that start with the prefix, by their next
 * digit (bits shift .. shift + 7). The first pass (mask 0: every key) also
 * returns this thread's online state of the row. */
template <bool kWithState>
__device__ SoftmaxState count_digits(const float *x, int vocab, RadixSelection selection, int shift,
                                     unsigned *histogram)
{
    for (int digit = threadIdx.x; digit < kRadixDigits; digit += blockDim.x) {
        histogram[digit] = 0;
    }
    __syncthreads();
    SoftmaxState state = softmax_state_empty();
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        float value = x[i];
        if (kWithState) {
            state = softmax_state_push(state, value);
        }
        int bin = topk_radix_bin(topk_radix_key(value), selection, shift);
        if (bin >= 0) {
            atomicAdd(&histogram[bin], 1u);
        }
    }
    __syncthreads();
    return state;
}

// ANCHOR: select_the_kth_key_digit_by_digit
/* Four passes, each counting the keys that start with the prefix by their
 * next digit; after each, one thread picks the digit. After the 4 digits,
 * prefix is the K-th key itself: `above` keys are larger, and the K-th is
 * among those equal to it. The first pass also makes this thread's online
 * state of the row. */
__device__ RadixSelection select_kth_key(const float *x, int vocab, int k, unsigned *histogram,
                                         RadixSelection *shared_selection, SoftmaxState *state)
{
    RadixSelection selection = {0, 0, 0};
    for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
        if (shift == 32 - kRadixBits) {
            *state = count_digits<true>(x, vocab, selection, shift, histogram);
        } else {
            count_digits<false>(x, vocab, selection, shift, histogram);
        }
        if (threadIdx.x == 0) {
            topk_radix_select_digit(histogram, shift, k, &selection);
            *shared_selection = selection;
        }
        __syncthreads();
        selection = *shared_selection;
        __syncthreads();
    }
    return selection;
}
// ANCHOR_END: select_the_kth_key_digit_by_digit

/* How many threads of the block below this one have the flag set (a ballot
 * within the warp, the warps' counts through shared memory), and in `total`
 * how many in all. */
__device__ int block_count_below(bool flag, int *warp_counts, int *total)
{
    unsigned ballot = __ballot_sync(kFullMask, flag);
    if (lane_id() == 0) {
        warp_counts[warp_id()] = __popc(ballot);
    }
    __syncthreads();
    int below = __popc(ballot & ((1u << lane_id()) - 1u));
    *total = 0;
    for (int w = 0; w < kBlockWarps; w++) {
        below += w < warp_id() ? warp_counts[w] : 0;
        *total += warp_counts[w];
    }
    __syncthreads();
    return below;
}

// ANCHOR: collect_the_winners_in_index_order
/* Every entry with a key above the K-th's wins; of the entries equal to it,
 * the k - above with the smallest indices. The block walks the row in
 * tiles, in index order, and numbers the equal entries as it goes (a count
 * of the equal ones below each thread): equal entry number r wins when
 * r < k - above. Winners above the K-th key take places 0 .. above - 1 in
 * any order (a counter), the equal ones the places after them. */
__device__ void collect_winners(const float *x, int vocab, int k, RadixSelection kth, TopkEntry *list, int *warp_counts,
                                int *next_place)
{
    if (threadIdx.x == 0) {
        *next_place = 0;
    }
    int equal_before_tile = 0;
    for (int tile = 0; tile < vocab; tile += blockDim.x) {
        int i = tile + static_cast<int>(threadIdx.x);
        float value = i < vocab ? x[i] : 0.0f;
        uint32_t key = topk_radix_key(value);
        bool equal = i < vocab && key == kth.prefix;
        int equal_in_tile;
        int rank = equal_before_tile + block_count_below(equal, warp_counts, &equal_in_tile);
        if (i < vocab && key > kth.prefix) {
            list[atomicAdd(next_place, 1)] = topk_entry(value, i);
        } else if (equal && rank < k - kth.above) {
            list[kth.above + rank] = topk_entry(value, i);
        }
        equal_before_tile += equal_in_tile;
    }
}
// ANCHOR_END: collect_the_winners_in_index_order

/* Sort list[0 .. k) best first: padded with sentinels to a power of two,
 * which rank after every real entry, then a bitonic network. */
__device__ void block_sort_list(TopkEntry *list, int k)
{
    int padded = 1;
    while (padded < k) {
        padded *= 2;
    }
    for (int i = k + static_cast<int>(threadIdx.x); i < padded; i += blockDim.x) {
        list[i] = topk_sentinel();
    }
    __syncthreads();
    for (int run = 2; run <= padded; run *= 2) {
        for (int stride = run / 2; stride > 0; stride /= 2) {
            for (int pair = threadIdx.x; pair < padded / 2; pair += blockDim.x) {
                topk_bitonic_step(list, pair, run, stride);
            }
            __syncthreads();
        }
    }
}

// ANCHOR: give_each_row_a_block_and_a_radix_select
/* A block per row (blocks loop over rows). The first pass over the row
 * makes the online state and the first digit's counts; three more find the
 * K-th key; a fifth collects the winners, which are sorted in shared
 * memory. The row is read five times; the later reads come from L2 when
 * the row is still there. */
__global__ void radix_select_kernel(const float *logits, int rows, int vocab, int k, float *probs, int64_t *indices)
{
    __shared__ unsigned histogram[kRadixDigits];
    __shared__ TopkEntry list[kRadixMaxK];
    __shared__ SoftmaxState states[kBlockWarps];
    __shared__ int warp_counts[kBlockWarps];
    __shared__ RadixSelection shared_selection;
    __shared__ int next_place;
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float *x = logits + static_cast<size_t>(row) * vocab;
        SoftmaxState state;
        RadixSelection kth = select_kth_key(x, vocab, k, histogram, &shared_selection, &state);
        state = block_merge_states(state, states);
        collect_winners(x, vocab, k, kth, list, warp_counts, &next_place);
        block_sort_list(list, k);
        for (int j = threadIdx.x; j < k; j += blockDim.x) {
            size_t out = static_cast<size_t>(row) * k + j;
            probs[out] = softmax_probability(state, list[j].value);
            indices[out] = list[j].index;
        }
        /* The next row reuses the list. */
        __syncthreads();
    }
}
// ANCHOR_END: give_each_row_a_block_and_a_radix_select

/* ---- Version 6: one threshold per row, merges sized to the candidates ---- */

/* A warp's candidates in version 6: `kept`, the best kept_size entries it
 * has seen, sorted (sentinels at first); `fresh`, the candidates since the
 * last merge, unsorted. The threshold is the row's, shared by its warps in
 * shared memory as a 64-bit key (topk_entry_key): the best k-th entry that
 * any of them has published. count and threshold are the same in every lane. */
struct RowCandidates {
    TopkEntry *kept;  /* kept_size entries: a power of two >= k */
    TopkEntry *fresh; /* fresh_size entries: a power of two >= kept_size */
    int kept_size, fresh_size, k, count;
    TopkEntry threshold;
    unsigned long long *row_threshold;
    /* The row's warps' q-th best keys, one slot per warp (this warp's is
     * quota_keys[member]): topk_warp_quota. */
    unsigned long long *quota_keys;
    int member, members, quota;
};

// ANCHOR: share_one_threshold_per_row
/* Read the row's threshold. Another warp may raise it at any time, so this
 * may read an older, lower one: that only lets through candidates a newer
 * one would have stopped, which the merge then drops. Never a wrong answer:
 * every threshold published is the k-th best of k real entries of the row,
 * so the row's top k all rank before it (or are it, held by the warp that
 * published it), and no logit of the top k is ever filtered out. */
__device__ void warp_read_row_threshold(RowCandidates &candidates)
{
    candidates.threshold = topk_entry_from_key(*static_cast<volatile unsigned long long *>(candidates.row_threshold));
}

/* The threshold's logit alone, for the quick vote: its high 32 bits. */
__device__ float row_threshold_value(const RowCandidates &candidates)
{
    uint64_t key = *static_cast<volatile unsigned long long *>(candidates.row_threshold);
    return topk_entry_from_key(key & ~uint64_t{0xffffffffu}).value;
}

/* Publish this warp's k-th best, if it has k, as the row's threshold: the
 * atomic maximum of the keys, so two warps that publish at once keep the
 * better one, and the threshold only ever rises. Then its q-th best in its
 * slot, and the worst of the row's slots as a threshold too
 * (topk_worst_quota_key): the bound that rises with everything the row's
 * warps have seen together. A slot read before another warp writes it
 * holds that warp's older, lower q-th: a lower bound, never a wrong one. */
__device__ void warp_publish_threshold(RowCandidates &candidates)
{
    if (lane_id() == 0) {
        volatile unsigned long long *slots = candidates.quota_keys;
        slots[candidates.member] = topk_entry_key(candidates.kept[candidates.quota - 1]);
        __threadfence_block();
        unsigned long long kth = topk_entry_key(candidates.kept[candidates.k - 1]),
                           quota = topk_worst_quota_key(slots, candidates.members), best = kth > quota ? kth : quota;
        if (best != topk_entry_key(topk_sentinel())) {
            atomicMax(candidates.row_threshold, best);
        }
    }
    __syncwarp();
    warp_read_row_threshold(candidates);
}
// ANCHOR_END: share_one_threshold_per_row

// ANCHOR: merge_the_fresh_candidates_into_the_kept
/* Sort only the fresh candidates (padded to a power of two, at least
 * kept_size), then merge the best kept_size of them into the kept list, as
 * the merge tree merges two warps' lists (warp_merge_sorted). The sort
 * costs log2(n) (log2(n) + 1) / 2 steps over the n fresh entries, the
 * merge 1 + log2(kept_size) over the kept: not a sort of the whole buffer. */
__device__ void warp_merge_fresh(RowCandidates &candidates)
{
    int size = candidates.kept_size;
    while (size < candidates.count) {
        size *= 2;
    }
    warp_pad_and_sort(candidates.fresh, candidates.count, size);
    auto fresh_into_kept = [&](int) { return ListMerge{candidates.kept, candidates.fresh}; };
    warp_merge_sorted(1, fresh_into_kept, candidates.kept_size);
    candidates.count = 0;
    warp_publish_threshold(candidates);
}
// ANCHOR_END: merge_the_fresh_candidates_into_the_kept

/* Room for the next step's offers, or merge first; and merge early when
 * the fresh candidates can set the row's first threshold (as version 3,
 * topk_buffer_needs_sort). */
__device__ void warp_merge_fresh_if_nearly_full(RowCandidates &candidates, int offers_to_come)
{
    /* Called once per float4 step that offers: the emulator counts them. */
    tally_slow_path(&SoftmaxTopkSlowPathTally::offer_steps, 1);
    if (topk_buffer_needs_sort(candidates.count, candidates.fresh_size, candidates.k, candidates.threshold,
                               offers_to_come)) {
        warp_merge_fresh(candidates);
    }
}

// ANCHOR: offer_a_float4_against_the_row_threshold
/* The visit of a float4 votes against the threshold's logit alone, and
 * reads the whole threshold only when some lane's logit passes. The quick
 * vote lets through a logit equal to the threshold's: the threshold may
 * come from another warp, whose entry can have a larger index than this
 * one, which then ranks before it. It needs no test for the sentinel:
 * against its -inf, !(x < t) holds for every logit and NaN. */
template <typename OffersToCome>
__device__ void warp_offer_float4(RowCandidates &candidates, float4 q, int first, bool valid,
                                  OffersToCome offers_to_come)
{
    float t = row_threshold_value(candidates);
    bool maybe = valid && (!(q.x < t) || !(q.y < t) || !(q.z < t) || !(q.w < t));
    if (__any_sync(kFullMask, maybe)) {
        warp_read_row_threshold(candidates);
        float values[4] = {q.x, q.y, q.z, q.w};
        for (int e = 0; e < 4; e++) {
            warp_append(candidates.fresh, candidates.count, candidates.threshold, topk_entry(values[e], first + e),
                        valid);
        }
        warp_merge_fresh_if_nearly_full(candidates, offers_to_come());
    }
}
// ANCHOR_END: offer_a_float4_against_the_row_threshold

/* A head or tail logit, against the whole threshold. */
__device__ void warp_offer_scalar(RowCandidates &candidates, float value, int index, bool valid)
{
    warp_read_row_threshold(candidates);
    warp_append(candidates.fresh, candidates.count, candidates.threshold, topk_entry(value, index), valid);
}

// ANCHOR: scan_with_a_shared_threshold
/* Version 6's scan of a warp's share: the branch-free online push per
 * float4, and candidates filtered by the row's threshold, read anew each
 * step. kSoftmax = false only selects (version 7: the draws need no sum
 * over V). */
template <bool kSoftmax>
__device__ void warp_scan_shared_threshold(const float *row, int begin, int end, int member, int members,
                                           RowCandidates &candidates, SoftmaxState &state)
{
    auto visit_vector = [&](float4 q, int first, bool valid, auto offers_to_come) {
        if (kSoftmax && valid) {
            state = softmax_state_push4(state, q.x, q.y, q.z, q.w);
        }
        warp_offer_float4(candidates, q, first, valid, offers_to_come);
    };
    auto visit_scalar = [&](float value, int index, bool valid) {
        if (kSoftmax && valid) {
            state = softmax_state_push(state, value);
        }
        warp_offer_scalar(candidates, value, index, valid);
    };
    warp_scan_float4s(row, begin, end, member, members, visit_vector, visit_scalar);
    warp_merge_fresh(candidates);
}
// ANCHOR_END: scan_with_a_shared_threshold

/* The rows of a group (a block holds kBlockWarps / warps_per_row rows at
 * once, blocks loop over groups), and this warp's part in them. */
struct RowGroupLayout {
    int rows_per_block, member, groups;
};

__device__ RowGroupLayout row_group_layout(int rows, int warps_per_row)
{
    RowGroupLayout layout;
    layout.rows_per_block = kBlockWarps / warps_per_row;
    layout.member = warp_id() % warps_per_row;
    layout.groups = (rows + layout.rows_per_block - 1) / layout.rows_per_block;
    return layout;
}

// ANCHOR: draw_in_the_block_that_found_the_top_k
/* Version 7's epilogue, by the warp that holds the row's top k, sorted, in
 * `best` (shared memory): the sampler's steps on their logits, which are
 * right there, copied into `scratch` (2k floats of shared memory, free
 * once the merge is done), then the draws, lanes taking them in turn, with
 * the uniforms of sample_rows on the CPU. Only the outputs go to global
 * memory: the survivors' probs and indices [rows, k] and the tokens. */
__device__ void warp_sample_row(int row, int k, const TopkEntry *best, float *scratch, const FusedSampling &sampling,
                                float *probs, int64_t *indices)
{
    const int lane = lane_id();
    float *candidate_logits = scratch, *survivor_probs = scratch + k;
    for (int j = lane; j < k; j += kWarpSize) {
        candidate_logits[j] = best[j].value;
    }
    __syncwarp();
    int count = lane == 0 ? sampling_survivors(candidate_logits, sampling.params, nullptr, survivor_probs) : 0;
    count = __shfl_sync(kFullMask, count, 0);
    __syncwarp();
    for (int j = lane; j < k; j += kWarpSize) {
        size_t out = static_cast<size_t>(row) * k + j;
        probs[out] = survivor_probs[j];
        indices[out] = j < count ? best[j].index : -1;
    }
    for (int d = lane; d < sampling.samples; d += kWarpSize) {
        int place = sample_inverse_cdf(survivor_probs, count, philox_uniform(sampling.seed, row, d, 0));
        sampling.tokens[static_cast<size_t>(row) * sampling.samples + d] = place < 0 ? -1 : best[place].index;
    }
}
// ANCHOR_END: draw_in_the_block_that_found_the_top_k

// ANCHOR: lay_out_the_thresholds_buffers_and_states
/* Versions 6 and 9 in dynamic shared memory: one threshold per row slot,
 * one buffer per warp (kept, then fresh), one online state per warp. */
struct ThresholdLayout {
    unsigned long long *row_thresholds, *quota_keys;
    TopkEntry *buffers;
    int stride;
    SoftmaxState *states;
};

__device__ ThresholdLayout threshold_layout(unsigned char *shared, int kept_size, int fresh_size)
{
    ThresholdLayout at;
    at.row_thresholds = reinterpret_cast<unsigned long long *>(shared);
    at.quota_keys = at.row_thresholds + kBlockWarps;
    at.buffers = reinterpret_cast<TopkEntry *>(at.quota_keys + kBlockWarps);
    at.stride = kept_size + fresh_size;
    at.states = reinterpret_cast<SoftmaxState *>(at.buffers + kBlockWarps * at.stride);
    return at;
}
// ANCHOR_END: lay_out_the_thresholds_buffers_and_states

// ANCHOR: start_the_rows_of_a_group
/* Every threshold and every kept entry starts as the sentinel, which every
 * logit beats; the caller's barrier makes them visible to all the row's
 * warps before any scans. */
__device__ RowCandidates start_row_candidates(const ThresholdLayout &at, const RowGroupLayout &layout, int k,
                                              int kept_size, int fresh_size, int warps_per_row)
{
    const int warp = warp_id(), slot = warp / warps_per_row;
    if (threadIdx.x < kBlockWarps) {
        at.row_thresholds[threadIdx.x] = topk_entry_key(topk_sentinel());
        at.quota_keys[threadIdx.x] = topk_entry_key(topk_sentinel());
    }
    RowCandidates candidates = {at.buffers + warp * at.stride,
                                at.buffers + warp * at.stride + kept_size,
                                kept_size,
                                fresh_size,
                                k,
                                0,
                                topk_sentinel(),
                                at.row_thresholds + slot,
                                at.quota_keys + slot * warps_per_row,
                                layout.member,
                                warps_per_row,
                                topk_warp_quota(k, warps_per_row)};
    for (int i = lane_id(); i < kept_size; i += kWarpSize) {
        candidates.kept[i] = topk_sentinel();
    }
    return candidates;
}
// ANCHOR_END: start_the_rows_of_a_group

// ANCHOR: give_each_row_a_block_and_one_threshold
/* Version 6, K >= 2: as version 3, a row's warps scan their shares and
 * merge in a tree, but they share the row's threshold, push float4s without
 * a branch, and merge their fresh candidates into their kept ones.
 * Version 7 (kSample): no online state, and the draws at the end. */
template <bool kSample>
__global__ void shared_threshold_kernel(const float *logits, int rows, int vocab, int k, int kept_size, int fresh_size,
                                        int warps_per_row, FusedSampling sampling, float *probs, int64_t *indices)
{
    extern __shared__ __align__(16) unsigned char shared[];
    const ThresholdLayout at = threshold_layout(shared, kept_size, fresh_size);
    const int warp = warp_id();
    const RowGroupLayout layout = row_group_layout(rows, warps_per_row);
    for (int group = blockIdx.x; group < layout.groups; group += gridDim.x) {
        int row = group * layout.rows_per_block + warp / warps_per_row;
        RowCandidates candidates = start_row_candidates(at, layout, k, kept_size, fresh_size, warps_per_row);
        __syncthreads();
        // ANCHOR: scan_the_row_and_merge_its_warps
        SoftmaxState state = softmax_state_empty();
        if (row < rows) {
            warp_scan_shared_threshold<!kSample>(logits + static_cast<size_t>(row) * vocab, 0, vocab, layout.member,
                                                 warps_per_row, candidates, state);
        }
        state = warp_merge_states(state);
        if (lane_id() == 0) {
            at.states[warp] = state;
        }
        __syncthreads();
        block_merge_partials(at.buffers, at.stride, at.states, kBlockWarps, warps_per_row, k);
        // ANCHOR_END: scan_the_row_and_merge_its_warps
        TopkEntry *best = at.buffers + warp * at.stride;
        if (layout.member == 0 && row < rows) {
            if (kSample) {
                warp_sample_row(row, k, best, reinterpret_cast<float *>(best + kept_size), sampling, probs, indices);
            } else {
                warp_write_row<true>(row, k, at.states[warp], best, nullptr, probs, indices);
            }
        }
        /* The next group reuses the thresholds, buffers and states. */
        __syncthreads();
    }
}
// ANCHOR_END: give_each_row_a_block_and_one_threshold

/* ---- Version 9: the floor of the steps' maxima ------------------------- */

// ANCHOR: keep_each_steps_maximum
/* Version 9's first pass over a warp's share: version 6's scan and online
 * push, but no vote and no candidates. Per step, the warp's largest logit
 * as an ordered key (fmaxf ignores NaN: a NaN makes the row's sum NaN
 * instead), which lane 0 keeps in step_keys[s] for step s, the float4s
 * [32 s, 32 s + 32) of the row: this warp's steps are member, member +
 * members, ... The head and tail logits, read by the last warp, are pushed
 * and kept in `scalar`, one per lane, to be offered later. */
__device__ void warp_scan_step_maxima(const float *row, int vocab, int member, int members, unsigned *step_keys,
                                      SoftmaxState &state, TopkEntry &scalar, bool &scalar_valid)
{
    int step = member;
    auto visit_vector = [&](float4 q, int, bool valid, auto) {
        if (valid) {
            state = softmax_state_push4(state, q.x, q.y, q.z, q.w);
        }
        float lane_max = fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w));
        unsigned key = __reduce_max_sync(kFullMask, valid ? topk_radix_key(lane_max) : 0u);
        if (lane_id() == 0) {
            step_keys[step] = key;
        }
        step += members;
    };
    auto visit_scalar = [&](float value, int index, bool valid) {
        if (valid) {
            state = softmax_state_push(state, value);
        }
        scalar = topk_entry(value, index);
        scalar_valid = valid;
    };
    warp_scan_float4s(row, 0, vocab, member, members, visit_vector, visit_scalar);
}
// ANCHOR_END: keep_each_steps_maximum

// ANCHOR: find_the_floor_with_the_rows_warps
/* The k-th largest of a row's `steps` step keys, bit by bit from the top
 * (topk_kth_largest_key): each of the row's warps counts its own steps'
 * keys that reach the trial, a ballot per 32 of them, and adds its count
 * to the row's counter of that bit (32 per row, zero at the start: no
 * barrier is needed to clear one); after a barrier, every warp reads the
 * total and keeps the bit or not, all alike. Every warp of the block takes
 * part, with a row or not, since the barriers are the block's. */
__device__ uint32_t block_kth_step_key(const unsigned *step_keys, int steps, int member, int members, int k,
                                       int *bit_counts)
{
    const int lane = lane_id(), mine = topk_member_steps(steps, member, members);
    uint32_t found = 0;
    for (int bit = 31; bit >= 0; bit--) {
        uint32_t trial = topk_kth_key_trial(found, bit);
        int reaching = 0;
        for (int i = lane; i - lane < mine; i += kWarpSize) {
            bool reaches = i < mine && step_keys[member + i * members] >= trial;
            reaching += __popc(__ballot_sync(kFullMask, reaches));
        }
        if (lane == 0 && reaching > 0) {
            atomicAdd(&bit_counts[bit], reaching);
        }
        __syncthreads();
        found = topk_kth_key_after(found, bit, bit_counts[bit], k);
    }
    return found;
}
// ANCHOR_END: find_the_floor_with_the_rows_warps

// ANCHOR: revisit_the_steps_that_reach_the_floor
/* Read again only this warp's steps whose maximum reaches the floor, a
 * ballot over 32 of their keys at a time, and offer their float4s as
 * version 6 does, against the row's threshold, which starts at the floor;
 * then the head and tail logits, which no step covers. */
__device__ void warp_revisit_steps(const float *row, int vocab, const unsigned *step_keys, int steps,
                                   uint32_t floor_key, RowCandidates &candidates, TopkEntry scalar, bool scalar_valid)
{
    const int lane = lane_id(), member = candidates.member, members = candidates.members;
    const int mine = topk_member_steps(steps, member, members);
    Float4Split split = float4_split(reinterpret_cast<uintptr_t>(row), vocab);
    const float4 *body = reinterpret_cast<const float4 *>(row + split.head);
    for (int base = 0; base < mine; base += kWarpSize) {
        bool reaches = base + lane < mine && step_keys[member + (base + lane) * members] >= floor_key;
        for (unsigned revisits = __ballot_sync(kFullMask, reaches); revisits != 0; revisits &= revisits - 1) {
            int step = member + (base + __ffs(static_cast<int>(revisits)) - 1) * members;
            int v = step * kWarpSize + lane;
            bool valid = v < split.vectors;
            float4 q = valid ? body[v] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            warp_offer_float4(candidates, q, split.head + 4 * v, valid, [] { return kOffersPerStep; });
        }
    }
    if (float4_reads_scalars(member, members)) {
        warp_offer_scalar(candidates, scalar.value, scalar.index, scalar_valid);
    }
    warp_merge_fresh(candidates);
}
// ANCHOR_END: revisit_the_steps_that_reach_the_floor

// ANCHOR: give_each_row_a_block_and_a_floor
/* Version 9, K >= 2: version 6's blocks, buffers and merges, but the row
 * is read twice: a scan that keeps the online state and each step's
 * maximum, then, once the row's warps have found the k-th largest of those
 * maxima (the floor), a revisit of only the steps that reach it. Shared
 * memory: version 6's, then 32 counters per row slot (kBlockWarps of
 * them) and steps_per_row keys per row slot. */
__global__ void step_floor_kernel(const float *logits, int rows, int vocab, int k, int kept_size, int fresh_size,
                                  int warps_per_row, int steps_per_row, float *probs, int64_t *indices)
{
    extern __shared__ __align__(16) unsigned char shared[];
    const ThresholdLayout at = threshold_layout(shared, kept_size, fresh_size);
    int *bit_counts = reinterpret_cast<int *>(at.states + kBlockWarps);
    unsigned *step_keys = reinterpret_cast<unsigned *>(bit_counts + kBlockWarps * 32);
    const int warp = warp_id();
    const RowGroupLayout layout = row_group_layout(rows, warps_per_row);
    for (int group = blockIdx.x; group < layout.groups; group += gridDim.x) {
        int slot = warp / warps_per_row, row = group * layout.rows_per_block + slot;
        const float *row_logits = logits + static_cast<size_t>(row) * vocab;
        unsigned *keys = step_keys + slot * steps_per_row;
        RowCandidates candidates = start_row_candidates(at, layout, k, kept_size, fresh_size, warps_per_row);
        bit_counts[threadIdx.x] = 0;
        __syncthreads();
        // ANCHOR: scan_then_floor_then_revisit
        SoftmaxState state = softmax_state_empty();
        TopkEntry scalar = topk_sentinel();
        bool scalar_valid = false;
        int steps = 0;
        if (row < rows) {
            warp_scan_step_maxima(row_logits, vocab, layout.member, warps_per_row, keys, state, scalar, scalar_valid);
            steps = topk_float4_steps(float4_split(reinterpret_cast<uintptr_t>(row_logits), vocab).vectors);
        }
        state = warp_merge_states(state);
        if (lane_id() == 0) {
            at.states[warp] = state;
        }
        __syncthreads();
        uint32_t kth = block_kth_step_key(keys, steps, layout.member, warps_per_row, k, bit_counts + slot * 32);
        bool row_sum_is_nan = false;
        for (int m = 0; m < warps_per_row; m++) {
            row_sum_is_nan |= isnan(at.states[slot * warps_per_row + m].sum);
        }
        uint32_t floor_key = topk_step_floor_key(kth, steps, k, row_sum_is_nan);
        if (row < rows) {
            if (lane_id() == 0) {
                atomicMax(candidates.row_threshold, topk_floor_entry_key(floor_key));
            }
            __syncwarp();
            warp_read_row_threshold(candidates);
            warp_revisit_steps(row_logits, vocab, keys, steps, floor_key, candidates, scalar, scalar_valid);
        }
        __syncthreads();
        block_merge_partials(at.buffers, at.stride, at.states, kBlockWarps, warps_per_row, k);
        // ANCHOR_END: scan_then_floor_then_revisit
        if (layout.member == 0 && row < rows) {
            warp_write_row<true>(row, k, at.states[warp], at.buffers + warp * at.stride, nullptr, probs, indices);
        }
        /* The next group reuses the thresholds, counters, keys and buffers. */
        __syncthreads();
    }
}
// ANCHOR_END: give_each_row_a_block_and_a_floor

// ANCHOR: take_the_better_entry_of_a_float4
/* Version 6, K = 1: an argmax. No buffer and no threshold: each lane keeps
 * its best entry and its online state, the warp takes the best of its lanes
 * (warp_best: the order is total, so ties go to the lower index), and the
 * first warp of the row combines the row's warps in order. */
__device__ TopkEntry better_entry(TopkEntry a, TopkEntry b)
{
    return topk_ranks_before(b, a) ? b : a;
}

/* A lane's best entry after a float4 at indices first .. first + 3, all
 * after the best's: only a larger logit, or a NaN over a number, can take
 * its place (an equal one has a larger index). The quick test takes the
 * float4's maximum (fmaxf, which ignores NaN) and, for NaN, the online sum,
 * which a NaN makes NaN for good; once the best is NaN nothing beats it.
 * The sentinel (-inf, no index) loses even to -inf. */
__device__ TopkEntry lane_best_after(TopkEntry best, float4 q, int first, float sum)
{
    float max = fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w));
    if (!(max <= best.value) || (isnan(sum) && !isnan(best.value)) || topk_is_sentinel(best)) {
        best = better_entry(better_entry(best, topk_entry(q.x, first)), topk_entry(q.y, first + 1));
        best = better_entry(better_entry(best, topk_entry(q.z, first + 2)), topk_entry(q.w, first + 3));
    }
    return best;
}
// ANCHOR_END: take_the_better_entry_of_a_float4

// ANCHOR: find_the_argmax_for_k_equal_1
template <bool kSample>
__global__ void argmax_rows_kernel(const float *logits, int rows, int vocab, int warps_per_row, FusedSampling sampling,
                                   float *probs, int64_t *indices)
{
    __shared__ TopkEntry bests[kBlockWarps];
    __shared__ SoftmaxState states[kBlockWarps];
    __shared__ float sample_scratch[2 * kBlockWarps];
    const int warp = warp_id();
    const RowGroupLayout layout = row_group_layout(rows, warps_per_row);
    for (int group = blockIdx.x; group < layout.groups; group += gridDim.x) {
        int row = group * layout.rows_per_block + warp / warps_per_row;
        SoftmaxState state = softmax_state_empty();
        TopkEntry best = topk_sentinel();
        // ANCHOR: scan_the_row_keeping_the_best
        /* Version 7 needs no online state, but the quick test's NaN check
         * reads its sum: it keeps it. */
        auto visit_vector = [&](float4 q, int first, bool valid, auto) {
            if (valid) {
                state = softmax_state_push4(state, q.x, q.y, q.z, q.w);
                best = lane_best_after(best, q, first, state.sum);
            }
        };
        auto visit_scalar = [&](float value, int index, bool valid) {
            if (valid) {
                state = softmax_state_push(state, value);
                best = better_entry(best, topk_entry(value, index));
            }
        };
        if (row < rows) {
            warp_scan_float4s(logits + static_cast<size_t>(row) * vocab, 0, vocab, layout.member, warps_per_row,
                              visit_vector, visit_scalar);
        }
        // ANCHOR_END: scan_the_row_keeping_the_best
        // ANCHOR: combine_the_warps_of_a_row
        best = warp_best(best);
        state = warp_merge_states(state);
        if (lane_id() == 0) {
            bests[warp] = best;
            states[warp] = state;
        }
        __syncthreads();
        if (layout.member == 0 && row < rows) {
            if (lane_id() == 0) {
                for (int w = warp + 1; w < warp + warps_per_row; w++) {
                    best = better_entry(best, bests[w]);
                    state = softmax_state_merge(state, states[w]);
                }
                bests[warp] = best;
                if (!kSample) {
                    probs[row] = softmax_probability(state, best.value);
                    indices[row] = best.index;
                }
            }
            if (kSample) {
                __syncwarp();
                warp_sample_row(row, 1, bests + warp, sample_scratch + 2 * warp, sampling, probs, indices);
            }
        }
        // ANCHOR_END: combine_the_warps_of_a_row
        /* The next group reuses bests and states. */
        __syncthreads();
    }
}
// ANCHOR_END: find_the_argmax_for_k_equal_1

// ANCHOR: sample_from_the_candidates_on_the_gpu
/* After the top K of any version: the CPU sampler's steps
 * (kernels/softmax_topk_sample.h) on each row's K candidates, whose logits
 * are read again by index (K of them, next to the V of the top-K pass),
 * then `samples` draws by inverse CDF, draw d of row r with the uniform
 * philox_uniform(seed, r, d, 0), as sample_rows draws it on the CPU: the
 * same candidates give the same tokens. The work of a row is a few passes
 * over K numbers, so one thread takes a row. Its candidates' logits are
 * gathered into `candidate_logits` [rows, k], device memory that stays in
 * the cache: an array of up to kSampleMaxK floats per thread would be a
 * 1 KiB stack frame. probs and indices become the survivors'. */
__global__ void sample_candidates_kernel(const float *logits, int rows, int vocab, SamplingParams params, uint64_t seed,
                                         int samples, float *candidate_logits, float *probs, int64_t *indices,
                                         int64_t *tokens)
{
    const int k = params.top_k;
    for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += gridDim.x * blockDim.x) {
        const float *row_logits = logits + static_cast<size_t>(row) * vocab;
        float *row_candidates = candidate_logits + static_cast<size_t>(row) * k;
        float *row_probs = probs + static_cast<size_t>(row) * k;
        int64_t *row_indices = indices + static_cast<size_t>(row) * k;
        for (int j = 0; j < k; j++) {
            row_candidates[j] = row_logits[row_indices[j]];
        }
        int count = sampling_survivors(row_candidates, params, nullptr, row_probs);
        for (int j = count; j < k; j++) {
            row_indices[j] = -1;
        }
        for (int d = 0; d < samples; d++) {
            int place = sample_inverse_cdf(row_probs, count, philox_uniform(seed, row, d, 0));
            tokens[static_cast<size_t>(row) * samples + d] = place < 0 ? -1 : row_indices[place];
        }
    }
}
// ANCHOR_END: sample_from_the_candidates_on_the_gpu

/* The instances the launcher uses: a register list for every K up to
 * kRegisterMaxK (version 2), selection alone (version 1) or with the
 * softmax (version 3). One missing here fails the link. */
#define INSTANTIATE_WARP_PER_ROW(LIST_K) \
    template __global__ void warp_per_row_kernel<LIST_K>(const float *, int, int, int, float *, int64_t *)
INSTANTIATE_WARP_PER_ROW(1);
INSTANTIATE_WARP_PER_ROW(4);
INSTANTIATE_WARP_PER_ROW(8);
INSTANTIATE_WARP_PER_ROW(16);
INSTANTIATE_WARP_PER_ROW(kRegisterMaxK);
#define INSTANTIATE_BLOCK_ROWS(SOFTMAX)                                                                        \
    template __global__ void block_rows_kernel<SOFTMAX>(const float *, int, int, int, int, int, const float *, \
                                                        float *, int64_t *)
INSTANTIATE_BLOCK_ROWS(false);
INSTANTIATE_BLOCK_ROWS(true);
/* Version 6 (false) and 7 (true). */
#define INSTANTIATE_SHARED_THRESHOLD(SAMPLE)                                                              \
    template __global__ void shared_threshold_kernel<SAMPLE>(const float *, int, int, int, int, int, int, \
                                                             FusedSampling, float *, int64_t *);          \
    template __global__ void argmax_rows_kernel<SAMPLE>(const float *, int, int, int, FusedSampling, float *, int64_t *)
INSTANTIATE_SHARED_THRESHOLD(false);
INSTANTIATE_SHARED_THRESHOLD(true);

} // namespace softmax_topk_kernels

/* nvcc defines __NVCC__; the emulator compiles this file with g++. */
bool softmax_topk_gpu_counts_slow_paths(void)
{
#ifdef __NVCC__
    return false;
#else
    return true;
#endif
}

SoftmaxTopkSlowPathTally softmax_topk_gpu_slow_path_tally(void)
{
    return softmax_topk_kernels::emulated_slow_path_tally;
}

void softmax_topk_gpu_slow_path_tally_reset(void)
{
    softmax_topk_kernels::emulated_slow_path_tally = SoftmaxTopkSlowPathTally{};
}
