#include "chapters/03-softmax-topk/slow_paths.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/warp_counts.h"
#include "common/alloc.h"
#include "kernels/softmax_topk.h"

enum { OFFERS_PER_STEP = 4 * WARP_LANES };

/* A warp of a row as the kernel's RowCandidates holds it. */
typedef struct {
    TopkEntry *kept, *fresh;
    int count;
    TopkEntry threshold;
    int next_base; /* the first float4 of its next step */
    bool done;
} ReplayedWarp;

typedef struct {
    const float *row;
    Float4Split split;
    SharedThresholdKernel kernel;
    uint64_t row_threshold;                                /* the key in shared memory */
    unsigned long long quota_keys[TOPK_MAX_WARPS_PER_ROW]; /* each warp's q-th best key */
    ReplayedWarp *warps;
    SlowPathCounts *counts;
    /* Version 9: the steps' keys, and the floor the revisits start from. */
    bool step_floor;
    const uint32_t *keys;
    int steps;
    uint32_t floor_key;
} ReplayedRow;

/* warp_merge_sorted of two lists of `size`: the loops' iterations. */
static void count_list_merge(SlowPathCounts *c, int size)
{
    int stages = log2_of_power_of_two(size);
    c->keep_iterations += per_lane(size);
    c->merge_stages += stages;
    c->merge_pair_steps += (long)stages * per_lane(size / 2);
}

/* warp_pad_and_sort of `count` candidates to `size`: the loops' iterations. */
static void count_sort(SlowPathCounts *c, int count, int size, int kept_size)
{
    int log_size = log2_of_power_of_two(size), stages = log_size * (log_size + 1) / 2;
    c->merges++;
    c->candidates += count;
    c->sorted_entries += size;
    c->size_doublings += log_size - log2_of_power_of_two(kept_size);
    c->pad_iterations += per_lane(size - count);
    c->sort_runs += log_size;
    c->sort_stages += stages;
    c->sort_pair_steps += (long)stages * per_lane(size / 2);
}

static void read_row_threshold(ReplayedRow *r, ReplayedWarp *w)
{
    w->threshold = topk_entry_from_key(r->row_threshold);
}

/* warp_publish_threshold: the warp's q-th best in its slot, then the
 * better of its k-th and the worst of the row's slots (atomicMax), unless
 * both are the sentinel's. */
static void publish_threshold(ReplayedRow *r, ReplayedWarp *w)
{
    const SharedThresholdKernel *kernel = &r->kernel;
    int quota = topk_warp_quota(kernel->k, kernel->warps_per_row);
    r->quota_keys[w - r->warps] = topk_entry_key(w->kept[quota - 1]);
    uint64_t kth = topk_entry_key(w->kept[kernel->k - 1]),
             worst = topk_worst_quota_key(r->quota_keys, kernel->warps_per_row), best = kth > worst ? kth : worst;
    if (best != topk_entry_key(topk_sentinel())) {
        r->row_threshold = best > r->row_threshold ? best : r->row_threshold;
        r->counts->publishes++;
    }
    read_row_threshold(r, w);
}

/* warp_merge_fresh: sort the fresh candidates, merge the best into the
 * kept list, publish (above) and read the row's threshold back. */
static void merge_fresh(ReplayedRow *r, ReplayedWarp *w)
{
    const SharedThresholdKernel *kernel = &r->kernel;
    int size = kernel->kept_size;
    while (size < w->count)
        size *= 2;
    count_sort(r->counts, w->count, size, kernel->kept_size);
    for (int i = w->count; i < size; i++)
        w->fresh[i] = topk_sentinel();
    for (int run = 2; run <= size; run *= 2)
        for (int stride = run / 2; stride > 0; stride /= 2)
            for (int pair = 0; pair < size / 2; pair++)
                topk_bitonic_step(w->fresh, pair, run, stride);
    topk_list_merge(w->kept, w->fresh, kernel->kept_size);
    count_list_merge(r->counts, kernel->kept_size);
    w->count = 0;
    publish_threshold(r, w);
}

