/* The layer norm and RMSNorm launchers (kernels/layernorm.h): argument
 * checks, the launch configuration of every version, and the dispatch of
 * the row kernels to the template instance of their row plan. Both norms
 * and every storage type go through the same launcher, a template on the
 * storage type S and RMS; the kernels are kernels/layernorm.cu. */
#include <climits>

#include "common/cuda_util.h"
#include "kernels/layernorm.h"
#include "kernels/layernorm_kernels.cuh"
#include "kernels/layernorm_row.h"

static const char *check_sizes(int version, int versions, size_t n, size_t d)
{
    if (version < 1 || version > versions)
        return gpu_refusal("no version %d: there are 1 .. %d", version, versions);
    if (n < 1 || d < 1)
        return gpu_refusal("n = %zu, d = %zu: both must be at least 1", n, d);
    if (n > INT_MAX || d > INT_MAX || n * d / d != n)
        return gpu_refusal("n = %zu, d = %zu: too large for int indices", n, d);
    return NULL;
}

/* One line per version: version v of layer norm at [0][v - 1], of
 * RMSNorm at [1][v - 1]. */
static constexpr const char *FORWARD_VERSION_NAMES[2][LAYERNORM_FORWARD_GPU_VERSIONS] = {
    {"one thread per row, three passes", "one warp per row, Welford shuffles",
     "one block per row, the row in registers"},
    {"one thread per row, two passes",   "one warp per row, sums of squares by shuffles",
     "one block per row, the row in registers"},
};
static constexpr const char *BACKWARD_VERSION_NAMES[2][LAYERNORM_BACKWARD_GPU_VERSIONS] = {
    {"one thread per row for dx, per column for dgamma, dbeta",
     "fused, partial dgamma, dbeta per block, fixed-order finalize",                                                     "fused, grid from occupancy, next row in flight, wide finalize"},
    {"one thread per row for dx, per column for dgamma",        "fused, partial dgamma per block, fixed-order finalize",
     "fused, grid from occupancy, next row in flight, wide finalize"                                                                                                                    },
};
static_assert(FORWARD_VERSION_NAMES[1][LAYERNORM_FORWARD_GPU_VERSIONS - 1] != nullptr, "a name for every version");
static_assert(BACKWARD_VERSION_NAMES[1][LAYERNORM_BACKWARD_GPU_VERSIONS - 1] != nullptr, "a name for every version");

template <size_t VERSIONS> static const char *version_name(const char *const (&names)[VERSIONS], int version)
{
    return version >= 1 && version <= (int)VERSIONS ? names[version - 1] : "?";
}

extern "C" const char *layernorm_forward_gpu_version_name(int version)
{
    return version_name(FORWARD_VERSION_NAMES[0], version);
}

extern "C" const char *layernorm_backward_gpu_version_name(int version)
{
    return version_name(BACKWARD_VERSION_NAMES[0], version);
}

extern "C" const char *rmsnorm_forward_gpu_version_name(int version)
{
    return version_name(FORWARD_VERSION_NAMES[1], version);
}

extern "C" const char *rmsnorm_backward_gpu_version_name(int version)
{
    return version_name(BACKWARD_VERSION_NAMES[1], version);
}

static unsigned blocks_for(size_t items, unsigned threads)
{
    return (unsigned)((items + threads - 1) / threads);
}

/* Launch kernel<WIDTH, items, S, RMS>, items 1, 2, 4 or the most a thread
 * holds at this width (LN_PLAN_MOST_ITEMS): the instance for a row plan of
 * that width, for the storage type and the norm. */
#define LAUNCH_FOR_ITEMS(kernel, WIDTH, items, blocks, threads, ...)                            \
    do {                                                                                        \
        switch (items) {                                                                        \
        case 1:                                                                                 \
            kernel<WIDTH, 1, S, RMS><<<blocks, threads>>>(__VA_ARGS__);                         \
            break;                                                                              \
        case 2:                                                                                 \
            kernel<WIDTH, 2, S, RMS><<<blocks, threads>>>(__VA_ARGS__);                         \
            break;                                                                              \
        case 4:                                                                                 \
            kernel<WIDTH, 4, S, RMS><<<blocks, threads>>>(__VA_ARGS__);                         \
            break;                                                                              \
        default:                                                                                \
            kernel<WIDTH, LN_PLAN_MOST_ITEMS(WIDTH), S, RMS><<<blocks, threads>>>(__VA_ARGS__); \
            break;                                                                              \
        }                                                                                       \
    } while (0)

