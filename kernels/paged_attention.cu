/* Paged decode attention kernels, versions 1 to 4 (see
 * kernels/paged_attention_gpu.h; their launcher is
 * kernels/paged_attention_launch.cu). The block layout, the dequantization
 * steps and the online softmax come from kernels/kv_quant.h, kernels/fp16.h
 * and kernels/online_attention.h, the same functions the CPU cache and its
 * tests use. */
#include <algorithm>

#include "kernels/kv_quant.h"
#include "kernels/online_attention.h"
#include "kernels/paged_attention_kernels.cuh"

namespace paged_attention_kernels
{

constexpr unsigned kFullMask = 0xffffffffu;
/* Positions whose loads a token group issues before using the first. */
constexpr int kUnroll = 4;

constexpr int bits_of(KvNumber number)
{
    return number == KV_NUMBER_FLOAT32 ? 32 : number == KV_NUMBER_FP16 ? 16 : number == KV_NUMBER_INT4 ? 4 : 8;
}

constexpr KvNumber number_of(KvFormat format)
{
    return format == KV_FORMAT_FLOAT32    ? KV_NUMBER_FLOAT32
           : format == KV_FORMAT_FP16     ? KV_NUMBER_FP16
           : format == KV_FORMAT_INT8     ? KV_NUMBER_INT8
           : format == KV_FORMAT_FP8_E4M3 ? KV_NUMBER_FP8_E4M3
           : format == KV_FORMAT_FP8_E5M2 ? KV_NUMBER_FP8_E5M2
                                          : KV_NUMBER_INT4;
}

// ANCHOR: share_a_position_among_lanes
/* How a warp covers positions: each lane loads 16 bytes of a key row (8 for
 * INT4, to leave registers for its 16 channels; more channels when head_dim
 * needs more than 32 lanes' worth), so one position takes kLanes lanes and a
 * warp works on kTokens positions at once. A lane always holds the same
 * kChannels channels of every row, of the query and of the output. */
template <KvFormat kFormat, int kHeadDim> struct LanePlan {
    static constexpr KvNumber kNumber = number_of(kFormat);
    static constexpr int kBits = bits_of(kNumber);
    static constexpr int kLoadBytes = kBits == 4 ? 8 : 16;
    static constexpr int kChannels = std::max(kLoadBytes * 8 / kBits, kHeadDim / kWarpSize);
    static constexpr int kLanes = kHeadDim / kChannels;
    static constexpr int kTokens = kWarpSize / kLanes;
    static constexpr int kWords = kChannels * kBits / 32; /* 32-bit words of a lane's part of a row */
    static constexpr bool kKeysPerChannel = kFormat == KV_FORMAT_KIVI4;
    static constexpr bool kScaledPerToken = kNumber == KV_NUMBER_INT8 || kNumber == KV_NUMBER_INT4;
    /* FP8: one scale for all of a kv head's numbers (per tensor or per head). */
    static constexpr bool kScaledPerTensor = kNumber == KV_NUMBER_FP8_E4M3 || kNumber == KV_NUMBER_FP8_E5M2;
    static_assert(kHeadDim % kChannels == 0 && kLanes >= 1 && kLanes <= kWarpSize && kWarpSize % kLanes == 0,
                  "a row must split evenly over at most a warp");
    static_assert(kWords % 2 == 0, "a lane loads 8 or 16 bytes at a time");
};
// ANCHOR_END: share_a_position_among_lanes

/* A lane's words of a row, in 16-byte loads, or 8-byte ones when that is
 * all there is (rows and lane offsets are aligned to them: kv_quant.h). */
template <int kWords> __device__ __forceinline__ void load_words(const uint8_t *from, uint32_t (&words)[kWords])
{
    if constexpr (kWords % 4 == 0) {
        const uint4 *vectors = reinterpret_cast<const uint4 *>(from);
#pragma unroll
        for (int v = 0; v < kWords / 4; v++) {
            uint4 x = vectors[v];
            words[4 * v] = x.x, words[4 * v + 1] = x.y, words[4 * v + 2] = x.z, words[4 * v + 3] = x.w;
        }
    } else {
        const uint2 *vectors = reinterpret_cast<const uint2 *>(from);
#pragma unroll
        for (int v = 0; v < kWords / 2; v++) {
            uint2 x = vectors[v];
            words[2 * v] = x.x, words[2 * v + 1] = x.y;
        }
    }
}

// ANCHOR: dequantize_in_registers
/* A lane's kChannels numbers of one row, from the bytes it loaded, not yet
 * scaled: an INT8 or INT4 number comes out as its integer. The scales are
 * applied where they cost one multiplication, not kChannels: a lane's
 * channels share one scale per token (INT8, INT4), which multiplies the
 * lane's part of the dot product and the value's weight; KIVI's per-channel
 * key scales multiply the query once per block; FP8's one scale per kv head
 * multiplies the query and the sum once. The arithmetic is
 * kernels/kv_quant.h's: an fp16 through half_to_float, an INT4 nibble
 * through int4_low/int4_high, a pair of FP8 numbers through
 * fp8_pair_to_floats. */
template <KvNumber kNumber, int kChannels, int kWords>
__device__ __forceinline__ void dequantize(const uint32_t (&words)[kWords], float (&x)[kChannels])
{
#pragma unroll
    for (int i = 0; i < kChannels; i++) {
        if constexpr (kNumber == KV_NUMBER_FLOAT32) {
            x[i] = __uint_as_float(words[i]);
        } else if constexpr (kNumber == KV_NUMBER_FP16) {
            x[i] = half_to_float(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
        } else if constexpr (kNumber == KV_NUMBER_INT8) {
            x[i] = static_cast<float>(static_cast<int8_t>(words[i / 4] >> (8 * (i % 4))));
        } else if constexpr (kNumber == KV_NUMBER_FP8_E4M3 || kNumber == KV_NUMBER_FP8_E5M2) {
            /* Two at a time, from an even channel: one instruction per pair on sm_89 and later. */
            if (i % 2 == 0) {
                uint16_t pair = static_cast<uint16_t>(words[i / 4] >> (8 * (i % 4)));
                fp8_pair_to_floats(pair, kv_fp8_format(kNumber), &x[i], &x[i + 1]);
            }
        } else {
            uint8_t byte = static_cast<uint8_t>(words[i / 8] >> (8 * (i / 2 % 4)));
            x[i] = static_cast<float>(i % 2 == 0 ? int4_low(byte) : int4_high(byte));
        }
    }
}
// ANCHOR_END: dequantize_in_registers

// ANCHOR: find_a_lanes_scales_without_division
/* Where a lane's scales lie in a kv head's part of a block, worked out once,
 * before the loop over positions: the byte offset of slot 0's scale for the
 * lane's channels, and the bytes from one slot's scales to the next. The
 * generic kv_load_scale divides (the channel by the group size, the row by
 * the groups) and copies two bytes from an address of unknown alignment,
 * which costs two byte loads; here each scale is one 16-bit load from an
 * address that is 2-byte aligned (kv_quant.h starts the scales on a 16-byte
 * boundary), and the loop only adds. */
struct LaneScales {
    size_t first, stride;
};

__device__ __forceinline__ LaneScales lane_scales(KvBlockLayout l, int first_channel)
{
    LaneScales s;
    s.first = kv_scales_offset(l) + 2 * static_cast<size_t>(kv_scale_index(l, 0, first_channel));
    s.stride = 2 * static_cast<size_t>(kv_groups_per_row(l));
    return s;
}

__device__ __forceinline__ float load_scale(const uint8_t *head, LaneScales s, int slot)
{
    return half_to_float(*reinterpret_cast<const uint16_t *>(head + s.first + static_cast<size_t>(slot) * s.stride));
}
// ANCHOR_END: find_a_lanes_scales_without_division

/* What a lane loads for one position: its bytes of the key and value rows,
 * and the per-token scales of its channels. */
template <class Plan> struct LaneSlot {
    uint32_t key[Plan::kWords], value[Plan::kWords];
    float key_scale, value_scale;
};

/* Where a lane's numbers and scales start in a kv head's part of a block. */
struct LaneOffsets {
    size_t key_row_bytes, value_row_bytes, channel_bytes;
    LaneScales key_scales, value_scales;
};

template <class Plan> __device__ LaneOffsets lane_offsets(const KernelParams &p, int first_channel)
{
    LaneOffsets o;
    o.key_row_bytes = kv_row_bytes(p.keys);
    o.value_row_bytes = kv_row_bytes(p.values);
    o.channel_bytes = static_cast<size_t>(first_channel) * Plan::kBits / 8;
    o.key_scales = lane_scales(p.keys, first_channel);
    o.value_scales = lane_scales(p.values, first_channel);
    return o;
}

template <class Plan>
__device__ __forceinline__ void load_slot(const LaneOffsets &o, const uint8_t *key_head, const uint8_t *value_head,
                                          int slot, LaneSlot<Plan> &s)
{
    load_words(key_head + slot * o.key_row_bytes + o.channel_bytes, s.key);
    load_words(value_head + slot * o.value_row_bytes + o.channel_bytes, s.value);
    s.key_scale = s.value_scale = 1.0f;
    if constexpr (Plan::kScaledPerToken) {
        /* A lane's channels lie in one scale group (kChannels divides the group). */
        s.value_scale = load_scale(value_head, o.value_scales, slot);
        if constexpr (!Plan::kKeysPerChannel) {
            s.key_scale = load_scale(key_head, o.key_scales, slot);
        }
    }
}

/* KIVI's keys: a scale per channel, for all the block's positions. A lane's
 * kChannels scales are consecutive fp16s at a 2 kChannels-byte aligned
 * offset: whole 16-byte loads. */
template <class Plan>
__device__ __forceinline__ void load_channel_scales(const LaneOffsets &o, const uint8_t *key_head,
                                                    float (&scales)[Plan::kChannels])
{
    uint32_t words[Plan::kChannels / 2];
    load_words(key_head + o.key_scales.first, words);
#pragma unroll
    for (int i = 0; i < Plan::kChannels; i++) {
        scales[i] = half_to_float(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
    }
}

/* A lane's share of every partial state: the softmax state of the positions
 * its token group has seen and its channels of their weighted values. */
template <int kChannels> struct LaneState {
    SoftmaxState softmax;
    float acc[kChannels];
};

// ANCHOR: load_a_lanes_queries
/* A lane's channels of the kGroup queries, times `scale` and, channel by
 * channel, `channel_scale` (KIVI's key scales; none for the others); a
 * head past `heads` gets a zero query. */
template <int kGroup, int kChannels, int kScales>
__device__ __forceinline__ void load_queries(const KernelParams &p, int seq, int first_head, int heads,
                                             int first_channel, int head_dim, float scale,
                                             const float (&channel_scale)[kScales], float (&q)[kGroup][kChannels])
{
#pragma unroll
    for (int g = 0; g < kGroup; g++) {
        const float4 *q4 = reinterpret_cast<const float4 *>(
            p.queries + (static_cast<size_t>(seq) * p.n_heads + first_head + min(g, heads - 1)) * head_dim +
            first_channel);
#pragma unroll
        for (int i = 0; i < kChannels / 4; i++) {
            float4 v = g < heads ? q4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                q[g][4 * i + j] = x[j] * scale * (kScales == kChannels ? channel_scale[(4 * i + j) % kScales] : 1.0f);
            }
        }
    }
}

// ANCHOR_END: load_a_lanes_queries

/* Every head's accumulator times `scale`. */
template <int kChannels, int kGroup>
__device__ __forceinline__ void scale_values(float scale, LaneState<kChannels> (&state)[kGroup])
{
#pragma unroll
    for (int g = 0; g < kGroup; g++) {
#pragma unroll
        for (int i = 0; i < kChannels; i++) {
            state[g].acc[i] *= scale;
        }
    }
}

/* Every head's state empty: no score seen, a zero accumulator. */
template <int kChannels, int kGroup> __device__ __forceinline__ void empty_states(LaneState<kChannels> (&state)[kGroup])
{
#pragma unroll
    for (int g = 0; g < kGroup; g++) {
        state[g].softmax = softmax_state_empty();
#pragma unroll
        for (int i = 0; i < kChannels; i++) {
            state[g].acc[i] = 0.0f;
        }
    }
}

// ANCHOR: merge_lanes_warps_and_blocks
/* Merge the token groups of a warp: lanes kLanes apart hold the same
 * channels, so a butterfly over offsets kLanes, 2 kLanes, ... < 32 merges
 * them all (every lane ends with the whole warp's state). */
template <int kLanes, int kChannels> __device__ void merge_token_groups(LaneState<kChannels> &state)
{
#pragma unroll
    for (int offset = kLanes; offset < kWarpSize; offset *= 2) {
        SoftmaxState other;
        other.max = __shfl_xor_sync(kFullMask, state.softmax.max, offset);
        other.sum = __shfl_xor_sync(kFullMask, state.softmax.sum, offset);
        float other_acc[kChannels];
#pragma unroll
        for (int i = 0; i < kChannels; i++) {
            other_acc[i] = __shfl_xor_sync(kFullMask, state.acc[i], offset);
        }
        state.softmax = attention_merge(state.softmax, state.acc, other, other_acc, kChannels);
    }
}
// ANCHOR_END: merge_lanes_warps_and_blocks

// ANCHOR: merge_the_warps_of_a_block
/* Merge the warps of a thread block through shared memory, in warp order:
 * thread t finishes channels t, t + kThreads, ... into block_acc, and every
 * thread returns the block's softmax state. */
template <int kHeadDim, int kLanes, int kChannels>
__device__ SoftmaxState merge_warps(const LaneState<kChannels> &state, float *block_acc)
{
    __shared__ float warp_acc[kWarps][kHeadDim];
    __shared__ SoftmaxState warp_softmax[kWarps];
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    // ANCHOR: publish_the_state_of_each_warp
    if (lane < kLanes) {
#pragma unroll
        for (int i = 0; i < kChannels; i++) {
            warp_acc[warp][lane * kChannels + i] = state.acc[i];
        }
        if (lane == 0) {
            warp_softmax[warp] = state.softmax;
        }
    }
    __syncthreads();
    // ANCHOR_END: publish_the_state_of_each_warp
    for (int c = threadIdx.x; c < kHeadDim; c += kThreads) {
        SoftmaxState merged = softmax_state_empty();
        float acc = 0.0f;
        for (int w = 0; w < kWarps; w++) {
            merged = attention_merge(merged, &acc, warp_softmax[w], &warp_acc[w][c], 1);
        }
        block_acc[c] = acc;
    }
    /* The states alone, merged in the same order: the same values as above. */
    SoftmaxState merged = softmax_state_empty();
    for (int w = 0; w < kWarps; w++) {
        merged = softmax_state_merge(merged, warp_softmax[w]);
    }
    return merged;
}
// ANCHOR_END: merge_the_warps_of_a_block

// ANCHOR: give_every_head_of_the_group_its_query
/* The lane states of kGroup query heads of sequence `seq`, heads
 * first_head, first_head + 1, ..., all of one kv head's group (only the
 * first `heads` count; the others compute on a zero query and are dropped),
 * over positions [begin, end), begin a multiple of the block size. Token
 * group g of the thread block takes logical blocks g, g + groups, ...;
 * within a block it takes the positions in order. Each position's key and
 * value are loaded and unpacked once, then used by every head of the group:
 * a dot product, a push into that head's online state, a weighted add. */
template <KvFormat kFormat, int kHeadDim, int kGroup>
__device__ void attend_positions(const KernelParams &p, int seq, int first_head, int heads, int begin, int end,
                                 LaneState<LanePlan<kFormat, kHeadDim>::kChannels> (&state)[kGroup])
{
    using Plan = LanePlan<kFormat, kHeadDim>;
    constexpr int kChannels = Plan::kChannels, kLanes = Plan::kLanes, kGroups = kWarps * Plan::kTokens;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int first_channel = lane % kLanes * kChannels, token_group = warp * Plan::kTokens + lane / kLanes;
    const int kv_head = first_head / (p.n_heads / p.keys.shape.n_kv_heads), block_size = p.keys.shape.block_size;
    const int32_t *table = p.block_tables + static_cast<size_t>(seq) * p.max_blocks;
    const float inverse_sqrt_d = 1.0f / sqrtf(static_cast<float>(kHeadDim));
    /* FP8: one scale for all of this kv head's keys (per tensor or per head,
     * kv_quant.h), so it multiplies the query once instead of every key. */
    float key_scale = 1.0f;
    if constexpr (Plan::kScaledPerTensor) {
        key_scale = kv_fp8_row_scale(kv_head_layout(p.keys, kv_head));
    }
    // ANCHOR_END: give_every_head_of_the_group_its_query
    // ANCHOR: load_the_queries_and_empty_the_states
    float q[kGroup][kChannels];
    load_queries(p, seq, first_head, heads, first_channel, kHeadDim, key_scale, {1.0f}, q);
    empty_states(state);
    const LaneOffsets offsets = lane_offsets<Plan>(p, first_channel);
    // ANCHOR_END: load_the_queries_and_empty_the_states

    // ANCHOR: walk_the_blocks_round_robin
    const int first_block = begin / block_size, blocks = paged_kv_blocks_for(end, block_size) - first_block;
    for (int round = 0; round < blocks; round += kGroups) {
        /* Every lane runs every iteration (the shuffles need the whole warp);
         * a token group without a block, or past its block's last position,
         * computes on zeros and keeps nothing. */
        const int b = first_block + round + token_group;
        const bool has_block = round + token_group < blocks;
        const int count = has_block ? min(block_size, end - b * block_size) : 0;
        const uint8_t *key_head = nullptr, *value_head = nullptr;
        float channel_scale[Plan::kKeysPerChannel ? kChannels : 1];
        if (has_block) {
            key_head = p.key_pool + kv_head_offset(p.keys, table[b], kv_head);
            value_head = p.value_pool + kv_head_offset(p.values, table[b], kv_head);
        }
        if constexpr (Plan::kKeysPerChannel) {
            if (has_block) {
                load_channel_scales<Plan>(offsets, key_head, channel_scale);
            } else {
#pragma unroll
                for (int i = 0; i < kChannels; i++) {
                    channel_scale[i] = 0.0f;
                }
            }
        }
        /* KIVI: the keys' per-channel scales multiply the query, once a block. */
        float scaled_q[kGroup][kChannels];
#pragma unroll
        for (int g = 0; g < kGroup; g++) {
#pragma unroll
            for (int i = 0; i < kChannels; i++) {
                scaled_q[g][i] = Plan::kKeysPerChannel ? q[g][i] * channel_scale[i] : q[g][i];
            }
        }
        // ANCHOR_END: walk_the_blocks_round_robin
        // ANCHOR: load_four_positions_then_score_them
        const int warp_count = static_cast<int>(__reduce_max_sync(kFullMask, static_cast<unsigned>(count)));
        for (int slot = 0; slot < warp_count; slot += kUnroll) {
            LaneSlot<Plan> loaded[kUnroll] = {};
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                if (slot + u < count) {
                    load_slot<Plan>(offsets, key_head, value_head, slot + u, loaded[u]);
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                float k[kChannels], v[kChannels], dot[kGroup];
                dequantize<Plan::kNumber>(loaded[u].key, k);
                dequantize<Plan::kNumber>(loaded[u].value, v);
#pragma unroll
                for (int g = 0; g < kGroup; g++) {
                    dot[g] = 0.0f;
#pragma unroll
                    for (int i = 0; i < kChannels; i++) {
                        dot[g] += scaled_q[g][i] * k[i];
                    }
                    if constexpr (Plan::kScaledPerToken && !Plan::kKeysPerChannel) {
                        dot[g] *= loaded[u].key_scale; /* this lane's channels' one scale */
                    }
#pragma unroll
                    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
                        dot[g] += __shfl_xor_sync(kFullMask, dot[g], offset);
                    }
                }
                // ANCHOR_END: load_four_positions_then_score_them
                // ANCHOR: push_each_score_into_its_heads_state
#pragma unroll
                for (int g = 0; g < kGroup; g++) {
                    /* No branch around the push: a slot past the block's end
                     * scores -inf, which weighs 0 and rescales by 1 (its value
                     * numbers are zeros), so the state and the sum keep their
                     * bits. A branch here would be taken on nearly every pass. */
                    float score = slot + u < count ? dot[g] * inverse_sqrt_d : -INFINITY;
                    float rescale, weight;
                    state[g].softmax = attention_push(state[g].softmax, score, &rescale, &weight);
                    const float scaled_weight = Plan::kScaledPerToken ? weight * loaded[u].value_scale : weight;
#pragma unroll
                    for (int i = 0; i < kChannels; i++) {
                        state[g].acc[i] = state[g].acc[i] * rescale + scaled_weight * v[i];
                    }
                }
            }
        }
    }
    // ANCHOR_END: push_each_score_into_its_heads_state
    // ANCHOR: scale_the_values_once_and_attend_one_head
    /* FP8: the values' one scale multiplies their weighted sum, once. */
    if constexpr (Plan::kScaledPerTensor) {
        scale_values(kv_fp8_row_scale(kv_head_layout(p.values, kv_head)), state);
    }
}

/* One query head's state over [begin, end), merged over the thread block:
 * its channels in block_acc, not yet divided by the returned sum. */
template <KvFormat kFormat, int kHeadDim>
__device__ SoftmaxState attend_range(const KernelParams &p, int seq, int head, int begin, int end, float *block_acc)
{
    using Plan = LanePlan<kFormat, kHeadDim>;
    LaneState<Plan::kChannels> state[1];
    attend_positions<kFormat, kHeadDim, 1>(p, seq, head, 1, begin, end, state);
    merge_token_groups<Plan::kLanes>(state[0]);
    return merge_warps<kHeadDim, Plan::kLanes>(state[0], block_acc);
}
// ANCHOR_END: scale_the_values_once_and_attend_one_head

// ANCHOR: give_each_head_a_block
/* Version 1: block (query head, sequence) walks the whole context. Each
 * thread divides the channels it merged by the block's sum. */
template <KvFormat kFormat, int kHeadDim>
__global__ void __launch_bounds__(kThreads) whole_context_kernel(KernelParams p)
{
    __shared__ float block_acc[kHeadDim];
    const int head = blockIdx.x, seq = blockIdx.y;
    SoftmaxState state = attend_range<kFormat, kHeadDim>(p, seq, head, 0, p.lengths[seq], block_acc);
    float *out = p.out + (static_cast<size_t>(seq) * p.n_heads + head) * kHeadDim;
    for (int c = threadIdx.x; c < kHeadDim; c += kThreads) {
        out[c] = block_acc[c] / state.sum;
    }
}
// ANCHOR_END: give_each_head_a_block

// ANCHOR: split_the_context_into_partitions
/* A partition's partial state for one query head: its channels from
 * block_acc (each thread those it merged there), not yet divided by the
 * sum, and its (max, sum). */
__device__ void write_partial(const KernelParams &p, int seq, int head, int partition, SoftmaxState state,
                              const float *block_acc, int head_dim)
{
    size_t item = (static_cast<size_t>(seq) * p.n_heads + head) * p.max_partitions + partition;
    for (int c = threadIdx.x; c < head_dim; c += kThreads) {
        p.partial_acc[item * head_dim + c] = block_acc[c];
    }
    if (threadIdx.x == 0) {
        p.partial_state[item] = state;
    }
}

/* Version 2, first kernel: block (query head, sequence, partition) attends
 * over its partition and writes the partial state. Partitions past a
 * sequence's end have nothing to do. */
template <KvFormat kFormat, int kHeadDim> __global__ void __launch_bounds__(kThreads) partition_kernel(KernelParams p)
{
    __shared__ float block_acc[kHeadDim];
    const int head = blockIdx.x, seq = blockIdx.y, partition = blockIdx.z;
    const int length = p.lengths[seq], begin = partition * p.partition_tokens;
    if (begin >= length) {
        return; /* the same for the whole block: no thread is left waiting at a barrier */
    }
    const int end = min(length, begin + p.partition_tokens);
    SoftmaxState state = attend_range<kFormat, kHeadDim>(p, seq, head, begin, end, block_acc);
    write_partial(p, seq, head, partition, state, block_acc, kHeadDim);
}
// ANCHOR_END: split_the_context_into_partitions

// ANCHOR: merge_the_partitions_in_order
/* Version 2, second kernel: block (query head, sequence) merges the
 * sequence's partitions in order, one thread per channel. */
__global__ void merge_partitions_kernel(KernelParams p, int head_dim)
{
    const int head = blockIdx.x, seq = blockIdx.y;
    const int partitions = (p.lengths[seq] + p.partition_tokens - 1) / p.partition_tokens;
    const size_t first = (static_cast<size_t>(seq) * p.n_heads + head) * p.max_partitions;
    for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
        SoftmaxState state = softmax_state_empty();
        float acc = 0.0f;
        for (int i = 0; i < partitions; i++) {
            state =
                attention_merge(state, &acc, p.partial_state[first + i], &p.partial_acc[(first + i) * head_dim + c], 1);
        }
        p.out[(static_cast<size_t>(seq) * p.n_heads + head) * head_dim + c] = acc / state.sum;
    }
}
// ANCHOR_END: merge_the_partitions_in_order

