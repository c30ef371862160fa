/* Layer norm and RMSNorm forward and backward kernels, numbered from naive
 * to best (see kernels/layernorm.h; their launchers are
 * kernels/layernorm_launch.cu). Every kernel is a template on the norm, its
 * last template argument RMS: RMSNorm is layer norm without the centring
 * and without beta, so each version takes the same loads and the same
 * reductions, with fewer sums. The one before it, S, is the storage type of
 * x, dy, y and dx: a value is widened to float where it is loaded and
 * rounded where y or dx is stored, and everything between is float, as on
 * the CPU. The arithmetic of a row is
 * kernels/layernorm_row.h, kernels/rmsnorm_row.h and the Welford merge
 * kernels/welford.h: the same code the CPU runs and the tests check. */
#include "kernels/layernorm.h"
#include "kernels/layernorm_kernels.cuh"
#include "kernels/layernorm_row.h"
#include "kernels/rmsnorm_row.h"
#include "kernels/welford.h"

#define FULL_MASK 0xffffffffu

// ANCHOR: normalize_an_element_on_the_gpu
/* The output of one element: gamma * xhat, plus beta for layer norm.
 * RMSNorm's statistics have mean and residual 0 and it has no beta: y =
 * gamma * (x * rstd), as on the CPU. */
template <bool RMS> __device__ static float normalized(float x, LnRowStats stats, float gamma, float beta)
{
    if constexpr (RMS)
        return gamma * (x * stats.rstd);
    else
        return ln_affine(ln_normalize(x, stats.mean, stats.residual, stats.rstd), gamma, beta);
}
// ANCHOR_END: normalize_an_element_on_the_gpu

// ANCHOR: sum_a_row_in_double

/* The statistics of a row walked in memory, sums in double: layer norm's
 * mean and then deviations from it (two passes), RMSNorm's sum of squares
 * (one). */
template <LnStorage S, bool RMS> __device__ static LnRowStats row_stats_in_double(const Stored<S> *xr, int d, float eps)
{
    auto x = [&](int j) { return Storage<S>::widen(xr[j]); };
    if constexpr (RMS) {
        double sum_sq = 0.0;
        for (int j = 0; j < d; j++)
            sum_sq += (double)x(j) * x(j);
        LnRowStats stats = {0.0f, rms_rstd_from_double(sum_sq, (float)d, eps), 0.0f};
        return stats;
    } else {
        double sum = 0.0, sum_dev = 0.0, sum_dev_sq = 0.0;
        for (int j = 0; j < d; j++)
            sum += x(j);
        float first_mean = (float)(sum / d);
        for (int j = 0; j < d; j++) {
            double dev = x(j) - first_mean;
            sum_dev += dev;
            sum_dev_sq += dev * dev;
        }
        return ln_stats_from_double_deviations(first_mean, sum_dev, sum_dev_sq, (float)d, eps);
    }
}
// ANCHOR_END: sum_a_row_in_double

// ANCHOR: normalize_a_row_per_thread

/* Version 1: one thread per row. Each thread walks its row three times
 * (RMSNorm: twice); neighbouring threads read addresses d floats apart, so
 * a warp's loads do not coalesce. Sums in double, so that this baseline is
 * as accurate as the CPU and any difference in the comparison is the
 * faster kernels'. RMSNorm has no mean and no beta: both pointers NULL. */
template <LnStorage S, bool RMS>
__global__ void layernorm_forward_v1(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                                     const float *beta, int n, int d, float eps)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n)
        return;
    const Stored<S> *xr = x + (size_t)row * d;
    LnRowStats stats = row_stats_in_double<S, RMS>(xr, d, eps);
    for (int j = 0; j < d; j++)
        y[(size_t)row * d + j] =
            Storage<S>::narrow(normalized<RMS>(Storage<S>::widen(xr[j]), stats, gamma[j], RMS ? 0.0f : beta[j]));
    if (!RMS)
        mean[row] = stats.mean;
    rstd[row] = stats.rstd;
}
// ANCHOR_END: normalize_a_row_per_thread

// ANCHOR: merge_welford_across_a_warp
/* Every lane ends with the state of the whole warp: a butterfly, lane i
 * merging with lane i ^ offset. welford_merge(a, b) and welford_merge(b, a)
 * can round differently, so both partners put the lower lane first and
 * compute the same bits; all lanes then agree on the row's statistics. */
__device__ static WelfordState warp_merge_all(WelfordState state)
{
    unsigned lane = threadIdx.x % WARP_SIZE;
    for (unsigned offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        WelfordState other = welford_shuffle_xor(FULL_MASK, state, offset);
        state = lane & offset ? welford_merge(other, state) : welford_merge(state, other);
    }
    return state;
}
// ANCHOR_END: merge_welford_across_a_warp

// ANCHOR: take_the_statistics_of_a_row_in_a_warp
/* The statistics of the row a warp reads, every lane with the same bits:
 * layer norm's Welford states merged, RMSNorm's sums of squares added in
 * the same butterfly (a + b and b + a round alike). */
template <LnStorage S, bool RMS> __device__ static LnRowStats warp_row_stats(const Stored<S> *xr, int d, float eps)
{
    int lane = threadIdx.x % WARP_SIZE;
    auto x = [&](int j) { return Storage<S>::widen(xr[j]); };
    if constexpr (RMS) {
        double sum_sq = 0.0;
        for (int j = lane; j < d; j += WARP_SIZE)
            sum_sq += (double)x(j) * x(j);
        for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
            sum_sq += __shfl_xor_sync(FULL_MASK, sum_sq, offset);
        LnRowStats stats = {0.0f, rms_rstd_from_double(sum_sq, (float)d, eps), 0.0f};
        return stats;
    } else {
        WelfordState state = welford_empty();
        for (int j = lane; j < d; j += WARP_SIZE)
            state = welford_push(state, x(j));
        state = warp_merge_all(state);
        return ln_stats_from_double(state.mean, welford_variance(state), eps);
    }
}
// ANCHOR_END: take_the_statistics_of_a_row_in_a_warp