/* warp_append: the entries that beat the threshold, in lane order. */
static void append(ReplayedWarp *w, TopkEntry entry)
{
    if (topk_ranks_before(entry, w->threshold))
        w->fresh[w->count++] = entry;
}

/* The visit of the float4s from `base` (warp_offer_float4): the vote
 * against the threshold's logit, then, if a lane's logit passes, the
 * offers of each lane's four and a merge if the next step's offers (at
 * most offers_to_come()) might not fit. */
static void offer_float4_step(ReplayedRow *r, ReplayedWarp *w, int base,
                              int (*offers_to_come)(const ReplayedRow *, const ReplayedWarp *))
{
    const float *body = r->row + r->split.head;
    int end = base + WARP_LANES < r->split.vectors ? base + WARP_LANES : r->split.vectors;
    float t = topk_entry_from_key(r->row_threshold).value;
    bool maybe = false;
    for (int i = 4 * base; i < 4 * end; i++)
        maybe |= !(body[i] < t);
    if (!maybe)
        return;
    r->counts->offer_steps++;
    read_row_threshold(r, w);
    for (int e = 0; e < 4; e++)
        for (int v = base; v < end; v++)
            append(w, topk_entry(body[4 * v + e], r->split.head + 4 * v + e));
    if (topk_buffer_needs_sort(w->count, r->kernel.fresh_size, r->kernel.k, w->threshold, offers_to_come(r, w)))
        merge_fresh(r, w);
}

/* Version 6's scan: a full step's offers while float4s are left, then the
 * head and tail's if the warp reads them. */
static int scan_offers_to_come(const ReplayedRow *r, const ReplayedWarp *w)
{
    int scalar_offers = float4_reads_scalars((int)(w - r->warps), r->kernel.warps_per_row)
                            ? float4_scalar_count(r->split, r->kernel.vocab)
                            : 0;
    return float4_offers_at(w->next_base, r->split.vectors, OFFERS_PER_STEP, scalar_offers);
}

/* A step of version 6's scan (warp_scan_shared_threshold). */
static void float4_step(ReplayedRow *r, ReplayedWarp *w)
{
    const int base = w->next_base;
    r->counts->steps++;
    w->next_base += r->kernel.warps_per_row * WARP_LANES;
    offer_float4_step(r, w, base, scan_offers_to_come);
}

/* The end of a warp's scan: the head and tail, one logit per lane, if it
 * reads them, then the merge of what is still fresh. */
static void finish_scan(ReplayedRow *r, ReplayedWarp *w)
{
    if (float4_reads_scalars((int)(w - r->warps), r->kernel.warps_per_row)) {
        read_row_threshold(r, w);
        for (int lane = 0; lane < WARP_LANES; lane++) {
            int local = float4_scalar_index(r->split, r->kernel.vocab, lane);
            if (local >= 0)
                append(w, topk_entry(r->row[local], local));
        }
    }
    merge_fresh(r, w);
    r->counts->end_merges++;
    w->done = true;
}

/* One step of warp w, or the end of its scan: false once it has ended. */
static bool advance(ReplayedRow *r, ReplayedWarp *w)
{
    if (w->done)
        return false;
    if (w->next_base < r->split.vectors)
        float4_step(r, w);
    else
        finish_scan(r, w);
    return true;
}

/* ---- Version 9: the floor of the steps' maxima ------------------------ */

/* Version 9's revisits: a full step's offers, always (warp_revisit_steps). */
static int revisit_offers_to_come(const ReplayedRow *r, const ReplayedWarp *w)
{
    (void)r;
    (void)w;
    return OFFERS_PER_STEP;
}

/* Each step's key as warp_scan_step_maxima keeps it, and whether the row
 * holds a NaN (which makes its online sum NaN). */