/* x & mask, with mask a constant: in PTX on the GPU, so that the compiler
 * cannot merge it with the OR before it into an AND and an OR per number
 * (a LOP3 takes one 32-bit constant, not two); plain C++ in the emulator. */
__device__ __forceinline__ uint32_t and_with(uint32_t x, uint32_t mask)
{
#ifdef __CUDA_ARCH__
    uint32_t bits;
    asm("and.b32 %0, %1, %2;" : "=r"(bits) : "r"(x), "r"(mask));
    return bits;
#else
    return x & mask;
#endif
}

/* Byte b of x (0 = lowest) under the exponent 0x4B: the bits
 * 0x4B0000xx, one PRMT on the GPU; shifts and masks in the emulator. */
__device__ __forceinline__ uint32_t byte_under_magic(uint32_t x, int b)
{
#ifdef __CUDA_ARCH__
    /* Result bytes 0..3: byte b of x, then bytes 0, 0 and 3 of 0x4B000000. */
    return __byte_perm(x, 0x4B000000u, 0x7440u | b);
#else
    return (x >> (8 * b) & 0xffu) | 0x4B000000u;
#endif
}

// ANCHOR: unpack_with_a_magic_exponent
/* Version 4's INT4 unpacking: no shift per number and no int-to-float
 * conversion. A float whose bits are 0x4B000000 | m (m < 2^23) is exactly
 * 2^23 + m. Nibble n of a word, masked where it lies (bits 4n .. 4n + 3)
 * under that exponent, is 2^23 + 2^(4n) (q + 8); one FFMA times 2^(-4n)
 * minus (2^(23 - 4n) + 8) leaves q. Every step is exact: the product by a
 * power of two is exact, and the FFMA rounds once a result, q, that is a
 * small integer. Only nibbles 0 to 4 fit under the exponent (2^16 15 <
 * 2^23), so the word's top three are shifted down by 12 once, into places
 * 2 to 4. */
