/* Softmax + top-K: the pieces the CPU code and the CUDA kernels share.
 *
 * Everything here is a HOST_DEVICE static inline function: gcc compiles it
 * into the chapter program and its tests, nvcc compiles the same text into
 * kernels/softmax_topk.cu. So the online (max, sum) update and merge, the
 * order of logits with its tie rule, and the top-K insert and merge are
 * tested on any machine, GPU or not.
 *
 * Conventions for hard inputs, the same on CPU and GPU:
 *   - order: larger logit first; equal logits, lower index first; NaN ranks
 *     above every number (as in torch.topk), NaNs among themselves by index;
 *   - a NaN anywhere in a row makes the row's sum NaN, so every probability
 *     of that row is NaN (as torch.softmax does);
 *   - +inf logits share the probability equally (the limit of equal huge
 *     logits), the rest get 0; a row of only -inf has no softmax (0/0) and
 *     its probabilities are NaN. */
#ifndef KERNELS_SOFTMAX_TOPK_H
#define KERNELS_SOFTMAX_TOPK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/float_bits.h"

/* nvcc keeps a small array in registers only when every index is known at
 * compile time, that is when the loop is unrolled; host compilers need no
 * hint (and warn about the pragma). */
#ifdef __CUDA_ARCH__
#define TOPK_UNROLL _Pragma("unroll")
#else
#define TOPK_UNROLL
#endif

/* Below ln(FLT_MIN), exp(x) is a subnormal float or 0; softmax_exp returns 0. */
#define SOFTMAX_EXP_FLUSH (-87.33654475f)

// ANCHOR: compute_exp_in_plain_arithmetic
/* exp(x) for x <= 0 (softmax only ever needs exp(x - max)), within about
 * 2 ulp; exp(-inf) = 0, exp(NaN) = NaN. On the CPU, libm's expf is a
 * function call that a loop cannot vectorise; this is plain arithmetic on
 * floats and their bits, so a loop calling it vectorises (and it returns 0
 * below SOFTMAX_EXP_FLUSH instead of a subnormal). On the GPU, CUDA's own
 * expf is already a few instructions (it uses the special function unit)
 * and as accurate, so it is used. */
HOST_DEVICE static inline float softmax_exp(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    /* x = n ln2 + r with n an integer and |r| <= ln2/2, so exp(x) = 2^n e^r.
     * Adding 1.5 * 2^23 rounds x log2(e) to the integer n and leaves n in the
     * low bits of t: no float-to-int conversion, which is undefined for NaN. */
    const float shifter = 12582912.0f;
    float t = fmaf(x, 1.44269504f, shifter);
    float n = t - shifter;
    /* ln2 in two parts (Cody and Waite): n times the first is exact. */
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    /* e^r - 1 = r + r^2 P(r), P of degree 4 interpolating (e^r - 1 - r)/r^2
     * at the 5 Chebyshev nodes of [-ln2/2, ln2/2]: close to the best
     * polynomial of its degree, and below float rounding there. */
    float p = 1.392621347e-3f;
    p = fmaf(p, r, 8.363202972e-3f);
    p = fmaf(p, r, 4.166655444e-2f);
    p = fmaf(p, r, 1.666657685e-1f);
    p = fmaf(p, r, 0.5f);
    float expm1_r = fmaf(p, r * r, r);
    /* 2^n, built in the exponent field; n >= -126 above the flush limit. */
    uint32_t n_mod_2_32 = float_bits(t) - float_bits(shifter);
    float two_to_n = float_from_bits((n_mod_2_32 + 127u) << 23);
    /* 2^n e^r = 2^n + 2^n (e^r - 1), in one rounding. */
    return x < SOFTMAX_EXP_FLUSH ? 0.0f : fmaf(expm1_r, two_to_n, two_to_n);
#endif
}
// ANCHOR_END: compute_exp_in_plain_arithmetic

/* The online softmax state of a set of logits: their maximum (NaN never
 * becomes the maximum) and the sum of exp(x - max) over the set. */
typedef struct {
    float max;
    float sum;
} SoftmaxState;

