/* The softmax + top-K launcher (kernels/softmax_topk_gpu.h): argument
 * checks, the launch configuration of every version, and allocation. The
 * kernels are kernels/softmax_topk.cu. */
#include <algorithm>

#include "common/cuda_util.h"
#include "common/occupancy.h"
#include "kernels/softmax_topk.h"
#include "kernels/softmax_topk_gpu.h"
#include "kernels/softmax_topk_kernels.cuh"

/* Launches name their kernels unqualified: tests/emulator/cuda-to-cpp.sh
 * rewrites `name<<<`, and a qualified name would lose its qualifier. */
using namespace softmax_topk_kernels;

namespace
{

constexpr int kMaxK = 256;
/* A slice of a row that a block of versions 4 and 8 reads in one step,
 * one float4 per thread: each warp then offers its share, 128 logits at
 * most (the head and tail scalars included), and sorts it once. */
constexpr int kSliceLength = kBlockThreads * 4;

int next_power_of_two(int n)
{
    int p = 1;
    while (p < n) {
        p *= 2;
    }
    return p;
}

/* Buffer entries per warp: room for k kept plus one step of offers (and
 * so for the topk_list_size(k) entries that the merges read). */
int candidate_capacity(int k)
{
    return next_power_of_two(k + kOffersPerStep);
}

/* Warps per row in version 3: each warp should get at least ~16 float4
 * per lane of work, else a block takes several rows. Powers of two up to 8. */
int warps_per_row_for(int vocab)
{
    int warps = 1;
    while (warps < kBlockWarps && vocab >= 2 * warps * 512) {
        warps *= 2;
    }
    return warps;
}

/* The merge of a row's slices: each slice's list, padded to
 * topk_list_size(k) entries, and its online state. */
size_t merge_shared_bytes(int splits, int k)
{
    return static_cast<size_t>(splits) * (topk_list_size(k) * sizeof(TopkEntry) + sizeof(SoftmaxState));
}

/* The most dynamic shared memory a merge may ask for: what a block may have
 * once its kernel opts in (opt_in_to_merge_shared_bytes), for compute
 * capability 9.0, the only one the kernels are built for (sm_90), as
 * SM90_LIMITS records it: 227 KiB, not the 48 KiB of a plain launch. The
 * limit counts static shared memory too: 1 KiB is left for it (version 8's
 * flag, last_of_row). */
size_t merge_shared_limit()
{
    const size_t static_reserve = 1024;
    return SM90_LIMITS.max_shared_bytes_per_block - static_reserve;
}

/* The merge holds every split's list in one block's shared memory. */
int max_splits(int vocab, int k)
{
    return std::min(vocab, static_cast<int>(merge_shared_limit() / merge_shared_bytes(1, k)));
}

int multiprocessor_count()
{
    int device = 0, count = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
}

/* Blocks per row for versions 4 and 8: enough blocks in all to fill the
 * GPU a few times over, but no more than it takes to cut the row into
 * slices of kSliceLength: a block's warps then each sort their share once,
 * and at most 128 entries (a slice three logits longer gave one warp 131
 * candidates, and a sort of 256). */
int splits_for(int rows, int vocab, int k, int multiprocessors)
{
    int wanted = (4 * multiprocessors + rows - 1) / rows;
    int by_length = (vocab + kSliceLength - 1) / kSliceLength;
    return std::max(1, std::min({wanted, by_length, max_splits(vocab, k)}));
}

int auto_splits(int rows, int vocab, int k)
{
    return splits_for(rows, vocab, k, multiprocessor_count());
}

int grid_for(long long work_items, int max_blocks)
{
    long long cap = max_blocks > 0 ? max_blocks : 1ll << 30;
    return static_cast<int>(std::max(1ll, std::min(work_items, cap)));
}

template <int kListK>
void launch_warp_per_row(const float *logits, int rows, int vocab, int k, int max_blocks, float *probs,
                         int64_t *indices, cudaStream_t stream)
{
    int grid = grid_for((rows + kBlockWarps - 1) / kBlockWarps, max_blocks);
    warp_per_row_kernel<kListK><<<grid, kBlockThreads, 0, stream>>>(logits, rows, vocab, k, probs, indices);
}

/* The smallest register list that holds k. */
void launch_version_2(const float *logits, int rows, int vocab, int k, int max_blocks, float *probs, int64_t *indices,
                      cudaStream_t stream)
{
    if (k <= 1) {
        launch_warp_per_row<1>(logits, rows, vocab, k, max_blocks, probs, indices, stream);
    } else if (k <= 4) {
        launch_warp_per_row<4>(logits, rows, vocab, k, max_blocks, probs, indices, stream);
    } else if (k <= 8) {
        launch_warp_per_row<8>(logits, rows, vocab, k, max_blocks, probs, indices, stream);
    } else if (k <= 16) {
        launch_warp_per_row<16>(logits, rows, vocab, k, max_blocks, probs, indices, stream);
    } else {
        launch_warp_per_row<kRegisterMaxK>(logits, rows, vocab, k, max_blocks, probs, indices, stream);
    }
}

/* Shared memory of a block of versions 1 (selection), 3 and 4 (first kernel):
 * a candidate buffer and an online state per warp. */
size_t scan_shared_bytes(int capacity)
{
    return kBlockWarps * (static_cast<size_t>(capacity) * sizeof(TopkEntry) + sizeof(SoftmaxState));
}

/* Version 6 keeps the best k of each warp sorted in a power of two, and
 * fresh candidates in another, at least as large and room for two steps of
 * offers: it merges when one more step could overflow, so half of it at
 * least is filled between merges. */
int kept_size_for(int k)
{
    return next_power_of_two(k);
}

int fresh_size_for(int k)
{
    return std::max(kept_size_for(k), 2 * kOffersPerStep);
}

/* Version 6's dynamic shared memory: a threshold key per row slot and a
 * quota key per warp (kBlockWarps of each), then a kept and a fresh buffer
 * and an online state per warp. */
size_t shared_threshold_bytes(int k)
{
    return 2 * kBlockWarps * sizeof(unsigned long long) +
           kBlockWarps *
               (static_cast<size_t>(kept_size_for(k) + fresh_size_for(k)) * sizeof(TopkEntry) + sizeof(SoftmaxState));
}

/* Version 9's: version 6's, then 32 counters per warp slot, then a key per
 * step for each row a block holds (topk_step_keys_per_row). */
size_t step_floor_bytes(int vocab, int k)
{
    int rows_per_block = kBlockWarps / warps_per_row_for(vocab);
    return shared_threshold_bytes(k) + kBlockWarps * 32 * sizeof(int) +
           static_cast<size_t>(rows_per_block) * topk_step_keys_per_row(vocab) * sizeof(unsigned);
}

/* Versions 4 and 8 split a row across blocks. */
bool splits_rows(int version)
{
    return version == 4 || version == 8;
}

/* Version 8's one kernel scans, then (the last block of a row) merges, in
 * the same dynamic shared memory. */
size_t slice_and_merge_shared_bytes(int splits, int k)
{
    return std::max(scan_shared_bytes(candidate_capacity(k)), merge_shared_bytes(splits, k));
}

/* A launch may ask for more than 48 KiB of dynamic shared memory only once
 * its kernel opts in; without this, versions 4 and 8 would fail to launch
 * on rows cut into many slices at large K. The opt-in is the kernel's, not
 * a run's: to the limit, so that no run lowers it below what another, made
 * before it, launches with. */
template <class... Params> void opt_in_to_merge_shared_bytes(void (*kernel)(Params...))
{
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(merge_shared_limit())));
}

