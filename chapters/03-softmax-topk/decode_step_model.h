/* What one decode step (the top K of a single row) should cost on a GPU
 * with versions 4 and 8 of the chapter's kernels, before it runs.
 *
 * The instruction budget (common/instruction_budget.h) assumes a GPU full
 * of warps, and says little here: one row of V = 128256 floats is half a
 * megabyte, spread over fewer blocks than an H100 has SMs. What a row costs
 * is the chain of steps that wait for one another: the loads of the scan,
 * in sequence because each step's logits are used before the next are
 * read; the buffer sorts, a bitonic network whose stages each wait for the
 * last one's shared-memory stores; the list merges, whose steps do the
 * same; the global round trips between the scan
 * and the merge; and the kernels themselves.
 *
 * The counts are the code's: the slices and buffer sizes its launcher
 * chooses, and the buffer sorts of each warp found by replaying its offers
 * on the benchmark's own row, with the threshold the sorts raise. Their
 * costs are assumed (DecodeStepCosts), low and high, each said. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_DECODE_STEP_MODEL_H
#define CHAPTERS_03_SOFTMAX_TOPK_DECODE_STEP_MODEL_H

#include <stdbool.h>
#include <stdio.h>

/* A kernel as its launcher sets it up for one row. */
typedef struct {
    int version; /* 4 (two kernels) or 8 (one: the last block merges) */
    int vocab, k;
    int splits;      /* blocks on the row, one slice each */
    int capacity;    /* entries of a warp's candidate buffer, a power of two */
    int block_warps; /* warps per block, all on the slice */
} DecodeStepKernel;

enum { DECODE_STEP_MAX_SORTS_SHOWN = 8 };

/* The steps on the longest chain, counted. */
typedef struct {
    int kernels;
    int slice_length;
    int scan_loads; /* loads in sequence of the busiest warp: its float4 steps and its scalar step */
    /* The sorts of the warp whose sorts cost the most, the last one
     * included: their sizes (topk_sort_size: a power of two), their stages
     * in all (each a compare-exchange of every pair, then a wait for
     * shared memory), and the compare-exchanges a lane makes in them. */
    int buffer_sorts;
    int sort_sizes[DECODE_STEP_MAX_SORTS_SHOWN];
    int sort_stages;
    int sort_exchanges_per_lane;
    /* One list merge (warp_merge_sorted): its steps, each a wait for
     * shared memory, and the compare-exchanges a lane makes in them. */
    int merge_steps;
    int merge_exchanges_per_lane;
    /* The merge tree's rounds (the block's warps, then the last block's
     * slices), each waiting for the last, and the merges of the busiest
     * warp in them, which a round makes step by step together. */
    int merge_rounds;
    int block_merges;
    int round_trips_after; /* global: partial written and fenced, ticket, partials read */
} DecodeStepCounts;

/* Each step's cost, assumed: the low and the high end of what we expect on
 * an H100 SXM, in cycles of the clock of its model (H100_SXM,
 * common/instruction_budget.h). */
typedef struct {
    double kernel_seconds;   /* a kernel's start and end, replayed in a CUDA graph */
    double l2_cycles;        /* a load that hits L2, or a fence or an atomic, issue to completion */
    double shared_cycles;    /* a shared-memory load, issue to use */
    double exchange_cycles;  /* the instructions of one compare-exchange of a lane */
    int warps_per_scheduler; /* a block's warps that share an issue slot (8 warps, 4 schedulers) */
} DecodeStepCosts;

extern const DecodeStepCosts DECODE_STEP_LOW, DECODE_STEP_HIGH;

/* Count the chain for `kernel` on `row` (kernel.vocab floats, the row at a
 * 16-byte aligned address, as cudaMalloc gives). */
DecodeStepCounts decode_step_counts(const float *row, DecodeStepKernel kernel);

/* The counts' time under `costs`, and its parts: the sorts' share. */
double decode_step_seconds(const DecodeStepCounts *counts, const DecodeStepCosts *costs);
double decode_step_sort_seconds(const DecodeStepCounts *counts, const DecodeStepCosts *costs);

/* The merges of a block's busiest warp, all rounds, when it merges `count`
 * partials (block_merge_partials, one group): its warps take a round's
 * merges in turn, or, dealt_by_index, those whose partial index is theirs
 * modulo the warps' count. */
int decode_step_busiest_warp_merges(int count, int warps, bool dealt_by_index);

/* The dependent shared-memory loads of a lane in one merge of two lists
 * of k by binary searches (the kernels' merge before warp_merge_sorted:
 * each entry lands at its own place plus the count of the other list's
 * entries before it): ceil(k / 32) entries of each list, each placed by a
 * search of ceil(log2(k + 1)) steps. */
int decode_step_search_merge_loads(int k);

/* One line: the costs assumed, low and high. */
void decode_step_print_costs(FILE *out);

#endif
