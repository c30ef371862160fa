/* Welford states and the merge that combines them (Chan, Golub & LeVeque
 * 1979/1983), written once for the CPU and the GPU.
 *
 * A state summarises a stretch of data: how many values, their mean, and m2,
 * the sum of squared deviations from that mean. Two states merge into the
 * state of the concatenated data exactly (in exact arithmetic), so the data
 * can be cut into any pieces, the pieces summarised independently (by GPU
 * threads, by warps, by blocks) and the summaries merged in any tree. The
 * state is double: the merge is cheap next to reading the data, and a double
 * state makes the result independent of how the data was cut, to far below
 * the float rounding of the data itself. */
#ifndef KERNELS_WELFORD_H
#define KERNELS_WELFORD_H

#include "common/hostdevice.h"

/* count is a double: it enters the arithmetic as one, it is exact up to
 * 2^53, and a double moves through a warp shuffle like the other fields. */
typedef struct {
    double count;
    double mean;
    double m2;
} WelfordState;

HOST_DEVICE static inline WelfordState welford_empty(void)
{
    WelfordState empty = {0.0, 0.0, 0.0};
    return empty;
}

// ANCHOR: merge_welford_states
HOST_DEVICE static inline WelfordState welford_merge(WelfordState a, WelfordState b)
{
    double count = a.count + b.count;
    if (count == 0.0) {
        return a; /* two empty states */
    }
    double delta = b.mean - a.mean;
    double b_share = b.count / count; /* 0 or 1 if a side is empty */
    WelfordState merged;
    merged.count = count;
    merged.mean = a.mean + delta * b_share;
    merged.m2 = a.m2 + b.m2 + delta * delta * a.count * b_share;
    return merged;
}
// ANCHOR_END: merge_welford_states

/* Adding one value is merging a state of one value, whose m2 is 0. */
HOST_DEVICE static inline WelfordState welford_push(WelfordState state, double x)
{
    WelfordState single = {1.0, x, 0.0};
    return welford_merge(state, single);
}

/* Population variance m2 / count of a non-empty state. */
HOST_DEVICE static inline double welford_variance(WelfordState state)
{
    return state.m2 / state.count;
}

#ifdef __CUDACC__
/* Moving a state between the lanes of a warp: three doubles, three
 * shuffles. `shuffle` takes this lane's double and returns the other lane's.
 * The kernels' warp merges are built on the two below. */
template <typename Shuffle> __device__ static inline WelfordState welford_shuffle(WelfordState state, Shuffle shuffle)
{
    WelfordState other;
    other.count = shuffle(state.count);
    other.mean = shuffle(state.mean);
    other.m2 = shuffle(state.m2);
    return other;
}

/* The state of lane `lane + offset`: for a merge into lane 0. */
__device__ static inline WelfordState welford_shuffle_down(unsigned mask, WelfordState state, unsigned offset)
{
    return welford_shuffle(state, [=](double value) { return __shfl_down_sync(mask, value, offset); });
}

/* The state of lane `lane ^ offset`: for a merge that every lane ends with. */
__device__ static inline WelfordState welford_shuffle_xor(unsigned mask, WelfordState state, unsigned offset)
{
    return welford_shuffle(state, [=](double value) { return __shfl_xor_sync(mask, value, offset); });
}
#endif

#endif
