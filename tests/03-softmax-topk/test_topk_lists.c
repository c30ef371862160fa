/* The top-K building blocks of kernels/softmax_topk.h (order, radix key, insert,
 * merge, bitonic step, merge tree and its numbered rounds, sort sizes) and the CPU collector built on them,
 * against a plain sort of everything. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chapters/03-softmax-topk/topk_collect.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

static int compare_ranks(const void *a, const void *b)
{
    TopkEntry x = *(const TopkEntry *)a, y = *(const TopkEntry *)b;
    return topk_ranks_before(x, y) ? -1 : topk_ranks_before(y, x) ? 1 : 0;
}

/* Logits with many ties, infinities and the odd NaN, indices 0 .. n-1 shuffled. */
static void random_entries(Rng *rng, TopkEntry *entries, int n, bool with_nan)
{
    for (int i = 0; i < n; i++) {
        int kind = (int)rng_below(rng, 40);
        float value = (float)rng_below(rng, 50) * 0.25f - 6.0f; /* 50 distinct values: ties */
        if (kind == 0) {
            value = INFINITY;
        } else if (kind == 1) {
            value = -INFINITY;
        } else if (kind == 2 && with_nan) {
            value = NAN;
        } else if (kind == 3) {
            value = -0.0f;
        } else if (kind == 4) {
            value = 0.0f;
        }
        entries[i] = topk_entry(value, i);
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(rng, (uint64_t)i + 1);
        TopkEntry swap = entries[i];
        entries[i] = entries[j];
        entries[j] = swap;
    }
}

static bool same_entries(const TopkEntry *a, const TopkEntry *b, int k)
{
    for (int j = 0; j < k; j++) {
        if (a[j].index != b[j].index) {
            return false;
        }
    }
    return true;
}

/* The k best of `entries` by sorting a copy. */
static TopkEntry *sorted_copy(const TopkEntry *entries, int n)
{
    TopkEntry *copy = ALLOC_ARRAY(n, TopkEntry);
    for (int i = 0; i < n; i++) {
        copy[i] = entries[i];
    }
    qsort(copy, (size_t)n, sizeof *copy, compare_ranks);
    return copy;
}

static void test_order(void)
{
    TopkEntry a = topk_entry(2.0f, 7), b = topk_entry(2.0f, 9), c = topk_entry(3.0f, 12);
    EXPECT(topk_ranks_before(a, b) && !topk_ranks_before(b, a), "equal logits: lower index first");
    EXPECT(topk_ranks_before(c, a), "larger logit first");
    EXPECT(topk_ranks_before(topk_entry(NAN, 5), topk_entry(INFINITY, 1)), "NaN above +inf");
    EXPECT(topk_ranks_before(topk_entry(NAN, 1), topk_entry(NAN, 5)), "NaNs by index");
    EXPECT(!topk_ranks_before(topk_entry(INFINITY, 0), topk_entry(NAN, 5)), "no number above NaN");
    EXPECT(topk_ranks_before(topk_entry(-0.0f, 1), topk_entry(0.0f, 2)), "-0 and +0 tie: by index");
    EXPECT(topk_ranks_before(topk_entry(-INFINITY, 100), topk_sentinel()), "-inf ranks before the sentinel");
    EXPECT(!topk_ranks_before(topk_sentinel(), topk_sentinel()), "the sentinel does not rank before itself");

    /* A strict total order on entries with distinct indices: exactly one of
     * a < b and b < a, and transitive. */
    Rng rng;
    rng_seed(&rng, 41);
    enum { N = 300 };
    TopkEntry e[N];
    random_entries(&rng, e, N, true);
    int not_total = 0, not_transitive = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            bool ij = topk_ranks_before(e[i], e[j]), ji = topk_ranks_before(e[j], e[i]);
            not_total += i == j ? (ij || ji) : (ij == ji);
            int m = (i * 7 + j * 13) % N;
            not_transitive += ij && topk_ranks_before(e[j], e[m]) && !topk_ranks_before(e[i], e[m]);
        }
    }
    EXPECT(not_total == 0, "%d pairs where the order is not strict and total", not_total);
    EXPECT(not_transitive == 0, "%d triples where the order is not transitive", not_transitive);
}

