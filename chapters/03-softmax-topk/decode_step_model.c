#include "chapters/03-softmax-topk/decode_step_model.h"

#include <string.h>

#include "chapters/03-softmax-topk/warp_counts.h"
#include "common/alloc.h"
#include "common/instruction_budget.h"
#include "kernels/softmax_topk.h"

/* The costs, low and high. A kernel replayed in a graph still starts its
 * grid and drains it. L2 hits take some 250 cycles from the near half of
 * H100's L2 and more from the far half; a fence waits for the writes it
 * orders, an atomic is done at L2, so each is a round trip too. A
 * shared-memory load is used some 30 cycles after its issue. A lane's step
 * of a sort or a merge (two 8-byte loads, the comparison of value then
 * index, the swap) is 8 to 14 instructions. */
const DecodeStepCosts DECODE_STEP_LOW = {
    .kernel_seconds = 1.0e-6, .l2_cycles = 250, .shared_cycles = 25, .exchange_cycles = 8, .warps_per_scheduler = 2};
const DecodeStepCosts DECODE_STEP_HIGH = {
    .kernel_seconds = 2.5e-6, .l2_cycles = 450, .shared_cycles = 35, .exchange_cycles = 14, .warps_per_scheduler = 2};

/* ---- A warp's candidate buffer, replayed as kernels/softmax_topk.cu runs it */

typedef struct {
    int sorts, sizes[DECODE_STEP_MAX_SORTS_SHOWN];
    int stages, exchanges_per_lane;
} SortWork;

typedef struct {
    TopkEntry *buffer;
    int capacity, k, count;
    TopkEntry threshold;
    SortWork work;
} ReplayedBuffer;

/* warp_keep_best: pad with sentinels to topk_sort_size, sort with the
 * bitonic network, keep the best k, the k-th is the threshold. */
static void replay_keep_best(ReplayedBuffer *b)
{
    int size = topk_sort_size(b->count, b->k);
    for (int i = b->count; i < size; i++)
        b->buffer[i] = topk_sentinel();
    for (int run = 2; run <= size; run *= 2)
        for (int stride = run / 2; stride > 0; stride /= 2)
            for (int pair = 0; pair < size / 2; pair++)
                topk_bitonic_step(b->buffer, pair, run, stride);
    b->count = b->count < b->k ? b->count : b->k;
    b->threshold = b->count == b->k ? b->buffer[b->k - 1] : topk_sentinel();
    int log_size = log2_of_power_of_two(size), stages = log_size * (log_size + 1) / 2;
    if (b->work.sorts < DECODE_STEP_MAX_SORTS_SHOWN)
        b->work.sizes[b->work.sorts] = size;
    b->work.sorts++;
    b->work.stages += stages;
    /* A lane takes pairs lane, lane + 32, ... < size / 2 at every stage. */
    b->work.exchanges_per_lane += stages * per_lane(size / 2);
}

static void replay_keep_best_if_nearly_full(ReplayedBuffer *b, int offers_to_come)
{
    if (topk_buffer_needs_sort(b->count, b->capacity, b->k, b->threshold, offers_to_come))
        replay_keep_best(b);
}

/* warp_append: the threshold is the same for every lane of an offer. */
static void replay_offer(ReplayedBuffer *b, TopkEntry entry)
{
    if (topk_ranks_before(entry, b->threshold))
        b->buffer[b->count++] = entry;
}

typedef struct {
    int loads;
    SortWork sorts;
} WarpChain;

/* One warp's scan of [begin, end): warp_scan_float4s with version 3's
 * visits (member `member` of `members`): per step one vote over the warp's
 * float4s and, if a lane may hold a candidate, four offers; then, if it
 * reads them (float4_reads_scalars), the head and the tail in one scalar
 * step; then the final sort. */
