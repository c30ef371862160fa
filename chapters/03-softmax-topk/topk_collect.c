#include "chapters/03-softmax-topk/topk_collect.h"

#include <stdint.h>
#include <string.h>

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

// ANCHOR: sort_few_candidates_by_counting
/* The candidates of a collector with a floor, a few more than K and fewer
 * than the buffer's 2K (a full buffer selects), so at most 127 for K up to
 * 64, are sorted fastest by counting: an entry's place is
 * the number of entries that rank before it (unique, since the order is
 * strict). That is count^2 comparisons, but with no branch, and on the
 * entries' 64-bit keys (topk_entry_key: value and index in one number,
 * ordered as topk_ranks_before orders entries) 8 to a vector instruction;
 * a quicksort makes about 1.4 count log2(count), and the processor guesses
 * every other one wrong. */
enum { COUNTING_SORT_MAX = 128 };

static void sort_numbers_by_counting(TopkEntry *entries, int count)
{
    uint64_t keys[COUNTING_SORT_MAX];
    for (int i = 0; i < count; i++) {
        keys[i] = topk_entry_key(entries[i]);
    }
    TopkEntry sorted[COUNTING_SORT_MAX];
    for (int i = 0; i < count; i++) {
        int place = 0;
        for (int j = 0; j < count; j++) {
            place += keys[j] > keys[i];
        }
        sorted[place] = entries[i];
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
