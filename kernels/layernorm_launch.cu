/* The layer norm and RMSNorm launchers (kernels/layernorm.h): argument
 * checks, the launch configuration of every version, and the dispatch of
 * the row kernels to the template instance of their row plan. Both norms
 * go through the same launcher, a template on RMS; the kernels are
 * kernels/layernorm.cu. */
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
     "fused, partial dgamma, dbeta per block, fixed-order finalize"                                                    },
    {"one thread per row for dx, per column for dgamma",        "fused, partial dgamma per block, fixed-order finalize"},
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

/* Launch kernel<WIDTH, items, RMS>, items 1, 2, 4 or 8: the instance for
 * a row plan of that width, for the norm. */
#define LAUNCH_FOR_ITEMS(kernel, WIDTH, items, blocks, threads, ...) \
    do {                                                             \
        switch (items) {                                             \
        case 1:                                                      \
            kernel<WIDTH, 1, RMS><<<blocks, threads>>>(__VA_ARGS__); \
            break;                                                   \
        case 2:                                                      \
            kernel<WIDTH, 2, RMS><<<blocks, threads>>>(__VA_ARGS__); \
            break;                                                   \
        case 4:                                                      \
            kernel<WIDTH, 4, RMS><<<blocks, threads>>>(__VA_ARGS__); \
            break;                                                   \
        default:                                                     \
            kernel<WIDTH, 8, RMS><<<blocks, threads>>>(__VA_ARGS__); \
            break;                                                   \
        }                                                            \
    } while (0)

/* Dispatch a row kernel to its template instance for a plan: vectors of 4
 * floats or single floats, then the items per thread. Used inside the
 * launchers, which are templates on RMS. */
#define LAUNCH_FOR_PLAN(kernel, plan, grid, ...)                                       \
    do {                                                                               \
        dim3 blocks_(grid), threads_((unsigned)(plan).threads);                        \
        if ((plan).width == 4)                                                         \
            LAUNCH_FOR_ITEMS(kernel, 4, (plan).items, blocks_, threads_, __VA_ARGS__); \
        else                                                                           \
            LAUNCH_FOR_ITEMS(kernel, 1, (plan).items, blocks_, threads_, __VA_ARGS__); \
    } while (0)

/* The refusal of a row longer than a plan takes. */
static const char *row_too_long(int max_threads)
{
    return gpu_refusal("a row of this length does not fit in one block's registers (more than %d threads x %d "
                       "vectors): use a lower version",
                       max_threads, (int)LN_PLAN_MAX_ITEMS);
}

/* Both norms' forward launcher; for RMSNorm mean and beta are NULL. */
template <bool RMS>
static const char *forward_gpu(int version, float *y, float *mean, float *rstd, const float *x, const float *gamma,
                               const float *beta, size_t n, size_t d, float eps)
{
    const char *why = check_sizes(version, LAYERNORM_FORWARD_GPU_VERSIONS, n, d);
    if (why != NULL)
        return why;
    int rows = (int)n, cols = (int)d;
    if (version == 1) {
        layernorm_forward_v1<RMS><<<blocks_for(n, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            y, mean, rstd, x, gamma, beta, rows, cols, eps);
    } else if (version == 2) {
        const unsigned warps_per_block = LN_WARP_PER_ROW_THREADS / WARP_SIZE;
        layernorm_forward_v2<RMS><<<blocks_for(n, warps_per_block), LN_WARP_PER_ROW_THREADS>>>(y, mean, rstd, x, gamma,
                                                                                               beta, rows, cols, eps);
    } else {
        const void *rows_and_params[] = {x, y, gamma, beta, NULL}; /* RMSNorm: beta NULL ends the list */
        LnRowPlan plan = ln_row_plan(d, ln_all_16_byte_aligned(rows_and_params));
        if (plan.threads == 0)
            return row_too_long(LN_PLAN_MAX_THREADS);
        LAUNCH_FOR_PLAN(layernorm_forward_v3, plan, (unsigned)n, y, mean, rstd, x, gamma, beta, cols, eps);
    }
    CUDA_CHECK(cudaGetLastError());
    return NULL;
}

