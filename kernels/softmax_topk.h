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
#include "kernels/online_softmax.h"

/* nvcc keeps a small array in registers only when every index is known at
 * compile time, that is when the loop is unrolled; host compilers need no
 * hint (and warn about the pragma). */
#ifdef __CUDA_ARCH__
#define TOPK_UNROLL _Pragma("unroll")
#else
#define TOPK_UNROLL
#endif

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

/* Radix select (version 5) finds the K-th key of a row 8 bits at a time,
 * from the top: 4 passes over the row, each counting keys in 256 bins. */
#define TOPK_RADIX_BITS 8
#define TOPK_RADIX_DIGITS (1 << TOPK_RADIX_BITS)

/* The K-th key, as far as it is known: `prefix` holds the digits found so
 * far (the bits in `mask`), and `above` counts the keys of the row above
 * every key that starts with the prefix. */
typedef struct {
    uint32_t prefix, mask;
    int above;
} RadixSelection;

/* The bin a key is counted in by the pass that reads its digit at bits
 * shift .. shift + 7, or -1 if it does not start with the prefix (that
 * pass does not count it). */
HOST_DEVICE static inline int topk_radix_bin(uint32_t key, RadixSelection selection, int shift)
{
    return (key & selection.mask) == selection.prefix ? (int)((key >> shift) % TOPK_RADIX_DIGITS) : -1;
}

// ANCHOR: pick_the_digit_where_the_count_reaches_k
/* Walk the digits from the largest down, adding their counts to `above`
 * while that stays below k: the K-th key's digit is the one where the count
 * would reach k. Invariant: above < k, and at least k - above keys start
 * with the prefix, so the walk stops at a digit. */
HOST_DEVICE static inline void topk_radix_select_digit(const unsigned *histogram, int shift, int k,
                                                       RadixSelection *selection)
{
    int digit = TOPK_RADIX_DIGITS - 1;
    while (selection->above + (int)histogram[digit] < k) {
        selection->above += (int)histogram[digit];
        digit--;
    }
    selection->prefix |= (uint32_t)digit << shift;
    selection->mask |= (uint32_t)(TOPK_RADIX_DIGITS - 1) << shift;
}
// ANCHOR_END: pick_the_digit_where_the_count_reaches_k

// ANCHOR: map_an_entry_to_a_64_bit_key
/* A 64-bit key whose unsigned order is topk_ranks_before's, index included:
 * the logit's key above, and below it the index flipped, since the lower
 * index ranks first. So a larger key ranks earlier, and one atomicMax keeps
 * the better of two entries (version 6's shared threshold). The sentinel's
 * key is below every real entry's, -inf included. */
HOST_DEVICE static inline uint64_t topk_entry_key(TopkEntry entry)
{
    return (uint64_t)topk_radix_key(entry.value) << 32 | (uint32_t) ~(uint32_t)entry.index;
}

/* The logit whose topk_radix_key is `value_key`: between -inf's key and
 * +inf's the map's inverse; the keys outside give NaNs. The CPU's floor
 * (floor_key) is such a key, made lower and clamped to -inf's. */
HOST_DEVICE static inline float topk_value_from_key(uint32_t value_key)
{
    return float_from_bits(value_key >> 31 ? value_key & 0x7fffffffu : ~value_key);
}

/* The entry back from its key: the same index, and a logit equal to the
 * original (+0.0 for -0.0, one NaN for any NaN), so it ranks the same. */
HOST_DEVICE static inline TopkEntry topk_entry_from_key(uint64_t key)
{
    return topk_entry(topk_value_from_key((uint32_t)(key >> 32)), (int32_t) ~(uint32_t)key);
}
// ANCHOR_END: map_an_entry_to_a_64_bit_key

// ANCHOR: bound_the_kth_from_every_warps_quota
/* A second threshold for a row whose `warps` warps each keep the best of
 * their own share, sorted. Each warp's k-th best is a threshold (it has k
 * entries at or before it), but while a warp has seen only a part of the
 * row, its k-th lies far below the row's. Every warp's q-th best, with
 * q = topk_warp_quota(k, warps) = ceil(k / warps), bounds the row's k-th
 * too: the warps hold q entries each at or before their q-th, warps * q >= k
 * in all, and each of those ranks at or before the worst of the warps'
 * q-ths. So the worst of them is a threshold, and it sits near the k-th of
 * everything the warps have seen together, not of one warp's part. */