int row_groups_for(int rows, int warps_per_row)
{
    int rows_per_block = kBlockWarps / warps_per_row;
    return (rows + rows_per_block - 1) / rows_per_block;
}

} // namespace

struct SoftmaxTopkGpuRun {
    int version;
    int rows, vocab, k;
    int max_blocks, splits;
    float *logits, *probs;
    int64_t *indices;
    float *probabilities;         /* version 1: [rows, vocab] */
    TopkEntry *partial_lists;     /* versions 4 and 8: [rows, splits, k] */
    SoftmaxState *partial_states; /* versions 4 and 8: [rows, splits] */
    unsigned *row_tickets;        /* version 8: [rows], 0 between launches */
    /* Set by softmax_topk_gpu_run_sample (tokens non-null): every launch
     * also draws, version 7 in its top-K kernel, the others in
     * sample_candidates_kernel, which gathers the candidates' logits into
     * candidate_logits [rows, k]. */
    FusedSampling sampling;
    float *candidate_logits;
};

int softmax_topk_gpu_max_k(int version)
{
    return version == 2 ? kRegisterMaxK : version == 5 ? kRadixMaxK : kMaxK;
}

bool softmax_topk_gpu_fuses_sampling(int version)
{
    return version == 7;
}

int softmax_topk_gpu_threads_per_block(void)
{
    return kBlockThreads;
}