static bool step_keys(const ReplayedRow *r, int steps, uint32_t *keys)
{
    const float *body = r->row + r->split.head;
    for (int s = 0; s < steps; s++) {
        keys[s] = 0;
        for (int v = s * WARP_LANES; v < (s + 1) * WARP_LANES && v < r->split.vectors; v++) {
            const float *q = body + 4 * v;
            uint32_t key = topk_radix_key(fmaxf(fmaxf(q[0], q[1]), fmaxf(q[2], q[3])));
            keys[s] = key > keys[s] ? key : keys[s];
        }
    }
    bool nan = false;
    for (int i = 0; i < r->kernel.vocab; i++)
        nan |= isnan(r->row[i]);
    return nan;
}

/* One revisit of warp w (its next step whose key reaches the floor), or
 * the end of its revisits: false once they have ended. w->next_base counts
 * the warp's own steps, member + i members for i = 0, 1, ... */
static bool advance_revisit(ReplayedRow *r, ReplayedWarp *w)
{
    const int member = (int)(w - r->warps), members = r->kernel.warps_per_row;
    const int mine = topk_member_steps(r->steps, member, members);
    if (w->done)
        return false;
    while (w->next_base < mine && r->keys[member + w->next_base * members] < r->floor_key)
        w->next_base++;
    if (w->next_base < mine) {
        r->counts->revisited_steps++;
        offer_float4_step(r, w, (member + w->next_base * members) * WARP_LANES, revisit_offers_to_come);
        w->next_base++;
    } else {
        finish_scan(r, w);
    }
    return true;
}

/* Version 9's scan: the steps' keys, the floor, and the threshold it sets. */
static void take_the_floor(ReplayedRow *r, uint32_t *keys)
{
    r->steps = topk_float4_steps(r->split.vectors);
    bool nan = step_keys(r, r->steps, keys);
    r->keys = keys;
    r->floor_key = topk_step_floor_key(topk_kth_largest_key(keys, r->steps, r->kernel.k), r->steps, r->kernel.k, nan);
    r->counts->steps += r->steps;
    r->row_threshold = topk_floor_entry_key(r->floor_key);
}

static bool advance_warp(ReplayedRow *r, ReplayedWarp *w)
{
    return r->step_floor ? advance_revisit(r, w) : advance(r, w);
}

/* A row's warps from their start (version 6's scan, or version 9's
 * revisits after take_the_floor), in `order`, then the tree that merges
 * their lists. */
static void replay_row(ReplayedRow *r, WarpOrder order)
{
    const int warps = r->kernel.warps_per_row;
    if (!r->step_floor)
        r->row_threshold = topk_entry_key(topk_sentinel());
    for (int m = 0; m < TOPK_MAX_WARPS_PER_ROW; m++)
        r->quota_keys[m] = topk_entry_key(topk_sentinel());
    for (int m = 0; m < warps; m++) {
        ReplayedWarp *w = &r->warps[m];
        topk_fill_sentinels(w->kept, r->kernel.kept_size);
        w->count = 0;
        read_row_threshold(r, w);
        w->next_base = r->step_floor ? 0 : m * WARP_LANES;
        w->done = false;
    }
    if (order.sequence == NULL) {
        bool any = true;
        while (any) {
            any = false;
            for (int m = 0; m < warps; m++)
                any |= advance_warp(r, &r->warps[m]);
        }
    } else {
        for (int k = 0; k < warps; k++) {
            ReplayedWarp *w = &r->warps[order.sequence[k]];
            while (advance_warp(r, w)) {
            }
        }
    }
    /* block_merge_partials: the row's warps' lists, merged in a tree. */
    for (int m = 1; m < warps; m++) {
        count_list_merge(r->counts, topk_list_size(r->kernel.k));
        r->counts->tree_merges++;
    }
}