template <int kChannels, int kWords>
__device__ __forceinline__ void unpack_int4(const uint32_t (&words)[kWords], float (&x)[kChannels])
{
    constexpr float kPlace[5] = {1.0f, 0x1p-4f, 0x1p-8f, 0x1p-12f, 0x1p-16f}; /* 2^(-4n) */
    constexpr uint32_t kMagic = 0x4B000000u;
#pragma unroll
    for (int w = 0; w < kWords; w++) {
        /* (word & mask) | magic is (word | magic) & (mask | magic): one OR
         * per word, then one AND with a constant per number. */
        const uint32_t low = words[w] | kMagic, top = (words[w] >> 12) | kMagic;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const int place = n < 5 ? n : n - 3;
            const uint32_t bits = and_with(n < 5 ? low : top, (0xfu << (4 * place)) | kMagic);
            x[8 * w + n] = fmaf(__uint_as_float(bits), kPlace[place], -(0x1p23f * kPlace[place] + 8.0f));
        }
    }
}
// ANCHOR_END: unpack_with_a_magic_exponent

/* INT8 the same way: XOR 0x80 makes each byte q + 128; one PRMT puts a
 * byte under the exponent, and one FADD subtracts 2^23 + 128, exactly. */
template <int kChannels, int kWords>
__device__ __forceinline__ void unpack_int8(const uint32_t (&words)[kWords], float (&x)[kChannels])
{
#pragma unroll
    for (int w = 0; w < kWords; w++) {
        const uint32_t biased = words[w] ^ 0x80808080u; /* q + 128 in every byte */
#pragma unroll
        for (int b = 0; b < 4; b++) {
            x[4 * w + b] = __uint_as_float(byte_under_magic(biased, b)) - (0x1p23f + 128.0f);
        }
    }
}