size_t softmax_topk_gpu_scan_shared_bytes(int k)
{
    return scan_shared_bytes(candidate_capacity(k));
}

size_t softmax_topk_gpu_shared_threshold_bytes(int k)
{
    return k == 1 ? 0 : shared_threshold_bytes(k);
}

size_t softmax_topk_gpu_step_floor_bytes(int vocab, int k)
{
    return k == 1 ? 0 : step_floor_bytes(vocab, k);
}

size_t softmax_topk_gpu_shared_limit(void)
{
    return merge_shared_limit();
}

int softmax_topk_gpu_warps_per_row(int vocab)
{
    return warps_per_row_for(vocab);
}

int softmax_topk_gpu_kept_size(int k)
{
    return kept_size_for(k);
}

int softmax_topk_gpu_fresh_size(int k)
{
    return fresh_size_for(k);
}

int softmax_topk_gpu_candidate_capacity(int k)
{
    return candidate_capacity(k);
}

int softmax_topk_gpu_splits_for(int rows, int vocab, int k, int multiprocessors)
{
    return splits_for(rows, vocab, k, multiprocessors);
}

size_t softmax_topk_gpu_merge_shared_bytes(int rows, int vocab, int k, int multiprocessors)
{
    return merge_shared_bytes(splits_for(rows, vocab, k, multiprocessors), k);
}

size_t softmax_topk_gpu_slice_and_merge_shared_bytes(int rows, int vocab, int k, int multiprocessors)
{
    return slice_and_merge_shared_bytes(splits_for(rows, vocab, k, multiprocessors), k);
}

const char *softmax_topk_gpu_version_name(int version)
{
    switch (version) {
    case 1:
        return "naive: three passes, [rows, V] probabilities, then select";
    case 2:
        return "one warp per row, top K in registers";
    case 3:
        return "block per row, float4 loads, cross-warp merge";
    case 4:
        return "several blocks per row, merged by a second kernel";
    case 5:
        return "block per row, radix select of the K-th key";
    case 6:
        return "block per row, one threshold per row, merges sized to the candidates";
    case 7:
        return "version 6 with the draws in the block that found the top K";
    case 8:
        return "version 4 in one kernel: the last block of a row merges it";
    case 9:
        return "block per row, the floor of the steps' maxima, then a revisit of the steps that reach it";
    default:
        return "?";
    }
}

/* The argument checks, one line each: NULL, or the reason. */
static const char *check_arguments(int version, size_t rows, size_t vocab, int k, const SoftmaxTopkGpuConfig *config)
{
    if (version < 1 || version > SOFTMAX_TOPK_GPU_VERSIONS) {
        return gpu_refusal("version %d does not exist (1 .. %d)", version, SOFTMAX_TOPK_GPU_VERSIONS);
    }
    if (rows < 1 || rows > (1u << 30) || vocab < 1 || vocab > (1u << 30)) {
        return gpu_refusal("rows %zu and V %zu must be in [1, 2^30]", rows, vocab);
    }
    if (k < 1 || static_cast<size_t>(k) > vocab) {
        return gpu_refusal("K = %d must be in [1, V = %zu]", k, vocab);
    }
    if (k > softmax_topk_gpu_max_k(version)) {
        return gpu_refusal("version %d supports K <= %d, got K = %d", version, softmax_topk_gpu_max_k(version), k);
    }
    if (config->max_blocks < 0 || config->splits < 0) {
        return "max_blocks and splits must be >= 0";
    }
    if (splits_rows(version) && config->splits > max_splits(static_cast<int>(vocab), k)) {
        return gpu_refusal("version %d with V = %zu, K = %d takes at most %d splits, got %d", version, vocab, k,
                           max_splits(static_cast<int>(vocab), k), config->splits);
    }
    if (version == 9 && k > 1 && step_floor_bytes(static_cast<int>(vocab), k) > merge_shared_limit()) {
        return gpu_refusal("version 9 keeps a key per 128 logits in shared memory: V = %zu at K = %d needs %zu "
                           "bytes, more than the %zu a block may have",
                           vocab, k, step_floor_bytes(static_cast<int>(vocab), k), merge_shared_limit());
    }
    return nullptr;
}