// ANCHOR: normalize_a_row_per_warp

/* Version 2: one warp per row. Lane l reads elements l, l + 32, ...: the
 * warp's loads coalesce. Each lane folds its elements into a Welford
 * state (chapter 1), the warp merges the states, and a second read of the
 * row (mostly from cache) writes y. */
template <LnStorage S, bool RMS>
__global__ void layernorm_forward_v2(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                                     const float *beta, int n, int d, float eps)
{
    int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    if (row >= n) /* the same for the whole warp: the shuffles below see all 32 lanes */
        return;
    const Stored<S> *xr = x + (size_t)row * d;
    LnRowStats stats = warp_row_stats<S, RMS>(xr, d, eps);
    for (int j = lane; j < d; j += WARP_SIZE)
        y[(size_t)row * d + j] =
            Storage<S>::narrow(normalized<RMS>(Storage<S>::widen(xr[j]), stats, gamma[j], RMS ? 0.0f : beta[j]));
    if (lane == 0) {
        if (!RMS)
            mean[row] = stats.mean;
        rstd[row] = stats.rstd;
    }
}
// ANCHOR_END: normalize_a_row_per_warp

// ANCHOR: reduce_across_a_warp
/* The two reductions of a row: sums, and the largest magnitude. Both
 * start from 0. */
struct Add {
    __device__ float operator()(float a, float b) const
    {
        return a + b;
    }
};
struct Larger {
    __device__ float operator()(float a, float b) const
    {
        return fmaxf(a, b);
    }
};

template <typename Op> __device__ static float warp_reduce(float value, Op op)
{
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)
        value = op(value, __shfl_xor_sync(FULL_MASK, value, offset));
    return value;
}
// ANCHOR_END: reduce_across_a_warp

// ANCHOR: sum_across_a_block

/* Reduce N values over the block; every thread gets the results. blockDim.x
 * is a multiple of 32 (the row plan makes it so). Each warp reduces its
 * lanes, then every warp reduces the warps' partial results: the same tree,
 * so the same bits, in every thread. The closing barrier lets the next call
 * reuse `partial`. */
template <int N, typename Op = Add> __device__ static void block_reduce(float (&values)[N], Op op = Op())
{
    __shared__ float partial[N][LN_PLAN_MAX_THREADS / WARP_SIZE];
    int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, warps = blockDim.x / WARP_SIZE;
#pragma unroll
    for (int k = 0; k < N; k++) {
        values[k] = warp_reduce(values[k], op);
        if (lane == 0)
            partial[k][warp] = values[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; k++)
        values[k] = warp_reduce(lane < warps ? partial[k][lane] : 0.0f, op);
    __syncthreads();
}
// ANCHOR_END: sum_across_a_block

// ANCHOR: take_a_word_of_two_halves_apart
/* A 32-bit word of two 16-bit values, in memory order: the GPU is
 * little-endian, so the low half is the lower address. */
template <LnStorage S> __device__ static void widen_halves(float *out, uint32_t word)
{
    out[0] = Storage<S>::widen((uint16_t)(word & 0xffffu));
    out[1] = Storage<S>::widen((uint16_t)(word >> 16));
}

template <LnStorage S> __device__ static uint32_t narrow_halves(const float *in)
{
    return (uint32_t)Storage<S>::narrow(in[0]) | (uint32_t)Storage<S>::narrow(in[1]) << 16;
}
// ANCHOR_END: take_a_word_of_two_halves_apart

// ANCHOR: load_16_bytes_of_any_storage
/* WIDTH consecutive values of storage type S as one access: one value, or
 * whole 16-byte vectors, each 4 floats (a float4) or 8 values of 16 bits
 * (a uint4), widened to float. x, dy, y and dx are touched once: their
 * loads and stores use the `cs` (cache-streaming) forms, which tell the
 * GPU they need not stay in its caches. gamma and beta, read by every row,
 * go through the read-only cache instead (STREAMING false). */

template <LnStorage S, int WIDTH, bool STREAMING = true>
__device__ static void load(float (&out)[WIDTH], const Stored<S> *p)
{
    static_assert(WIDTH == 1 || WIDTH * sizeof(Stored<S>) % 16 == 0, "one value or whole 16-byte vectors");
    if constexpr (WIDTH == 1) {
        out[0] = Storage<S>::widen(STREAMING ? __ldcs(p) : __ldg(p));
    } else if constexpr (S == STORAGE_FLOAT32) {
        const float4 *p4 = reinterpret_cast<const float4 *>(p);
#pragma unroll
        for (int q = 0; q < WIDTH / 4; q++) {
            float4 v = STREAMING ? __ldcs(p4 + q) : __ldg(p4 + q);
            out[4 * q] = v.x, out[4 * q + 1] = v.y, out[4 * q + 2] = v.z, out[4 * q + 3] = v.w;
        }
    } else {
        const uint4 *p4 = reinterpret_cast<const uint4 *>(p);
#pragma unroll
        for (int q = 0; q < WIDTH / 8; q++) {
            uint4 v = STREAMING ? __ldcs(p4 + q) : __ldg(p4 + q);
            widen_halves<S>(out + 8 * q, v.x), widen_halves<S>(out + 8 * q + 2, v.y);
            widen_halves<S>(out + 8 * q + 4, v.z), widen_halves<S>(out + 8 * q + 6, v.w);
        }
    }
}

/* gamma and beta: floats, read by every row. */
template <int WIDTH> __device__ static void load_parameters(float (&out)[WIDTH], const float *p)
{
    load<STORAGE_FLOAT32, WIDTH, false>(out, p);
}
// ANCHOR_END: load_16_bytes_of_any_storage

// ANCHOR: store_16_bytes_of_any_storage

template <LnStorage S, int WIDTH> __device__ static void store_streaming(Stored<S> *p, const float (&in)[WIDTH])
{
    static_assert(WIDTH == 1 || WIDTH * sizeof(Stored<S>) == 16, "one value or one 16-byte vector");
    if constexpr (WIDTH == 1) {
        __stcs(p, Storage<S>::narrow(in[0]));
    } else if constexpr (S == STORAGE_FLOAT32) {
        __stcs(reinterpret_cast<float4 *>(p), make_float4(in[0], in[1], in[2], in[3]));
    } else {
        uint4 v = {narrow_halves<S>(in), narrow_halves<S>(in + 2), narrow_halves<S>(in + 4), narrow_halves<S>(in + 6)};
        __stcs(reinterpret_cast<uint4 *>(p), v);
    }
}
// ANCHOR_END: store_16_bytes_of_any_storage

/* Blocks of more than 512 threads only hold the most vectors per thread
 * (the row plan); telling the compiler the block size caps registers per thread so
 * that such a block can always launch. */
#define ROW_KERNEL_BOUNDS(WIDTH, ITEMS) \
    __launch_bounds__((ITEMS) < LN_PLAN_MOST_ITEMS(WIDTH) ? LN_PLAN_PREFERRED_THREADS : LN_PLAN_MAX_THREADS)

// ANCHOR: read_a_row_into_registers
/* Thread t holds vectors t, t + blockDim.x, ... of the row xr. */
template <int WIDTH, int ITEMS, LnStorage S>
__device__ static void load_row(float (&v)[ITEMS][WIDTH], const Stored<S> *xr, int vectors)
{
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k < vectors)
            load<S>(v[i], xr + (size_t)k * WIDTH);
    }
}
// ANCHOR_END: read_a_row_into_registers

