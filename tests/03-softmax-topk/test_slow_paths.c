/* The replay of version 6's slow paths (chapters/03-softmax-topk/slow_paths.h)
 * on one row of gpu-bench's logits, its warps in step as on a GPU: the
 * counts hold what the kernel's rules imply, and the costs are read from
 * machine code of the shape of version 6's merge, or refused. The replay
 * is held to the kernel itself by test_slow_paths_gpu (emulated). */
#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/slow_paths.h"
#include "common/alloc.h"
#include "common/testing.h"

enum { VOCAB = 128256, WARPS = 8, OFFERS_PER_STEP = 128 };

/* The launcher's sizes (kernels/softmax_topk_launch.cu), which this
 * CPU test cannot call: kept a power of two >= k, fresh at least that and
 * two steps of offers. */
static SharedThresholdKernel version_6(int k)
{
    int kept = 1;
    while (kept < k)
        kept *= 2;
    int fresh = kept > 2 * OFFERS_PER_STEP ? kept : 2 * OFFERS_PER_STEP;
    return (SharedThresholdKernel){VOCAB, k, WARPS, kept, fresh};
}

static void test_counts_follow_the_rules(const float *row)
{
    SlowPathCounts previous = {0};
    const int ks[] = {8, 64};
    for (int t = 0; t < 2; t++) {
        SharedThresholdKernel kernel = version_6(ks[t]);
        SlowPathCounts c = slow_paths_replay(row, 1, kernel, WARPS_IN_STEP);
        /* 128256 / 4 float4s, 32 a step. */
        EXPECT(c.steps == VOCAB / 4 / 32, "K %d: %ld steps", ks[t], c.steps);
        EXPECT(c.end_merges == WARPS && c.tree_merges == WARPS - 1, "K %d: %ld end merges, %ld tree merges", ks[t],
               c.end_merges, c.tree_merges);
        /* A sort covers at least the kept list and never more than the buffer. */
        EXPECT(c.sorted_entries >= c.merges * kernel.kept_size && c.sorted_entries <= c.merges * kernel.fresh_size &&
                   c.candidates <= c.sorted_entries,
               "K %d: %ld merges sorted %ld entries holding %ld candidates", ks[t], c.merges, c.sorted_entries,
               c.candidates);
        /* A larger K keeps a lower threshold: more steps offer. */
        EXPECT(c.offer_steps > previous.offer_steps, "K %d: %ld offer steps, after %ld at a smaller K", ks[t],
               c.offer_steps, previous.offer_steps);
        printf("K %d: %ld of %ld steps offer, %ld merges of %ld entries\n", ks[t], c.offer_steps, c.steps, c.merges,
               c.sorted_entries);
        previous = c;
    }
}

static void test_argmax_counts(const float *row)
{
    SlowPathCounts c = argmax_slow_paths_replay(row, 1, VOCAB, WARPS);
    /* Every warp's first step finds each lane's first best. */
    EXPECT(c.steps == VOCAB / 4 / 32 && c.offer_steps >= WARPS && c.offer_steps < c.steps,
           "argmax: %ld of %ld steps leave the fast path", c.offer_steps, c.steps);
}

/* Version 9: at least the K steps that reach the floor are read again,
 * none offers that is not read again, and a NaN, which the steps' maxima
 * hide, sends every step back. */
static void test_step_floor_counts(float *row)
{
    const int ks[] = {8, 64};
    for (int t = 0; t < 2; t++) {
        SharedThresholdKernel kernel = version_6(ks[t]);
        SlowPathCounts c = step_floor_replay(row, 1, kernel, WARPS_IN_STEP);
        EXPECT(c.steps == VOCAB / 4 / 32 && c.revisited_steps >= ks[t] && c.revisited_steps < c.steps &&
                   c.offer_steps <= c.revisited_steps && c.candidates >= ks[t] && c.end_merges == WARPS,
               "K %d: %ld steps, %ld read again, %ld offer, %ld candidates", ks[t], c.steps, c.revisited_steps,
               c.offer_steps, c.candidates);
        printf("version 9, K %d: %ld of %ld steps read again, %ld offer, %ld merges\n", ks[t], c.revisited_steps,
               c.steps, c.offer_steps, c.merges);
    }
    float kept = row[5000];
    row[5000] = NAN;
    SlowPathCounts c = step_floor_replay(row, 1, version_6(8), WARPS_IN_STEP);
    EXPECT(c.revisited_steps == c.steps, "a NaN row: %ld of %ld steps read again", c.revisited_steps, c.steps);
    row[5000] = kept;
}

