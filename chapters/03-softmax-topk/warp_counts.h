/* What the CPU models of the GPU kernels (decode_step_model.c,
 * slow_paths.c) count the same way: a warp's 32 lanes taking items in
 * turn, and the stages of a bitonic network over a power of two. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_WARP_COUNTS_H
#define CHAPTERS_03_SOFTMAX_TOPK_WARP_COUNTS_H

enum { WARP_LANES = 32 };

static inline int log2_of_power_of_two(int n)
{
    int log = 0;
    while ((1 << log) < n)
        log++;
    return log;
}

/* A warp's lanes taking `items` in turn: the most a lane takes. */
static inline int per_lane(int items)
{
    return (items + WARP_LANES - 1) / WARP_LANES;
}

#endif
