#include "softmax_topk.h"

#include <math.h>
#include <stdlib.h>

#include "common/alloc.h"

const char *cpu_version_name(CpuVersion version)
{
    switch (version) {
    case CPU_NAIVE:
        return "naive";
    case CPU_ONLINE:
        return "online";
    case CPU_FUSED:
        return "fused";
    }
    return "?";
}

RowScratch row_scratch_new(CpuVersion version, size_t vocab, int k)
{
    RowScratch scratch = {NULL, ALLOC_ARRAY(TopkEntry, topk_collector_storage(k))};
    if (version == CPU_NAIVE) {
        scratch.probabilities = ALLOC_ARRAY(float, vocab);
    }
    return scratch;
}

void row_scratch_free(RowScratch *scratch)
{
    array_free(scratch->probabilities);
    array_free(scratch->candidates);
    *scratch = (RowScratch){NULL, NULL};
}

// ANCHOR: offer_each_logit
/* Offer logits begin .. end-1 in order. Once the collector is full, an
 * entry gets in only with a logit above the threshold's (an equal one comes
 * later, so ranks after), or as a NaN: !(x <= t) is that test. */
static void offer_all(TopkCollector *top, const float *logits, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++) {
        if (!(logits[i] <= top->threshold.value) || topk_is_sentinel(top->threshold)) {
            topk_collector_offer(top, topk_entry(logits[i], (int32_t)i));
        }
    }
}
// ANCHOR_END: offer_each_logit

enum { OFFER_GROUP = 16 };

// ANCHOR: offer_groups_above_threshold
/* The same, but 16 logits are first tested against the threshold at once
 * (one vector comparison), and only a group with a logit above it is
 * offered one by one: in a chunk that may hold a candidate, most groups
 * still hold none. */
static void offer_groups(TopkCollector *top, const float *logits, size_t begin, size_t end)
{
    for (size_t group = begin; group < end; group += OFFER_GROUP) {
        size_t group_end = end - group < OFFER_GROUP ? end : group + OFFER_GROUP;
        float threshold = top->threshold.value;
        int above = topk_is_sentinel(top->threshold);
#pragma omp simd reduction(| : above)
        for (size_t i = group; i < group_end; i++) {
            above |= !(logits[i] <= threshold);
        }
        if (above) {
            offer_all(top, logits, group, group_end);
        }
    }
}
// ANCHOR_END: offer_groups_above_threshold

// ANCHOR: compute_softmax_in_three_passes
static const TopkEntry *naive_row(const float *logits, size_t vocab, TopkCollector *top, float *probabilities)
{
    float max = -INFINITY;
    for (size_t i = 0; i < vocab; i++) {
        max = logits[i] > max ? logits[i] : max;
    }
    float sum = 0.0f;
    for (size_t i = 0; i < vocab; i++) {
        sum += softmax_weight(logits[i], max);
    }
    for (size_t i = 0; i < vocab; i++) {
        probabilities[i] = softmax_weight(logits[i], max) / sum;
        topk_collector_offer(top, topk_entry(logits[i], (int32_t)i));
    }
    return topk_collector_finish(top);
}
// ANCHOR_END: compute_softmax_in_three_passes

// ANCHOR: compute_online_then_select
static const TopkEntry *online_row(const float *logits, size_t vocab, TopkCollector *top, SoftmaxState *state)
{
    *state = softmax_state_empty();
    for (size_t i = 0; i < vocab; i++) {
        *state = softmax_state_push(*state, logits[i]);
    }
    offer_all(top, logits, 0, vocab);
    return topk_collector_finish(top);
}
// ANCHOR_END: compute_online_then_select

// ANCHOR: summarise_chunk_with_vectors
SoftmaxState chunk_state(const float *logits, int n)
{
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int i = 0; i < n; i++) {
        max = logits[i] > max ? logits[i] : max;
    }
    if (max == INFINITY) {
        /* inf - inf is NaN: let the scalar update count the infinities. */
        SoftmaxState state = softmax_state_empty();
        for (int i = 0; i < n; i++) {
            state = softmax_state_push(state, logits[i]);
        }
        return state;
    }
    /* All -inf (or NaN): every weight is exp(-inf) = 0, and a NaN stays. */
    float reference = max == -INFINITY ? 0.0f : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        sum += softmax_exp(logits[i] - reference);
    }
    return (SoftmaxState){max, sum};
}
// ANCHOR_END: summarise_chunk_with_vectors

/* 256 logits: 1 KiB, in L1 for the second look, and long enough that the
 * two exps of the merge and the threshold test vanish per logit. */
enum { FUSED_CHUNK = 256 };

// ANCHOR: skip_chunks_without_candidates
/* Can this chunk hold an entry of the top K? Not if its largest logit is at
 * most the threshold's: an equal logit here has a larger index, so it ranks
 * after. But a NaN (which the max ignores) always might, and so might -inf
 * while the collector is not yet full. */