extern "C" const char *layernorm_forward_gpu(int version, float *y, float *mean, float *rstd, const float *x,
                                             const float *gamma, const float *beta, size_t n, size_t d, float eps)
{
    return forward_gpu<false>(version, y, mean, rstd, x, gamma, beta, n, d, eps);
}

extern "C" const char *rmsnorm_forward_gpu(int version, float *y, float *rstd, const float *x, const float *gamma,
                                           size_t n, size_t d, float eps)
{
    return forward_gpu<true>(version, y, NULL, rstd, x, gamma, NULL, n, d, eps);
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

template <bool RMS> static size_t backward_scratch_floats(int version, size_t n, size_t d)
{
    if (check_sizes(version, LAYERNORM_BACKWARD_GPU_VERSIONS, n, d) != NULL)
        return 0;
    if (version == 1) /* each row's mean residual, from the row kernel to the column kernel */
        return RMS ? 0 : n;
    return (size_t)backward_v2_blocks(n) * ln_parameter_gradients<RMS> * d;
}

extern "C" size_t layernorm_backward_gpu_scratch_floats(int version, size_t n, size_t d)
{
    return backward_scratch_floats<false>(version, n, d);
}

extern "C" size_t rmsnorm_backward_gpu_scratch_floats(int version, size_t n, size_t d)
{
    return backward_scratch_floats<true>(version, n, d);
}

/* Both norms' backward launcher; for RMSNorm dbeta and mean are NULL. */
template <bool RMS>
static const char *backward_gpu(int version, float *dx, float *dgamma, float *dbeta, float *scratch, const float *dy,
                                const float *x, const float *mean, const float *rstd, const float *gamma, size_t n,
                                size_t d)
{
    const char *why = check_sizes(version, LAYERNORM_BACKWARD_GPU_VERSIONS, n, d);
    if (why != NULL)
        return why;
    int rows = (int)n, cols = (int)d;
    if (scratch == NULL && backward_scratch_floats<RMS>(version, n, d) > 0)
        return RMS ? "backward needs scratch space (rmsnorm_backward_gpu_scratch_floats)"
                   : "backward needs scratch space (layernorm_backward_gpu_scratch_floats)";
    if (version == 1) {
        layernorm_backward_v1_dx<RMS><<<blocks_for(n, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            dx, scratch, dy, x, mean, rstd, gamma, rows, cols);
        CUDA_CHECK(cudaGetLastError());
        layernorm_backward_v1_params<RMS><<<blocks_for(d, LN_THREAD_PER_ROW_THREADS), LN_THREAD_PER_ROW_THREADS>>>(
            dgamma, dbeta, dy, x, mean, scratch, rstd, rows, cols);
    } else {
        const void *rows_and_params[] = {dx, dy, x, gamma, NULL};
        LnRowPlan plan = ln_backward_row_plan(d, ln_all_16_byte_aligned(rows_and_params));
        if (plan.threads == 0)
            return row_too_long(LN_BACKWARD_PLAN_MAX_THREADS);
        int blocks = backward_v2_blocks(n);
        LAUNCH_FOR_PLAN(layernorm_backward_v2, plan, (unsigned)blocks, dx, scratch, dy, x, mean, rstd, gamma, rows,
                        cols);
        CUDA_CHECK(cudaGetLastError());
        unsigned columns = blocks_for(d, LN_FINALIZE_THREADS);
        layernorm_backward_v2_finalize<RMS><<<columns, LN_FINALIZE_THREADS>>>(dgamma, dbeta, scratch, blocks, cols);
    }
    CUDA_CHECK(cudaGetLastError());
    return NULL;
}

extern "C" const char *layernorm_backward_gpu(int version, float *dx, float *dgamma, float *dbeta, float *scratch,
                                              const float *dy, const float *x, const float *mean, const float *rstd,
                                              const float *gamma, size_t n, size_t d)
{
    return backward_gpu<false>(version, dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d);
}

extern "C" const char *rmsnorm_backward_gpu(int version, float *dx, float *dgamma, float *scratch, const float *dy,
                                            const float *x, const float *rstd, const float *gamma, size_t n, size_t d)
{
    return backward_gpu<true>(version, dx, dgamma, NULL, scratch, dy, x, NULL, rstd, gamma, n, d);
}