/* Dispatch a row kernel to its template instance for a plan: 16-byte
 * vectors or single values, then the items per thread. Used inside the
 * launchers, which are templates on S and RMS. */
#define LAUNCH_FOR_PLAN(kernel, plan, grid, ...)                                                         \
    do {                                                                                                 \
        dim3 blocks_(grid), threads_((unsigned)(plan).threads);                                          \
        if ((plan).width == 1)                                                                           \
            LAUNCH_FOR_ITEMS(kernel, 1, (plan).items, blocks_, threads_, __VA_ARGS__);                   \
        else                                                                                             \
            LAUNCH_FOR_ITEMS(kernel, LN_VECTOR_VALUES(S), (plan).items, blocks_, threads_, __VA_ARGS__); \
    } while (0)

/* The refusal of a row longer than a plan takes. */
static const char *row_too_long(int max_threads)
{
    return gpu_refusal("a row of this length does not fit in one block's registers (more than %d threads x %d "
                       "vectors): use a lower version",
                       max_threads, (int)LN_PLAN_MAX_ITEMS);
}

/* Both norms' forward launcher, for one storage type; for RMSNorm mean and
 * beta are NULL. */
template <LnStorage S, bool RMS>
static void forward_stored(int version, LnRowPlan plan, Stored<S> *y, float *mean, float *rstd, const Stored<S> *x,
                           const float *gamma, const float *beta, size_t n, size_t d, float eps)
{
    int rows = (int)n, cols = (int)d;
    if (version == 1) {
        layernorm_forward_v1<S, RMS><<<blocks_for(n, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            y, mean, rstd, x, gamma, beta, rows, cols, eps);
    } else if (version == 2) {
        const unsigned warps_per_block = LN_WARP_PER_ROW_THREADS / WARP_SIZE;
        layernorm_forward_v2<S, RMS><<<blocks_for(n, warps_per_block), LN_WARP_PER_ROW_THREADS>>>(
            y, mean, rstd, x, gamma, beta, rows, cols, eps);
    } else {
        LAUNCH_FOR_PLAN(layernorm_forward_v3, plan, (unsigned)n, y, mean, rstd, x, gamma, beta, cols, eps);
    }
    CUDA_CHECK(cudaGetLastError());
}

/* The checks, the row plan of forward 3, and the launch for x's storage type. */
template <bool RMS>
static const char *forward_gpu(int version, LnStorage storage, void *y, float *mean, float *rstd, const void *x,
                               const float *gamma, const float *beta, size_t n, size_t d, float eps)
{
    const char *why = check_sizes(version, LAYERNORM_FORWARD_GPU_VERSIONS, n, d);
    if (why != NULL)
        return why;
    LnRowPlan plan = {0, 0, 0};
    if (version == 3) {
        const void *rows_and_params[] = {x, y, gamma, beta, NULL}; /* RMSNorm: beta NULL ends the list */
        plan = ln_row_plan(d, ln_all_16_byte_aligned(rows_and_params), storage);
        if (plan.threads == 0)
            return row_too_long(LN_PLAN_MAX_THREADS);
    }
    with_storage(storage, [&](auto tag) {
        constexpr LnStorage S = decltype(tag)::value;
        forward_stored<S, RMS>(version, plan, static_cast<Stored<S> *>(y), mean, rstd,
                               static_cast<const Stored<S> *>(x), gamma, beta, n, d, eps);
    });
    return NULL;
}

extern "C" const char *layernorm_forward_gpu(int version, LnStorage storage, void *y, float *mean, float *rstd,
                                             const void *x, const float *gamma, const float *beta, size_t n, size_t d,
                                             float eps)
{
    return forward_gpu<false>(version, storage, y, mean, rstd, x, gamma, beta, n, d, eps);
}

extern "C" const char *rmsnorm_forward_gpu(int version, LnStorage storage, void *y, float *rstd, const void *x,
                                           const float *gamma, size_t n, size_t d, float eps)
{
    return forward_gpu<true>(version, storage, y, NULL, rstd, x, gamma, NULL, n, d, eps);
}

/* Enough blocks of backward 2 to fill the GPU a few times over, and at
 * least LN_BACKWARD_CHUNKS, so that no block sums more rows of dgamma in
 * float than a CPU chunk does (on a GPU with few multiprocessors, 4 blocks
 * per SM would each sum hundreds of rows); never more than rows: each block
 * writes a partial row of 2 * d floats. */