HOST_DEVICE static inline int topk_warp_quota(int k, int warps)
{
    return (k + warps - 1) / warps;
}

/* The worst of the warps' q-th keys (a larger key ranks earlier): the
 * sentinel's key while any warp has fewer than q entries, which no
 * threshold is below, so it then changes nothing. The loop runs to a
 * constant, so that nvcc unrolls it: no loop in the kernel's merge.
 * (unsigned long long, the type of CUDA's atomicMax, uint64_t's width.) */
#define TOPK_MAX_WARPS_PER_ROW 8

HOST_DEVICE static inline unsigned long long topk_worst_quota_key(const volatile unsigned long long *quota_keys,
                                                                  int warps)
{
    unsigned long long worst = quota_keys[0];
    for (int w = 1; w < TOPK_MAX_WARPS_PER_ROW; w++) {
        unsigned long long key = w < warps ? quota_keys[w] : worst;
        worst = key < worst ? key : worst;
    }
    return worst;
}
// ANCHOR_END: bound_the_kth_from_every_warps_quota

// ANCHOR: find_the_kth_largest_key_bit_by_bit
/* The k-th largest of a set of keys is the largest key that at least k of
 * them reach. So it is found one bit at a time, from the top: each bit is
 * kept if, with it set, the key found so far is still reached by k keys.
 * 32 counts, each a comparison per key with no branch, where comparing
 * every key with every other would take n^2. The CPU's floor of the lane
 * maxima (floor_key) counts only the bits that matter to it, version 9's
 * row of warps with a ballot per warp and a counter per bit in shared
 * memory. */
HOST_DEVICE static inline uint32_t topk_kth_key_trial(uint32_t found, int bit)
{
    return found | 1u << bit;
}

HOST_DEVICE static inline uint32_t topk_kth_key_after(uint32_t found, int bit, int reaching, int k)
{
    return reaching >= k ? topk_kth_key_trial(found, bit) : found;
}

/* Of n >= k keys; with fewer, 0. */
HOST_DEVICE static inline uint32_t topk_kth_largest_key(const uint32_t *keys, int n, int k)
{
    uint32_t found = 0;
    for (int bit = 31; bit >= 0; bit--) {
        uint32_t trial = topk_kth_key_trial(found, bit);
        int reaching = 0;
        for (int i = 0; i < n; i++) {
            reaching += keys[i] >= trial;
        }
        found = topk_kth_key_after(found, bit, reaching, k);
    }
    return found;
}
// ANCHOR_END: find_the_kth_largest_key_bit_by_bit

// ANCHOR: take_the_floor_of_the_steps_maxima
/* Version 9 keeps one key per float4 step of a row's scan: the largest
 * logit of the float4s [32 s, 32 s + 32) of step s. A row of `vocab`
 * logits has at most this many steps, whatever its alignment. */
HOST_DEVICE static inline int topk_float4_steps(int vectors)
{
    return (vectors + 31) / 32;
}

HOST_DEVICE static inline int topk_step_keys_per_row(int vocab)
{
    return topk_float4_steps(vocab / 4);
}

/* The steps s = member, member + members, ... < steps of one warp. */
HOST_DEVICE static inline int topk_member_steps(int steps, int member, int members)
{
    return steps > member ? (steps - member + members - 1) / members : 0;
}

/* The steps' maxima are different logits of the row, so their k-th
 * largest key (kth_key) is at most the row's k-th largest logit's: a
 * floor. Not when the row has fewer than k steps (there is no k-th), nor
 * when it holds a NaN, which fmaxf hides from the maxima (its online sum
 * is then NaN): the floor is then -inf's key, which every step reaches. */
HOST_DEVICE static inline uint32_t topk_step_floor_key(uint32_t kth_key, int steps, int k, bool row_sum_is_nan)
{
    return steps < k || row_sum_is_nan ? topk_radix_key(-INFINITY) : kth_key;
}

/* The threshold the revisits start from, as a 64-bit entry key: the
 * floor's logit with no index (TOPK_NO_INDEX), so that every entry of that
 * logit, at any index, ranks before it. The floor of -inf is the
 * sentinel. */
HOST_DEVICE static inline uint64_t topk_floor_entry_key(uint32_t floor_key)
{
    return (uint64_t)floor_key << 32 | (uint32_t) ~(uint32_t)TOPK_NO_INDEX;
}
// ANCHOR_END: take_the_floor_of_the_steps_maxima

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