/* A lane's numbers of one row, version 4's way; the formats other than the
 * integers unpack as versions 1 to 3 do. */
template <KvNumber kNumber, int kChannels, int kWords>
__device__ __forceinline__ void unpack(const uint32_t (&words)[kWords], float (&x)[kChannels])
{
    if constexpr (kNumber == KV_NUMBER_INT4) {
        unpack_int4(words, x);
    } else if constexpr (kNumber == KV_NUMBER_INT8) {
        unpack_int8(words, x);
    } else {
        dequantize<kNumber>(words, x);
    }
}

// ANCHOR: push_a_group_of_scores
/* Push kCount scores into one head's state at once: the group's maximum
 * first, then one rescale of the sum (and of the accumulator, by the
 * returned factor), then a weight per score, measured from that maximum
 * without a branch, as softmax_state_push4 does (kernels/online_softmax.h,
 * which says why the reference is raised to -FLT_MAX and how +inf and NaN
 * come out). The exponentials are softmax_exp_in_sum's: a weight is off by
 * about 2 + 1.2 |x| ulp (x the score's distance below the maximum, under 104
 * where a weight is not flushed), a few millionths at most, which the
 * output, a weighted mean, carries over as a relative error of the same
 * size, far inside the GPU check's tolerance. */
template <int kCount>
__device__ __forceinline__ float push_group(SoftmaxState &state, const float (&score)[kCount], float (&weight)[kCount])
{
    float max = state.max;
#pragma unroll
    for (int u = 0; u < kCount; u++) {
        max = fmaxf(max, score[u]);
    }
    const float reference = fmaxf(max, -FLT_MAX);
    const float rescale = softmax_weight_in_sum(state.max, reference);
    state.sum *= rescale;
#pragma unroll
    for (int u = 0; u < kCount; u++) {
        weight[u] = softmax_weight_in_sum(score[u], reference);
        state.sum += weight[u];
    }
    state.max = max;
    return rescale;
}
// ANCHOR_END: push_a_group_of_scores