static int backward_v2_blocks(size_t n)
{
    int device, sms;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    size_t blocks = 4 * (size_t)sms;
    if (blocks < LN_BACKWARD_CHUNKS)
        blocks = LN_BACKWARD_CHUNKS;
    return (int)(n < blocks ? n : blocks);
}

// ANCHOR: size_the_grid_from_occupancy
/* Backward 3's grid: every block the GPU holds at once, as the runtime
 * computes it for this instance (its registers and shared memory, at
 * `threads` per block), so that the SMs are as full as the registers
 * allow; in whole waves of that, and at least LN_BACKWARD_CHUNKS blocks,
 * for the same reason as backward 2; never more blocks than rows. */
template <typename Kernel> static int backward_v3_blocks(Kernel kernel, int threads, size_t n)
{
    int device, sms, per_sm;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    size_t wave = (size_t)(per_sm > 0 ? per_sm : 1) * (size_t)sms;
    size_t blocks = (LN_BACKWARD_CHUNKS + wave - 1) / wave * wave;
    return (int)(n < blocks ? n : blocks);
}
// ANCHOR_END: size_the_grid_from_occupancy

/* The most blocks backward_v3_blocks can choose on this GPU, whatever the
 * instance: an SM holds at most LN_MOST_BLOCKS_PER_SM blocks, and whole
 * waves of fewer than LN_BACKWARD_CHUNKS blocks stop below twice that. */
enum { LN_MOST_BLOCKS_PER_SM = 32 };
static size_t backward_v3_most_blocks(size_t n)
{
    int device, sms;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    size_t most = (size_t)LN_MOST_BLOCKS_PER_SM * (size_t)sms;
    if (most < 2 * LN_BACKWARD_CHUNKS)
        most = 2 * LN_BACKWARD_CHUNKS;
    return n < most ? n : most;
}

template <bool RMS> static size_t backward_scratch_floats(int version, size_t n, size_t d)
{
    if (check_sizes(version, LAYERNORM_BACKWARD_GPU_VERSIONS, n, d) != NULL)
        return 0;
    if (version == 1) /* each row's mean residual, from the row kernel to the column kernel */
        return RMS ? 0 : n;
    size_t blocks = version == 2 ? (size_t)backward_v2_blocks(n) : backward_v3_most_blocks(n);
    return blocks * ln_parameter_gradients<RMS> * d;
}

extern "C" size_t layernorm_backward_gpu_scratch_floats(int version, size_t n, size_t d)
{
    return backward_scratch_floats<false>(version, n, d);
}

extern "C" size_t rmsnorm_backward_gpu_scratch_floats(int version, size_t n, size_t d)
{
    return backward_scratch_floats<true>(version, n, d);
}

/* Backward 3 at one plan: the fused kernel in a grid from its own
 * occupancy (version 2's kernel where a thread holds more than 8 values of
 * a row, too many to hold two rows), then the finalize, a block per
 * LN_FINALIZE_COLUMNS columns of the partial rows. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS> static auto backward_v3_kernel()
{
    if constexpr (overlaps_next_row<WIDTH, ITEMS>)
        return layernorm_backward_v3<WIDTH, ITEMS, S, RMS>;
    else
        return layernorm_backward_v2<WIDTH, ITEMS, S, RMS>;
}

template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
static void backward_v3_at_plan(int threads, Stored<S> *dx, float *dgamma, float *dbeta, float *scratch,
                                const Stored<S> *dy, const Stored<S> *x, const float *mean, const float *rstd,
                                const float *gamma, int n, int d)
{
    auto kernel = backward_v3_kernel<WIDTH, ITEMS, S, RMS>();
    int blocks = backward_v3_blocks(kernel, threads, (size_t)n);
    kernel<<<blocks, threads>>>(dx, scratch, dy, x, mean, rstd, gamma, n, d);
    CUDA_CHECK(cudaGetLastError());
    int width = ln_parameter_gradients<RMS> * d;
    layernorm_backward_v3_finalize<<<blocks_for((size_t)width, LN_FINALIZE_COLUMNS), LN_FINALIZE_THREADS>>>(
        dgamma, dbeta, scratch, blocks, d, width);
}

/* Call f(width, items) with a plan's vector width and items per thread as
 * constants (integral_constant tags): the template instance of the plan. */
template <LnStorage S, int WIDTH, typename F> static void with_items(int items, F f)
{
    using W = std::integral_constant<int, WIDTH>;
    if (items == 1)
        f(W(), std::integral_constant<int, 1>());
    else if (items == 2)
        f(W(), std::integral_constant<int, 2>());
    else if (items == 4)
        f(W(), std::integral_constant<int, 4>());
    else
        f(W(), std::integral_constant<int, LN_PLAN_MOST_ITEMS(WIDTH)>());
}

