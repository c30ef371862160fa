/* The paged attention launcher (kernels/paged_attention_gpu.h): problem
 * checks, the copies to the GPU, the dispatch of a format and head_dim to
 * its kernel instance, and version 2's workspace. The kernels are
 * kernels/paged_attention.cu. */
#include <algorithm>
#include <iterator>

#include "common/cuda_util.h"
#include "kernels/kv_quant.h"
#include "kernels/online_attention.h"
#include "kernels/paged_attention_gpu.h"
#include "kernels/paged_attention_kernels.cuh"

/* Launches name their kernels unqualified: tests/emulator/cuda-to-cpp.sh
 * rewrites `name<<<`, and a qualified name would lose its qualifier. */
using namespace paged_attention_kernels;

namespace
{

/* A grid's y and z dimensions. */
constexpr int kMaxGridYZ = 65535;

template <KvFormat kFormat, int kHeadDim> void launch_format(int version, const KernelParams &p, dim3 grid)
{
    if (version == 1) {
        whole_context_kernel<kFormat, kHeadDim><<<grid, kThreads>>>(p);
    } else if (version == 2) {
        partition_kernel<kFormat, kHeadDim><<<grid, kThreads>>>(p);
    } else if (version == 3) {
        group_partition_kernel<kFormat, kHeadDim><<<grid, kThreads>>>(p);
    } else {
        push_groups_kernel<kFormat, kHeadDim><<<grid, kThreads>>>(p);
    }
}

/* The instances for one head_dim, in KvFormat order. check_problem has
 * refused any other format. */
template <int kHeadDim> void launch_head_dim(int version, KvFormat format, const KernelParams &p, dim3 grid)
{
    using Launch = void (*)(int version, const KernelParams &p, dim3 grid);
    static constexpr Launch kByFormat[] = {
        launch_format<KV_FORMAT_FLOAT32, kHeadDim>,  launch_format<KV_FORMAT_FP16, kHeadDim>,
        launch_format<KV_FORMAT_INT8, kHeadDim>,     launch_format<KV_FORMAT_INT4, kHeadDim>,
        launch_format<KV_FORMAT_KIVI4, kHeadDim>,    launch_format<KV_FORMAT_FP8_E4M3, kHeadDim>,
        launch_format<KV_FORMAT_FP8_E5M2, kHeadDim>,
    };
    static_assert(std::size(kByFormat) == KV_FORMAT_COUNT, "an instance for every format");
    kByFormat[format](version, p, grid);
}

void launch(int version, KvFormat format, int head_dim, const KernelParams &p, dim3 grid)
{
    switch (head_dim) {
    case 64:
        launch_head_dim<64>(version, format, p, grid);
        break;
    case 128:
        launch_head_dim<128>(version, format, p, grid);
        break;
    default:
        launch_head_dim<256>(version, format, p, grid);
        break;
    }
}

template <typename T> T *device_copy(const T *host, size_t count)
{
    T *device = nullptr;
    CUDA_CHECK(cudaMalloc(&device, count * sizeof(T)));
    CUDA_CHECK(cudaMemcpy(device, host, count * sizeof(T), cudaMemcpyHostToDevice));
    return device;
}
} // namespace

struct PagedAttentionGpuRun {
    PagedAttentionProblem problem; /* the host pointers are not kept */
    KvBlockLayout keys, values;
    int max_length;
    float *queries, *out;
    uint8_t *key_pool, *value_pool;
    int32_t *block_tables, *lengths;
    float *key_head_scales, *value_head_scales; /* FP8 per kv head; NULL otherwise */
    float *partial_acc;
    SoftmaxState *partial_state;
    size_t workspace_items; /* (sequence, head, partition) items the workspace holds */
};

extern "C" const char *paged_attention_gpu_version_name(int version)
{
    /* Version v is at [v - 1]. */
    static const char *const names[] = {
        "a thread block per (sequence, query head), whole context",
        "split-K: a thread block per partition, then a merge",
        "split-K, a thread block per kv head's group of query heads: keys and values read once per group",
        "version 3 with a softmax rescale per group of positions and unpacking through the float's exponent",
    };
    static_assert(std::size(names) == PAGED_ATTENTION_GPU_VERSIONS, "a name for every version");
    return version >= 1 && version <= PAGED_ATTENTION_GPU_VERSIONS ? names[version - 1] : "?";
}

extern "C" int paged_attention_gpu_threads_per_block(void)
{
    return kThreads;
}

static bool usable_scale(float scale)
{
    return scale > 0.0f && scale <= FLT_MAX;
}

/* The problem's scalars and host arrays must make every device read land
 * inside the copies: lengths within the tables, blocks within the pool. */