static SlowPathCounts replay_rows(const float *logits, size_t rows, SharedThresholdKernel kernel, WarpOrder order,
                                  bool step_floor)
{
    SlowPathCounts counts = {.rows = (long)rows};
    const int warps = kernel.warps_per_row;
    ReplayedWarp *w = ALLOC_ARRAY((size_t)warps, ReplayedWarp);
    TopkEntry *buffers = ALLOC_ARRAY((size_t)warps * (size_t)(kernel.kept_size + kernel.fresh_size), TopkEntry);
    uint32_t *keys = ALLOC_ARRAY((size_t)topk_step_keys_per_row(kernel.vocab) + 1, uint32_t);
    for (int m = 0; m < warps; m++) {
        w[m].kept = buffers + (size_t)m * (size_t)(kernel.kept_size + kernel.fresh_size);
        w[m].fresh = w[m].kept + kernel.kept_size;
    }
    for (size_t row = 0; row < rows; row++) {
        size_t offset = row * (size_t)kernel.vocab;
        ReplayedRow r = {.row = logits + offset,
                         .split = float4_split(offset * sizeof(float), kernel.vocab),
                         .kernel = kernel,
                         .warps = w,
                         .counts = &counts,
                         .step_floor = step_floor};
        if (step_floor)
            take_the_floor(&r, keys);
        replay_row(&r, order);
    }
    array_free(keys);
    array_free(buffers);
    array_free(w);
    return counts;
}

SlowPathCounts slow_paths_replay(const float *logits, size_t rows, SharedThresholdKernel kernel, WarpOrder order)
{
    return replay_rows(logits, rows, kernel, order, false);
}

SlowPathCounts step_floor_replay(const float *logits, size_t rows, SharedThresholdKernel kernel, WarpOrder order)
{
    return replay_rows(logits, rows, kernel, order, true);
}

/* lane_best_after's test: can this float4 change the lane's best? The NaN
 * test reads the lane's online sum, which a NaN makes NaN for good. */
static bool may_beat(TopkEntry best, const float *q, bool seen_nan)
{
    float max = fmaxf(fmaxf(q[0], q[1]), fmaxf(q[2], q[3]));
    return !(max <= best.value) || (seen_nan && !isnan(best.value)) || topk_is_sentinel(best);
}

SlowPathCounts argmax_slow_paths_replay(const float *logits, size_t rows, int vocab, int warps_per_row)
{
    SlowPathCounts counts = {.rows = (long)rows};
    TopkEntry best[WARP_LANES];
    bool seen_nan[WARP_LANES];
    for (size_t row = 0; row < rows; row++) {
        size_t offset = row * (size_t)vocab;
        Float4Split split = float4_split(offset * sizeof(float), vocab);
        const float *body = logits + offset + split.head;
        for (int m = 0; m < warps_per_row; m++) {
            for (int lane = 0; lane < WARP_LANES; lane++) {
                best[lane] = topk_sentinel();
                seen_nan[lane] = false;
            }
            for (int base = m * WARP_LANES; base < split.vectors; base += warps_per_row * WARP_LANES) {
                bool slow = false;
                for (int lane = 0; lane < WARP_LANES && base + lane < split.vectors; lane++) {
                    const float *q = body + 4 * (base + lane);
                    seen_nan[lane] |= isnan(q[0]) | isnan(q[1]) | isnan(q[2]) | isnan(q[3]);
                    if (!may_beat(best[lane], q, seen_nan[lane]))
                        continue;
                    slow = true;
                    for (int e = 0; e < 4; e++)
                        if (topk_ranks_before(topk_entry(q[e], split.head + 4 * (base + lane) + e), best[lane]))
                            best[lane] = topk_entry(q[e], split.head + 4 * (base + lane) + e);
                }
                counts.steps++;
                counts.offer_steps += slow;
            }
        }
    }
    return counts;
}

/* ---- The costs, from the machine code --------------------------------- */

static int own_instructions(const SassSteadyState *s, int loop)
{
    int own = s->inner_loops[loop].instructions;
    for (int j = 0; j < s->inner_loop_count; j++)
        if (s->inner_loops[j].parent == loop)
            own -= s->inner_loops[j].instructions;
    return own;
}