// ANCHOR: pair_partial_states_in_a_tree
/* Partial states 0 .. count-1 of one row are merged in rounds with
 * span = 1, 2, 4, ... < count: in each round, state i absorbs state i + span
 * when i is a multiple of 2 * span. Afterwards state 0 holds them all. */
HOST_DEVICE static inline bool merge_tree_absorbs(int i, int span, int count)
{
    return i % (2 * span) == 0 && i + span < count;
}

/* The same round's merges, numbered: in each of `groups` groups of
 * `count` partials there are merge_tree_merges(count, span) of them,
 * numbered a group at a time in turn: merge m is the (m / groups)-th of
 * group m % groups, the one into partial merge_tree_target. Numbered, they
 * can be dealt to the warps in turn: dealt by the partial's own index, a
 * round whose 2 span is a multiple of the warps' count (span 4 on, with 8
 * warps) would fall to warp 0 alone. And when groups divides the warps'
 * count, the merges a warp takes (m, m + warps, m + 2 warps, ...) are all
 * in one group, evenly spaced: 2 span warps / groups partials apart. */
HOST_DEVICE static inline int merge_tree_merges(int count, int span)
{
    return count > span ? (count - span + 2 * span - 1) / (2 * span) : 0;
}

HOST_DEVICE static inline int merge_tree_target(int m, int span, int count, int groups)
{
    return (m % groups) * count + (m / groups) * 2 * span;
}
// ANCHOR_END: pair_partial_states_in_a_tree

// ANCHOR: split_a_slice_for_vector_loads
/* A slice of `length` floats at `address`, read as float4s, which must be
 * 16-byte aligned: `head` floats (up to 3) before the first aligned
 * address, `vectors` whole float4s, then the tail from `tail_begin` (up to
 * 3 floats). Indices count from the slice's start. */
typedef struct {
    int head, vectors, tail_begin;
} Float4Split;

HOST_DEVICE static inline Float4Split float4_split(uintptr_t address, int length)
{
    int head = (int)((16u - (address & 15u)) & 15u) / 4;
    Float4Split split;
    split.head = head < length ? head : length;
    split.vectors = (length - split.head) / 4;
    split.tail_begin = split.head + 4 * split.vectors;
    return split;
}

/* The head and tail are read one float per lane, by one warp: lanes 0-2
 * the head, lanes 4-6 the tail. The index in the slice that `lane` reads,
 * or -1 for none. */
HOST_DEVICE static inline int float4_scalar_index(Float4Split split, int length, int lane)
{
    int tail = length - split.tail_begin;
    return lane < split.head ? lane : lane >= 4 && lane - 4 < tail ? split.tail_begin + lane - 4 : -1;
}
// ANCHOR_END: split_a_slice_for_vector_loads

// ANCHOR: count_the_offers_still_to_come
/* Of `members` warps that take the float4s in turns, the one that reads
 * the head and the tail: the last, which never has more turns than
 * another. The others' scans end with their float4s, and the last sort of
 * a buffer covers what their last step brought, with no sort before it for
 * a few scalars still to come. */
HOST_DEVICE static inline bool float4_reads_scalars(int member, int members)
{
    return member == members - 1;
}

/* The logits of the head and the tail, read one by one. */
HOST_DEVICE static inline int float4_scalar_count(Float4Split split, int length)
{
    return split.head + length - split.tail_begin;
}

/* The most offers a warp's next step can make, when its next float4 step
 * would start at float4 `next`: a full step's, offers_per_step, while
 * float4s are left; past the last, scalar_offers (float4_scalar_count if
 * the warp reads the head and the tail, else none: its scan is over). */
HOST_DEVICE static inline int float4_offers_at(int next, int vectors, int offers_per_step, int scalar_offers)
{
    return next < vectors ? offers_per_step : scalar_offers;
}
// ANCHOR_END: count_the_offers_still_to_come

/* The entries a sort of a candidate buffer must cover: its count of
 * candidates, and at least k, since the best k are read as a list of k
 * (sentinels fill what the candidates do not); a power of two, as the
 * bitonic network needs. A buffer sorted at the end of a scan holds few
 * candidates: sorting its whole capacity would cost more for nothing. */
