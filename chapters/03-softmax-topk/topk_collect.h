/* Collecting the K best of a stream of logits on the CPU.
 *
 * The structure depends on K. For small K a sorted list (the one the GPU
 * keeps in registers, kernels/softmax_topk.h): an entry that gets in costs
 * up to K moves. For large K that is too slow, so candidates are appended to
 * a buffer, and when the buffer is full a selection (quickselect) keeps the
 * K best and discards the rest; the few dozen left at the end are sorted by
 * counting. A collector whose floor is raised uses the buffer at every K
 * (see topk_collector_raise_floor). Either way, an entry must rank before the
 * collector's threshold to be looked at: in a long row almost none does, so
 * the cost per logit is one comparison. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_TOPK_COLLECT_H
#define CHAPTERS_03_SOFTMAX_TOPK_TOPK_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/softmax_topk.h"

/* Above this K the candidate buffer beats the sorted list. */
#define TOPK_LIST_MAX_K 32

typedef struct {
    int k;
    bool uses_list;      /* k <= TOPK_LIST_MAX_K, and no floor raised */
    bool has_floor;      /* topk_collector_raise_floor was called */
    TopkEntry *entries;  /* list: k entries, best first; buffer: candidates */
    int count;           /* buffer: candidates held */
    int capacity;        /* buffer: candidates it can hold */
    TopkEntry threshold; /* an entry is a candidate only if it ranks before this */
    long admitted;       /* entries that got past the threshold */
} TopkCollector;

/* Entries of storage a collector for k needs. */
size_t topk_collector_storage(int k);

/* Start collecting the best k (k >= 1) into `storage`. */
void topk_collector_init(TopkCollector *collector, int k, TopkEntry *storage);

/* Before the first offer: only logits >= floor can be among the K best, so
 * the collector takes no other. Its threshold is raised to the floor: an
 * entry (floor, TOPK_NO_INDEX) ranks after every logit >= floor (their
 * indices are smaller) and before every logit below it. The floor must be
 * right: at least K logits of the stream are >= floor, and the stream must
 * hold no NaN (the order of numbers sorts it). A floor close to the
 * K-th best lets few more than K in, so the collector keeps them in the
 * buffer, whatever K: appended without a comparison, and sorted once at the
 * end (topk_collector_finish) without a branch, where the list would stop
 * each insertion at a place the processor cannot predict. */
void topk_collector_raise_floor(TopkCollector *collector, float floor);

/* Take an entry that ranks before the threshold. */
void topk_collector_admit(TopkCollector *collector, TopkEntry entry);

// ANCHOR: offer_candidate_to_collector
static inline void topk_collector_offer(TopkCollector *collector, TopkEntry entry)
{
    if (topk_ranks_before(entry, collector->threshold)) {
        topk_collector_admit(collector, entry);
    }
}
// ANCHOR_END: offer_candidate_to_collector

/* While a collector's threshold is its floor, every entry that reaches
 * the floor's value ranks before it (the floor has no index), and until
 * the buffer is full no selection raises it: so many entries can be taken
 * without a comparison (one fewer than would fill it, where the next
 * offer selects). 0 for a collector without a floor or past a selection. */
static inline int topk_collector_room_at_floor(const TopkCollector *collector)
{
    bool at_floor = collector->has_floor && topk_is_sentinel(collector->threshold);
    return at_floor ? collector->capacity - 1 - collector->count : 0;
}

/* Take an entry that reaches the floor, within that room. */
static inline void topk_collector_take(TopkCollector *collector, TopkEntry entry)
{
    collector->entries[collector->count++] = entry;
    collector->admitted++;
}

/* The k best, sorted best first (sentinels where fewer than k were offered).
 * The few dozen candidates of a collector with a floor are sorted by
 * counting; more, or a stream that may hold NaN, by a selection and a
 * quicksort. */
const TopkEntry *topk_collector_finish(TopkCollector *collector);

/* Reorder entries[0 .. count) so that the first k are the k best, with the
 * k-th best at k - 1 (like C++'s nth_element). 1 <= k <= count. */
void topk_select(TopkEntry *entries, int count, int k);

/* Sort entries best first. */
void topk_sort(TopkEntry *entries, int count);

/* How many of the n keys are at least `trial`; n is a multiple of
 * TOPK_KEY_BLOCK (the keys of one AVX-512 comparison). */
enum { TOPK_KEY_BLOCK = 16 };

int topk_count_keys_reaching(const uint32_t *keys, int n, uint32_t trial);

#endif