const char *softmax_topk_gpu_run_new(SoftmaxTopkGpuRun **made, int version, const float *logits, size_t rows,
                                     size_t vocab, int k, const SoftmaxTopkGpuConfig *config)
{
    *made = nullptr;
    const char *why = check_arguments(version, rows, vocab, k, config);
    if (why != nullptr) {
        return why;
    }
    SoftmaxTopkGpuRun *run = new SoftmaxTopkGpuRun();
    run->version = version;
    run->rows = static_cast<int>(rows);
    run->vocab = static_cast<int>(vocab);
    run->k = k;
    run->max_blocks = config->max_blocks;
    run->splits = 1;
    if (splits_rows(version)) {
        run->splits = config->splits > 0 ? config->splits : auto_splits(run->rows, run->vocab, k);
    }
    size_t count = rows * vocab, outputs = rows * static_cast<size_t>(k);
    CUDA_CHECK(cudaMalloc(&run->logits, count * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(run->logits, logits, count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMalloc(&run->probs, outputs * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&run->indices, outputs * sizeof(int64_t)));
    if (version == 1) {
        CUDA_CHECK(cudaMalloc(&run->probabilities, count * sizeof(float)));
    }
    if (splits_rows(version)) {
        CUDA_CHECK(cudaMalloc(&run->partial_lists, outputs * run->splits * sizeof(TopkEntry)));
        CUDA_CHECK(cudaMalloc(&run->partial_states, rows * run->splits * sizeof(SoftmaxState)));
    }
    if (version == 4) {
        opt_in_to_merge_shared_bytes(merge_partials_kernel);
    }
    if (version == 9) {
        opt_in_to_merge_shared_bytes(step_floor_kernel);
    }
    if (version == 8) {
        opt_in_to_merge_shared_bytes(slice_and_merge_kernel);
        CUDA_CHECK(cudaMalloc(&run->row_tickets, rows * sizeof(unsigned)));
        CUDA_CHECK(cudaMemset(run->row_tickets, 0, rows * sizeof(unsigned)));
    }
    *made = run;
    return nullptr;
}

void softmax_topk_gpu_run_free(SoftmaxTopkGpuRun *run)
{
    if (run == nullptr) {
        return;
    }
    CUDA_CHECK(cudaFree(run->logits));
    CUDA_CHECK(cudaFree(run->probs));
    CUDA_CHECK(cudaFree(run->indices));
    CUDA_CHECK(cudaFree(run->probabilities));
    CUDA_CHECK(cudaFree(run->partial_lists));
    CUDA_CHECK(cudaFree(run->partial_states));
    CUDA_CHECK(cudaFree(run->row_tickets));
    CUDA_CHECK(cudaFree(run->sampling.tokens));
    CUDA_CHECK(cudaFree(run->candidate_logits));
    delete run;
}

int softmax_topk_gpu_run_splits(const SoftmaxTopkGpuRun *run)
{
    return run->splits;
}

/* K = 1 is an argmax; above, candidates with a shared threshold. With
 * kSample (version 7 when it samples) the same block then draws. */
template <bool kSample> static void launch_shared_threshold(const SoftmaxTopkGpuRun *run, cudaStream_t stream)
{
    int warps = warps_per_row_for(run->vocab);
    int grid = grid_for(row_groups_for(run->rows, warps), run->max_blocks);
    if (run->k == 1) {
        argmax_rows_kernel<kSample><<<grid, kBlockThreads, 0, stream>>>(run->logits, run->rows, run->vocab, warps,
                                                                        run->sampling, run->probs, run->indices);
    } else {
        shared_threshold_kernel<kSample><<<grid, kBlockThreads, shared_threshold_bytes(run->k), stream>>>(
            run->logits, run->rows, run->vocab, run->k, kept_size_for(run->k), fresh_size_for(run->k), warps,
            run->sampling, run->probs, run->indices);
    }
}

/* Version 9: K = 1 is version 6's argmax; above, the floor of the steps. */
static void launch_step_floor(const SoftmaxTopkGpuRun *run, cudaStream_t stream)
{
    if (run->k == 1) {
        launch_shared_threshold<false>(run, stream);
        return;
    }
    int warps = warps_per_row_for(run->vocab);
    int grid = grid_for(row_groups_for(run->rows, warps), run->max_blocks);
    step_floor_kernel<<<grid, kBlockThreads, step_floor_bytes(run->vocab, run->k), stream>>>(
        run->logits, run->rows, run->vocab, run->k, kept_size_for(run->k), fresh_size_for(run->k), warps,
        topk_step_keys_per_row(run->vocab), run->probs, run->indices);
}

static bool samples(const SoftmaxTopkGpuRun *run)
{
    return run->sampling.tokens != nullptr;
}

/* After the top K of versions 1 .. 6, 8 and 9: one thread per row draws. */
static void launch_sampling(const SoftmaxTopkGpuRun *run, cudaStream_t stream)
{
    int grid = grid_for((run->rows + kBlockThreads - 1) / kBlockThreads, run->max_blocks);
    sample_candidates_kernel<<<grid, kBlockThreads, 0, stream>>>(
        run->logits, run->rows, run->vocab, run->sampling.params, run->sampling.seed, run->sampling.samples,
        run->candidate_logits, run->probs, run->indices, run->sampling.tokens);
}

/* Every kernel of the run's version queued on `stream`. */
static void launch(const SoftmaxTopkGpuRun *run, cudaStream_t stream = nullptr)
{
    const int rows = run->rows, vocab = run->vocab, k = run->k;
    const int capacity = candidate_capacity(k);
    const size_t scan_bytes = scan_shared_bytes(capacity);
    switch (run->version) {
    case 1: {
        three_pass_softmax_kernel<<<grid_for(rows, run->max_blocks), kBlockThreads, 0, stream>>>(
            run->logits, rows, vocab, run->probabilities);
        CUDA_CHECK(cudaGetLastError());
        int warps = warps_per_row_for(vocab), groups = row_groups_for(rows, warps);
        block_rows_kernel<false><<<grid_for(groups, run->max_blocks), kBlockThreads, scan_bytes, stream>>>(
            run->logits, rows, vocab, k, capacity, warps, run->probabilities, run->probs, run->indices);
        break;
    }
    case 2:
        launch_version_2(run->logits, rows, vocab, k, run->max_blocks, run->probs, run->indices, stream);
        break;
    case 3: {
        int warps = warps_per_row_for(vocab), groups = row_groups_for(rows, warps);
        block_rows_kernel<true><<<grid_for(groups, run->max_blocks), kBlockThreads, scan_bytes, stream>>>(
            run->logits, rows, vocab, k, capacity, warps, nullptr, run->probs, run->indices);
        break;
    }
    case 4:
        slice_partials_kernel<<<grid_for(static_cast<long long>(rows) * run->splits, run->max_blocks), kBlockThreads,
                                scan_bytes, stream>>>(run->logits, rows, vocab, k, capacity, run->splits,
                                                      run->partial_lists, run->partial_states);
        CUDA_CHECK(cudaGetLastError());
        merge_partials_kernel<<<grid_for(rows, run->max_blocks), kBlockThreads, merge_shared_bytes(run->splits, k),
                                stream>>>(run->partial_lists, run->partial_states, rows, k, run->splits, run->probs,
                                          run->indices);
        break;
    case 8:
        slice_and_merge_kernel<<<grid_for(static_cast<long long>(rows) * run->splits, run->max_blocks), kBlockThreads,
                                 slice_and_merge_shared_bytes(run->splits, k), stream>>>(
            run->logits, rows, vocab, k, capacity, run->splits, run->partial_lists, run->partial_states,
            run->row_tickets, run->probs, run->indices);
        break;
    case 5:
        radix_select_kernel<<<grid_for(rows, run->max_blocks), kBlockThreads, 0, stream>>>(run->logits, rows, vocab, k,
                                                                                           run->probs, run->indices);
        break;
    case 6:
        launch_shared_threshold<false>(run, stream);
        break;
    case 7:
        if (samples(run)) {
            launch_shared_threshold<true>(run, stream);
            CUDA_CHECK(cudaGetLastError());
            return;
        }
        launch_shared_threshold<false>(run, stream);
        break;
    case 9:
        launch_step_floor(run, stream);
        break;
    }
    CUDA_CHECK(cudaGetLastError());
    if (samples(run)) {
        launch_sampling(run, stream);
        CUDA_CHECK(cudaGetLastError());
    }
}

void softmax_topk_gpu_run_launch(SoftmaxTopkGpuRun *run)
{
    launch(run);
}

void softmax_topk_gpu_run_launch_on(SoftmaxTopkGpuRun *run, void *stream)
{
    launch(run, static_cast<cudaStream_t>(stream));
}

void softmax_topk_gpu_run_once(SoftmaxTopkGpuRun *run, float *probs, int64_t *indices)
{
    launch(run);
    size_t outputs = static_cast<size_t>(run->rows) * run->k;
    CUDA_CHECK(cudaMemcpy(probs, run->probs, outputs * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(indices, run->indices, outputs * sizeof(int64_t), cudaMemcpyDeviceToHost));
}

static_assert(SOFTMAX_TOPK_GPU_SAMPLE_MAX_K == kSampleMaxK, "the C header's limit is the kernel's");

static const char *check_sampling(SamplingParams params, int samples)
{
    if (params.top_k > kSampleMaxK) {
        return gpu_refusal("sampling takes K <= %d, got K = %d", kSampleMaxK, params.top_k);
    }
    if (!(params.temperature > 0.0) || !(params.top_p > 0.0 && params.top_p <= 1.0) ||
        !(params.min_p >= 0.0 && params.min_p <= 1.0)) {
        return gpu_refusal("temperature %g must be > 0, top-p %g in (0, 1], min-p %g in [0, 1]", params.temperature,
                           params.top_p, params.min_p);
    }
    if (samples < 1) {
        return gpu_refusal("samples %d must be >= 1", samples);
    }
    return nullptr;
}

const char *softmax_topk_gpu_run_sample(SoftmaxTopkGpuRun *run, SamplingParams params, uint64_t seed, int samples)
{
    const char *why = check_sampling(params, samples);
    if (why == nullptr && params.top_k != run->k) {
        why = gpu_refusal("sampling with K = %d on a run of K = %d", params.top_k, run->k);
    }
    if (why != nullptr) {
        return why;
    }
    size_t token_count = static_cast<size_t>(run->rows) * samples, outputs = static_cast<size_t>(run->rows) * run->k;
    CUDA_CHECK(cudaFree(run->sampling.tokens));
    run->sampling = FusedSampling{params, seed, samples, nullptr};
    CUDA_CHECK(cudaMalloc(&run->sampling.tokens, token_count * sizeof(int64_t)));
    if (run->candidate_logits == nullptr && !softmax_topk_gpu_fuses_sampling(run->version)) {
        CUDA_CHECK(cudaMalloc(&run->candidate_logits, outputs * sizeof(float)));
    }
    return nullptr;
}

void softmax_topk_gpu_run_tokens(const SoftmaxTopkGpuRun *run, int64_t *tokens, float *probs, int64_t *indices)
{
    size_t token_count = static_cast<size_t>(run->rows) * run->sampling.samples;
    size_t outputs = static_cast<size_t>(run->rows) * run->k;
    CUDA_CHECK(cudaMemcpy(tokens, run->sampling.tokens, token_count * sizeof(int64_t), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(probs, run->probs, outputs * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(indices, run->indices, outputs * sizeof(int64_t), cudaMemcpyDeviceToHost));
}

// ANCHOR: sample_after_the_top_k_on_the_gpu
const char *softmax_topk_gpu_sample(int version, const float *logits, size_t rows, size_t vocab, SamplingParams params,
                                    uint64_t seed, int samples, const SoftmaxTopkGpuConfig *config, int64_t *tokens,
                                    float *probs, int64_t *indices)
{
    const char *why = check_sampling(params, samples);
    SoftmaxTopkGpuRun *run = nullptr;
    if (why == nullptr) {
        why = softmax_topk_gpu_run_new(&run, version, logits, rows, vocab, params.top_k, config);
    }
    if (why == nullptr) {
        why = softmax_topk_gpu_run_sample(run, params, seed, samples);
    }
    if (why == nullptr) {
        launch(run);
        softmax_topk_gpu_run_tokens(run, tokens, probs, indices);
    }
    softmax_topk_gpu_run_free(run);
    return why;
}
// ANCHOR_END: sample_after_the_top_k_on_the_gpu

const char *softmax_topk_gpu(int version, const float *logits, size_t rows, size_t vocab, int k,
                             const SoftmaxTopkGpuConfig *config, float *probs, int64_t *indices)
{
    SoftmaxTopkGpuRun *run = nullptr;
    const char *why = softmax_topk_gpu_run_new(&run, version, logits, rows, vocab, k, config);
    if (why != nullptr) {
        return why;
    }
    softmax_topk_gpu_run_once(run, probs, indices);
    softmax_topk_gpu_run_free(run);
    return nullptr;
}
