#include "chapters/03-softmax-topk/softmax_topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "chapters/03-softmax-topk/exp16.h"
#include "common/alloc.h"
#include "kernels/bf16.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"

const char *cpu_version_name(CpuVersion version)
{
    /* The versions count from 1 (the command line's numbers): names[0] is unused. */
    static const char *const names[] = {[CPU_NAIVE] = "naive", [CPU_ONLINE] = "online", [CPU_FUSED] = "fused"};
    if (version < CPU_NAIVE || version > CPU_FUSED)
        return "?";
    return names[version];
}

StoredLogits float32_logits(const float *logits)
{
    return (StoredLogits){logits, LOGITS_FLOAT32};
}

size_t logits_type_size(LogitsType type)
{
    return type == LOGITS_FLOAT32 ? sizeof(float) : sizeof(uint16_t);
}

// ANCHOR: widen_one_logit
/* Logit i of a chunk stored as `type`, as a float. always_inline: called
 * with a constant type, the switch disappears. */
static inline __attribute__((always_inline)) float logit_at(const void *chunk, LogitsType type, int i)
{
    switch (type) {
    case LOGITS_FLOAT16:
        return half_to_float(((const uint16_t *)chunk)[i]);
    case LOGITS_BFLOAT16:
        return bf16_to_float(((const uint16_t *)chunk)[i]);
    case LOGITS_FLOAT32:
    default:
        return ((const float *)chunk)[i];
    }
}
// ANCHOR_END: widen_one_logit

#if defined(EXP16_AVX512)
/* Logits i .. i + 15 of a chunk stored as `type`, as floats in a register:
 * fp16 widened by the processor (vcvtph2ps), bf16 by moving its 16 bits to
 * the top of a float's 32. */
static inline __attribute__((always_inline)) __m512 logits16_at(const void *chunk, LogitsType type, int i)
{
    const __m256i *halves = (const __m256i *)((const uint16_t *)chunk + i);
    switch (type) {
    case LOGITS_FLOAT16:
        return _mm512_cvtph_ps(_mm256_loadu_si256(halves));
    case LOGITS_BFLOAT16:
        return floats16_from_bf16s(_mm256_loadu_si256(halves));
    case LOGITS_FLOAT32:
    default:
        return _mm512_loadu_ps((const float *)chunk + i);
    }
}
#endif

// ANCHOR: widen_a_chunk_of_logits
void widen_logits(StoredLogits logits, size_t first, size_t n, float *out)
{
    const uint16_t *bits = (const uint16_t *)logits.data + first;
    switch (logits.type) {
    case LOGITS_FLOAT16:
        for (size_t i = 0; i < n; i++) {
            out[i] = half_to_float(bits[i]);
        }
        return;
    case LOGITS_BFLOAT16:
        for (size_t i = 0; i < n; i++) {
            out[i] = bf16_to_float(bits[i]);
        }
        return;
    case LOGITS_FLOAT32:
    default:
        memcpy(out, (const float *)logits.data + first, n * sizeof(float));
        return;
    }
}
// ANCHOR_END: widen_a_chunk_of_logits

/* 512 logits: 2 KiB, still in L1 when the chunk is summed again for a new
 * maximum, and long enough that the work per chunk, across the lanes,
 * nearly vanishes per logit. (Chunks of 256, with twice that work per
 * logit, made the pass on a row in L2 a tenth or more slower, in `bench`;
 * a chunk summed again costs twice as much now, but only about
 * 1 + ln(chunks) of a row's chunks are.) */
enum { FUSED_CHUNK = 512 };

/* Logits are compared with the threshold 32 to a block (a mask of 32
 * bits), and marked 64 to a word. */
enum { OFFER_BLOCK = 32, MARK_BITS = 64 };
_Static_assert(LANES % MARK_BITS == 0 && FUSED_CHUNK % MARK_BITS == 0, "rows are marked in whole words");

RowScratch row_scratch_new(CpuVersion version, size_t vocab, int k)
{
    RowScratch scratch = {NULL, ALLOC_ARRAY(topk_collector_storage(k), TopkEntry), NULL, NULL, NULL, NULL, NULL};
    if (version == CPU_NAIVE) {
        scratch.probabilities = ALLOC_ARRAY(vocab, float);
    }
    if (version == CPU_FUSED) {
        scratch.chunk_maxima = ALLOC_ARRAY((vocab + FUSED_CHUNK - 1) / FUSED_CHUNK, float);
        scratch.step_maxima = ALLOC_ARRAY((vocab / LANES + 1) * MAXIMA_LANES, float);
        scratch.marked_steps = ALLOC_ARRAY(vocab / LANES + 1, uint32_t);
        scratch.marks = ALLOC_ARRAY(vocab / MARK_BITS + 1, uint64_t);
        scratch.marked_words = ALLOC_ARRAY(vocab / MARK_BITS + 1, uint32_t);
    }
    return scratch;
}

void row_scratch_free(RowScratch *scratch)
{
    array_free(scratch->probabilities);
    array_free(scratch->candidates);
    array_free(scratch->chunk_maxima);
    array_free(scratch->step_maxima);
    array_free(scratch->marked_steps);
    array_free(scratch->marks);
    array_free(scratch->marked_words);
    *scratch = (RowScratch){NULL, NULL, NULL, NULL, NULL, NULL, NULL};
}