// ANCHOR: visit_every_value_a_thread_holds
/* f(i, c, held) for every value v[i][c] of the row that this thread
 * holds: held is false for vectors past the end of the row, which hold
 * nothing and must count as 0. */
template <int WIDTH, int ITEMS, typename F> __device__ static void for_each_value(int vectors, F f)
{
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        bool held = (int)(threadIdx.x + i * blockDim.x) < vectors;
#pragma unroll
        for (int c = 0; c < WIDTH; c++)
            f(i, c, held);
    }
}
// ANCHOR_END: visit_every_value_a_thread_holds

/* A row whose first mean is far off (ln_first_mean_is_far), centred again
 * as on the CPU (recentred_row_moments), in place: the row held in the
 * registers becomes x - m1 and then (x - m1) - c1, whose squares sum to
 * d var. The caller reads the row again. In place, because a shifted copy
 * of each value, or a third pass over them, left the widest rows spilling
 * registers. */
template <int WIDTH, int ITEMS>
__device__ static LnRowMoments block_moments_centred_in_place(float (&v)[ITEMS][WIDTH], int vectors, int d, float m1)
{
    float sum_dev[1] = {0.0f}, sum_sq[1] = {0.0f};
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) {
        v[i][c] -= m1;
        sum_dev[0] += held ? v[i][c] : 0.0f;
    });
    block_reduce(sum_dev);
    float c1 = sum_dev[0] / d;
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) {
        v[i][c] -= c1;
        sum_sq[0] += held ? v[i][c] * v[i][c] : 0.0f;
    });
    block_reduce(sum_sq);
    return ln_moments_about_the_mean(m1, sum_dev[0], sum_sq[0], (float)d);
}

// ANCHOR: take_the_statistics_of_either_norm
/* The moments of the row that the block holds in registers. The
 * exact two-pass variance costs no second read: the sum, the deviations
 * from the first mean and their squares are all formed from registers, and
 * corrected as on the CPU (kernels/layernorm_row.h). RMSNorm needs one
 * block reduction where layer norm needs two: the sum of squares. */
template <int WIDTH, int ITEMS, bool RMS>
__device__ static LnRowMoments block_row_moments(float (&v)[ITEMS][WIDTH], int vectors, int d, bool &centred_in_place)
{
    centred_in_place = false;
    if constexpr (RMS) {
        float sum_sq[1] = {0.0f};
        for_each_value<WIDTH, ITEMS>(vectors,
                                     [&](int i, int c, bool held) { sum_sq[0] += held ? v[i][c] * v[i][c] : 0.0f; });
        block_reduce(sum_sq);
        return rms_moments(sum_sq[0], (float)d);
    }
    float sums[1] = {0.0f};
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) { sums[0] += held ? v[i][c] : 0.0f; });
    block_reduce(sums);
    float first_mean = sums[0] / d;
    float deviations[2] = {0.0f, 0.0f}; /* sum(x - m0), sum((x - m0)^2) */
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) {
        float dev = held ? v[i][c] - first_mean : 0.0f;
        deviations[0] += dev;
        deviations[1] += dev * dev;
    });
    block_reduce(deviations);
    LnRowMoments moments = ln_moments_from_deviations(first_mean, deviations[0], deviations[1], (float)d);
    if (!ln_first_mean_is_far(deviations[0], deviations[1], (float)d))
        return moments;
    centred_in_place = true;
    return block_moments_centred_in_place(v, vectors, d, moments.mean);
}
// ANCHOR_END: take_the_statistics_of_either_norm

