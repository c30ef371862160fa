#include "chapters/04-kv-cache/contiguous_cache.h"

#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "common/alloc.h"

// ANCHOR: locate_in_contiguous_cache
size_t contiguous_cache_offset(const ContiguousCache *cache, int layer, int seq, int kv_head, int position)
{
    size_t sequence = (size_t)layer * cache->n_seqs + seq;
    size_t head = sequence * cache->n_kv_heads + kv_head;
    return (head * cache->max_len + position) * cache->head_dim;
}
// ANCHOR_END: locate_in_contiguous_cache

/* Every slot already holds max_len positions: room is only a question of length. */
static bool contiguous_reserve(KvCache *base, int seq, int length)
{
    const ContiguousCache *cache = (const ContiguousCache *)base;
    (void)seq;
    return length <= cache->max_len;
}

static void contiguous_store(KvCache *base, int seq, int layer, int kv_head, int position, const float *key,
                             const float *value)
{
    ContiguousCache *cache = (ContiguousCache *)base;
    size_t at = contiguous_cache_offset(cache, layer, seq, kv_head, position);
    memcpy(cache->keys + at, key, sizeof(float) * cache->head_dim);
    memcpy(cache->values + at, value, sizeof(float) * cache->head_dim);
}

static void contiguous_attend(const KvCache *base, int seq, int layer, int kv_head, int length, const float *queries,
                              int n_queries, float *scores, float *out)
{
    const ContiguousCache *cache = (const ContiguousCache *)base;
    size_t at = contiguous_cache_offset(cache, layer, seq, kv_head, 0);
    attend_contiguous(queries, n_queries, cache->keys + at, cache->values + at, length, cache->head_dim, scores, out);
}

/* Nothing to give back: the slot's memory stays reserved for the next sequence. */
static void contiguous_release(KvCache *base, int seq)
{
    (void)base;
    (void)seq;
}

static int contiguous_max_length(const KvCache *base)
{
    return ((const ContiguousCache *)base)->max_len;
}

ContiguousCache contiguous_cache_create(const ModelConfig *c, int n_seqs)
{
    ContiguousCache cache = {
        .base = {contiguous_reserve, contiguous_store, contiguous_attend, contiguous_release, contiguous_max_length},
        .n_layers = c->n_layers,
        .n_seqs = n_seqs,
        .n_kv_heads = c->n_kv_heads,
        .max_len = c->max_seq_len,
        .head_dim = c->head_dim,
    };
    size_t floats = (size_t)c->n_layers * n_seqs * c->n_kv_heads * c->max_seq_len * c->head_dim;
    cache.keys = ALLOC_ARRAY(floats, float);
    cache.values = ALLOC_ARRAY(floats, float);
    return cache;
}

void contiguous_cache_free(ContiguousCache *cache)
{
    array_free(cache->keys);
    array_free(cache->values);
    *cache = (ContiguousCache){0};
}