// ANCHOR: offer_each_logit
/* Offer n logits in order: values[i] is logit first + i of the row. Once
 * the collector is full, an entry gets in only with a logit above the
 * threshold's (an equal one comes later, so ranks after), or as a NaN:
 * !(x <= t) is that test. */
static void offer_all(TopkCollector *top, const float *values, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!(values[i] <= top->threshold.value) || topk_is_sentinel(top->threshold)) {
            topk_collector_offer(top, topk_entry(values[i], (int32_t)(first + i)));
        }
    }
}
// ANCHOR_END: offer_each_logit

// ANCHOR: compare_a_block_with_the_threshold
/* Bit i is set if logit i of the block is at least the threshold: equal may
 * be enough, when the threshold is the floor (see fused_row). The rows
 * that reach this have no NaN (see fused_row). With AVX-512 a comparison
 * of 16 floats leaves its 16 answers as the bits of a mask register, so
 * the block's mask is two comparisons and a shift. gcc makes the portable
 * loop into two comparisons too, but then turns each answer into its bit
 * in a vector lane of its own and ORs the lanes together, a chain of
 * shuffles that the mask register does not need. */
static uint32_t reaching_threshold_mask(const float *block, float threshold)
{
#if defined(__AVX512F__)
    __m512 least = _mm512_set1_ps(threshold);
    uint32_t low = _mm512_cmp_ps_mask(_mm512_loadu_ps(block), least, _CMP_GE_OQ);
    uint32_t high = _mm512_cmp_ps_mask(_mm512_loadu_ps(block + 16), least, _CMP_GE_OQ);
    return low | high << 16;
#else
    uint32_t mask = 0;
    for (int i = 0; i < OFFER_BLOCK; i++) {
        mask |= (uint32_t)(block[i] >= threshold) << i;
    }
    return mask;
#endif
}
// ANCHOR_END: compare_a_block_with_the_threshold

// ANCHOR: mark_logits_that_reach_threshold
/* The marks of a row: bit i of words[w] for logit 64 w + i, and the
 * numbers of the words that hold a mark, listed[0 .. count-1], in order. */
typedef struct {
    uint64_t *words;
    uint32_t *listed;
    size_t count;
} RowMarks;

/* The candidates are found in two loops. The first marks the n logits
 * values[0 .. n-1] (logits first .. first + n - 1 of the row, n and first
 * multiples of 64) that reach the threshold, two blocks to a word, and
 * lists each word that holds a mark: its number is written, and the count
 * moves on only past a word with a mark. It has no branch, so its loads
 * stream from L2 at the cache's pace. Offering each block's logits as soon
 * as its mask came out, as a first version did, put a branch between the
 * loads that the processor guessed wrong at about every candidate, and
 * each wrong guess threw away the loads it had started past the branch. */
static void mark_reaching_threshold(RowMarks *marks, size_t first, const float *values, size_t n, float threshold)
{
    for (size_t w = 0; w < n / MARK_BITS; w++) {
        uint64_t word = reaching_threshold_mask(values + MARK_BITS * w, threshold) |
                        (uint64_t)reaching_threshold_mask(values + MARK_BITS * w + OFFER_BLOCK, threshold)
                            << OFFER_BLOCK;
        size_t number = first / MARK_BITS + w;
        marks->words[number] = word;
        marks->listed[marks->count] = (uint32_t)number;
        marks->count += word != 0;
    }
}

// ANCHOR_END: mark_logits_that_reach_threshold

// ANCHOR: offer_only_logits_that_reach_threshold
/* The second offers the marked logits, word by listed word, lowest bit
 * first: in the order of the row. One loop over the words of the whole
 * row: a loop over each chunk's words would end at a different count in
 * each chunk, a wrong guess per chunk. The marks were made with the
 * threshold of that time, the floor: if the collector has room at its
 * floor for them all, each is taken without a comparison. Else the
 * threshold may rise as they come, and each is offered, compared again. */
static size_t marked_logits(const RowMarks *marks)
{
    size_t count = 0;
    for (size_t j = 0; j < marks->count; j++) {
        count += (size_t)__builtin_popcountll(marks->words[marks->listed[j]]);
    }
    return count;
}

static void offer_marked(TopkCollector *top, StoredLogits row, const RowMarks *marks)
{
    bool take_all = marked_logits(marks) <= (size_t)topk_collector_room_at_floor(top);
    for (size_t j = 0; j < marks->count; j++) {
        int word = (int)marks->listed[j];
        for (uint64_t mask = marks->words[word]; mask != 0; mask &= mask - 1) {
            int at = MARK_BITS * word + __builtin_ctzll(mask);
            TopkEntry entry = topk_entry(logit_at(row.data, row.type, at), at);
            if (take_all) {
                topk_collector_take(top, entry);
            } else {
                topk_collector_offer(top, entry);
            }
        }
    }
}
// ANCHOR_END: offer_only_logits_that_reach_threshold

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

LaneSums lane_sums_empty(void)
{
    LaneSums empty = {.max = -INFINITY};
    for (int group = 0; group < FLOOR_GROUPS; group++) {
        for (int lane = 0; lane < MAXIMA_LANES; lane++) {
            empty.maxima[group][lane] = -INFINITY;
        }
    }
    return empty;
}