/* Where a lane reads one block: its part of the first key and value rows,
 * and the first of its scales. */
struct LaneRows {
    const uint8_t *key, *value, *key_scale, *value_scale;
};

template <class Plan>
__device__ __forceinline__ LaneRows lane_rows(const KernelParams &p, const LaneOffsets &o, int32_t physical,
                                              int kv_head)
{
    const uint8_t *key_head = p.key_pool + kv_head_offset(p.keys, physical, kv_head);
    const uint8_t *value_head = p.value_pool + kv_head_offset(p.values, physical, kv_head);
    return {key_head + o.channel_bytes, value_head + o.channel_bytes, key_head + o.key_scales.first,
            value_head + o.value_scales.first};
}

// ANCHOR: load_a_group_without_branches
/* Load kUnroll positions, from `slot` on, with no branch: a slot past the
 * block's last position `last` loads the last one again (its score is then
 * -inf), so every load of the group is issued before the first is used. */
template <class Plan, int kHeadDim, int kUnroll>
__device__ __forceinline__ void load_group(const LaneRows &rows, const LaneOffsets &o, int slot, int last,
                                           LaneSlot<Plan> (&loaded)[kUnroll])
{
    constexpr uint32_t kRowBytes = kHeadDim * Plan::kBits / 8;
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
        /* 32-bit offsets: a kv head's part of a block is far below 4 GiB. */
        const uint32_t at = static_cast<uint32_t>(min(slot + u, last));
        load_words(rows.key + at * kRowBytes, loaded[u].key);
        load_words(rows.value + at * kRowBytes, loaded[u].value);
        loaded[u].key_scale = loaded[u].value_scale = 1.0f;
        if constexpr (Plan::kScaledPerToken) {
            loaded[u].value_scale = half_to_float(*reinterpret_cast<const uint16_t *>(
                rows.value_scale + at * static_cast<uint32_t>(o.value_scales.stride)));
            if constexpr (!Plan::kKeysPerChannel) {
                loaded[u].key_scale = half_to_float(*reinterpret_cast<const uint16_t *>(
                    rows.key_scale + at * static_cast<uint32_t>(o.key_scales.stride)));
            }
        }
    }
}
// ANCHOR_END: load_a_group_without_branches