static const char *check_problem(const PagedAttentionProblem *p)
{
    const PagedKvShape &s = p->shape;
    if (static_cast<int>(p->format) < 0 || p->format >= KV_FORMAT_COUNT) {
        return gpu_refusal("unknown cache format %d", static_cast<int>(p->format));
    }
    bool fp8 = p->format == KV_FORMAT_FP8_E4M3 || p->format == KV_FORMAT_FP8_E5M2;
    if (fp8 && (p->key_head_scales == nullptr) != (p->value_head_scales == nullptr)) {
        return "FP8 scales per kv head for keys and values, or for neither";
    }
    for (int h = 0; fp8 && p->key_head_scales != nullptr && h < s.n_kv_heads; h++) {
        if (!usable_scale(p->key_head_scales[h]) || !usable_scale(p->value_head_scales[h])) {
            return gpu_refusal("FP8 scales %g and %g of kv head %d: they must be positive and finite",
                               p->key_head_scales[h], p->value_head_scales[h], h);
        }
    }
    if (fp8 && p->key_head_scales == nullptr && !(usable_scale(p->key_scale) && usable_scale(p->value_scale))) {
        return gpu_refusal("FP8 scales %g and %g: they must be positive and finite", p->key_scale, p->value_scale);
    }
    if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256) {
        return gpu_refusal("head_dim %d: the kernels take 64, 128 or 256", s.head_dim);
    }
    if ((p->format == KV_FORMAT_INT4 || p->format == KV_FORMAT_KIVI4) && p->int4_group != 32 && p->int4_group != 64) {
        return gpu_refusal("INT4 groups of %d channels: the kernels take 32 or 64", p->int4_group);
    }
    if (p->batch < 1 || p->batch > kMaxGridYZ || p->n_heads < 1 || s.n_kv_heads < 1 || p->n_heads % s.n_kv_heads != 0) {
        return gpu_refusal("batch %d, %d heads, %d kv heads: need 1..%d sequences and kv heads dividing heads",
                           p->batch, p->n_heads, s.n_kv_heads, kMaxGridYZ);
    }
    if (s.block_size < 1 || p->max_blocks < 1 || p->num_blocks < 1) {
        return "block size, blocks per table and pool must be at least 1";
    }
    for (int b = 0; b < p->batch; b++) {
        if (p->lengths[b] < 1 || p->lengths[b] > p->max_blocks * s.block_size) {
            return gpu_refusal("sequence %d: length %d outside 1..%d", b, p->lengths[b], p->max_blocks * s.block_size);
        }
        for (int i = 0; i < paged_kv_blocks_for(p->lengths[b], s.block_size); i++) {
            int32_t block = p->block_tables[static_cast<size_t>(b) * p->max_blocks + i];
            if (block < 0 || block >= p->num_blocks) {
                return gpu_refusal("sequence %d: block %d is %d, outside the pool of %d", b, i, block, p->num_blocks);
            }
        }
    }
    return nullptr;
}

extern "C" const char *paged_attention_gpu_run_new(PagedAttentionGpuRun **made, const PagedAttentionProblem *problem)
{
    *made = nullptr;
    const char *why = check_problem(problem);
    if (why != nullptr) {
        return why;
    }
    PagedAttentionGpuRun *run = new PagedAttentionGpuRun();
    const PagedAttentionProblem &p = *problem;
    run->problem = p;
    run->keys = kv_layout(p.format, true, p.shape, p.int4_group);
    run->values = kv_layout(p.format, false, p.shape, p.int4_group);
    if (run->keys.axis == KV_SCALE_PER_TENSOR && p.key_head_scales != nullptr) {
        run->key_head_scales = device_copy(p.key_head_scales, static_cast<size_t>(p.shape.n_kv_heads));
        run->value_head_scales = device_copy(p.value_head_scales, static_cast<size_t>(p.shape.n_kv_heads));
        run->keys = kv_fp8_per_head(run->keys, run->key_head_scales);
        run->values = kv_fp8_per_head(run->values, run->value_head_scales);
    } else if (run->keys.axis == KV_SCALE_PER_TENSOR) {
        run->keys.tensor_scale = p.key_scale;
        run->values.tensor_scale = p.value_scale;
    }
    run->max_length = *std::max_element(p.lengths, p.lengths + p.batch);
    size_t query_floats = static_cast<size_t>(p.batch) * p.n_heads * p.shape.head_dim;
    run->queries = device_copy(p.queries, query_floats);
    run->key_pool = device_copy(p.key_pool, p.num_blocks * kv_block_bytes(run->keys));
    run->value_pool = device_copy(p.value_pool, p.num_blocks * kv_block_bytes(run->values));
    run->block_tables = device_copy(p.block_tables, static_cast<size_t>(p.batch) * p.max_blocks);
    run->lengths = device_copy(p.lengths, static_cast<size_t>(p.batch));
    CUDA_CHECK(cudaMalloc(&run->out, query_floats * sizeof(float)));
    *made = run;
    return nullptr;
}