// ANCHOR: rescale_a_row_held_in_registers
/* The row's largest magnitude (ln_magnitude: inf if it holds a NaN). */
template <int WIDTH, int ITEMS> __device__ static float block_max_magnitude(const float (&v)[ITEMS][WIDTH], int vectors)
{
    float largest[1] = {0.0f};
    for_each_value<WIDTH, ITEMS>(
        vectors, [&](int i, int c, bool held) { largest[0] = fmaxf(largest[0], held ? ln_magnitude(v[i][c]) : 0.0f); });
    block_reduce(largest, Larger());
    return largest[0];
}

/* As on the CPU (rescaled_row_stats), for a row whose statistics came out
 * 0, NaN or too small: where the row can be rescaled, the block scales it
 * in its registers by 2^-k, in place (exact), takes the moments of the
 * scaled row and the statistics from them (ln_unscaled_stats), and reads
 * the row again, to normalise it unscaled as any other row. (Normalising the scaled row
 * would need rstd 2^k, which overflows where rstd is near 1/sqrt(eps) and
 * the row near float's limit.) Every thread has the same statistics after
 * the reductions, so the whole block takes the branch or none of it does. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__device__ static LnRowStats rescaled_row_stats(float (&v)[ITEMS][WIDTH], const Stored<S> *xr, int vectors, int d,
                                                float eps, LnRowStats plain)
{
    float largest = block_max_magnitude(v, vectors);
    if (!ln_can_rescale(largest))
        return plain;
    int k = ln_scaling_exponent(largest);
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) {
        if (held)
            v[i][c] = ldexpf(v[i][c], -k);
    });
    bool centred_in_place;
    LnRowStats stats = ln_unscaled_stats(block_row_moments<WIDTH, ITEMS, RMS>(v, vectors, d, centred_in_place), k, eps);
    load_row<WIDTH, ITEMS, S>(v, xr, vectors);
    return stats;
}
// ANCHOR_END: rescale_a_row_held_in_registers

// ANCHOR: keep_the_row_in_registers
/* Version 3: one block per row, the row read from memory once into
 * registers (thread t holds vectors t, t + blockDim.x, ... of the row). */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void ROW_KERNEL_BOUNDS(WIDTH, ITEMS)
    layernorm_forward_v3(Stored<S> *y, float *mean, float *rstd, const Stored<S> *x, const float *gamma,
                         const float *beta, int d, float eps)
{
    size_t offset = (size_t)blockIdx.x * d;
    int vectors = d / WIDTH;
    float v[ITEMS][WIDTH];
    load_row<WIDTH, ITEMS, S>(v, x + offset, vectors);
    bool centred_in_place;
    LnRowStats stats = ln_row_stats(block_row_moments<WIDTH, ITEMS, RMS>(v, vectors, d, centred_in_place), eps);
    if (centred_in_place)
        load_row<WIDTH, ITEMS, S>(v, x + offset, vectors);
    if (ln_may_need_rescaling(stats.rstd)) {
        stats = rescaled_row_stats<WIDTH, ITEMS, S, RMS>(v, x + offset, vectors, d, eps, stats);
    }
    // ANCHOR: normalize_from_registers
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k >= vectors)
            continue;
        float g[WIDTH], b[WIDTH] = {}, out[WIDTH];
        load_parameters(g, gamma + (size_t)k * WIDTH);
        if constexpr (!RMS)
            load_parameters(b, beta + (size_t)k * WIDTH);
#pragma unroll
        for (int c = 0; c < WIDTH; c++)
            out[c] = normalized<RMS>(v[i][c], stats, g[c], b[c]);
        store_streaming<S>(y + offset + (size_t)k * WIDTH, out);
    }
    // ANCHOR_END: normalize_from_registers
    if (threadIdx.x == 0) {
        if (!RMS)
            mean[blockIdx.x] = stats.mean;
        rstd[blockIdx.x] = stats.rstd;
    }
}
// ANCHOR_END: keep_the_row_in_registers

// ANCHOR: differentiate_by_rows
/* Backward version 1, two plain kernels: a thread per row for dx (sums in
 * double, like forward 1), and a thread per column for dgamma and dbeta
 * (below). A column's thread cannot see a whole row, so the row kernel
 * leaves each row's residual in `residual` (n floats of scratch) for it.
 *
 * RMSNorm's row needs one sum, sum(g * xhat) with xhat = x * rstd, and
 * no residual: nothing was centred (no scratch; mean and residual NULL). */
template <LnStorage S, bool RMS>
__global__ void layernorm_backward_v1_dx(Stored<S> *dx, float *residual, const Stored<S> *dy, const Stored<S> *x,
                                         const float *mean, const float *rstd, const float *gamma, int n, int d)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n)
        return;
    size_t offset = (size_t)row * d;
    auto xv = [&](int j) { return Storage<S>::widen(x[offset + j]); };
    auto g = [&](int j) { return gamma[j] * Storage<S>::widen(dy[offset + j]); };
    if constexpr (RMS) {
        float r = rstd[row];
        double sum_g_xhat = 0.0;
        for (int j = 0; j < d; j++)
            sum_g_xhat += (double)g(j) * (xv(j) * r);
        float mean_g_xhat = (float)sum_g_xhat / (float)d;
        for (int j = 0; j < d; j++)
            dx[offset + j] = Storage<S>::narrow(rms_dx(g(j), xv(j) * r, mean_g_xhat, r));
        return;
    }
    // ANCHOR: differentiate_a_layer_norm_row_in_double
    float m = mean[row], r = rstd[row];
    double sum_g = 0.0, sum_g_centered = 0.0, sum_centered = 0.0;
    for (int j = 0; j < d; j++) {
        float gj = g(j), centered = xv(j) - m;
        sum_g += gj;
        sum_g_centered += (double)gj * centered;
        sum_centered += centered;
    }
    LnBackwardMeans means = ln_backward_means((float)sum_g, (float)sum_g_centered, (float)sum_centered, (float)d, r);
    for (int j = 0; j < d; j++) {
        float xhat = ln_normalize(xv(j), m, means.residual, r);
        dx[offset + j] = Storage<S>::narrow(ln_dx(g(j), xhat, means.mean_g, means.mean_g_xhat, r));
    }
    residual[row] = means.residual;
    // ANCHOR_END: differentiate_a_layer_norm_row_in_double
}
// ANCHOR_END: differentiate_by_rows

