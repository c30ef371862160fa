/* How often version 6's (and version 9's) slow paths run, counted on the CPU, and what they
 * add to the instructions of its fast path.
 *
 * The instruction budget (common/instruction_budget.h) counts one pass of
 * the scan on its fast path: a float4 per lane that no logit of the warp
 * lets past the threshold. Version 6 leaves it when a lane's logit passes:
 * the warp offers its four logits (an offer step), and when its fresh
 * buffer could overflow it sorts them and merges them into its kept list
 * (a merge), which raises the row's threshold. How often depends on the
 * logits and on the order in which a row's warps raise the threshold, so
 * the counts are made by replaying the kernel's steps on the CPU, with the
 * helpers the kernel calls (kernels/softmax_topk.h): the same warps, the
 * same float4s per lane, the same vote, buffer sizes and merge rule.
 *
 * The order of the warps is the one thing the replay chooses. On a GPU a
 * row's warps run at the same time: the replay takes them in step, each
 * warp's step s after every warp's step s - 1. The CUDA emulator
 * (tests/emulator) runs one warp to its end before the next starts: the
 * replay can follow that order too, and the tests hold it to the emulated
 * kernel's own counts.
 *
 * Version 9 runs the same visit and merges on the steps it reads again
 * after its floor: step_floor_replay counts those the same way. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_SLOW_PATHS_H
#define CHAPTERS_03_SOFTMAX_TOPK_SLOW_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/sass.h"

/* The order of a row's warps: in step (a GPU's: every warp's step s
 * before any warp's step s + 1), or one after another, each to the end of
 * its scan, in the order `sequence` lists them (the emulator's). */
typedef struct {
    const int *sequence; /* NULL: in step */
} WarpOrder;

#define WARPS_IN_STEP ((WarpOrder){NULL})

/* Version 6 as its launcher sets it up for rows of `vocab` logits. */
typedef struct {
    int vocab, k;
    int warps_per_row;
    int kept_size, fresh_size; /* entries of a warp's kept list and fresh buffer */
} SharedThresholdKernel;

/* What a row's (or rows') warps did, all warps added up. */
typedef struct {
    long rows;
    long steps;       /* float4 steps: a float4 per lane, 512 bytes per warp */
    long offer_steps; /* steps whose vote let a logit through, so the warp offered its four */
    long candidates;  /* entries the offers put in fresh buffers */
    long merges;      /* sorts of a fresh buffer merged into the kept list, the one at each scan's end included */
    long end_merges;  /* of those, at a scan's end (outside the scan's loop) */
    long sorted_entries;
    /* The iterations a lane makes of each loop of the merges, added up: the
     * costs of slow_path_instructions multiply these. */
    long size_doublings;   /* the sort's size doubled from kept_size up to the candidates' count */
    long pad_iterations;   /* sentinels written, a lane every 32nd place */
    long sort_runs;        /* bitonic runs: log2 of each sort's size */
    long sort_stages;      /* compare-exchange stages: log2 n (log2 n + 1) / 2 per sort of n */
    long sort_pair_steps;  /* per lane: a stage's pairs, a lane every 32nd */
    long keep_iterations;  /* the merge's first step, a lane every 32nd entry of the kept list */
    long merge_stages;     /* the merge's stages after it: log2 kept_size */
    long merge_pair_steps; /* per lane */
    long publishes;        /* atomicMax on the row's threshold: one per merge that holds k entries */
    long tree_merges;      /* the merges of a row's warps' lists after the scan: warps_per_row - 1 a row */
    long revisited_steps;  /* version 9: the steps read again, whose maximum reaches the floor */
} SlowPathCounts;

/* Replay version 6 (k >= 2) on rows 0 .. rows-1 of `logits`, row r at
 * logits + r * vocab (its address's alignment as cudaMalloc's would be),
 * with the warps in `order`. */
SlowPathCounts slow_paths_replay(const float *logits, size_t rows, SharedThresholdKernel kernel, WarpOrder order);

/* Version 9 (k >= 2) on the same rows: `steps` counts the scan's steps,
 * which keep each step's maximum; then the floor of those maxima
 * (topk_kth_largest_key, topk_step_floor_key), and the revisits of the
 * steps that reach it, with the warps in `order`: revisited_steps, and the
 * offer steps, merges and their loops as version 6's (the revisits run its
 * code), from a threshold that starts at the floor. */
SlowPathCounts step_floor_replay(const float *logits, size_t rows, SharedThresholdKernel kernel, WarpOrder order);

/* Version 6 at k = 1, the argmax: a warp's step leaves the fast path when
 * some lane's float4 may beat that lane's best (lane_best_after). Counted
 * in offer_steps; nothing else applies, and the order of warps does not
 * matter (each lane keeps its own best). */
SlowPathCounts argmax_slow_paths_replay(const float *logits, size_t rows, int vocab, int warps_per_row);

/* The cost of each loop of a merge, read from the steady state's machine
 * code (SassSteadyState.inner_loops): a loop's own instructions, its body
 * without the loops inside it, issued once per iteration; and the
 * straight-line code of the body, run at most once per pass. */
typedef struct {
    int fast_path;     /* per step */
    int straight_slow; /* the body's instructions outside its loops, the fast path's left out: at most what a
                           slow pass adds before its loops */
    int size_doubling; /* the loop that doubles the sort's size */
    int pad;           /* the loop that writes sentinels */
    int sort_run;      /* the bitonic sort's three nested loops: runs, stages, pairs */
    int sort_stage;
    int sort_pair;
    int keep;        /* the merge's first step */
    int merge_stage; /* the merge's two nested loops: stages, pairs */
    int merge_pair;
    int publish; /* the atomicMax, a compare-and-swap loop on shared memory */
} SlowPathCosts;

/* Read the costs from version 6's steady state, whose loops are, in order:
 * the size doubling, the padding, the sort (three deep), the merge's first
 * step, the merge (two deep), the publish. False, with `why`, when the
 * machine code's loops have another shape. */
bool slow_path_costs_read(const SassSteadyState *steady, SlowPathCosts *costs, char *why, size_t why_size);

/* Warp instructions of the counted events at these costs, fast path
 * included: the scan's, and (the end merges) after it. An upper bound:
 * each loop's every iteration counted at its whole body, each slow pass's
 * straight-line code at all of it. */
double slow_path_instructions(const SlowPathCounts *counts, const SlowPathCosts *costs);

/* Version 9's: the scan's steps at its own fast path, and the revisits
 * costed as version 6's steps (the same visit, merges and publishes), at
 * version 6's costs; the floor's 32 rounds per row are left out. */
double step_floor_instructions(const SlowPathCounts *counts, int scan_fast_path, const SlowPathCosts *revisit_costs);

/* Of those, the merges' loops: sorting, merging, publishing. */
double slow_path_loop_instructions(const SlowPathCounts *counts, const SlowPathCosts *costs);

/* The share of the copy bandwidth a batch of `rows` reaches when `slots`
 * rows are resident at once. Whole waves run at `ceiling`, the budget's
 * prediction for a full GPU. The last, partial wave holds fewer rows, and
 * so fewer bytes in flight: it runs at `in_flight` (what bytes in flight
 * allow with every slot filled) times its share of the slots, by Little's
 * law, or at `ceiling` if that is lower. */
double slow_paths_batch_share(int rows, int slots, double ceiling, double in_flight);

#endif