/* A steady state with the loops of version 6's merge, or not. */
static SassSteadyState merge_shaped(void)
{
    SassSteadyState s = {.instructions = 64, .instructions_on_all_paths = 1000, .inner_loop_count = 9};
    const SassInnerLoop loops[] = {
        {0x100, 0x140, 5,   -1},
        {0x200, 0x300, 20,  -1},
        {0x400, 0x900, 250, -1},
        {0x410, 0x8f0, 240, 2 },
        {0x500, 0x800, 120, 3 },
        {0xa00, 0xb00, 70,  -1},
        {0xc00, 0xf00, 240, -1},
        {0xd00, 0xe00, 130, 6 },
        {0xf10, 0xf50, 8,   -1},
    };
    for (int j = 0; j < s.inner_loop_count; j++)
        s.inner_loops[j] = loops[j];
    return s;
}

static void test_costs_from_the_loops(void)
{
    SassSteadyState s = merge_shaped();
    SlowPathCosts costs;
    char why[256] = "";
    EXPECT(slow_path_costs_read(&s, &costs, why, sizeof why), "%s", why);
    EXPECT(costs.sort_run == 10 && costs.sort_stage == 120 && costs.sort_pair == 120 && costs.merge_stage == 110 &&
               costs.merge_pair == 130 && costs.keep == 70 && costs.publish == 8,
           "own instructions: run %d, stage %d, pair %d, merge stage %d, pair %d, keep %d, publish %d", costs.sort_run,
           costs.sort_stage, costs.sort_pair, costs.merge_stage, costs.merge_pair, costs.keep, costs.publish);
    /* 1000 on all paths, 593 in the loops, 64 on the fast path. */
    EXPECT(costs.straight_slow == 1000 - 593 - 64, "straight-line slow code %d", costs.straight_slow);
    s.inner_loops[4].parent = -1; /* the sort only two deep */
    EXPECT(!slow_path_costs_read(&s, &costs, why, sizeof why), "a sort two deep is not version 6's");
}

/* Whole waves run at the ceiling; a batch with a partial last wave no
 * faster, and no slower than if that wave took a whole wave's time (the
 * model this one refines); the fuller the last wave, the closer the batch
 * comes to the ceiling. */
static void test_batch_share(void)
{
    const int slots = 792;
    const double ceiling = 0.9, in_flight = 1.8;
    EXPECT(fabs(slow_paths_batch_share(4 * slots, slots, ceiling, in_flight) - ceiling) < 1e-12,
           "whole waves run at the ceiling");
    double previous = 0.0;
    for (int last = 1; last < slots; last += 97) {
        int rows = slots + last;
        double share = slow_paths_batch_share(rows, slots, ceiling, in_flight);
        double whole_wave_time = ceiling * rows / (2.0 * slots);
        EXPECT(share <= ceiling + 1e-12 && share >= whole_wave_time - 1e-12,
               "%d rows: %.4f between a whole wave's time (%.4f) and the ceiling", rows, share, whole_wave_time);
        EXPECT(share >= previous - 1e-12, "%d rows: %.4f not below %.4f with fewer rows in the last wave", rows, share,
               previous);
        previous = share;
    }
    double one_row = slow_paths_batch_share(1, slots, ceiling, in_flight);
    EXPECT(fabs(one_row - in_flight / slots) < 1e-12, "one row runs at its own bytes in flight: %g", one_row);
}

int main(void)
{
    float *row = bench_logits_new(VOCAB, 1);
    test_counts_follow_the_rules(row);
    test_argmax_counts(row);
    test_step_floor_counts(row);
    test_costs_from_the_loops();
    test_batch_share();
    array_free(row);
    return test_finish();
}
