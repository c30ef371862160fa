#include "chapters/03-softmax-topk/topk_collect.h"

#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* The buffer holds 2k candidates, so each selection frees room for k more.
 * A larger buffer selects less often, but its threshold, raised only by a
 * selection, lags further behind the true K-th value, and more logits get
 * past it. */
enum { BUFFER_FACTOR = 2 };

size_t topk_collector_storage(int k)
{
    return (size_t)BUFFER_FACTOR * (size_t)k;
}

void topk_collector_init(TopkCollector *collector, int k, TopkEntry *storage)
{
    collector->k = k;
    collector->uses_list = k <= TOPK_LIST_MAX_K;
    collector->entries = storage;
    collector->count = 0;
    collector->capacity = (int)topk_collector_storage(k);
    collector->threshold = topk_sentinel();
    collector->admitted = 0;
    collector->has_floor = false;
    if (collector->uses_list) {
        topk_fill_sentinels(storage, k);
    }
}

void topk_collector_raise_floor(TopkCollector *collector, float floor)
{
    collector->threshold = topk_entry(floor, TOPK_NO_INDEX);
    collector->uses_list = false;
    collector->has_floor = true;
}

static void swap_entries(TopkEntry *a, TopkEntry *b)
{
    TopkEntry swap = *a;
    *a = *b;
    *b = swap;
}

/* Partition entries[low .. high] around the median of three: returns the
 * pivot's final place, with every entry before it ranking before it. */
static int partition(TopkEntry *entries, int low, int high)
{
    int middle = low + (high - low) / 2;
    if (topk_ranks_before(entries[middle], entries[low])) {
        swap_entries(&entries[middle], &entries[low]);
    }
    if (topk_ranks_before(entries[high], entries[low])) {
        swap_entries(&entries[high], &entries[low]);
    }
    if (topk_ranks_before(entries[middle], entries[high])) {
        swap_entries(&entries[middle], &entries[high]);
    }
    TopkEntry pivot = entries[high];
    int place = low;
    for (int i = low; i < high; i++) {
        if (topk_ranks_before(entries[i], pivot)) {
            swap_entries(&entries[place], &entries[i]);
            place++;
        }
    }
    swap_entries(&entries[place], &entries[high]);
    return place;
}

void topk_select(TopkEntry *entries, int count, int k)
{
    int low = 0, high = count - 1;
    while (low < high) {
        int place = partition(entries, low, high);
        if (place == k - 1) {
            return;
        }
        if (place < k - 1) {
            low = place + 1;
        } else {
            high = place - 1;
        }
    }
}

static void sort_range(TopkEntry *entries, int low, int high)
{
    while (low < high) {
        int place = partition(entries, low, high);
        /* Recurse into the smaller side, loop on the larger: depth O(log n). */
        if (place - low < high - place) {
            sort_range(entries, low, place - 1);
            low = place + 1;
        } else {
            sort_range(entries, place + 1, high);
            high = place - 1;
        }
    }
}

void topk_sort(TopkEntry *entries, int count)
{
    sort_range(entries, 0, count - 1);
}

// ANCHOR: keep_k_best_candidates
static void keep_k_best(TopkCollector *collector)
{
    topk_select(collector->entries, collector->count, collector->k);
    collector->count = collector->k;
    collector->threshold = collector->entries[collector->k - 1];
}

void topk_collector_admit(TopkCollector *collector, TopkEntry entry)
{
    collector->admitted++;
    if (collector->uses_list) {
        topk_list_insert(collector->entries, collector->k, entry);
        collector->threshold = collector->entries[collector->k - 1];
        return;
    }
    collector->entries[collector->count++] = entry;
    if (collector->count == collector->capacity) {
        keep_k_best(collector);
    }
}
// ANCHOR_END: keep_k_best_candidates

// ANCHOR: count_the_keys_with_masks
/* With AVX-512 each comparison of 16 keys gives a mask, which popcnt
 * counts: no sum across the lanes of a register stands between one count
 * and what waits for it. */
int topk_count_keys_reaching(const uint32_t *keys, int n, uint32_t trial)
{
    int reaching = 0;
#if defined(__AVX512F__)
    __m512i broadcast = _mm512_set1_epi32((int)trial);
    for (int i = 0; i < n; i += TOPK_KEY_BLOCK) {
        reaching += __builtin_popcount(_mm512_cmpge_epu32_mask(_mm512_loadu_si512(keys + i), broadcast));
    }
#else
    for (int i = 0; i < n; i++) {
        reaching += keys[i] >= trial;
    }
#endif
    return reaching;
}
// ANCHOR_END: count_the_keys_with_masks