static bool chunk_may_hold_candidates(SoftmaxState chunk, TopkEntry threshold)
{
    return chunk.max > threshold.value || isnan(chunk.sum) || topk_is_sentinel(threshold);
}
// ANCHOR_END: skip_chunks_without_candidates

/* The hardware prefetcher keeps only a little ahead of a loop this busy
 * with arithmetic; asking for the logits a few chunks ahead keeps the
 * memory busy while the core computes. (A prefetch never faults, but the
 * address must stay inside the row to be valid C.) */
enum { PREFETCH_AHEAD = 8 * FUSED_CHUNK, CACHE_LINE_FLOATS = 16 };

static void prefetch_chunk_ahead(const float *logits, size_t begin, size_t vocab)
{
    size_t from = begin + PREFETCH_AHEAD, to = from + FUSED_CHUNK < vocab ? from + FUSED_CHUNK : vocab;
    for (size_t i = from; i < to; i += CACHE_LINE_FLOATS) {
        __builtin_prefetch(logits + i);
    }
}

// ANCHOR: fuse_softmax_and_topk_in_one_pass
static const TopkEntry *fused_row(const float *logits, size_t vocab, TopkCollector *top, SoftmaxState *state)
{
    *state = softmax_state_empty();
    for (size_t begin = 0; begin < vocab; begin += FUSED_CHUNK) {
        size_t end = vocab - begin < FUSED_CHUNK ? vocab : begin + FUSED_CHUNK;
        prefetch_chunk_ahead(logits, begin, vocab);
        SoftmaxState chunk = chunk_state(logits + begin, (int)(end - begin));
        *state = softmax_state_merge(*state, chunk);
        if (chunk_may_hold_candidates(chunk, top->threshold)) {
            offer_groups(top, logits, begin, end);
        }
    }
    return topk_collector_finish(top);
}
// ANCHOR_END: fuse_softmax_and_topk_in_one_pass

void softmax_topk_row(CpuVersion version, const float *logits, size_t vocab, int k, RowScratch *scratch,
                      float *probs, int64_t *indices)
{
    TopkCollector top;
    topk_collector_init(&top, k, scratch->candidates);
    SoftmaxState state;
    const TopkEntry *best;
    switch (version) {
    case CPU_NAIVE:
        best = naive_row(logits, vocab, &top, scratch->probabilities);
        for (int j = 0; j < k; j++) {
            probs[j] = scratch->probabilities[best[j].index];
            indices[j] = best[j].index;
        }
        return;
    case CPU_ONLINE:
        best = online_row(logits, vocab, &top, &state);
        break;
    case CPU_FUSED:
    default:
        best = fused_row(logits, vocab, &top, &state);
        break;
    }
    // ANCHOR: normalise_only_the_winners
    for (int j = 0; j < k; j++) {
        probs[j] = softmax_probability(state, best[j].value);
        indices[j] = best[j].index;
    }
    // ANCHOR_END: normalise_only_the_winners
}

void softmax_topk_rows(CpuVersion version, const float *logits, size_t rows, size_t vocab, int k, int threads,
                       float *probs, int64_t *indices)
{
#pragma omp parallel num_threads(threads)
    {
        RowScratch scratch = row_scratch_new(version, vocab, k);
#pragma omp for schedule(static)
        for (size_t row = 0; row < rows; row++) {
            softmax_topk_row(version, logits + row * vocab, vocab, k, &scratch, probs + row * (size_t)k,
                             indices + row * (size_t)k);
        }
        row_scratch_free(&scratch);
    }
}

static int compare_ranks(const void *a, const void *b)
{
    TopkEntry x = *(const TopkEntry *)a, y = *(const TopkEntry *)b;
    return topk_ranks_before(x, y) ? -1 : topk_ranks_before(y, x) ? 1 : 0;
}

/* exp(x - max) in double, with the limits of softmax_weight. */
static double reference_weight(double x, double max)
{
    if (x == max) {
        return max == -INFINITY ? 0.0 : 1.0;
    }
    return exp(x - max);
}

void softmax_topk_reference(const float *logits, size_t vocab, int k, double *probs, int64_t *indices)
{
    TopkEntry *sorted = ALLOC_ARRAY(TopkEntry, vocab);
    double max = -INFINITY;
    for (size_t i = 0; i < vocab; i++) {
        sorted[i] = topk_entry(logits[i], (int32_t)i);
        max = logits[i] > max ? logits[i] : max;
    }
    qsort(sorted, vocab, sizeof *sorted, compare_ranks);
    double sum = 0.0;
    for (size_t i = 0; i < vocab; i++) {
        sum += reference_weight(logits[i], max);
    }
    for (int j = 0; j < k; j++) {
        probs[j] = reference_weight(sorted[j].value, max) / sum;
        indices[j] = sorted[j].index;
    }
    array_free(sorted);
}