// ANCHOR: prefetch_ahead_into_l2
/* The hardware prefetcher keeps only a little ahead of a loop this busy
 * with arithmetic, and stops at every 4 KiB page. So the loop asks for the
 * lines itself, 16 chunks ahead, into L2: that starts the slow trip to
 * memory early, and from L2 on the hardware keeps up. (Asking for each
 * line into L1 as well, 4 chunks ahead, was slower: 16 more instructions a
 * chunk, and the fused pass read less of the bandwidth with them, on one
 * thread and on two, at K = 8 and 64, in `bench`.)
 * `readable` is how many bytes from `chunk` on may be read: the rest of
 * the row and the rows after it, so that the next row is on its way while
 * this one ends; a chunk is `size` bytes (FUSED_CHUNK logits of 4 or 2).
 * (A prefetch never faults, but its address must stay inside the array to
 * be valid C.) */
enum { CACHE_LINE = 64, AHEAD_CHUNKS = 16 };

/* Where the chunk AHEAD_CHUNKS after `chunk` starts, or NULL where that
 * chunk is not all readable. */
static inline const char *chunk_ahead(const char *chunk, size_t readable, size_t size)
{
    size_t ahead = AHEAD_CHUNKS * size;
    return readable >= ahead + size ? chunk + ahead : NULL;
}
// ANCHOR_END: prefetch_ahead_into_l2

// ANCHOR: spread_the_prefetches
/* A prefetch that goes to memory holds one of the core's few line fill
 * buffers (a dozen or two) until its line arrives, and so does every load
 * that finds its line in L2 rather than L1, for its short trip up. Asked
 * for all at once at the start of a chunk, the 32 lines of a chunk ahead
 * (16 of a 16-bit one) take them, and the chunk's own loads from L2 wait
 * behind trips to memory. So each step of the loop over a chunk asks for
 * as many bytes of the chunk ahead as it reads itself: bytes first ..
 * first + count - 1 from `ahead` on, into L2; nothing where ahead is NULL.
 * always_inline: to gcc, a function that only prefetches has no effect,
 * and it deletes the calls. */
static inline __attribute__((always_inline)) void prefetch_lines(const char *ahead, size_t first, size_t count)
{
    if (ahead != NULL) {
        for (size_t i = first; i < first + count; i += CACHE_LINE) {
            __builtin_prefetch(ahead + i, 0, 1);
        }
    }
}

/* The whole chunk AHEAD_CHUNKS ahead at once, where no loop over a chunk
 * follows to spread its lines across. */
static inline __attribute__((always_inline)) void prefetch_ahead(const char *chunk, size_t readable, size_t size)
{
    prefetch_lines(chunk_ahead(chunk, readable, size), 0, size);
}
// ANCHOR_END: spread_the_prefetches

#if defined(EXP16_AVX512)
// ANCHOR: add_a_chunk_sixteen_lanes_at_a_time
/* add_weights_below's loop with AVX-512, written out: the same lanes and
 * the same sums, in registers, and the exponential of exp16.h, whose table
 * lookup gcc does not make of softmax_exp_in_sum. The step's four
 * registers' maxima merge lane by lane into one: MAXIMA_LANES is 16.
 * max_ps(x, m) is m when x is NaN, as x > m ? x : m is. */
_Static_assert(MAXIMA_LANES == 16, "one AVX-512 register of maxima");

static inline __attribute__((always_inline)) void add_weights_below16(float sums[LANES], float maxima[MAXIMA_LANES],
                                                                      float *step_maxima, const void *chunk,
                                                                      LogitsType type, int n, float reference,
                                                                      const char *ahead)
{
    enum { VECTORS = LANES / 16 };
    const Exp16Powers powers = exp16_powers();
    const __m512 subtrahend = _mm512_set1_ps(reference);
    __m512 sum[VECTORS], top = _mm512_set1_ps(-INFINITY);
    for (int v = 0; v < VECTORS; v++) {
        sum[v] = _mm512_loadu_ps(sums + 16 * v);
    }
    size_t size = logits_type_size(type);
    for (int i = 0; i < n; i += LANES) {
        prefetch_lines(ahead, (size_t)i * size, LANES * size);
        __m512 step = _mm512_set1_ps(-INFINITY);
        for (int v = 0; v < VECTORS; v++) {
            __m512 x = logits16_at(chunk, type, i + 16 * v);
            step = _mm512_max_ps(x, step);
            sum[v] = _mm512_add_ps(sum[v], exp16_in_sum(_mm512_sub_ps(x, subtrahend), powers));
        }
        if (step_maxima != NULL) {
            _mm512_storeu_ps(step_maxima + i / LANES * MAXIMA_LANES, step);
        }
        top = _mm512_max_ps(step, top);
    }
    for (int v = 0; v < VECTORS; v++) {
        _mm512_storeu_ps(sums + 16 * v, sum[v]);
    }
    _mm512_storeu_ps(maxima, top);
}
// ANCHOR_END: add_a_chunk_sixteen_lanes_at_a_time
#endif

// ANCHOR: add_steps_lane_by_lane
/* A step's logits l, l + 16, l + 32, l + 48 have their maximum in lane l
 * of `step` (MAXIMA_LANES is 16: four registers of 16 merged into one),
 * and each logit's weight goes to its own lane's sum. */
static inline __attribute__((always_inline)) void add_step(float sums[LANES], float step[MAXIMA_LANES],
                                                           const void *chunk, LogitsType type, int i, float reference)
{
    for (int lane = 0; lane < MAXIMA_LANES; lane++) {
        step[lane] = -INFINITY;
    }
    for (int first = 0; first < LANES; first += MAXIMA_LANES) {
        for (int lane = 0; lane < MAXIMA_LANES; lane++) {
            float x = logit_at(chunk, type, i + first + lane);
            step[lane] = x > step[lane] ? x : step[lane];
            sums[first + lane] += softmax_exp_in_sum(x - reference);
        }
    }
}
// ANCHOR_END: add_steps_lane_by_lane

