/* The interface between the model and a key/value cache.
 *
 * The forward pass never knows how keys and values are stored: it asks the
 * cache for room, to store one position's key and value, and for the
 * attention of a group of query heads over a sequence's first `length`
 * positions. The contiguous cache and the paged cache implement it; the
 * model code is the same for both, so any difference between their logits
 * is a difference in the caches. */
#ifndef CHAPTERS_04_KV_CACHE_CACHE_H
#define CHAPTERS_04_KV_CACHE_CACHE_H

#include <stdbool.h>

typedef struct KvCache KvCache;

// ANCHOR: define_cache_interface
struct KvCache {
    /* Make room for sequence `seq` to hold `length` positions (its current
     * ones plus the new tokens of the next forward pass). False when the
     * cache has no room; nothing has changed then. */
    bool (*reserve)(KvCache *cache, int seq, int length);
    /* Store the key and the value (head_dim floats each) of
     * (seq, layer, kv_head, position), in whatever form the cache keeps. */
    void (*store)(KvCache *cache, int seq, int layer, int kv_head, int position, const float *key, const float *value);
    /* Attention of the n_queries query heads that share kv_head, over the
     * positions [0, length) of seq: out[q][head_dim]. `scores` is scratch
     * for n_queries * length floats. */
    void (*attend)(const KvCache *cache, int seq, int layer, int kv_head, int length, const float *queries,
                   int n_queries, float *scores, float *out);
    /* Forget sequence `seq`: its room goes back to the cache. */
    void (*release)(KvCache *cache, int seq);
    /* The most positions one sequence could hold, with the cache to itself. */
    int (*max_length)(const KvCache *cache);
};
// ANCHOR_END: define_cache_interface

#endif