HOST_DEVICE static inline SoftmaxState softmax_state_empty(void)
{
    SoftmaxState empty = {-INFINITY, 0.0f};
    return empty;
}

/* exp(x - max) for x <= max (or x NaN), with the two limits that plain
 * arithmetic gets wrong: x == max == +inf weighs 1, not exp(inf - inf) = NaN,
 * and when the max is -inf every x is -inf and weighs nothing. */
HOST_DEVICE static inline float softmax_weight(float x, float max)
{
    if (x == max) {
        return max == -INFINITY ? 0.0f : 1.0f;
    }
    return softmax_exp(x - max);
}

// ANCHOR: update_running_max_and_sum
HOST_DEVICE static inline SoftmaxState softmax_state_push(SoftmaxState state, float x)
{
    if (x > state.max) {
        /* A new maximum: what was summed against the old one shrinks. */
        state.sum = state.sum * softmax_weight(state.max, x) + 1.0f;
        state.max = x;
    } else {
        /* x <= max, or x is NaN and so becomes the sum. */
        state.sum += softmax_weight(x, state.max);
    }
    return state;
}
// ANCHOR_END: update_running_max_and_sum

// ANCHOR: merge_running_max_and_sum
HOST_DEVICE static inline SoftmaxState softmax_state_merge(SoftmaxState a, SoftmaxState b)
{
    SoftmaxState merged;
    merged.max = a.max > b.max ? a.max : b.max;
    merged.sum = a.sum * softmax_weight(a.max, merged.max) + b.sum * softmax_weight(b.max, merged.max);
    return merged;
}
// ANCHOR_END: merge_running_max_and_sum

/* The softmax probability of logit x in the set the state describes. */
HOST_DEVICE static inline float softmax_probability(SoftmaxState state, float x)
{
    return softmax_weight(x, state.max) / state.sum;
}

/* A candidate for the top K: a logit and its index in the row. */
typedef struct {
    float value;
    int32_t index;
} TopkEntry;

/* Fills the places of a list that holds fewer than K logits; it ranks after
 * every real entry, -inf included (their index is smaller). */
#define TOPK_NO_INDEX INT32_MAX

HOST_DEVICE static inline TopkEntry topk_entry(float value, int32_t index)
{
    TopkEntry entry = {value, index};
    return entry;
}

HOST_DEVICE static inline TopkEntry topk_sentinel(void)
{
    return topk_entry(-INFINITY, TOPK_NO_INDEX);
}

HOST_DEVICE static inline bool topk_is_sentinel(TopkEntry entry)
{
    return entry.index == TOPK_NO_INDEX;
}

// ANCHOR: rank_logits_with_ties_and_nan
/* The order of two entries that are not NaN: larger logit first, equal
 * logits by lower index. Joined with | and &, not || and &&, which would be
 * branches that go either way as the values fall: a CPU that must guess
 * them is wrong half the time, and a loop of these comparisons with no
 * branch can be vectorised. */
HOST_DEVICE static inline bool topk_number_ranks_before(TopkEntry a, TopkEntry b)
{
    return (a.value > b.value) | ((a.value == b.value) & (a.index < b.index));
}

/* Does a come before b in the output? The order above, with NaN above
 * everything. Indices are unique within a row, so this is a strict total
 * order: every correct top-K returns the same list. */
HOST_DEVICE static inline bool topk_ranks_before(TopkEntry a, TopkEntry b)
{
    bool a_nan = isnan(a.value), b_nan = isnan(b.value);
    if (a_nan || b_nan) {
        return a_nan && (!b_nan || a.index < b.index);
    }
    return topk_number_ranks_before(a, b);
}
// ANCHOR_END: rank_logits_with_ties_and_nan

// ANCHOR: map_a_logit_to_an_ordered_key
/* A 32-bit key whose unsigned order is the order of logits by value: a
 * larger key ranks earlier, equal keys are a tie (broken by index, as in
 * topk_ranks_before). A positive float's bits already grow with its value:
 * setting the sign bit puts them above every negative one. A negative
 * float's bits grow as it falls: flipping them all reverses that. -0.0 is
 * made +0.0 first, since the two compare equal, and every NaN gets the
 * largest key, as NaN ranks above everything (+inf's key is smaller). */