// ANCHOR: add_chunk_to_lane_sums
/* A chunk of n logits (n a multiple of LANES), a step of LANES at a time:
 * exp(x - max) of each logit added to its lane's sum (each lane its own,
 * so no vector instruction waits for the one before it), each step's
 * MAXIMA_LANES largest logits to step_maxima (unless NULL), the largest
 * of those to `maxima`, and the chunk's largest returned (NaN ignored).
 * The sums are right only if no logit exceeds `max`: the caller checks.
 * While every logit so far is -inf, -inf - max would be NaN: measured
 * from 0 instead, -inf weighs exp(-inf) = 0. `ahead`: see prefetch_lines.
 * (inline: called twice as a function, it would keep the sums in memory.) */
static inline __attribute__((always_inline)) float add_weights_below(float sums[LANES], float maxima[MAXIMA_LANES],
                                                                     float *step_maxima, const void *chunk,
                                                                     LogitsType type, int n, float max,
                                                                     const char *ahead)
{
    float reference = max == -INFINITY ? 0.0f : max;
#if defined(EXP16_AVX512)
    add_weights_below16(sums, maxima, step_maxima, chunk, type, n, reference, ahead);
#else
    for (int lane = 0; lane < MAXIMA_LANES; lane++) {
        maxima[lane] = -INFINITY;
    }
    for (int i = 0; i < n; i += LANES) {
        prefetch_lines(ahead, (size_t)i * logits_type_size(type), LANES * logits_type_size(type));
        float step[MAXIMA_LANES];
        add_step(sums, step, chunk, type, i, reference);
        for (int lane = 0; lane < MAXIMA_LANES; lane++) {
            maxima[lane] = step[lane] > maxima[lane] ? step[lane] : maxima[lane];
        }
        if (step_maxima != NULL) {
            memcpy(step_maxima + i / LANES * MAXIMA_LANES, step, sizeof step);
        }
    }
#endif
    float chunk_max = -INFINITY;
#pragma omp simd reduction(max : chunk_max)
    for (int lane = 0; lane < MAXIMA_LANES; lane++) {
        chunk_max = maxima[lane] > chunk_max ? maxima[lane] : chunk_max;
    }
    return chunk_max;
}
// ANCHOR_END: add_chunk_to_lane_sums

// ANCHOR: rescale_the_sums_for_a_new_maximum
/* A new maximum: what was summed against the old one shrinks, by the factor
 * of the recurrence, once for all lanes. */
static void raise_max(LaneSums *row, float max)
{
    float scale = softmax_weight(row->max, max);
    for (int lane = 0; lane < LANES; lane++) {
        row->recent[lane] *= scale;
        row->sums[lane] *= scale;
    }
    row->max = max;
}
// ANCHOR_END: rescale_the_sums_for_a_new_maximum

// ANCHOR: sum_a_chunk_on_a_guess
/* The chunk is summed on the guess that it holds no new maximum, which is
 * true of all but about 1 + ln(chunks) chunks of a row in random order (the
 * admissions of a top 1). When the guess is wrong, the row's sums are
 * rescaled and the chunk, still in L1, is summed again from its maximum.
 * The chunk gets its own sums first, in float, a few terms a lane; they go
 * into the row's recent ones, and those into its double ones (LaneSums). */
static inline __attribute__((always_inline)) float add_chunk(LaneSums *row, const void *chunk, LogitsType type, int n,
                                                             const char *ahead, float *step_maxima)
{
    float sums[LANES] = {0}, maxima[MAXIMA_LANES];
    float max = add_weights_below(sums, maxima, step_maxima, chunk, type, n, row->max, ahead);
    if (max > row->max) {
        raise_max(row, max);
        memset(sums, 0, sizeof sums);
        add_weights_below(sums, maxima, NULL, chunk, type, n, max, NULL); /* its lines are asked for */
    }
    for (int lane = 0; lane < LANES; lane++) {
        row->recent[lane] += sums[lane];
    }
    float *group_maxima = row->maxima[row->chunks++ % FLOOR_GROUPS];
    for (int lane = 0; lane < MAXIMA_LANES; lane++) {
        group_maxima[lane] = maxima[lane] > group_maxima[lane] ? maxima[lane] : group_maxima[lane];
    }
    if (row->chunks % CHUNKS_IN_FLOAT == 0) {
        for (int lane = 0; lane < LANES; lane++) {
            row->sums[lane] += row->recent[lane];
            row->recent[lane] = 0.0f;
        }
    }
    return max;
}

float lane_sums_add_chunk(LaneSums *row, const float *chunk, int n)
{
    return add_chunk(row, chunk, LOGITS_FLOAT32, n, NULL, NULL);
}
// ANCHOR_END: sum_a_chunk_on_a_guess