static int child_of(const SassSteadyState *s, int loop)
{
    for (int j = 0; j < s->inner_loop_count; j++)
        if (s->inner_loops[j].parent == loop)
            return j;
    return -1;
}

/* How deep the loops inside `loop` go: 1 for a loop with none. */
static int depth(const SassSteadyState *s, int loop)
{
    int deepest = 0;
    for (int j = 0; j < s->inner_loop_count; j++)
        if (s->inner_loops[j].parent == loop) {
            int d = depth(s, j);
            deepest = d > deepest ? d : deepest;
        }
    return 1 + deepest;
}

bool slow_path_costs_read(const SassSteadyState *steady, SlowPathCosts *costs, char *why, size_t why_size)
{
    /* The loops directly in the body, and how deep each goes. */
    int top[SASS_MAX_INNER_LOOPS], depths[SASS_MAX_INNER_LOOPS], n = 0, straight = steady->instructions_on_all_paths;
    for (int j = 0; j < steady->inner_loop_count; j++)
        if (steady->inner_loops[j].parent < 0) {
            top[n] = j;
            depths[n++] = depth(steady, j);
            straight -= steady->inner_loops[j].instructions;
        }
    static const int expected[] = {1, 1, 3, 1, 2, 1};
    const int roles = (int)(sizeof expected / sizeof expected[0]);
    bool shaped = n == roles;
    for (int i = 0; shaped && i < roles; i++)
        shaped = depths[i] == expected[i];
    if (!shaped) {
        snprintf(why, why_size,
                 "the steady state has %d loops in its body, not the six (one, one, three deep, one, two deep, "
                 "one) of version 6's merge",
                 n);
        return false;
    }
    int sort = top[2], sort_stage = child_of(steady, sort), merge = top[4];
    *costs = (SlowPathCosts){
        .fast_path = steady->instructions,
        .straight_slow = straight - steady->instructions,
        .size_doubling = own_instructions(steady, top[0]),
        .pad = own_instructions(steady, top[1]),
        .sort_run = own_instructions(steady, sort),
        .sort_stage = own_instructions(steady, sort_stage),
        .sort_pair = own_instructions(steady, child_of(steady, sort_stage)),
        .keep = own_instructions(steady, top[3]),
        .merge_stage = own_instructions(steady, merge),
        .merge_pair = own_instructions(steady, child_of(steady, merge)),
        .publish = own_instructions(steady, top[5]),
    };
    return true;
}

double slow_path_loop_instructions(const SlowPathCounts *c, const SlowPathCosts *k)
{
    return (double)c->size_doublings * k->size_doubling + (double)c->pad_iterations * k->pad +
           (double)c->sort_runs * k->sort_run + (double)c->sort_stages * k->sort_stage +
           (double)c->sort_pair_steps * k->sort_pair + (double)c->keep_iterations * k->keep +
           (double)c->merge_stages * k->merge_stage + (double)c->merge_pair_steps * k->merge_pair +
           (double)c->publishes * k->publish;
}

double slow_path_instructions(const SlowPathCounts *c, const SlowPathCosts *k)
{
    double slow_passes = (double)(c->offer_steps + c->end_merges + c->tree_merges);
    return (double)c->steps * k->fast_path + slow_passes * k->straight_slow + slow_path_loop_instructions(c, k);
}

double step_floor_instructions(const SlowPathCounts *c, int scan_fast_path, const SlowPathCosts *revisit_costs)
{
    SlowPathCounts revisits = *c;
    revisits.steps = c->revisited_steps;
    return (double)c->steps * scan_fast_path + slow_path_instructions(&revisits, revisit_costs);
}

double slow_paths_batch_share(int rows, int slots, double ceiling, double in_flight)
{
    int whole_waves = rows / slots, last = rows % slots;
    double last_wave_share = in_flight * last / slots;
    last_wave_share = last_wave_share < ceiling ? last_wave_share : ceiling;
    double time = (double)whole_waves * slots / ceiling + (last > 0 ? last / last_wave_share : 0.0);
    return rows / time;
}