/* The radix key orders entries as topk_ranks_before does, up to the index:
 * for every pair, key(a) > key(b) exactly when a ranks before b whatever
 * their indices, and equal keys exactly when the index decides. Plus the
 * values at the edges: every NaN bit pattern, the zeros, the infinities,
 * the smallest subnormals and the largest finite floats. */
static void test_radix_key(void)
{
    EXPECT(topk_radix_key(-0.0f) == topk_radix_key(0.0f), "-0 and +0 share a key");
    EXPECT(topk_radix_key(NAN) == UINT32_MAX && topk_radix_key(-NAN) == UINT32_MAX &&
               topk_radix_key(float_from_bits(0x7f800001u)) == UINT32_MAX,
           "every NaN has the largest key");
    const float edges[] = {-INFINITY,    -FLT_MAX, -1.0f, -FLT_MIN, -FLT_TRUE_MIN, -0.0f, 0.0f,
                           FLT_TRUE_MIN, FLT_MIN,  1.0f,  FLT_MAX,  INFINITY,      NAN};
    enum { EDGES = sizeof edges / sizeof edges[0], N = 300 + EDGES };
    TopkEntry e[N];
    Rng rng;
    rng_seed(&rng, 43);
    random_entries(&rng, e, N - EDGES, true);
    for (int i = 0; i < EDGES; i++) {
        e[N - EDGES + i] = topk_entry(edges[i], N - EDGES + i);
    }
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            uint32_t ki = topk_radix_key(e[i].value), kj = topk_radix_key(e[j].value);
            TopkEntry i_first = topk_entry(e[i].value, 0), j_later = topk_entry(e[j].value, 1);
            TopkEntry j_first = topk_entry(e[j].value, 0), i_later = topk_entry(e[i].value, 1);
            bool i_wins_anyway = topk_ranks_before(i_first, j_later) && topk_ranks_before(i_later, j_first);
            bool tie = topk_ranks_before(i_first, j_later) && topk_ranks_before(j_first, i_later);
            wrong += (ki > kj) != i_wins_anyway || (ki == kj) != tie;
        }
    }
    EXPECT(wrong == 0, "%d of %d pairs where the key's order differs from topk_ranks_before", wrong, N * N);
}

/* The 64-bit entry key (version 6's shared threshold) orders entries
 * exactly as topk_ranks_before, index included, and an entry read back from
 * its key ranks as the original does against every other entry. */
static void test_entry_key(void)
{
    enum { N = 400 };
    TopkEntry e[N];
    Rng rng;
    rng_seed(&rng, 44);
    random_entries(&rng, e, N - 1, true);
    e[N - 1] = topk_sentinel();
    int wrong_order = 0, wrong_round_trip = 0;
    for (int i = 0; i < N; i++) {
        TopkEntry back = topk_entry_from_key(topk_entry_key(e[i]));
        wrong_round_trip += back.index != e[i].index;
        for (int j = 0; j < N; j++) {
            wrong_order += (topk_entry_key(e[i]) > topk_entry_key(e[j])) != topk_ranks_before(e[i], e[j]);
            wrong_round_trip += i != j && topk_ranks_before(back, e[j]) != topk_ranks_before(e[i], e[j]);
        }
    }
    EXPECT(wrong_order == 0, "%d of %d pairs where the 64-bit key's order differs from topk_ranks_before", wrong_order,
           N * N);
    EXPECT(wrong_round_trip == 0, "%d entries read back from their key rank differently", wrong_round_trip);
}

static void test_list_insert(void)
{
    Rng rng;
    rng_seed(&rng, 42);
    const int ks[] = {1, 2, 5, 32};
    enum { N = 1000 };
    TopkEntry stream[N];
    int wrong = 0;
    for (int trial = 0; trial < 20; trial++) {
        random_entries(&rng, stream, N, trial % 2 == 0);
        TopkEntry *expected = sorted_copy(stream, N);
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            TopkEntry list[32];
            topk_fill_sentinels(list, ks[t]);
            for (int i = 0; i < N; i++) {
                topk_list_insert(list, ks[t], stream[i]);
            }
            wrong += !same_entries(list, expected, ks[t]);
        }
        array_free(expected);
    }
    EXPECT(wrong == 0, "sorted-list insert: %d of 80 lists differ from a full sort", wrong);
}

/* Merging two lists built from disjoint parts of a stream, each possibly
 * not full (sentinels at the end), gives the top k of the union. */
/* Two lists merged (topk_list_merge, padded with sentinels to
 * topk_list_size(k)) hold the best k of everything both saw. */