// ANCHOR: sum_down_the_columns
/* dgamma and dbeta: a thread per column walks down it through every row
 * (neighbouring threads read neighbouring columns, so these loads do
 * coalesce), summing in double. */
template <LnStorage S, bool RMS>
__global__ void layernorm_backward_v1_params(float *dgamma, float *dbeta, const Stored<S> *dy, const Stored<S> *x,
                                             const float *mean, const float *residual, const float *rstd, int n, int d)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d)
        return;
    double sum_dgamma = 0.0, sum_dbeta = 0.0;
    for (int row = 0; row < n; row++) {
        float g = Storage<S>::widen(dy[(size_t)row * d + j]), xv = Storage<S>::widen(x[(size_t)row * d + j]);
        sum_dgamma += g * (RMS ? xv * rstd[row] : ln_normalize(xv, mean[row], residual[row], rstd[row]));
        sum_dbeta += g;
    }
    dgamma[j] = (float)sum_dgamma;
    if (!RMS)
        dbeta[j] = (float)sum_dbeta;
}
// ANCHOR_END: sum_down_the_columns

// ANCHOR: load_a_backward_row
/* x, dy and g = gamma * dy of vector k of a row. STREAMING as for load:
 * false where the block reads the vector again. */
template <LnStorage S, int WIDTH, bool STREAMING>
__device__ static void load_gradient_inputs(float (&xv)[WIDTH], float (&dyv)[WIDTH], float (&g)[WIDTH],
                                            const Stored<S> *x, const Stored<S> *dy, const float *gamma, size_t offset,
                                            int k)
{
    load<S, WIDTH, STREAMING>(xv, x + offset + (size_t)k * WIDTH);
    load<S, WIDTH, STREAMING>(dyv, dy + offset + (size_t)k * WIDTH);
    load_parameters(g, gamma + (size_t)k * WIDTH);
#pragma unroll
    for (int c = 0; c < WIDTH; c++)
        g[c] *= dyv[c];
}

/* A thread of backward 2 keeps 2 x ITEMS x WIDTH floats of dgamma and dbeta
 * across rows and, between the two steps of a row, 3 x ITEMS x WIDTH of x,
 * dy and g: 160 floats for 8 float4, where a block of 640 threads leaves a
 * thread 96 registers (65,536 / 640, in multiples of 8). ptxas would spill
 * the rest to local memory, read and written on every row. So a plan of
 * the most vectors per thread (8 float4, or 4 vectors of 8 16-bit values,
 * the same floats once widened) keeps only dgamma and dbeta, and reads x, dy and
 * gamma again for the second step: the block read them a moment before,
 * and they come from the caches, not from DRAM. */
template <int WIDTH, int ITEMS> constexpr bool keeps_row_between_steps = ITEMS < LN_PLAN_MOST_ITEMS(WIDTH);

/* Plans of fewer than the most vectors run in blocks of up to 512 threads
 * (128 registers each); plans of the most in blocks of up to 640
 * (ln_backward_row_plan). */
#define BACKWARD_KERNEL_BOUNDS(WIDTH, ITEMS) \
    __launch_bounds__((ITEMS) < LN_PLAN_MOST_ITEMS(WIDTH) ? LN_PLAN_PREFERRED_THREADS : LN_BACKWARD_PLAN_MAX_THREADS)
// ANCHOR_END: load_a_backward_row

// ANCHOR: sum_a_backward_row_of_either_norm
/* The row sums of backward 2 for one element. Layer norm's are sum(g),
 * sum(g * (x - m)) and sum(x - m); RMSNorm's is sum(g * xhat) alone. */
template <bool RMS> constexpr int backward_row_sums = RMS ? 1 : 3;

template <bool RMS>
__device__ static void add_to_row_sums(float (&sums)[backward_row_sums<RMS>], float x, float g, float m, float r)
{
    if constexpr (RMS) {
        sums[0] += g * (x * r);
    } else {
        float centered = x - m;
        sums[0] += g;
        sums[1] += g * centered;
        sums[2] += centered;
    }
}

template <bool RMS>
__device__ static LnBackwardMeans backward_means(const float (&sums)[backward_row_sums<RMS>], int d, float r)
{
    if constexpr (RMS) {
        LnBackwardMeans means = {0.0f, sums[0] / (float)d, 0.0f};
        return means;
    } else {
        return ln_backward_means(sums[0], sums[1], sums[2], (float)d, r);
    }
}
// ANCHOR_END: sum_a_backward_row_of_either_norm

// ANCHOR: finish_an_element_and_keep_the_partials
/* dx of one element, once the row's means are known, and the element's
 * terms of dgamma and dbeta added to the thread's running sums. */
template <bool RMS>
__device__ static float dx_and_accumulate(float x, float dy, float g, float m, float r, LnBackwardMeans means,
                                          float &dgamma, float &dbeta)
{
    float xhat = RMS ? x * r : ln_normalize(x, m, means.residual, r);
    dgamma += dy * xhat;
    dbeta += dy;
    return RMS ? rms_dx(g, xhat, means.mean_g_xhat, r) : ln_dx(g, xhat, means.mean_g, means.mean_g_xhat, r);
}