// ANCHOR: add_a_stored_chunk
/* The chunk of n logits from `begin` on, as stored: the same code for each
 * type, which add_chunk's inlining turns into loops, each with the type's
 * widening inside it, in registers. A 16-bit row moves half the bytes from
 * memory. With AVX-512 that holds for fp16 too: one vcvtph2ps widens 16
 * halves in a register (logits16_at). Without it, where the processor
 * widens halves itself (F16C), one instruction per 8 halves into a buffer
 * of a chunk (2 KiB, in L1) costs less than the arithmetic of half_to_float
 * on every logit, the second time too when the chunk is summed again; with
 * AVX-512 the buffer would only add a store and a load per 16 logits. A
 * signalling NaN comes out of vcvtph2ps quiet, and in the fused pass a NaN
 * is never an output: a row with one is started again from widen_logits
 * (see fused_row). step_maxima: the chunk's (add_weights_below). */
static float add_stored_chunk(LaneSums *row, StoredLogits logits, size_t begin, int n, const char *ahead,
                              float *step_maxima)
{
    const uint16_t *bits = (const uint16_t *)logits.data + begin;
    switch (logits.type) {
    case LOGITS_FLOAT16: {
#if defined(FP16_F16C) && !defined(EXP16_AVX512)
        float widened[FUSED_CHUNK];
        /* add_chunk's loop is over the widened floats: the halves' lines
         * are asked for here, at once. */
        prefetch_lines(ahead, 0, (size_t)n * sizeof *bits);
        halves_to_floats(widened, bits, (size_t)n);
        return add_chunk(row, widened, LOGITS_FLOAT32, n, NULL, step_maxima);
#else
        return add_chunk(row, bits, LOGITS_FLOAT16, n, ahead, step_maxima);
#endif
    }
    case LOGITS_BFLOAT16:
        return add_chunk(row, bits, LOGITS_BFLOAT16, n, ahead, step_maxima);
    case LOGITS_FLOAT32:
    default:
        return add_chunk(row, (const float *)logits.data + begin, LOGITS_FLOAT32, n, ahead, step_maxima);
    }
}
// ANCHOR_END: add_a_stored_chunk

/* Halve the lanes until one is left, in double, and round the sum once. */
SoftmaxState lane_sums_state(const LaneSums *row)
{
    double sums[LANES];
    for (int lane = 0; lane < LANES; lane++) {
        sums[lane] = row->sums[lane] + row->recent[lane];
    }
    for (int width = LANES / 2; width > 0; width /= 2) {
        for (int lane = 0; lane < width; lane++) {
            sums[lane] += sums[lane + width];
        }
    }
    return (SoftmaxState){row->max, (float)sums[0]};
}

// ANCHOR: keep_four_k_maxima
/* n maxima of groups of V/n logits each: in a row in random order, the
 * k-th largest of them leaves about -n ln(1 - k/n) logits at or above it
 * (a group's maximum lies above a level with probability 1 - (1 - q)^(V/n)
 * when each logit does with q). So n = 16 lane maxima leave 11 for k = 8
 * and hundreds for k = 16; n = 4k leaves 1.15 k at every k. The groups are
 * counted up to that, at most FLOOR_GROUPS. */
_Static_assert((FLOOR_GROUPS * MAXIMA_LANES) == 4 * LANES, "4k maxima for every k up to LANES");

int lane_sums_floor_groups(int k)
{
    int groups = (4 * k + MAXIMA_LANES - 1) / MAXIMA_LANES;
    return groups < 1 ? 1 : groups > FLOOR_GROUPS ? FLOOR_GROUPS : groups;
}

/* The maxima of `groups` groups, each the lane maxima of the groups of
 * chunks g, g + groups, ...: still different logits of the row. From the
 * last group down, each is merged into the one `groups` before it, which
 * passes it on when its own turn comes: no remainder to divide for, and
 * 16 lanes to an instruction. */
static int merge_group_maxima(const LaneSums *row, int groups, float maxima[FLOOR_GROUPS * MAXIMA_LANES])
{
    memcpy(maxima, row->maxima, sizeof row->maxima);
    for (int group = FLOOR_GROUPS - 1; group >= groups; group--) {
        float *merged = maxima + (group - groups) * MAXIMA_LANES;
        const float *more = maxima + group * MAXIMA_LANES;
#pragma omp simd
        for (int lane = 0; lane < MAXIMA_LANES; lane++) {
            merged[lane] = more[lane] > merged[lane] ? more[lane] : merged[lane];
        }
    }
    return groups * MAXIMA_LANES;
}
// ANCHOR_END: keep_four_k_maxima

// ANCHOR: bound_the_kth_best_from_below
/* The k-th largest of n keys, found as topk_kth_largest_key finds it, but
 * only from the highest bit in which the keys differ (above it, the k-th
 * shares the bits of them all) down to FLOOR_LOWEST_BIT: the bits below are
 * left 0, which makes the key no larger, and a normal float's logit lower
 * by less than 2^-12 of its size. Never below -inf's key: those are
 * negative NaNs'. */
enum { FLOOR_LOWEST_BIT = 11 };
_Static_assert(MAXIMA_LANES % TOPK_KEY_BLOCK == 0, "the maxima are counted in whole blocks");

static uint32_t floor_key(const uint32_t *keys, int n, int k)
{
    uint32_t lowest = UINT32_MAX, highest = 0;
#pragma omp simd reduction(min : lowest) reduction(max : highest)
    for (int i = 0; i < n; i++) {
        lowest = keys[i] < lowest ? keys[i] : lowest;
        highest = keys[i] > highest ? keys[i] : highest;
    }
    if (lowest == highest) {
        return lowest;
    }
    int first_different = 31 - __builtin_clz(lowest ^ highest);
    uint32_t found = highest & ~(UINT32_MAX >> (31 - first_different)); /* the bits all keys share */
    for (int bit = first_different; bit >= FLOOR_LOWEST_BIT; bit--) {
        uint32_t trial = topk_kth_key_trial(found, bit);
        found = topk_kth_key_after(found, bit, topk_count_keys_reaching(keys, n, trial), k);
    }
    uint32_t minus_infinity = topk_radix_key(-INFINITY);
    return found > minus_infinity ? found : minus_infinity;
}
// ANCHOR_END: bound_the_kth_best_from_below