static WarpChain replay_warp(const float *row, int begin, int end, int member, int members, ReplayedBuffer *b)
{
    WarpChain chain = {0};
    const float *slice = row + begin;
    int length = end - begin;
    Float4Split split = float4_split((uintptr_t)begin * sizeof(float), length);
    b->count = 0;
    b->threshold = topk_sentinel();
    b->work = (SortWork){0};
    const int step = members * WARP_LANES;
    const bool reads_scalars = float4_reads_scalars(member, members);
    const int scalar_offers = reads_scalars ? float4_scalar_count(split, length) : 0;
    for (int base = member * WARP_LANES; base < split.vectors; base += step) {
        chain.loads++;
        bool maybe = false;
        for (int v = base; v < base + WARP_LANES && v < split.vectors; v++)
            for (int e = 0; e < 4; e++)
                maybe |= topk_is_sentinel(b->threshold) || !(slice[split.head + 4 * v + e] <= b->threshold.value);
        if (!maybe)
            continue;
        for (int e = 0; e < 4; e++)
            for (int v = base; v < base + WARP_LANES && v < split.vectors; v++)
                replay_offer(b, topk_entry(slice[split.head + 4 * v + e], begin + split.head + 4 * v + e));
        replay_keep_best_if_nearly_full(b, float4_offers_at(base + step, split.vectors, 4 * WARP_LANES, scalar_offers));
    }
    if (reads_scalars) {
        bool loaded = false;
        for (int lane = 0; lane < WARP_LANES; lane++) {
            int local = float4_scalar_index(split, length, lane);
            if (local >= 0) {
                loaded = true;
                replay_offer(b, topk_entry(slice[local], begin + local));
            }
        }
        chain.loads += loaded;
    }
    replay_keep_best(b);
    chain.sorts = b->work;
    return chain;
}

/* ---- The merges -------------------------------------------------------- */

/* The rounds of block_merge_partials over `count` partials. */
static int merge_rounds(int count)
{
    int rounds = 0;
    for (int span = 1; span < count; span *= 2)
        rounds++;
    return rounds;
}

/* block_merge_partials over `count` partials of one group: per round, the
 * most merges any warp makes. The kernel deals a round's merges to the
 * warps in turn (merge_tree_target); dealt by the partial's index instead
 * (i = warp, warp + warps, ...), every merge of a round whose 2 span is a
 * multiple of warps falls to warp 0. */
int decode_step_busiest_warp_merges(int count, int warps, bool dealt_by_index)
{
    int total = 0;
    for (int span = 1; span < count; span *= 2) {
        int busiest = 0;
        for (int warp = 0; warp < warps; warp++) {
            int merges = 0;
            if (dealt_by_index) {
                for (int i = warp; i < count; i += warps)
                    merges += merge_tree_absorbs(i, span, count);
            } else {
                for (int m = warp; m < merge_tree_merges(count, span); m += warps)
                    merges++;
            }
            busiest = merges > busiest ? merges : busiest;
        }
        total += busiest;
    }
    return total;
}

int decode_step_search_merge_loads(int k)
{
    int depth = 0;
    while ((1 << depth) < k + 1)
        depth++;
    int entries_per_lane = (k + WARP_LANES - 1) / WARP_LANES;
    return 2 * entries_per_lane * depth;
}

