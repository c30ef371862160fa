/* The replay of version 6's slow paths (chapters/03-softmax-topk/slow_paths.h)
 * against the kernel itself: on the CUDA emulator, which counts what the
 * kernel's slow paths did (softmax_topk_gpu_slow_path_tally), the replay
 * in the emulator's order of warps must count exactly the same offer steps,
 * sorts, candidates and sorted entries. The emulator runs a block's warps
 * in index order or in reverse, alternately from launch to launch, each
 * as far as it can: all reach the barrier before the scan, and the thread
 * that arrives last, of the last warp, opens it and goes on, so its warp
 * scans first. Two launches of one row must match the two orders, one
 * each. On a GPU nothing is counted, and the test is skipped. */
#include <stdio.h>

#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/slow_paths.h"
#include "common/alloc.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/softmax_topk_gpu.h"

static bool same_counts(SoftmaxTopkSlowPathTally emulated, SlowPathCounts replayed)
{
    return emulated.offer_steps == replayed.offer_steps && emulated.sorts == replayed.merges &&
           emulated.sorted_candidates == replayed.candidates && emulated.sorted_entries == replayed.sorted_entries;
}

static SoftmaxTopkSlowPathTally launch_and_count(SoftmaxTopkGpuRun *run, int k)
{
    float *probs = ALLOC_ARRAY((size_t)k, float);
    int64_t *indices = ALLOC_ARRAY((size_t)k, int64_t);
    softmax_topk_gpu_slow_path_tally_reset();
    softmax_topk_gpu_run_once(run, probs, indices);
    array_free(probs);
    array_free(indices);
    return softmax_topk_gpu_slow_path_tally();
}

enum { MAX_WARPS = 32 };

/* The warps of a row in the order the emulator scans them: in index order,
 * the last warp first (it opened the barrier), then 0, 1, ...; in
 * reverse, warp 0 first, then the last, the one before, ... */
static void emulator_sequences(int warps, int *in_order, int *in_reverse)
{
    in_order[0] = warps - 1;
    in_reverse[0] = 0;
    for (int k = 1; k < warps; k++) {
        in_order[k] = k - 1;
        in_reverse[k] = warps - k;
    }
}

/* One row of gpu-bench's logits (`vocab` of them: not a multiple of 4
 * puts a tail on the last warp), launched twice, on version 6 or on
 * version 9, whose revisits the replay counts the same way after the
 * floor. */
static void check_one_row(int version, int vocab, int k)
{
    float *row = bench_logits_new((size_t)vocab, 1);
    SharedThresholdKernel kernel = {vocab, k, softmax_topk_gpu_warps_per_row(vocab), softmax_topk_gpu_kept_size(k),
                                    softmax_topk_gpu_fresh_size(k)};
    int in_order_sequence[MAX_WARPS], in_reverse_sequence[MAX_WARPS];
    emulator_sequences(kernel.warps_per_row, in_order_sequence, in_reverse_sequence);
    SlowPathCounts (*replay)(const float *, size_t, SharedThresholdKernel, WarpOrder) =
        version == 9 ? step_floor_replay : slow_paths_replay;
    SlowPathCounts in_order = replay(row, 1, kernel, (WarpOrder){in_order_sequence});
    SlowPathCounts in_reverse = replay(row, 1, kernel, (WarpOrder){in_reverse_sequence});
    SoftmaxTopkGpuRun *run;
    SoftmaxTopkGpuConfig config = {0, 0};
    EXPECT(softmax_topk_gpu_run_new(&run, version, row, 1, (size_t)vocab, k, &config) == NULL,
           "version %d takes K = %d", version, k);
    SoftmaxTopkSlowPathTally first = launch_and_count(run, k), second = launch_and_count(run, k);
    bool one_each = (same_counts(first, in_order) && same_counts(second, in_reverse)) ||
                    (same_counts(first, in_reverse) && same_counts(second, in_order));
    EXPECT(one_each,
           "version %d, V %d, K %d: emulated offer steps %lld and %lld, sorts %lld and %lld, candidates %lld and "
           "%lld, entries %lld and %lld; replayed in order %ld, %ld, %ld, %ld; in reverse %ld, %ld, %ld, %ld",
           version, vocab, k, first.offer_steps, second.offer_steps, first.sorts, second.sorts, first.sorted_candidates,
           second.sorted_candidates, first.sorted_entries, second.sorted_entries, in_order.offer_steps, in_order.merges,
           in_order.candidates, in_order.sorted_entries, in_reverse.offer_steps, in_reverse.merges,
           in_reverse.candidates, in_reverse.sorted_entries);
    /* A test that compares zeros proves nothing: the row must have made
     * the kernel offer and merge. */
    EXPECT(first.offer_steps > 0 && first.sorts >= kernel.warps_per_row + (version == 6),
           "version %d, V %d, K %d: %lld offer steps, %lld sorts", version, vocab, k, first.offer_steps, first.sorts);
    printf("version %d, V %d, K %d: %lld offer steps, %lld sorts of %lld candidates in %lld entries, as replayed\n",
           version, vocab, k, first.offer_steps, first.sorts, first.sorted_candidates, first.sorted_entries);
    softmax_topk_gpu_run_free(run);
    array_free(row);
}

int main(void)
{
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }
    if (!softmax_topk_gpu_counts_slow_paths()) {
        test_skip("the kernels count their slow paths only on the CUDA emulator");
    }
    check_one_row(6, 128256, 64);
    check_one_row(6, 50257, 8);
    check_one_row(9, 128256, 64);
    check_one_row(9, 50257, 8);
    return test_finish();
}