// ANCHOR: take_the_floor_of_the_maxima
/* The maxima are different logits of the row, so their k-th largest is at
 * most the row's k-th largest, and so is any logit below it: the floor is
 * the logit of floor_key, on the maxima's ordered keys (topk_radix_key). */
float lane_sums_topk_floor(const LaneSums *row, int k)
{
    if (k > LANES) {
        return -INFINITY;
    }
    if (k == 1) {
        return row->max; /* the largest lane maximum, without counting */
    }
    float maxima[FLOOR_GROUPS * MAXIMA_LANES];
    uint32_t keys[FLOOR_GROUPS * MAXIMA_LANES];
    int n = merge_group_maxima(row, lane_sums_floor_groups(k), maxima);
    for (int i = 0; i < n; i++) {
        keys[i] = topk_radix_key(maxima[i]);
    }
    return topk_value_from_key(floor_key(keys, n, k));
}
// ANCHOR_END: take_the_floor_of_the_maxima

// ANCHOR: skip_chunks_without_candidates
/* Can the chunk that starts at `first` hold an entry of the top K? The best
 * entry it could hold is its maximum at its first index; the chunks are
 * looked at in order, so the threshold, unless it has no index (the
 * floor), has a smaller index, and an equal logit here ranks after it.
 * (NaN, which the maximum ignores, is dealt with for the whole row.) */
static bool chunk_may_hold_candidates(float max, size_t first, TopkEntry threshold)
{
    return topk_ranks_before(topk_entry(max, (int32_t)first), threshold);
}

/* Logits begin .. begin + n - 1 of the row as floats: float32 logits where
 * they lie, 16-bit ones widened into `buffer` (n floats, which stay in L1:
 * the traffic from memory is the 16-bit row's). */
static inline const float *chunk_floats(StoredLogits row, size_t begin, size_t n, float *buffer)
{
    if (row.type == LOGITS_FLOAT32) {
        return (const float *)row.data + begin;
    }
    if (row.type == LOGITS_FLOAT16) {
        halves_to_floats(buffer, (const uint16_t *)row.data + begin, n);
    } else {
        widen_logits(row, begin, n, buffer);
    }
    return buffer;
}
// ANCHOR_END: skip_chunks_without_candidates

// ANCHOR: screen_the_steps
/* Whether a step (LANES logits) may hold a candidate: whether any of its
 * MAXIMA_LANES maxima reaches the threshold, the floor. */
static bool step_may_hold_candidates(const float *maxima, float threshold)
{
#if defined(__AVX512F__)
    return _mm512_cmp_ps_mask(_mm512_loadu_ps(maxima), _mm512_set1_ps(threshold), _CMP_GE_OQ) != 0;
#else
    bool reaching = false;
    for (int lane = 0; lane < MAXIMA_LANES; lane++) {
        reaching |= maxima[lane] >= threshold;
    }
    return reaching;
#endif
}

/* If chunk `chunk` may hold a candidate, list those of its steps that may,
 * after the `count` in steps[], without a branch: each step's number is
 * written, and the count moves on only past a step that may hold one. */
static void list_steps_of_chunk(uint32_t *steps, size_t *count, const float *step_maxima, size_t whole_lanes,
                                size_t chunk, float max, TopkEntry threshold)
{
    size_t begin = chunk * FUSED_CHUNK;
    if (chunk_may_hold_candidates(max, begin, threshold)) {
        size_t end = whole_lanes - begin < FUSED_CHUNK ? whole_lanes : begin + FUSED_CHUNK;
        for (size_t step = begin / LANES; step < end / LANES; step++) {
            steps[*count] = (uint32_t)step;
            *count += step_may_hold_candidates(step_maxima + step * MAXIMA_LANES, threshold.value);
        }
    }
}
// ANCHOR_END: screen_the_steps

// ANCHOR: screen_the_chunk_maxima
/* The chunk maxima are screened the way a chunk's logits are: 32 at a time,
 * with one mask; the steps that may hold a candidate are listed in
 * scratch->marked_steps, and their number returned. Meanwhile memory would
 * have nothing to do: the scan's prefetches stopped AHEAD_CHUNKS into the
 * next row. So each block of 32 maxima asks for one more chunk of the rows
 * that follow, from the end of the row (byte `stream`) on, as the scan
 * would have. */