HOST_DEVICE static inline int topk_sort_size(int count, int k)
{
    int size = 1;
    while (size < count || size < k) {
        size *= 2;
    }
    return size;
}

/* The length lists of k are merged at on a GPU: the smallest power of two
 * that holds k (the bitonic merge below needs one), sentinels after the k. */
HOST_DEVICE static inline int topk_list_size(int k)
{
    return topk_sort_size(0, k);
}

/* After a step of offers, must a buffer of `capacity` holding `count`
 * candidates be sorted? When the next step's offers (offers_to_come, at
 * most) might not fit; and, while the threshold is still the sentinel,
 * which lets every logit in, as soon as it holds 4k: the threshold a sort
 * sets then, the k-th of 4k, lets in about a quarter of what follows (in
 * random order). Sorted at k already, the threshold would be so low that
 * the buffer filled again and needed a whole sort all the same. Never
 * when no offers are to come: the sort that ends the scan follows, and a
 * sort now would only come before it. */
HOST_DEVICE static inline bool topk_buffer_needs_sort(int count, int capacity, int k, TopkEntry threshold,
                                                      int offers_to_come)
{
    return offers_to_come > 0 && (count > capacity - offers_to_come || (topk_is_sentinel(threshold) && count >= 4 * k));
}

// ANCHOR: sort_with_a_bitonic_network
/* One compare-exchange of a bitonic sorting network that sorts `list` best
 * first: pair number `pair` of the stage that builds sorted runs of `run`
 * elements, comparing partners `stride` apart. The full sort of 2^m
 * elements runs run = 2, 4, ..., 2^m and, for each, stride = run/2, ..., 1,
 * calling this for every pair 0 .. 2^(m-1) - 1; the pairs of a stage are
 * disjoint, so threads may make them at the same time. Threads take pairs,
 * not elements: taking elements, half of them would find their partner
 * below and have nothing to do, and on a GPU they would wait, idle, while
 * the other half of their warp made the exchange. */
HOST_DEVICE static inline void topk_bitonic_step(TopkEntry *list, int pair, int run, int stride)
{
    /* The pair's first element has the bit `stride` clear: the pair's
     * bits below it stay where they are, those above move up one place. */
    int i = (pair & (stride - 1)) | ((pair & ~(stride - 1)) << 1);
    int partner = i + stride;
    bool best_first = (i & run) == 0;
    if (topk_ranks_before(list[partner], list[i]) == best_first) {
        TopkEntry swap = list[i];
        list[i] = list[partner];
        list[partner] = swap;
    }
}
// ANCHOR_END: sort_with_a_bitonic_network

// ANCHOR: merge_two_sorted_topk_lists
/* The first step of merging two lists of `size` entries (a power of two),
 * both sorted best first, into the best `size` of the two: entry i of
 * `kept` against entry size - 1 - i of `other`, the better one kept. The
 * kept entries fall from i = 0 and the other's, read backwards, rise, so
 * the better of each pair falls and then rises (a bitonic sequence), and
 * it is exactly the best `size` of the two lists: where the kept list's
 * entry wins a pair, every entry before it in the kept list is better
 * still, and so is every entry after the other's in the other. The last
 * stage of a bitonic sort (topk_bitonic_step with run = size) then puts
 * it in order. The pairs are disjoint, so threads may take them at once. */
HOST_DEVICE static inline void topk_keep_better_of_pair(TopkEntry *kept, const TopkEntry *other, int size, int i)
{
    TopkEntry challenger = other[size - 1 - i];
    if (topk_ranks_before(challenger, kept[i])) {
        kept[i] = challenger;
    }
}

/* `kept` absorbs `other`: both sorted best first, `size` entries (a power
 * of two; sentinels after the real ones), and `kept` ends with the best
 * `size` of the two, sorted. Here one thread takes every pair in turn; on
 * a GPU (warp_merge_sorted) each lane takes its own. */
HOST_DEVICE static inline void topk_list_merge(TopkEntry *kept, const TopkEntry *other, int size)
{
    for (int i = 0; i < size; i++) {
        topk_keep_better_of_pair(kept, other, size, i);
    }
    for (int stride = size / 2; stride > 0; stride /= 2) {
        for (int pair = 0; pair < size / 2; pair++) {
            topk_bitonic_step(kept, pair, size, stride);
        }
    }
}
// ANCHOR_END: merge_two_sorted_topk_lists

#endif