HOST_DEVICE static inline uint32_t topk_radix_key(float x)
{
    if (isnan(x)) {
        return UINT32_MAX;
    }
    uint32_t bits = float_bits(x == 0.0f ? 0.0f : x);
    bool negative = bits >> 31;
    return negative ? ~bits : bits | 0x80000000u;
}
// ANCHOR_END: map_a_logit_to_an_ordered_key

HOST_DEVICE static inline void topk_fill_sentinels(TopkEntry *list, int k)
{
    for (int j = 0; j < k; j++) {
        list[j] = topk_sentinel();
    }
}

// ANCHOR: insert_into_sorted_topk_list
/* Insert into a list of k entries sorted best first, if the entry beats the
 * last one. The entry enters at the bottom and swaps its way up: with k known
 * at compile time every index is a constant, so the list can live in
 * registers on a GPU. */
HOST_DEVICE static inline void topk_list_insert(TopkEntry *list, int k, TopkEntry entry)
{
    if (!topk_ranks_before(entry, list[k - 1])) {
        return;
    }
    list[k - 1] = entry;
    TOPK_UNROLL
    for (int j = k - 1; j > 0 && topk_ranks_before(list[j], list[j - 1]); j--) {
        TopkEntry swap = list[j];
        list[j] = list[j - 1];
        list[j - 1] = swap;
    }
}
// ANCHOR_END: insert_into_sorted_topk_list

/* How many entries of a list sorted best first rank before `entry`. */
HOST_DEVICE static inline int topk_count_before(const TopkEntry *list, int k, TopkEntry entry)
{
    int low = 0, high = k;
    while (low < high) {
        int middle = low + (high - low) / 2;
        if (topk_ranks_before(list[middle], entry)) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    return low;
}

// ANCHOR: merge_two_sorted_topk_lists
/* Merging two sorted lists of k: entry j of one list lands at position j plus
 * the number of entries of the other list that rank before it (a binary
 * search); positions k and beyond drop out. Each entry finds its place
 * alone, so on a GPU one lane per entry merges the lists in parallel.
 * Sentinels share one key, but the ones that land below k are identical. */
HOST_DEVICE static inline void topk_merge_entry(const TopkEntry *from, const TopkEntry *other, int k, int j,
                                                TopkEntry *out)
{
    int position = j + topk_count_before(other, k, from[j]);
    if (position < k) {
        out[position] = from[j];
    }
}

HOST_DEVICE static inline void topk_list_merge(const TopkEntry *a, const TopkEntry *b, int k, TopkEntry *out)
{
    for (int j = 0; j < k; j++) {
        topk_merge_entry(a, b, k, j, out);
        topk_merge_entry(b, a, k, j, out);
    }
}
// ANCHOR_END: merge_two_sorted_topk_lists

// ANCHOR: pair_partial_states_in_a_tree
/* Partial states 0 .. count-1 of one row are merged in rounds with
 * span = 1, 2, 4, ... < count: in each round, state i absorbs state i + span
 * when i is a multiple of 2 * span. Afterwards state 0 holds them all. */
HOST_DEVICE static inline bool merge_tree_absorbs(int i, int span, int count)
{
    return i % (2 * span) == 0 && i + span < count;
}
// ANCHOR_END: pair_partial_states_in_a_tree

/* One compare-exchange of a bitonic sorting network that sorts `list` best
 * first: element i at the stage that builds sorted runs of `run` elements,
 * comparing partners `stride` apart. The full sort of 2^m elements runs
 * run = 2, 4, ..., 2^m and, for each, stride = run/2, ..., 1, calling this
 * for every i; calls within one stride touch disjoint pairs, so threads may
 * make them at the same time. */
HOST_DEVICE static inline void topk_bitonic_step(TopkEntry *list, int i, int run, int stride)
{
    int partner = i ^ stride;
    if (partner <= i) {
        return;
    }
    bool best_first = (i & run) == 0;
    if (topk_ranks_before(list[partner], list[i]) == best_first) {
        TopkEntry swap = list[i];
        list[i] = list[partner];
        list[partner] = swap;
    }
}

#endif