static void test_merge(void)
{
    Rng rng;
    rng_seed(&rng, 43);
    enum { N = 400 };
    TopkEntry stream[N];
    int wrong = 0, cases = 0;
    const int ks[] = {1, 3, 16, 33, 64};
    const int splits[] = {0, 2, 50, 200, 399, 400};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            int k = ks[t], split = splits[s], size = topk_list_size(k);
            random_entries(&rng, stream, N, s % 2 == 0);
            TopkEntry a[64], b[64];
            topk_fill_sentinels(a, size);
            topk_fill_sentinels(b, size);
            for (int i = 0; i < N; i++) {
                topk_list_insert(i < split ? a : b, k, stream[i]);
            }
            topk_list_merge(a, b, size);
            TopkEntry *expected = sorted_copy(stream, N);
            wrong += !same_entries(a, expected, k);
            array_free(expected);
            cases++;
        }
    }
    EXPECT(wrong == 0, "merge: %d of %d merged lists differ from a full sort", wrong, cases);
}

/* Run the bitonic network the way the kernel does (every pair, stage by
 * stage) and compare with a sort. */
static void test_bitonic_network(void)
{
    Rng rng;
    rng_seed(&rng, 44);
    int wrong = 0;
    for (int size = 1; size <= 1024; size *= 2) {
        TopkEntry *list = ALLOC_ARRAY(size, TopkEntry);
        random_entries(&rng, list, size, true);
        /* Half sentinels in the larger lists, as in a buffer not yet full. */
        for (int i = size / 2; i < size && size >= 8; i += 2) {
            list[i] = topk_sentinel();
        }
        TopkEntry *expected = sorted_copy(list, size);
        for (int run = 2; run <= size; run *= 2) {
            for (int stride = run / 2; stride > 0; stride /= 2) {
                for (int pair = 0; pair < size / 2; pair++) {
                    topk_bitonic_step(list, pair, run, stride);
                }
            }
        }
        for (int i = 0; i < size; i++) {
            wrong += list[i].index != expected[i].index;
        }
        array_free(list);
        array_free(expected);
    }
    EXPECT(wrong == 0, "bitonic network: %d entries out of place", wrong);
}

/* The merge tree absorbs every state exactly once, only from states that
 * were not absorbed before, and leaves everything in state 0. */
static void test_merge_tree(void)
{
    int bad = 0;
    for (int count = 1; count <= 64; count++) {
        unsigned long long covered[64];
        bool absorbed[64] = {false};
        for (int i = 0; i < count; i++) {
            covered[i] = 1ull << i;
        }
        for (int span = 1; span < count; span *= 2) {
            for (int i = 0; i < count; i++) {
                if (merge_tree_absorbs(i, span, count)) {
                    bad += absorbed[i] || absorbed[i + span] || (covered[i] & covered[i + span]) != 0;
                    covered[i] |= covered[i + span];
                    absorbed[i + span] = true;
                }
            }
        }
        unsigned long long all = count == 64 ? ~0ull : (1ull << count) - 1;
        bad += covered[0] != all;
    }
    EXPECT(bad == 0, "merge tree: %d violations over counts 1..64", bad);
}

/* Numbered, a round's merges are exactly the ones merge_tree_absorbs
 * names, each once, in every group of several: what block_merge_partials
 * deals to its 8 warps in turn. When the groups divide 8, the merges a warp
 * takes are 2 span 8 / groups partials apart, as it assumes. */
static void test_merge_tree_numbered(void)
{
    enum { WARPS = 8 };
    int bad = 0, unevenly_spaced = 0;
    for (int count = 1; count <= 40; count++) {
        for (int groups = 1; groups <= 4; groups++) {
            for (int span = 1; span < count; span *= 2) {
                int named[160] = {0};
                int merges = groups * merge_tree_merges(count, span);
                for (int m = 0; m < merges; m++) {
                    int i = merge_tree_target(m, span, count, groups);
                    bad += i < 0 || i >= groups * count || named[i]++ > 0;
                    if (WARPS % groups == 0 && m >= WARPS) {
                        int before = merge_tree_target(m - WARPS, span, count, groups);
                        unevenly_spaced += i - before != 2 * span * WARPS / groups;
                    }
                }
                for (int i = 0; i < groups * count; i++)
                    bad += named[i] != (int)merge_tree_absorbs(i % count, span, count);
            }
        }
    }
    EXPECT(bad == 0, "numbered merge tree: %d violations over counts 1..40, 1-4 groups", bad);
    EXPECT(unevenly_spaced == 0, "numbered merge tree: %d merges of a warp not evenly spaced", unevenly_spaced);
}