static size_t list_steps_that_may_hold_candidates(const RowScratch *scratch, TopkEntry threshold, StoredLogits row,
                                                  size_t vocab, size_t readable)
{
    size_t whole_lanes = vocab - vocab % LANES, chunks = (whole_lanes + FUSED_CHUNK - 1) / FUSED_CHUNK, c = 0;
    size_t chunk_bytes = FUSED_CHUNK * logits_type_size(row.type), stream = vocab * logits_type_size(row.type);
    const float *chunk_maxima = scratch->chunk_maxima;
    size_t count = 0;
    for (; c + OFFER_BLOCK <= chunks; c += OFFER_BLOCK, stream += chunk_bytes) {
        if (stream < readable) {
            prefetch_ahead((const char *)row.data + stream, readable - stream, chunk_bytes);
        }
        for (uint32_t mask = reaching_threshold_mask(chunk_maxima + c, threshold.value); mask != 0; mask &= mask - 1) {
            size_t chunk = c + (size_t)__builtin_ctz(mask);
            list_steps_of_chunk(scratch->marked_steps, &count, scratch->step_maxima, whole_lanes, chunk,
                                chunk_maxima[chunk], threshold);
        }
    }
    for (; c < chunks; c++) {
        list_steps_of_chunk(scratch->marked_steps, &count, scratch->step_maxima, whole_lanes, c, chunk_maxima[c],
                            threshold);
    }
    return count;
}
// ANCHOR_END: screen_the_chunk_maxima

// ANCHOR: mark_the_listed_steps
/* The row's marks: the steps that may hold a candidate listed, then each
 * marked, in order. Listed first, for the reason offer_marked gives: a
 * loop over each chunk's steps that may hold one would end at a different
 * count in each chunk. */
static RowMarks mark_candidates(const RowScratch *scratch, TopkEntry threshold, StoredLogits row, size_t vocab,
                                size_t readable)
{
    size_t steps = list_steps_that_may_hold_candidates(scratch, threshold, row, vocab, readable);
    RowMarks marks = {scratch->marks, scratch->marked_words, 0};
    for (size_t j = 0; j < steps; j++) {
        size_t first = (size_t)scratch->marked_steps[j] * LANES;
        float widened[LANES];
        mark_reaching_threshold(&marks, first, chunk_floats(row, first, LANES, widened), LANES, threshold.value);
    }
    return marks;
}
// ANCHOR_END: mark_the_listed_steps

/* A row with a NaN or +inf: the online version, which handles every
 * special value one logit at a time, on the row as floats (16-bit rows are
 * widened whole: such rows are rare, and the allocation no concern). */
static const TopkEntry *online_stored_row(StoredLogits row, size_t vocab, TopkCollector *top, SoftmaxState *state)
{
    if (row.type == LOGITS_FLOAT32) {
        return online_row(row.data, vocab, top, state);
    }
    float *widened = ALLOC_ARRAY(vocab, float);
    widen_logits(row, 0, vocab, widened);
    const TopkEntry *best = online_row(widened, vocab, top, state);
    array_free(widened);
    return best;
}

// ANCHOR: fuse_softmax_and_topk_in_one_pass
/* The pass over a row: its chunks summed into `sums`, their maxima and
 * their steps' kept in `scratch`, and the state of the whole row returned,
 * the last vocab % LANES logits (`tail`, as floats) pushed one by one. */
static SoftmaxState scan_row(StoredLogits row, size_t vocab, size_t readable, LaneSums *sums, const RowScratch *scratch,
                             float tail[LANES])
{
    size_t whole_lanes = vocab - vocab % LANES, size = logits_type_size(row.type);
    for (size_t begin = 0; begin < whole_lanes; begin += FUSED_CHUNK) {
        size_t n = whole_lanes - begin < FUSED_CHUNK ? whole_lanes - begin : FUSED_CHUNK;
        const char *ahead =
            chunk_ahead((const char *)row.data + begin * size, readable - begin * size, FUSED_CHUNK * size);
        scratch->chunk_maxima[begin / FUSED_CHUNK] =
            add_stored_chunk(sums, row, begin, (int)n, ahead, scratch->step_maxima + begin / LANES * MAXIMA_LANES);
    }
    SoftmaxState state = lane_sums_state(sums);
    widen_logits(row, whole_lanes, vocab - whole_lanes, tail);
    for (size_t i = 0; i < vocab - whole_lanes; i++) {
        state = softmax_state_push(state, tail[i]);
    }
    return state;
}

static const TopkEntry *fused_row(StoredLogits row, size_t vocab, size_t readable, TopkCollector *top,
                                  SoftmaxState *state, const RowScratch *scratch)
{
    LaneSums sums = lane_sums_empty();
    size_t whole_lanes = vocab - vocab % LANES;
    float tail[LANES];
    *state = scan_row(row, vocab, readable, &sums, scratch, tail);
    if (isnan(state->sum)) {
        /* A NaN or +inf in the row (see lane_sums_add_chunk). */
        return online_stored_row(row, vocab, top, state);
    }
    /* The row is in L2 now: the logits of the top K's few steps are marked, then offered. */
    topk_collector_raise_floor(top, lane_sums_topk_floor(&sums, top->k));
    RowMarks marks = mark_candidates(scratch, top->threshold, row, vocab, readable);
    offer_marked(top, row, &marks);
    offer_all(top, tail, whole_lanes, vocab - whole_lanes);
    return topk_collector_finish(top);
}
// ANCHOR_END: fuse_softmax_and_topk_in_one_pass

/* `readable`: bytes that may be read from the start of the row on (at
 * least the row's), for the fused version's prefetching. The naive and
 * online versions take float32 rows only. */