template <LnStorage S, typename F> static void with_plan(LnRowPlan plan, F f)
{
    if (plan.width == 1)
        with_items<S, 1>(plan.items, f);
    else
        with_items<S, LN_VECTOR_VALUES(S)>(plan.items, f);
}

/* Both norms' backward launcher, for one storage type; for RMSNorm dbeta
 * and mean are NULL. */
template <LnStorage S, bool RMS>
static void backward_stored(int version, LnRowPlan plan, Stored<S> *dx, float *dgamma, float *dbeta, float *scratch,
                            const Stored<S> *dy, const Stored<S> *x, const float *mean, const float *rstd,
                            const float *gamma, size_t n, size_t d)
{
    int rows = (int)n, cols = (int)d;
    if (version == 1) {
        layernorm_backward_v1_dx<S, RMS><<<blocks_for(n, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            dx, scratch, dy, x, mean, rstd, gamma, rows, cols);
        CUDA_CHECK(cudaGetLastError());
        layernorm_backward_v1_params<S, RMS><<<blocks_for(d, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            dgamma, dbeta, dy, x, mean, scratch, rstd, rows, cols);
    } else if (version == 3) {
        with_plan<S>(plan, [&](auto width, auto items) {
            backward_v3_at_plan<decltype(width)::value, decltype(items)::value, S, RMS>(
                plan.threads, dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, rows, cols);
        });
    } else {
        int blocks = backward_v2_blocks(n);
        LAUNCH_FOR_PLAN(layernorm_backward_v2, plan, (unsigned)blocks, dx, scratch, dy, x, mean, rstd, gamma, rows,
                        cols);
        CUDA_CHECK(cudaGetLastError());
        unsigned columns = blocks_for(d, LN_FINALIZE_THREADS);
        layernorm_backward_v2_finalize<RMS><<<columns, LN_FINALIZE_THREADS>>>(dgamma, dbeta, scratch, blocks, cols);
    }
    CUDA_CHECK(cudaGetLastError());
}

/* The checks, the row plan of backward 2 and 3, and the launch for the storage type. */
template <bool RMS>
static const char *backward_gpu(int version, LnStorage storage, void *dx, float *dgamma, float *dbeta, float *scratch,
                                const void *dy, const void *x, const float *mean, const float *rstd, const float *gamma,
                                size_t n, size_t d)
{
    const char *why = check_sizes(version, LAYERNORM_BACKWARD_GPU_VERSIONS, n, d);
    if (why != NULL)
        return why;
    if (scratch == NULL && backward_scratch_floats<RMS>(version, n, d) > 0)
        return RMS ? "backward needs scratch space (rmsnorm_backward_gpu_scratch_floats)"
                   : "backward needs scratch space (layernorm_backward_gpu_scratch_floats)";
    LnRowPlan plan = {0, 0, 0};
    if (version >= 2) {
        const void *rows_and_params[] = {dx, dy, x, gamma, NULL};
        plan = ln_backward_row_plan(d, ln_all_16_byte_aligned(rows_and_params), storage);
        if (plan.threads == 0)
            return row_too_long(LN_BACKWARD_PLAN_MAX_THREADS);
    }
    with_storage(storage, [&](auto tag) {
        constexpr LnStorage S = decltype(tag)::value;
        backward_stored<S, RMS>(version, plan, static_cast<Stored<S> *>(dx), dgamma, dbeta, scratch,
                                static_cast<const Stored<S> *>(dy), static_cast<const Stored<S> *>(x), mean, rstd,
                                gamma, n, d);
    });
    return NULL;
}

extern "C" const char *layernorm_backward_gpu(int version, LnStorage storage, void *dx, float *dgamma, float *dbeta,
                                              float *scratch, const void *dy, const void *x, const float *mean,
                                              const float *rstd, const float *gamma, size_t n, size_t d)
{
    return backward_gpu<false>(version, storage, dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d);
}

extern "C" const char *rmsnorm_backward_gpu(int version, LnStorage storage, void *dx, float *dgamma, float *scratch,
                                            const void *dy, const void *x, const float *rstd, const float *gamma,
                                            size_t n, size_t d)
{
    return backward_gpu<true>(version, storage, dx, dgamma, NULL, scratch, dy, x, NULL, rstd, gamma, n, d);
}