/* A sort of a candidate buffer covers the count and k, in a power of two,
 * and no more: the next power down would miss one of them. */
static void test_sort_size(void)
{
    int bad = 0;
    for (int k = 1; k <= 300; k++) {
        for (int count = 0; count <= 600; count++) {
            int size = topk_sort_size(count, k);
            bool power_of_two = size > 0 && (size & (size - 1)) == 0;
            bad += !power_of_two || size < count || size < k || (size > 1 && size / 2 >= count && size / 2 >= k);
        }
    }
    EXPECT(bad == 0, "topk_sort_size: %d wrong sizes", bad);
}

static void test_select_and_sort(void)
{
    Rng rng;
    rng_seed(&rng, 45);
    enum { N = 999 };
    TopkEntry entries[N];
    int wrong = 0;
    for (int k = 1; k <= N; k += 97) {
        random_entries(&rng, entries, N, true);
        TopkEntry *expected = sorted_copy(entries, N);
        topk_select(entries, N, k);
        /* The first k are the k best (in any order), the k-th best at k - 1. */
        wrong += entries[k - 1].index != expected[k - 1].index;
        topk_sort(entries, k);
        wrong += !same_entries(entries, expected, k);
        array_free(expected);
    }
    EXPECT(wrong == 0, "select + sort: %d failures", wrong);
}

/* Offer the whole stream to a collector of k, its floor raised first unless
 * `floor` is NULL: does it finish with the k best, as in `expected` (the
 * stream sorted)? */
static bool collector_keeps_the_best(const TopkEntry *stream, int n, int k, const float *floor,
                                     const TopkEntry *expected)
{
    TopkEntry *storage = ALLOC_ARRAY(topk_collector_storage(k), TopkEntry);
    TopkCollector collector;
    topk_collector_init(&collector, k, storage);
    if (floor != NULL) {
        topk_collector_raise_floor(&collector, *floor);
    }
    for (int i = 0; i < n; i++) {
        topk_collector_offer(&collector, stream[i]);
    }
    bool kept = same_entries(topk_collector_finish(&collector), expected, k);
    array_free(storage);
    return kept;
}

/* Both collector structures (list for small k, buffer for large k), with
 * streams shorter than, equal to and much longer than the buffer. */
static void test_collector(void)
{
    Rng rng;
    rng_seed(&rng, 46);
    const int ks[] = {1, 7, TOPK_LIST_MAX_K, TOPK_LIST_MAX_K + 1, 64, 256};
    const int lengths[] = {1, 100, 256, 1024, 20000};
    int wrong = 0, cases = 0;
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            int k = ks[t], n = lengths[l];
            if (k > n) {
                continue;
            }
            TopkEntry *stream = ALLOC_ARRAY(n, TopkEntry);
            random_entries(&rng, stream, n, l % 2 == 1);
            TopkEntry *expected = sorted_copy(stream, n);
            wrong += !collector_keeps_the_best(stream, n, k, NULL, expected);
            cases++;
            array_free(expected);
            array_free(stream);
        }
    }
    EXPECT(wrong == 0, "collector: %d of %d cases differ from a full sort", wrong, cases);
}

/* A collector whose floor is the k-th best value takes every entry equal
 * to it that belongs to the top k (the streams are full of ties and come
 * in no order of index), and ends up with the k best, at every k. With a
 * floor the collector keeps a buffer: a tight floor lets few more than k
 * in, which the finish sorts by counting; a loose one (the 4k-th best)
 * lets so many in that the buffer fills and selects on the way. */
static void test_collector_floor(void)
{
    Rng rng;
    rng_seed(&rng, 47);
    const int ks[] = {1, 7, TOPK_LIST_MAX_K, TOPK_LIST_MAX_K + 1, 64};
    int wrong = 0, cases = 0;
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (int repeat = 0; repeat < 20; repeat++) {
            enum { N = 1000 };
            int k = ks[t], floor_rank = repeat % 2 == 0 ? k : 4 * k;
            TopkEntry *stream = ALLOC_ARRAY(N, TopkEntry);
            random_entries(&rng, stream, N, false);
            TopkEntry *expected = sorted_copy(stream, N);
            wrong += !collector_keeps_the_best(stream, N, k, &expected[floor_rank - 1].value, expected);
            cases++;
            array_free(expected);
            array_free(stream);
        }
    }
    EXPECT(wrong == 0, "collector with a floor: %d of %d cases differ from a full sort", wrong, cases);
}