/* Positions a token group of version 4 loads, scores and pushes at once:
 * eight for INT8 and INT4, whose rows are short, so that a thread keeps
 * more bytes in flight and rescales less often; four for the others, whose
 * registers eight positions would crowd (the budget table shows both). */
__host__ __device__ constexpr int push_group_positions(KvNumber number)
{
    return number == KV_NUMBER_INT8 || number == KV_NUMBER_INT4 ? 8 : 4;
}

/* Version 4's loop: version 3's, with a softmax rescale per group of
 * push_group_positions positions instead of per position, loads without branches, the
 * unpacking above, and 1 / sqrt(head_dim) (and FP8's key scale) folded into
 * the query once. */
template <KvFormat kFormat, int kHeadDim, int kGroup>
__device__ void attend_positions_grouped(const KernelParams &p, int seq, int first_head, int heads, int begin, int end,
                                         LaneState<LanePlan<kFormat, kHeadDim>::kChannels> (&state)[kGroup])
{
    using Plan = LanePlan<kFormat, kHeadDim>;
    constexpr int kPushGroup = push_group_positions(Plan::kNumber);
    constexpr int kChannels = Plan::kChannels, kLanes = Plan::kLanes, kGroups = kWarps * Plan::kTokens;
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int first_channel = lane % kLanes * kChannels, token_group = warp * Plan::kTokens + lane / kLanes;
    const int kv_head = first_head / (p.n_heads / p.keys.shape.n_kv_heads), block_size = p.keys.shape.block_size;
    const int32_t *table = p.block_tables + static_cast<size_t>(seq) * p.max_blocks;
    float query_scale = 1.0f / sqrtf(static_cast<float>(kHeadDim));
    if constexpr (Plan::kScaledPerTensor) {
        query_scale *= kv_fp8_row_scale(kv_head_layout(p.keys, kv_head));
    }
    /* KIVI loads its queries again for every block, scaled by the block's
     * key scales (below), from L1: holding both the queries and a scaled
     * copy would take four queries' more registers, and scaling each key
     * instead one multiplication per number. */
    float q[kGroup][kChannels];
    if constexpr (!Plan::kKeysPerChannel) {
        load_queries(p, seq, first_head, heads, first_channel, kHeadDim, query_scale, {1.0f}, q);
    }
    empty_states(state);
    const LaneOffsets offsets = lane_offsets<Plan>(p, first_channel);
    const int first_block = begin / block_size, blocks = paged_kv_blocks_for(end, block_size) - first_block;
    for (int round = 0; round < blocks; round += kGroups) {
        /* A token group without a block reads the first one and keeps nothing. */
        const bool has_block = round + token_group < blocks;
        const int b = has_block ? first_block + round + token_group : first_block;
        const int count = has_block ? min(block_size, end - b * block_size) : 0;
        const LaneRows rows = lane_rows<Plan>(p, offsets, table[b], kv_head);
        if constexpr (Plan::kKeysPerChannel) {
            float channel_scale[kChannels];
            load_channel_scales<Plan>(offsets, rows.key_scale - offsets.key_scales.first, channel_scale);
            load_queries(p, seq, first_head, heads, first_channel, kHeadDim, query_scale, channel_scale, q);
        }
        const int warp_count = static_cast<int>(__reduce_max_sync(kFullMask, static_cast<unsigned>(count)));
        // ANCHOR: score_a_group
        for (int slot = 0; slot < warp_count; slot += kPushGroup) {
            LaneSlot<Plan> loaded[kPushGroup];
            load_group<Plan, kHeadDim>(rows, offsets, slot, max(count - 1, 0), loaded);
            float score[kGroup][kPushGroup];
#pragma unroll
            for (int u = 0; u < kPushGroup; u++) {
                float k[kChannels];
                unpack<Plan::kNumber>(loaded[u].key, k);
#pragma unroll
                for (int g = 0; g < kGroup; g++) {
                    float dot = 0.0f;
#pragma unroll
                    for (int i = 0; i < kChannels; i++) {
                        dot += q[g][i] * k[i];
                    }
                    dot *= loaded[u].key_scale;
#pragma unroll
                    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
                        dot += __shfl_xor_sync(kFullMask, dot, offset);
                    }
                    score[g][u] = slot + u < count ? dot : -INFINITY;
                }
            }
            // ANCHOR_END: score_a_group
            // ANCHOR: push_the_group_and_add_its_values
            float weight[kGroup][kPushGroup];
#pragma unroll
            for (int g = 0; g < kGroup; g++) {
                const float rescale = push_group(state[g].softmax, score[g], weight[g]);
#pragma unroll
                for (int i = 0; i < kChannels; i++) {
                    state[g].acc[i] *= rescale;
                }
            }
#pragma unroll
            for (int u = 0; u < kPushGroup; u++) {
                float v[kChannels];
                unpack<Plan::kNumber>(loaded[u].value, v);
#pragma unroll
                for (int g = 0; g < kGroup; g++) {
                    const float scaled_weight = weight[g][u] * loaded[u].value_scale;
#pragma unroll
                    for (int i = 0; i < kChannels; i++) {
                        state[g].acc[i] = fmaf(scaled_weight, v[i], state[g].acc[i]);
                    }
                }
            }
        }
        // ANCHOR_END: push_the_group_and_add_its_values
    }
    if constexpr (Plan::kScaledPerTensor) {
        scale_values(kv_fp8_row_scale(kv_head_layout(p.values, kv_head)), state);
    }
}