/* The block's partial sums, one row of `partials` per block: its dgamma,
 * then (layer norm) its dbeta, d floats each, with plain stores. */
template <int WIDTH, int ITEMS, bool RMS>
__device__ static void store_partials(float *partials, const float (&dgamma_acc)[ITEMS][WIDTH],
                                      const float (&dbeta_acc)[ITEMS][WIDTH], int vectors, int d)
{
    float *dgamma_part = partials + (size_t)blockIdx.x * ln_parameter_gradients<RMS> * d, *dbeta_part = dgamma_part + d;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k >= vectors)
            continue;
#pragma unroll
        for (int c = 0; c < WIDTH; c++) {
            dgamma_part[(size_t)k * WIDTH + c] = dgamma_acc[i][c];
            if (!RMS)
                dbeta_part[(size_t)k * WIDTH + c] = dbeta_acc[i][c];
        }
    }
}
// ANCHOR_END: finish_an_element_and_keep_the_partials

// ANCHOR: fuse_the_backward_pass

/* Version 2, fused: a block takes rows blockIdx.x, blockIdx.x + gridDim.x,
 * ... and for each reads x and dy once from memory, forms the row sums
 * with one block reduction, and writes dx. Each thread owns the same
 * columns in every row, so it adds its share of dgamma and dbeta in
 * registers, across all the block's rows; at the end the block writes its
 * partial sums, one row of `partials` per block, with plain stores
 * (RMSNorm: dgamma only, d floats per block). */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void BACKWARD_KERNEL_BOUNDS(WIDTH, ITEMS)
    layernorm_backward_v2(Stored<S> *dx, float *partials, const Stored<S> *dy, const Stored<S> *x, const float *mean,
                          const float *rstd, const float *gamma, int n, int d)
{
    constexpr bool KEEP = keeps_row_between_steps<WIDTH, ITEMS>;
    constexpr int KEPT = KEEP ? ITEMS : 1; /* vectors held between the steps */
    int vectors = d / WIDTH;
    float dgamma_acc[ITEMS][WIDTH] = {}, dbeta_acc[ITEMS][WIDTH] = {};
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        size_t offset = (size_t)row * d;
        float m = RMS ? 0.0f : mean[row], r = rstd[row];
        float xv[KEPT][WIDTH], dyv[KEPT][WIDTH], g[KEPT][WIDTH];
        // ANCHOR: form_the_row_sums
        float sums[backward_row_sums<RMS>] = {};
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            int k = threadIdx.x + i * blockDim.x, h = KEEP ? i : 0;
            if (k >= vectors)
                continue;
            load_gradient_inputs<S, WIDTH, KEEP>(xv[h], dyv[h], g[h], x, dy, gamma, offset, k);
#pragma unroll
            for (int c = 0; c < WIDTH; c++)
                add_to_row_sums<RMS>(sums, xv[h][c], g[h][c], m, r);
        }
        block_reduce(sums);
        LnBackwardMeans means = backward_means<RMS>(sums, d, r);
        // ANCHOR_END: form_the_row_sums
        // ANCHOR: write_dx_and_add_to_the_parameter_sums
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            int k = threadIdx.x + i * blockDim.x, h = KEEP ? i : 0;
            if (k >= vectors)
                continue;
            if constexpr (!KEEP)
                load_gradient_inputs<S, WIDTH, true>(xv[h], dyv[h], g[h], x, dy, gamma, offset, k);
            float out[WIDTH];
#pragma unroll
            for (int c = 0; c < WIDTH; c++)
                out[c] = dx_and_accumulate<RMS>(xv[h][c], dyv[h][c], g[h][c], m, r, means, dgamma_acc[i][c],
                                                dbeta_acc[i][c]);
            store_streaming<S>(dx + offset + (size_t)k * WIDTH, out);
        }
        // ANCHOR_END: write_dx_and_add_to_the_parameter_sums
    }
    store_partials<WIDTH, ITEMS, RMS>(partials, dgamma_acc, dbeta_acc, vectors, d);
}
// ANCHOR_END: fuse_the_backward_pass

// ANCHOR: add_the_partials_in_block_order

/* One thread per column adds the blocks' partial sums in block order, in
 * double: the same bits on every run. */
template <bool RMS>
__global__ void layernorm_backward_v2_finalize(float *dgamma, float *dbeta, const float *partials, int blocks, int d)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= d)
        return;
    const size_t stride = (size_t)ln_parameter_gradients<RMS> * d;
    double sum_dgamma = 0.0, sum_dbeta = 0.0;
    for (int b = 0; b < blocks; b++) {
        sum_dgamma += partials[(size_t)b * stride + j];
        if (!RMS)
            sum_dbeta += partials[(size_t)b * stride + d + j];
    }
    dgamma[j] = (float)sum_dgamma;
    if (!RMS)
        dbeta[j] = (float)sum_dbeta;
}
// ANCHOR_END: add_the_partials_in_block_order

// ANCHOR: issue_the_loads_of_a_row
/* What a thread of backward 3 holds of one row: its vectors of x and dy,
 * widened, and the row's saved statistics (mean 0 for RMSNorm). */
template <int WIDTH, int ITEMS> struct HeldRow {
    float x[ITEMS][WIDTH], dy[ITEMS][WIDTH];
    float mean, rstd;
};

/* Issue the loads of row `row` into `held`. Nothing waits for them here:
 * the registers fill while the thread goes on with the row before. */
