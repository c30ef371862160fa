/* The kernels of kernels/paged_attention.cu, as their launcher
 * (kernels/paged_attention_launch.cu) sees them. Blocks of kThreads threads;
 * grids (query head, sequence) for version 1 and for the merge of version 2,
 * (query head, sequence, partition) for version 2's first kernel. The
 * templates are instantiated in paged_attention.cu for every KvFormat and
 * head_dim 64, 128 and 256. */
#ifndef KERNELS_PAGED_ATTENTION_KERNELS_CUH
#define KERNELS_PAGED_ATTENTION_KERNELS_CUH

#include "kernels/kv_quant.h"
#include "kernels/online_attention.h"

namespace paged_attention_kernels
{

constexpr int kWarpSize = 32;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;

struct KernelParams {
    const float *queries;
    const uint8_t *key_pool, *value_pool;
    const int32_t *block_tables, *lengths;
    KvBlockLayout keys, values;
    int n_heads, max_blocks;
    int partition_tokens, max_partitions; /* version 2 */
    float *out;
    float *partial_acc;          /* [batch][n_heads][max_partitions][head_dim] */
    SoftmaxState *partial_state; /* [batch][n_heads][max_partitions] */
};

template <KvFormat kFormat, int kHeadDim> __global__ void whole_context_kernel(KernelParams p);
template <KvFormat kFormat, int kHeadDim> __global__ void partition_kernel(KernelParams p);
template <KvFormat kFormat, int kHeadDim> __global__ void group_partition_kernel(KernelParams p);
template <KvFormat kFormat, int kHeadDim> __global__ void push_groups_kernel(KernelParams p);
/* Version 4's blocks per SM, for __launch_bounds__: see the resource table
 * in chapters/04-kv-cache/chapter.md. */
constexpr int kPushGroupsBlocksPerSm = 2;

/* Version 3: the query heads one thread block carries, at most, and the
 * blocks a kv head's group of `group` query heads takes. */
constexpr int kGroupHeads = 4;
__host__ __device__ constexpr int group_chunks(int group)
{
    return (group + kGroupHeads - 1) / kGroupHeads;
}
__global__ void merge_partitions_kernel(KernelParams p, int head_dim);

} // namespace paged_attention_kernels

#endif