// ANCHOR: count_the_equal_keys_with_masks
/* How many keys equal entry i's own belong to an entry of a larger index:
 * with AVX-512, a mask of the keys equal to its own, and within that mask
 * a comparison of the indices, sixteen of each to an instruction, the
 * second mask counted by popcnt, as topk_count_keys_reaching counts.
 * `padded` keys and indices, the padding keys 0, which no logit has. */
static int equal_keys_after(const uint32_t *keys, const int32_t *indices, int padded, int i)
{
    int after = 0;
#if defined(__AVX512F__)
    __m512i key = _mm512_set1_epi32((int)keys[i]), index = _mm512_set1_epi32(indices[i]);
    for (int j = 0; j < padded; j += TOPK_KEY_BLOCK) {
        __mmask16 equal = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(keys + j), key);
        after += __builtin_popcount(_mm512_mask_cmpgt_epi32_mask(equal, _mm512_loadu_si512(indices + j), index));
    }
#else
    for (int j = 0; j < padded; j++) {
        after += keys[j] == keys[i] && indices[j] > indices[i];
    }
#endif
    return after;
}
// ANCHOR_END: count_the_equal_keys_with_masks

// ANCHOR: sort_few_candidates_by_counting
/* The candidates of a collector with a floor, a few more than K and fewer
 * than the buffer's 2K (a full buffer selects), so at most 127 for K up to
 * 64, are sorted fastest by counting: an entry's place is the number of
 * entries that rank before it. On the values' radix keys (topk_radix_key)
 * that is the number of keys that reach its own, less one (its own), less
 * the equal ones of larger index. count^2 comparisons, but with no branch,
 * 16 to an instruction (topk_count_keys_reaching); a quicksort makes about
 * 1.4 count log2(count), and the processor guesses every other one wrong.
 * Without a tie the places are 0 .. count - 1, whose sum is
 * count (count - 1) / 2; a tie makes it larger, and only then are the
 * equal keys counted. */
enum { COUNTING_SORT_MAX = 128 };

static void sort_numbers_by_counting(TopkEntry *entries, int count)
{
    uint32_t keys[COUNTING_SORT_MAX];
    int32_t indices[COUNTING_SORT_MAX];
    int places[COUNTING_SORT_MAX], padded = (count + TOPK_KEY_BLOCK - 1) / TOPK_KEY_BLOCK * TOPK_KEY_BLOCK, sum = 0;
    for (int i = 0; i < padded; i++) {
        keys[i] = i < count ? topk_radix_key(entries[i].value) : 0; /* 0: no logit's key */
        indices[i] = i < count ? entries[i].index : 0;
    }
    for (int i = 0; i < count; i++) {
        places[i] = topk_count_keys_reaching(keys, padded, keys[i]) - 1;
        sum += places[i];
    }
    bool tied = sum != count * (count - 1) / 2;
    TopkEntry sorted[COUNTING_SORT_MAX];
    for (int i = 0; i < count; i++) {
        sorted[tied ? places[i] - equal_keys_after(keys, indices, padded, i) : places[i]] = entries[i];
    }
    memcpy(entries, sorted, (size_t)count * sizeof *entries);
}
// ANCHOR_END: sort_few_candidates_by_counting

// ANCHOR: finish_the_collection
/* The top K in rank order, with sentinels where the row had fewer: the
 * counting sort where it applies, else select and sort. */
const TopkEntry *topk_collector_finish(TopkCollector *collector)
{
    if (!collector->uses_list) {
        if (collector->has_floor && collector->count <= COUNTING_SORT_MAX) {
            sort_numbers_by_counting(collector->entries, collector->count);
        } else {
            if (collector->count > collector->k) {
                keep_k_best(collector);
            }
            topk_sort(collector->entries, collector->count);
        }
        if (collector->count < collector->k) {
            topk_fill_sentinels(collector->entries + collector->count, collector->k - collector->count);
        }
        collector->count = collector->k;
    }
    return collector->entries;
}
// ANCHOR_END: finish_the_collection