// ANCHOR: give_a_group_of_query_heads_a_block
/* Version 3, first kernel: block (kv head and chunk of its query heads,
 * sequence, partition) reads the partition's keys and values once for up to
 * kGroupHeads query heads of the kv head's group, then merges and writes
 * each head's partial state as version 2 does, so that version 2's merge
 * kernel finishes the job. With 4 query heads per kv head (Llama 3 8B), a
 * key is read from L2 and unpacked once instead of four times. Version 4
 * is the same block with another loop over positions (kPushGroups). */
template <KvFormat kFormat, int kHeadDim, bool kPushGroups>
__device__ void attend_group_partition(const KernelParams &p)
{
    using Plan = LanePlan<kFormat, kHeadDim>;
    __shared__ float block_acc[kHeadDim];
    const int group = p.n_heads / p.keys.shape.n_kv_heads, chunks = group_chunks(group);
    const int kv_head = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
    const int first_head = kv_head * group + chunk * kGroupHeads;
    const int heads = min(kGroupHeads, group - chunk * kGroupHeads);
    const int seq = blockIdx.y, partition = blockIdx.z;
    const int length = p.lengths[seq], begin = partition * p.partition_tokens;
    if (begin >= length) {
        return; /* the same for the whole block */
    }
    const int end = min(length, begin + p.partition_tokens);
    LaneState<Plan::kChannels> state[kGroupHeads];
    if constexpr (kPushGroups) {
        attend_positions_grouped<kFormat, kHeadDim, kGroupHeads>(p, seq, first_head, heads, begin, end, state);
    } else {
        attend_positions<kFormat, kHeadDim, kGroupHeads>(p, seq, first_head, heads, begin, end, state);
    }
#pragma unroll
    for (int g = 0; g < kGroupHeads; g++) {
        if (g < heads) { /* the same for the whole block */
            merge_token_groups<Plan::kLanes>(state[g]);
            SoftmaxState merged = merge_warps<kHeadDim, Plan::kLanes>(state[g], block_acc);
            write_partial(p, seq, first_head + g, partition, merged, block_acc, kHeadDim);
            __syncthreads(); /* the next head reuses merge_warps' shared memory */
        }
    }
}

