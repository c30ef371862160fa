/* Row means and variances on the GPU: every thread summarises its strided
 * share of a row in a Welford state, then the block merges the states, first
 * within each warp through register shuffles, then across warps through
 * shared memory. The merge is kernels/welford.h, shared with the CPU code;
 * the launcher is kernels/welford_launch.cu. */
#include "kernels/welford.h"
#include "kernels/welford_gpu.h"
#include "kernels/welford_kernels.cuh"

#define WARP_SIZE 32u
#define WELFORD_GPU_MAX_WARPS (WELFORD_GPU_MAX_THREADS / WARP_SIZE)

// ANCHOR: merge_across_a_warp
/* Merge the states of lanes [0, lanes) of this warp into lane 0. Lanes
 * at `lanes` and above do not exist (the last warp of a block whose size
 * is not a multiple of 32), so they are left out of the shuffle mask,
 * and a value shuffled from beyond them is never used. */
__device__ static WelfordState warp_merge(WelfordState state, unsigned lanes)
{
    unsigned mask = lanes == WARP_SIZE ? 0xffffffffu : (1u << lanes) - 1;
    unsigned lane = threadIdx.x % WARP_SIZE;
    for (unsigned offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        WelfordState other = welford_shuffle_down(mask, state, offset);
        if (lane + offset < lanes) {
            state = welford_merge(state, other);
        }
    }
    return state;
}
// ANCHOR_END: merge_across_a_warp

// ANCHOR: reduce_a_row_per_block
__global__ void welford_rows_kernel(const float *x, size_t cols, float *mean, float *variance)
{
    const float *row = x + blockIdx.x * cols;

    /* Strided, so that neighbouring threads read neighbouring floats:
     * the warp's loads coalesce. A thread with no element keeps an
     * empty state. */
    WelfordState state = welford_empty();
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
        state = welford_push(state, row[j]);
    }

    unsigned warp = threadIdx.x / WARP_SIZE;
    unsigned lane = threadIdx.x % WARP_SIZE;
    unsigned warps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    unsigned lanes_here = min(WARP_SIZE, blockDim.x - warp * WARP_SIZE);
    state = warp_merge(state, lanes_here);

    __shared__ WelfordState warp_states[WELFORD_GPU_MAX_WARPS];
    if (lane == 0) {
        warp_states[warp] = state;
    }
    __syncthreads();
    if (warp == 0) {
        state = lane < warps ? warp_states[lane] : welford_empty();
        state = warp_merge(state, min(WARP_SIZE, blockDim.x));
        if (lane == 0) {
            mean[blockIdx.x] = (float)state.mean;
            variance[blockIdx.x] = (float)welford_variance(state);
        }
    }
}
// ANCHOR_END: reduce_a_row_per_block