DecodeStepCounts decode_step_counts(const float *row, DecodeStepKernel kernel)
{
    DecodeStepCounts counts = {0};
    counts.kernels = kernel.version == 4 ? 2 : 1;
    counts.slice_length = (kernel.vocab + kernel.splits - 1) / kernel.splits;
    SortWork costliest = {0};
    ReplayedBuffer b = {
        ALLOC_ARRAY((size_t)kernel.capacity, TopkEntry), kernel.capacity, kernel.k, 0, topk_sentinel(), {0}};
    for (int split = 0; split < kernel.splits; split++) {
        int begin = split * counts.slice_length < kernel.vocab ? split * counts.slice_length : kernel.vocab;
        int end = begin + counts.slice_length < kernel.vocab ? begin + counts.slice_length : kernel.vocab;
        for (int member = 0; member < kernel.block_warps; member++) {
            WarpChain chain = replay_warp(row, begin, end, member, kernel.block_warps, &b);
            counts.scan_loads = chain.loads > counts.scan_loads ? chain.loads : counts.scan_loads;
            if (chain.sorts.exchanges_per_lane > costliest.exchanges_per_lane)
                costliest = chain.sorts;
        }
    }
    array_free(b.buffer);
    counts.buffer_sorts = costliest.sorts;
    memcpy(counts.sort_sizes, costliest.sizes, sizeof counts.sort_sizes);
    counts.sort_stages = costliest.stages;
    counts.sort_exchanges_per_lane = costliest.exchanges_per_lane;
    /* warp_merge_sorted over topk_list_size(k) entries: the better of
     * each reversed pair, a lane taking every 32nd entry, then log2(size)
     * stages, a lane taking every 32nd pair. */
    int list_size = topk_list_size(kernel.k), stages = log2_of_power_of_two(list_size);
    counts.merge_steps = 1 + stages;
    counts.merge_exchanges_per_lane = per_lane(list_size) + stages * per_lane(list_size / 2);
    counts.merge_rounds = merge_rounds(kernel.block_warps) + merge_rounds(kernel.splits);
    counts.block_merges = decode_step_busiest_warp_merges(kernel.block_warps, kernel.block_warps, false) +
                          decode_step_busiest_warp_merges(kernel.splits, kernel.block_warps, false);
    /* Version 8: the partial's fence, the ticket's atomic, the merging
     * block's loads of the partials. Version 4: those loads only (the
     * first kernel's end makes the partials visible). */
    counts.round_trips_after = kernel.version == 4 ? 1 : 3;
    return counts;
}

/* Stages that each wait for shared memory once, and compare-exchanges
 * issued by a warp that shares its scheduler with others doing the same at
 * the same time (a row's warps end their scans together, and the first
 * rounds of a merge keep every warp busy). */
static double stage_cycles(int stages, int exchanges_per_lane, const DecodeStepCosts *costs)
{
    return stages * costs->shared_cycles + costs->warps_per_scheduler * exchanges_per_lane * costs->exchange_cycles;
}

double decode_step_sort_seconds(const DecodeStepCounts *counts, const DecodeStepCosts *costs)
{
    return stage_cycles(counts->sort_stages, counts->sort_exchanges_per_lane, costs) / H100_SXM.clock_hz;
}

double decode_step_seconds(const DecodeStepCounts *counts, const DecodeStepCosts *costs)
{
    /* A round's merges take each step together: one wait per step, and
     * the exchanges of all of them. */
    double merges = stage_cycles(counts->merge_rounds * counts->merge_steps,
                                 counts->block_merges * counts->merge_exchanges_per_lane, costs);
    double cycles = (counts->scan_loads + counts->round_trips_after) * costs->l2_cycles + merges;
    return counts->kernels * costs->kernel_seconds + cycles / H100_SXM.clock_hz +
           decode_step_sort_seconds(counts, costs);
}

void decode_step_print_costs(FILE *out)
{
    const DecodeStepCosts *low = &DECODE_STEP_LOW, *high = &DECODE_STEP_HIGH;
    fprintf(out,
            "The costs assumed (low-high), on an %s at %.3f GHz: a kernel replayed in a CUDA graph %.1f-%.1f "
            "microseconds; a load that hits L2, a fence or an atomic %.0f-%.0f cycles; a shared-memory load "
            "%.0f-%.0f cycles; the instructions of a lane's compare-exchange or search step %.0f-%.0f cycles, "
            "with %d warps of a block on each scheduler.\n",
            H100_SXM.name, H100_SXM.clock_hz / 1e9, low->kernel_seconds * 1e6, high->kernel_seconds * 1e6,
            low->l2_cycles, high->l2_cycles, low->shared_cycles, high->shared_cycles, low->exchange_cycles,
            high->exchange_cycles, low->warps_per_scheduler);
}
