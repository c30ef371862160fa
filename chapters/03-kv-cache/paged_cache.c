#include "paged_cache.h"

#include <string.h>

#include "attention.h"
#include "common/alloc.h"

static void copy_block(PagedCache *cache, int32_t from, int32_t to)
{
    size_t floats = paged_kv_block_floats(cache->shape);
    for (int layer = 0; layer < cache->n_layers; layer++) {
        size_t base = layer * cache->layer_floats;
        memcpy(cache->keys + base + to * floats, cache->keys + base + from * floats,
               sizeof(float) * floats);
        memcpy(cache->values + base + to * floats, cache->values + base + from * floats,
               sizeof(float) * floats);
    }
}

static bool paged_reserve(KvCache *base, int seq, int length)
{
    PagedCache *cache = (PagedCache *)base;
    BlockCopy copy;
    if (length > cache->max_len) return false;
    if (!block_table_reserve(&cache->pool, &cache->tables[seq], length, &copy)) return false;
    if (copy.from != NO_BLOCK) copy_block(cache, copy.from, copy.to);
    return true;
}

static void paged_locate(KvCache *base, int seq, int layer, int kv_head, int position,
                         float **key, float **value)
{
    PagedCache *cache = (PagedCache *)base;
    size_t at = layer * cache->layer_floats
                + paged_kv_position_offset(cache->shape, cache->tables[seq].blocks, kv_head, position);
    *key = cache->keys + at;
    *value = cache->values + at;
}

static void paged_attend(const KvCache *base, int seq, int layer, int kv_head, int length,
                         const float *queries, int n_queries, float *scores, float *out)
{
    const PagedCache *cache = (const PagedCache *)base;
    size_t at = layer * cache->layer_floats;
    attend_paged(queries, n_queries, cache->keys + at, cache->values + at, cache->shape,
                 cache->tables[seq].blocks, kv_head, length, scores, out);
}

static void paged_release(KvCache *base, int seq)
{
    PagedCache *cache = (PagedCache *)base;
    block_table_release(&cache->pool, &cache->tables[seq]);
}

static int paged_max_length(const KvCache *base)
{
    const PagedCache *cache = (const PagedCache *)base;
    int pool_positions = cache->pool.num_blocks * cache->pool.block_size;
    return pool_positions < cache->max_len ? pool_positions : cache->max_len;
}

PagedCache paged_cache_create(const ModelConfig *c, int n_seqs, int num_blocks, int block_size,
                              bool prefix_caching)
{
    PagedCache cache = {
        .base = {paged_reserve, paged_locate, paged_attend, paged_release, paged_max_length},
        .pool = block_pool_create(num_blocks, block_size, prefix_caching),
        .shape = {.block_size = block_size, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim},
        .n_layers = c->n_layers,
        .n_seqs = n_seqs,
        .max_len = c->max_seq_len,
    };
    cache.layer_floats = num_blocks * paged_kv_block_floats(cache.shape);
    cache.keys = ALLOC_ARRAY(float, c->n_layers * cache.layer_floats);
    cache.values = ALLOC_ARRAY(float, c->n_layers * cache.layer_floats);
    cache.tables = ALLOC_ARRAY(BlockTable, n_seqs);
    int capacity = paged_kv_blocks_for(c->max_seq_len, block_size);
    for (int s = 0; s < n_seqs; s++) cache.tables[s] = block_table_create(capacity);
    return cache;
}

void paged_cache_free(PagedCache *cache)
{
    for (int s = 0; s < cache->n_seqs; s++) block_table_free(&cache->tables[s]);
    array_free(cache->tables);
    array_free(cache->keys);
    array_free(cache->values);
    block_pool_free(&cache->pool);
    *cache = (PagedCache){0};
}

void paged_cache_fork(PagedCache *cache, int parent, int child)
{
    block_table_fork(&cache->pool, &cache->tables[parent], &cache->tables[child]);
}

int paged_cache_match_prefix(PagedCache *cache, int seq, const int32_t *tokens, int n_tokens)
{
    return block_table_match_prefix(&cache->pool, &cache->tables[seq], tokens, n_tokens);
}

void paged_cache_seal(PagedCache *cache, int seq, const int32_t *tokens)
{
    block_table_seal(&cache->pool, &cache->tables[seq], tokens);
}