template <LnStorage S, int WIDTH, int ITEMS, bool RMS>
__device__ static void prefetch_row(HeldRow<WIDTH, ITEMS> &held, const Stored<S> *x, const Stored<S> *dy,
                                    const float *mean, const float *rstd, int row, int vectors, int d)
{
    size_t offset = (size_t)row * d;
    held.mean = RMS ? 0.0f : mean[row];
    held.rstd = rstd[row];
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k < vectors) {
            load<S, WIDTH>(held.x[i], x + offset + (size_t)k * WIDTH);
            load<S, WIDTH>(held.dy[i], dy + offset + (size_t)k * WIDTH);
        }
    }
}
// ANCHOR_END: issue_the_loads_of_a_row

// ANCHOR: one_row_while_the_next_arrives
/* One row of backward 3, `cur`, already in registers: the loads of the
 * block's next row go out first, into `next`, then the row sums and their
 * block reduction (two barriers), during which those loads are in flight,
 * then dx and the running dgamma and dbeta. gamma, the same columns in
 * every row, stays in registers for the whole kernel. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__device__ static void backward_row_overlapped(HeldRow<WIDTH, ITEMS> &cur, HeldRow<WIDTH, ITEMS> &next,
                                               const float (&gam)[ITEMS][WIDTH], float (&dgamma_acc)[ITEMS][WIDTH],
                                               float (&dbeta_acc)[ITEMS][WIDTH], Stored<S> *dx, const Stored<S> *dy,
                                               const Stored<S> *x, const float *mean, const float *rstd, int row, int n,
                                               int vectors, int d)
{
    int following = row + gridDim.x;
    if (following < n)
        prefetch_row<S, WIDTH, ITEMS, RMS>(next, x, dy, mean, rstd, following, vectors, d);
    float m = cur.mean, r = cur.rstd;
    float sums[backward_row_sums<RMS>] = {};
    for_each_value<WIDTH, ITEMS>(vectors, [&](int i, int c, bool held) {
        if (held)
            add_to_row_sums<RMS>(sums, cur.x[i][c], gam[i][c] * cur.dy[i][c], m, r);
    });
    block_reduce(sums);
    LnBackwardMeans means = backward_means<RMS>(sums, d, r);
    // ANCHOR: write_dx_from_registers
    size_t offset = (size_t)row * d;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k >= vectors)
            continue;
        float out[WIDTH];
#pragma unroll
        for (int c = 0; c < WIDTH; c++)
            out[c] = dx_and_accumulate<RMS>(cur.x[i][c], cur.dy[i][c], gam[i][c] * cur.dy[i][c], m, r, means,
                                            dgamma_acc[i][c], dbeta_acc[i][c]);
        store_streaming<S>(dx + offset + (size_t)k * WIDTH, out);
    }
    // ANCHOR_END: write_dx_from_registers
}
// ANCHOR_END: one_row_while_the_next_arrives

// ANCHOR: bound_the_registers_of_two_rows
/* Two blocks of up to 512 threads per SM at least: 64 registers a thread.
 * Three (40 registers) spill the float4 instance, which holds 2 x 8 floats
 * of x and dy, 8 of dgamma and dbeta and 4 of gamma. */
#define OVERLAPPED_KERNEL_BOUNDS __launch_bounds__(LN_PLAN_PREFERRED_THREADS, 2)
// ANCHOR_END: bound_the_registers_of_two_rows

// ANCHOR: overlap_the_next_row

/* Version 3: version 2's fusion, in a grid of exactly the blocks the GPU
 * holds at once (the launcher asks the occupancy of this instance), each
 * striding over rows blockIdx.x, blockIdx.x + gridDim.x, ..., with the
 * next row's x and dy in flight across each row's barriers. Two buffers
 * take turns, so that no registers are copied from one to the other. */
template <int WIDTH, int ITEMS, LnStorage S, bool RMS>
__global__ void OVERLAPPED_KERNEL_BOUNDS layernorm_backward_v3(Stored<S> *dx, float *partials, const Stored<S> *dy,
                                                               const Stored<S> *x, const float *mean, const float *rstd,
                                                               const float *gamma, int n, int d)
{
    static_assert(overlaps_next_row<WIDTH, ITEMS>, "a thread's share of two rows fits in its registers");
    int vectors = d / WIDTH;
    float gam[ITEMS][WIDTH], dgamma_acc[ITEMS][WIDTH] = {}, dbeta_acc[ITEMS][WIDTH] = {};
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        int k = threadIdx.x + i * blockDim.x;
        if (k < vectors)
            load_parameters(gam[i], gamma + (size_t)k * WIDTH);
    }
    HeldRow<WIDTH, ITEMS> a, b;
    int first = blockIdx.x, grid = gridDim.x;
    if (first < n)
        prefetch_row<S, WIDTH, ITEMS, RMS>(a, x, dy, mean, rstd, first, vectors, d);
    for (int row = first; row < n; row += 2 * grid) {
        backward_row_overlapped<WIDTH, ITEMS, S, RMS>(a, b, gam, dgamma_acc, dbeta_acc, dx, dy, x, mean, rstd, row, n,
                                                      vectors, d);
        if (row + grid < n)
            backward_row_overlapped<WIDTH, ITEMS, S, RMS>(b, a, gam, dgamma_acc, dbeta_acc, dx, dy, x, mean, rstd,
                                                          row + grid, n, vectors, d);
    }
    store_partials<WIDTH, ITEMS, RMS>(partials, dgamma_acc, dbeta_acc, vectors, d);
}
// ANCHOR_END: overlap_the_next_row

// ANCHOR: add_the_partials_in_slices
/* Backward 3's finalize: block b takes LN_FINALIZE_COLUMNS columns of the
 * partial rows (dgamma's, then dbeta's: `width` = 2d, RMSNorm d), and its
 * LN_FINALIZE_SLICES slices each add every LN_FINALIZE_SLICES-th partial row
 * of their column, slice s the rows s, s + SLICES, ..., in double; then the
 * first slice adds the slices' sums in slice order. The order depends on
 * the number of partial rows alone, never on which block or thread ran
 * first: the same bits on every run. Eight columns are one 32-byte sector
 * of a row, and 2d / 8 blocks are enough to fill the GPU at d = 768. */