/* Version 9's floor, replayed on rows cut into steps of 128 logits: the
 * bitwise search finds the k-th largest key of a sorted copy, the floor's
 * threshold lets in every entry of the top k (ties at the floor included),
 * and each of them lies in a step whose key reaches the floor. */
static void test_step_floor(void)
{
    enum { STEP = 128, MAX_STEPS = 40 };
    Rng rng;
    rng_seed(&rng, 45);
    int wrong_kth = 0, missed = 0, wrong_members = 0, cases = 0;
    const int ks[] = {1, 2, 3, 8, 17, 40};
    for (int steps = 1; steps <= MAX_STEPS; steps += 3) {
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            int k = ks[t], n = steps * STEP;
            TopkEntry *row = ALLOC_ARRAY(n, TopkEntry);
            random_entries(&rng, row, n, false);
            for (int i = 0; i < n; i++) {
                row[i].index = i; /* the row in index order: step s holds [128 s, 128 s + 128) */
            }
            uint32_t keys[MAX_STEPS], sorted[MAX_STEPS];
            for (int s = 0; s < steps; s++) {
                float max = -INFINITY;
                for (int i = s * STEP; i < (s + 1) * STEP; i++) {
                    max = fmaxf(max, row[i].value);
                }
                keys[s] = sorted[s] = topk_radix_key(max);
            }
            for (int a = 0; a < steps; a++) { /* descending */
                for (int b = a + 1; b < steps; b++) {
                    if (sorted[b] > sorted[a]) {
                        uint32_t swap = sorted[a];
                        sorted[a] = sorted[b];
                        sorted[b] = swap;
                    }
                }
            }
            uint32_t kth = topk_kth_largest_key(keys, steps, k);
            wrong_kth += steps >= k ? kth != sorted[k - 1] : kth != 0;
            uint32_t floor_key = topk_step_floor_key(kth, steps, k, false);
            TopkEntry threshold = topk_entry_from_key(topk_floor_entry_key(floor_key));
            TopkEntry *best = sorted_copy(row, n);
            for (int j = 0; j < k && j < n; j++) {
                int step = best[j].index / STEP;
                missed += !topk_ranks_before(best[j], threshold) || keys[step] < floor_key;
            }
            int covered = 0;
            for (int member = 0; member < 8; member++) {
                covered += topk_member_steps(steps, member, 8);
            }
            wrong_members += covered != steps;
            cases++;
            array_free(best);
            array_free(row);
        }
    }
    EXPECT(wrong_kth == 0, "bitwise search: %d of %d cases differ from the k-th of a sorted copy", wrong_kth, cases);
    EXPECT(missed == 0, "%d top-k entries below the floor's threshold or in a step under the floor", missed);
    EXPECT(wrong_members == 0, "%d cases where the warps' steps do not add up to the row's", wrong_members);
    EXPECT(topk_step_floor_key(123u, 4, 8, false) == topk_radix_key(-INFINITY) &&
               topk_step_floor_key(123u, 9, 8, true) == topk_radix_key(-INFINITY) &&
               topk_step_floor_key(123u, 9, 8, false) == 123u,
           "the floor falls back to -inf with fewer than k steps or a NaN sum");
    EXPECT(topk_floor_entry_key(topk_radix_key(-INFINITY)) == topk_entry_key(topk_sentinel()),
           "the floor of -inf is the sentinel");
    EXPECT(topk_step_keys_per_row(128256) == 1002 && topk_step_keys_per_row(127) == 1 &&
               topk_step_keys_per_row(129) == 1 && topk_step_keys_per_row(3) == 0,
           "steps per row");
}

int main(void)
{
    test_order();
    test_radix_key();
    test_entry_key();
    test_list_insert();
    test_merge();
    test_bitonic_network();
    test_merge_tree();
    test_merge_tree_numbered();
    test_sort_size();
    test_select_and_sort();
    test_collector();
    test_collector_floor();
    test_step_floor();
    return test_finish();
}