// ANCHOR_END: give_a_group_of_query_heads_a_block

template <KvFormat kFormat, int kHeadDim>
__global__ void __launch_bounds__(kThreads) group_partition_kernel(KernelParams p)
{
    attend_group_partition<kFormat, kHeadDim, false>(p);
}

// ANCHOR: push_groups_kernel
/* Version 4, first kernel: version 3's block, version 4's loop. */
template <KvFormat kFormat, int kHeadDim>
__global__ void __launch_bounds__(kThreads, kPushGroupsBlocksPerSm) push_groups_kernel(KernelParams p)
{
    attend_group_partition<kFormat, kHeadDim, true>(p);
}
// ANCHOR_END: push_groups_kernel

/* The instances the launcher dispatches to: every format, head_dim 64, 128
 * and 256. One missing here fails the link. */
#define INSTANTIATE(FORMAT, HEAD_DIM)                                                  \
    template __global__ void whole_context_kernel<FORMAT, HEAD_DIM>(KernelParams p);   \
    template __global__ void partition_kernel<FORMAT, HEAD_DIM>(KernelParams p);       \
    template __global__ void group_partition_kernel<FORMAT, HEAD_DIM>(KernelParams p); \
    template __global__ void push_groups_kernel<FORMAT, HEAD_DIM>(KernelParams p)
#define INSTANTIATE_HEAD_DIMS(FORMAT) \
    INSTANTIATE(FORMAT, 64);          \
    INSTANTIATE(FORMAT, 128);         \
    INSTANTIATE(FORMAT, 256)
INSTANTIATE_HEAD_DIMS(KV_FORMAT_FLOAT32);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_FP16);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_INT8);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_INT4);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_KIVI4);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_FP8_E4M3);
INSTANTIATE_HEAD_DIMS(KV_FORMAT_FP8_E5M2);

} // namespace paged_attention_kernels