__global__ void __launch_bounds__(LN_FINALIZE_THREADS)
    layernorm_backward_v3_finalize(float *dgamma, float *dbeta, const float *partials, int blocks, int d, int width)
{
    __shared__ double slice_sums[LN_FINALIZE_SLICES][LN_FINALIZE_COLUMNS];
    int lane_column = threadIdx.x % LN_FINALIZE_COLUMNS, slice = threadIdx.x / LN_FINALIZE_COLUMNS;
    int column = blockIdx.x * LN_FINALIZE_COLUMNS + lane_column;
    double sum = 0.0;
    if (column < width)
        for (int b = slice; b < blocks; b += LN_FINALIZE_SLICES)
            sum += partials[(size_t)b * width + column];
    slice_sums[slice][lane_column] = sum;
    __syncthreads();
    if (slice != 0 || column >= width)
        return;
    double total = 0.0;
    for (int s = 0; s < LN_FINALIZE_SLICES; s++)
        total += slice_sums[s][lane_column];
    if (column < d)
        dgamma[column] = (float)total;
    else
        dbeta[column - d] = (float)total;
}
// ANCHOR_END: add_the_partials_in_slices

/* Every kernel, for every storage type and norm: those without a row plan,
 * and the row kernels at every plan ln_row_plan returns (1, 2, 4 or 8
 * single values, 1, 2 or 4 vectors of 16 bytes, and 8 of them where a
 * vector is 4 floats), backward 3 at those of at most 4 values in 2
 * vectors per thread (overlaps_next_row). The launchers use these instances and no others; one missing
 * here fails the link. */
#define INSTANTIATE_PLAIN_KERNELS(S, RMS)                                                                      \
    template __global__ void layernorm_forward_v1<S, RMS>(Stored<S> *, float *, float *, const Stored<S> *,    \
                                                          const float *, const float *, int, int, float);      \
    template __global__ void layernorm_forward_v2<S, RMS>(Stored<S> *, float *, float *, const Stored<S> *,    \
                                                          const float *, const float *, int, int, float);      \
    template __global__ void layernorm_backward_v1_dx<S, RMS>(Stored<S> *, float *, const Stored<S> *,         \
                                                              const Stored<S> *, const float *, const float *, \
                                                              const float *, int, int);                        \
    template __global__ void layernorm_backward_v1_params<S, RMS>(                                             \
        float *, float *, const Stored<S> *, const Stored<S> *, const float *, const float *, const float *, int, int)
#define INSTANTIATE_ROW_KERNELS(WIDTH, ITEMS, S, RMS)                                                             \
    template __global__ void layernorm_forward_v3<WIDTH, ITEMS, S, RMS>(                                          \
        Stored<S> *, float *, float *, const Stored<S> *, const float *, const float *, int, float);              \
    template __global__ void layernorm_backward_v2<WIDTH, ITEMS, S, RMS>(Stored<S> *, float *, const Stored<S> *, \
                                                                         const Stored<S> *, const float *,        \
                                                                         const float *, const float *, int, int)
#define INSTANTIATE_BACKWARD_V3(WIDTH, ITEMS, S, RMS)                                                             \
    template __global__ void layernorm_backward_v3<WIDTH, ITEMS, S, RMS>(Stored<S> *, float *, const Stored<S> *, \
                                                                         const Stored<S> *, const float *,        \
                                                                         const float *, const float *, int, int)
#define INSTANTIATE_FOR_NORM(S, RMS)                         \
    INSTANTIATE_PLAIN_KERNELS(S, RMS);                       \
    INSTANTIATE_ROW_KERNELS(1, 1, S, RMS);                   \
    INSTANTIATE_ROW_KERNELS(1, 2, S, RMS);                   \
    INSTANTIATE_ROW_KERNELS(1, 4, S, RMS);                   \
    INSTANTIATE_ROW_KERNELS(1, 8, S, RMS);                   \
    INSTANTIATE_ROW_KERNELS(LN_VECTOR_VALUES(S), 1, S, RMS); \
    INSTANTIATE_ROW_KERNELS(LN_VECTOR_VALUES(S), 2, S, RMS); \
    INSTANTIATE_ROW_KERNELS(LN_VECTOR_VALUES(S), 4, S, RMS); \
    INSTANTIATE_BACKWARD_V3(1, 1, S, RMS);                   \
    INSTANTIATE_BACKWARD_V3(1, 2, S, RMS)
#define INSTANTIATE_FOR_STORAGE(S)  \
    INSTANTIATE_FOR_NORM(S, false); \
    INSTANTIATE_FOR_NORM(S, true)
INSTANTIATE_FOR_STORAGE(STORAGE_FLOAT32);
INSTANTIATE_FOR_STORAGE(STORAGE_FP16);
INSTANTIATE_FOR_STORAGE(STORAGE_BF16);
INSTANTIATE_ROW_KERNELS(4, 8, STORAGE_FLOAT32, false);
INSTANTIATE_ROW_KERNELS(4, 8, STORAGE_FLOAT32, true);
INSTANTIATE_BACKWARD_V3(4, 1, STORAGE_FLOAT32, false);
INSTANTIATE_BACKWARD_V3(4, 1, STORAGE_FLOAT32, true);
template __global__ void layernorm_backward_v2_finalize<false>(float *, float *, const float *, int, int);
template __global__ void layernorm_backward_v2_finalize<true>(float *, float *, const float *, int, int);