static void row_with_lookahead(CpuVersion version, StoredLogits row, size_t vocab, size_t readable, int k,
                               RowScratch *scratch, float *probs, int64_t *indices, float *candidate_logits)
{
    TopkCollector top;
    topk_collector_init(&top, k, scratch->candidates);
    SoftmaxState state;
    const TopkEntry *best;
    switch (version) {
    case CPU_NAIVE:
        best = naive_row(row.data, vocab, &top, scratch->probabilities);
        for (int j = 0; j < k; j++) {
            probs[j] = scratch->probabilities[best[j].index];
            indices[j] = best[j].index;
        }
        return;
    case CPU_ONLINE:
        best = online_row(row.data, vocab, &top, &state);
        break;
    case CPU_FUSED:
    default:
        best = fused_row(row, vocab, readable, &top, &state, scratch);
        break;
    }
    // ANCHOR: normalise_only_the_winners
    for (int j = 0; j < k; j++) {
        probs[j] = softmax_probability(state, best[j].value);
        indices[j] = best[j].index;
    }
    // ANCHOR_END: normalise_only_the_winners
    if (candidate_logits != NULL) {
        for (int j = 0; j < k; j++) {
            candidate_logits[j] = best[j].value;
        }
    }
}

void softmax_topk_row(CpuVersion version, const float *logits, size_t vocab, int k, RowScratch *scratch, float *probs,
                      int64_t *indices)
{
    row_with_lookahead(version, float32_logits(logits), vocab, vocab * sizeof(float), k, scratch, probs, indices, NULL);
}

void softmax_topk_stored_row(StoredLogits row, size_t vocab, int k, RowScratch *scratch, float *probs, int64_t *indices)
{
    row_with_lookahead(CPU_FUSED, row, vocab, vocab * logits_type_size(row.type), k, scratch, probs, indices, NULL);
}

// ANCHOR: sample_each_row_where_its_top_k_is_found
/* `then`, when not NULL, takes each row's top K on the thread that found
 * it, with the candidates' logits. */
static void rows_with_lookahead(CpuVersion version, StoredLogits logits, size_t rows, size_t vocab, int k, int threads,
                                float *probs, int64_t *indices, const TopkRowConsumer *then)
{
    size_t row_bytes = vocab * logits_type_size(logits.type);
#pragma omp parallel num_threads(threads)
    {
        RowScratch scratch = row_scratch_new(version, vocab, k);
        float *candidate_logits = then != NULL ? ALLOC_ARRAY((size_t)k, float) : NULL;
#pragma omp for schedule(static)
        for (size_t row = 0; row < rows; row++) {
            /* The rows after this one follow it in memory. */
            StoredLogits this_row = {(const char *)logits.data + row * row_bytes, logits.type};
            float *row_probs = probs + row * (size_t)k;
            int64_t *row_indices = indices + row * (size_t)k;
            row_with_lookahead(version, this_row, vocab, (rows - row) * row_bytes, k, &scratch, row_probs, row_indices,
                               candidate_logits);
            if (then != NULL) {
                then->take(then->ctx, row, candidate_logits, row_probs, row_indices);
            }
        }
        array_free(candidate_logits);
        row_scratch_free(&scratch);
    }
}
// ANCHOR_END: sample_each_row_where_its_top_k_is_found

void softmax_topk_rows(CpuVersion version, const float *logits, size_t rows, size_t vocab, int k, int threads,
                       float *probs, int64_t *indices)
{
    rows_with_lookahead(version, float32_logits(logits), rows, vocab, k, threads, probs, indices, NULL);
}

void softmax_topk_stored_rows(StoredLogits logits, size_t rows, size_t vocab, int k, int threads, float *probs,
                              int64_t *indices)
{
    rows_with_lookahead(CPU_FUSED, logits, rows, vocab, k, threads, probs, indices, NULL);
}

void softmax_topk_stored_rows_then(StoredLogits logits, size_t rows, size_t vocab, int k, int threads, float *probs,
                                   int64_t *indices, TopkRowConsumer then)
{
    rows_with_lookahead(CPU_FUSED, logits, rows, vocab, k, threads, probs, indices, &then);
}

// ANCHOR: the_pass_without_its_top_k
/* A row with a NaN or +inf: the scalar recurrence, which handles both. */
static SoftmaxState state_one_by_one(StoredLogits row, size_t vocab)
{
    SoftmaxState state = softmax_state_empty();
    float widened[FUSED_CHUNK];
    for (size_t begin = 0; begin < vocab; begin += FUSED_CHUNK) {
        size_t n = vocab - begin < FUSED_CHUNK ? vocab - begin : FUSED_CHUNK;
        widen_logits(row, begin, n, widened);
        for (size_t i = 0; i < n; i++) {
            state = softmax_state_push(state, widened[i]);
        }
    }
    return state;
}

void softmax_state_stored_rows(StoredLogits logits, size_t rows, size_t vocab, int threads, SoftmaxState *states)
{
    size_t row_bytes = vocab * logits_type_size(logits.type);
#pragma omp parallel num_threads(threads)
    {
        RowScratch scratch = row_scratch_new(CPU_FUSED, vocab, 1);
#pragma omp for schedule(static)
        for (size_t row = 0; row < rows; row++) {
            StoredLogits this_row = {(const char *)logits.data + row * row_bytes, logits.type};
            LaneSums sums = lane_sums_empty();
            float tail[LANES];
            states[row] = scan_row(this_row, vocab, (rows - row) * row_bytes, &sums, &scratch, tail);
            if (isnan(states[row].sum)) {
                states[row] = state_one_by_one(this_row, vocab);
            }
        }
        row_scratch_free(&scratch);
    }
}
// ANCHOR_END: the_pass_without_its_top_k

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
    TopkEntry *sorted = ALLOC_ARRAY(vocab, TopkEntry);
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