extern "C" void paged_attention_gpu_run_free(PagedAttentionGpuRun *run)
{
    if (run == nullptr) {
        return;
    }
    void *buffers[] = {run->queries,      run->out,          run->key_pool,        run->value_pool,
                       run->block_tables, run->lengths,      run->key_head_scales, run->value_head_scales,
                       run->partial_acc,  run->partial_state};
    for (void *buffer : buffers) {
        CUDA_CHECK(cudaFree(buffer));
    }
    delete run;
}

extern "C" const char *paged_attention_gpu_partition(const PagedAttentionGpuRun *run, int partition_tokens, int *used)
{
    int block_size = run->problem.shape.block_size;
    if (partition_tokens == 0) {
        partition_tokens = paged_kv_blocks_for(PAGED_ATTENTION_DEFAULT_PARTITION, block_size) * block_size;
    }
    if (partition_tokens < 0 || partition_tokens % block_size != 0) {
        return gpu_refusal("a partition of %d positions: must be a positive multiple of the block size %d",
                           partition_tokens, block_size);
    }
    if (paged_kv_blocks_for(run->max_length, partition_tokens) > kMaxGridYZ) {
        return gpu_refusal("a partition of %d positions cuts %d positions into more than %d", partition_tokens,
                           run->max_length, kMaxGridYZ);
    }
    *used = partition_tokens;
    return nullptr;
}

extern "C" const char *paged_attention_gpu_run_launch(PagedAttentionGpuRun *run, int version, int partition_tokens)
{
    const PagedAttentionProblem &pr = run->problem;
    KernelParams p = {};
    p.queries = run->queries;
    p.key_pool = run->key_pool;
    p.value_pool = run->value_pool;
    p.block_tables = run->block_tables;
    p.lengths = run->lengths;
    p.keys = run->keys;
    p.values = run->values;
    p.n_heads = pr.n_heads;
    p.max_blocks = pr.max_blocks;
    p.out = run->out;
    if (version == 1) {
        launch(1, pr.format, pr.shape.head_dim, p, dim3(pr.n_heads, pr.batch));
        CUDA_CHECK(cudaGetLastError());
        return nullptr;
    }
    if (version < 2 || version > PAGED_ATTENTION_GPU_VERSIONS) {
        return gpu_refusal("no version %d: there are 1 .. %d", version, PAGED_ATTENTION_GPU_VERSIONS);
    }
    const char *why = paged_attention_gpu_partition(run, partition_tokens, &p.partition_tokens);
    if (why != nullptr) {
        return why;
    }
    p.max_partitions = paged_kv_blocks_for(run->max_length, p.partition_tokens);
    size_t items = static_cast<size_t>(pr.batch) * pr.n_heads * p.max_partitions;
    if (items > run->workspace_items) {
        CUDA_CHECK(cudaFree(run->partial_acc));
        CUDA_CHECK(cudaFree(run->partial_state));
        CUDA_CHECK(cudaMalloc(&run->partial_acc, items * pr.shape.head_dim * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&run->partial_state, items * sizeof(SoftmaxState)));
        run->workspace_items = items;
    }
    p.partial_acc = run->partial_acc;
    p.partial_state = run->partial_state;
    /* Version 2: a block per query head; 3 and 4: per chunk of a kv head's group. */
    int query_blocks = version == 2 ? pr.n_heads : pr.shape.n_kv_heads * group_chunks(pr.n_heads / pr.shape.n_kv_heads);
    launch(version, pr.format, pr.shape.head_dim, p, dim3(query_blocks, pr.batch, p.max_partitions));
    CUDA_CHECK(cudaGetLastError());
    merge_partitions_kernel<<<dim3(pr.n_heads, pr.batch), pr.shape.head_dim>>>(p, pr.shape.head_dim);
    CUDA_CHECK(cudaGetLastError());
    return nullptr;
}

extern "C" const char *paged_attention_gpu_run_once(PagedAttentionGpuRun *run, int version, int partition_tokens,
                                                    float *out)
{
    const char *why = paged_attention_gpu_run_launch(run, version, partition_tokens);
    if (why != nullptr) {
        return why;
    }
    const PagedAttentionProblem &p = run->problem;
    size_t floats = static_cast<size_t>(p.batch) * p.n_heads * p.shape.head_dim;
    CUDA_CHECK(cudaMemcpy(out, run->out, floats * sizeof(float), cudaMemcpyDeviceToHost));
    return nullptr;
}
