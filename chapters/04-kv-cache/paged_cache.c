#include "chapters/04-kv-cache/paged_cache.h"

#include <math.h>
#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "common/alloc.h"
#include "common/cli.h"

static void copy_block(PagedCache *cache, int32_t from, int32_t to)
{
    size_t key_bytes = kv_block_bytes(cache->key_layout), value_bytes = kv_block_bytes(cache->value_layout);
    for (int layer = 0; layer < cache->n_layers; layer++) {
        uint8_t *keys = cache->keys + layer * cache->key_layer_bytes;
        uint8_t *values = cache->values + layer * cache->value_layer_bytes;
        memcpy(keys + to * key_bytes, keys + from * key_bytes, key_bytes);
        memcpy(values + to * value_bytes, values + from * value_bytes, value_bytes);
    }
}

static bool paged_reserve(KvCache *base, int seq, int length)
{
    PagedCache *cache = (PagedCache *)base;
    BlockCopy copy;
    if (length > cache->max_len)
        return false;
    if (!block_table_reserve(&cache->pool, &cache->tables[seq], length, &copy))
        return false;
    if (copy.from != NO_BLOCK)
        copy_block(cache, copy.from, copy.to);
    return true;
}

/* The float keys of one sequence's last block, in one layer and kv head. */
static float *recent_key_rows(const PagedCache *cache, int seq, int layer, int kv_head)
{
    size_t head = ((size_t)seq * cache->n_layers + layer) * cache->shape.n_kv_heads + kv_head;
    return cache->recent_keys + head * cache->shape.block_size * cache->shape.head_dim;
}

/* One layer's layout: with FP8 scales set, that layer's scale of each kv head. */
static KvBlockLayout layer_layout(const PagedCache *cache, KvBlockLayout l, const float *scales, int layer)
{
    return scales != NULL ? kv_fp8_per_head(l, scales + (size_t)layer * cache->shape.n_kv_heads) : l;
}

// ANCHOR: store_a_position_in_the_block_format
/* A position's key and value go into their block's slot, quantized as the
 * format says. Keys with per-channel scales need the block's other keys
 * too: the float copy of the sequence's last block keeps them until the
 * block is full, and the block is quantized again from it. */
static void paged_store(KvCache *base, int seq, int layer, int kv_head, int position, const float *key,
                        const float *value)
{
    PagedCache *cache = (PagedCache *)base;
    int32_t block = cache->tables[seq].blocks[position / cache->shape.block_size];
    int slot = position % cache->shape.block_size;
    uint8_t *key_head =
        cache->keys + layer * cache->key_layer_bytes + kv_head_offset(cache->key_layout, block, kv_head);
    uint8_t *value_head =
        cache->values + layer * cache->value_layer_bytes + kv_head_offset(cache->value_layout, block, kv_head);
    if (cache->key_layout.axis == KV_SCALE_PER_CHANNEL) {
        float *recent = recent_key_rows(cache, seq, layer, kv_head);
        memcpy(recent + (size_t)slot * cache->shape.head_dim, key, sizeof(float) * cache->shape.head_dim);
        kv_store_block_per_channel(cache->key_layout, key_head, recent, slot + 1);
    } else {
        kv_store_row(kv_head_layout(layer_layout(cache, cache->key_layout, cache->key_scales, layer), kv_head),
                     key_head, slot, key);
    }
    kv_store_row(kv_head_layout(layer_layout(cache, cache->value_layout, cache->value_scales, layer), kv_head),
                 value_head, slot, value);
}
// ANCHOR_END: store_a_position_in_the_block_format

static void paged_attend(const KvCache *base, int seq, int layer, int kv_head, int length, const float *queries,
                         int n_queries, float *scores, float *out)
{
    const PagedCache *cache = (const PagedCache *)base;
    const uint8_t *keys = cache->keys + layer * cache->key_layer_bytes;
    const uint8_t *values = cache->values + layer * cache->value_layer_bytes;
    const int32_t *table = cache->tables[seq].blocks;
    if (cache->format == KV_FORMAT_FLOAT32) {
        attend_paged(queries, n_queries, (const float *)keys, (const float *)values, cache->shape, table, kv_head,
                     length, scores, out);
        return;
    }
    KvPool key_pool = {keys, layer_layout(cache, cache->key_layout, cache->key_scales, layer)};
    KvPool value_pool = {values, layer_layout(cache, cache->value_layout, cache->value_scales, layer)};
    attend_paged_quantized(queries, n_queries, key_pool, value_pool, table, kv_head, length, cache->tile, scores, out);
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

PagedCache paged_cache_create_in(const ModelConfig *c, int n_seqs, int num_blocks, int block_size, bool prefix_caching,
                                 KvFormat format, int int4_group)
{
    PagedCache cache = {
        .base = {paged_reserve,     paged_store, paged_attend, paged_release, paged_max_length},
        .pool = block_pool_create(num_blocks, block_size, prefix_caching),
        .shape = {.block_size = block_size, .n_kv_heads = c->n_kv_heads,            .head_dim = c->head_dim},
        .format = format,
        .n_layers = c->n_layers,
        .n_seqs = n_seqs,
        .max_len = c->max_seq_len,
    };
    cache.key_layout = kv_layout(format, true, cache.shape, int4_group);
    cache.value_layout = kv_layout(format, false, cache.shape, int4_group);
    cache.key_layer_bytes = num_blocks * kv_block_bytes(cache.key_layout);
    cache.value_layer_bytes = num_blocks * kv_block_bytes(cache.value_layout);
    cache.keys = ALLOC_ARRAY(c->n_layers * cache.key_layer_bytes, uint8_t);
    cache.values = ALLOC_ARRAY(c->n_layers * cache.value_layer_bytes, uint8_t);
    size_t block_floats = (size_t)block_size * c->head_dim;
    if (cache.key_layout.axis == KV_SCALE_PER_CHANNEL)
        cache.recent_keys = ALLOC_ARRAY((size_t)n_seqs * c->n_layers * c->n_kv_heads * block_floats, float);
    cache.tile = ALLOC_ARRAY(block_floats, float);
    cache.tables = ALLOC_ARRAY(n_seqs, BlockTable);
    int capacity = paged_kv_blocks_for(c->max_seq_len, block_size);
    for (int s = 0; s < n_seqs; s++)
        cache.tables[s] = block_table_create(capacity);
    return cache;
}

PagedCache paged_cache_create(const ModelConfig *c, int n_seqs, int num_blocks, int block_size, bool prefix_caching)
{
    return paged_cache_create_in(c, n_seqs, num_blocks, block_size, prefix_caching, KV_FORMAT_FLOAT32,
                                 KV_DEFAULT_INT4_GROUP);
}

void paged_cache_free(PagedCache *cache)
{
    for (int s = 0; s < cache->n_seqs; s++)
        block_table_free(&cache->tables[s]);
    array_free(cache->tables);
    array_free(cache->keys);
    array_free(cache->values);
    array_free(cache->recent_keys);
    array_free(cache->tile);
    array_free(cache->key_scales);
    array_free(cache->value_scales);
    block_pool_free(&cache->pool);
    *cache = (PagedCache){0};
}

void paged_cache_set_fp8_scales(PagedCache *cache, const float *key_scales, const float *value_scales)
{
    size_t count = (size_t)cache->n_layers * cache->shape.n_kv_heads;
    array_free(cache->key_scales);
    array_free(cache->value_scales);
    cache->key_scales = ALLOC_ARRAY(count, float);
    cache->value_scales = ALLOC_ARRAY(count, float);
    memcpy(cache->key_scales, key_scales, sizeof(float) * count);
    memcpy(cache->value_scales, value_scales, sizeof(float) * count);
}

static void note_largest(KvBlockLayout l, const uint8_t *head, int count, float *largest)
{
    const float *rows = (const float *)head;
    float block_largest = kv_largest_magnitude(rows, count * l.shape.head_dim, 1);
    *largest = kv_larger_or_nan(block_largest, *largest);
}

void paged_cache_largest(const PagedCache *cache, int seq, int length, float *largest_key, float *largest_value)
{
    if (cache->format != KV_FORMAT_FLOAT32) /* note_largest reads floats */
        cli_fail_status(1, "paged_cache_largest reads float32 caches, not format %d (a program error)",
                        (int)cache->format);
    int heads = cache->shape.n_kv_heads, block_size = cache->shape.block_size;
    const int32_t *table = cache->tables[seq].blocks;
    for (int layer = 0; layer < cache->n_layers; layer++) {
        const uint8_t *keys = cache->keys + layer * cache->key_layer_bytes;
        const uint8_t *values = cache->values + layer * cache->value_layer_bytes;
        for (int h = 0; h < heads; h++) {
            float *key = &largest_key[layer * heads + h], *value = &largest_value[layer * heads + h];
            *key = *value = 0.0f;
            for (int b = 0; b < paged_kv_blocks_for(length, block_size); b++) {
                int count = paged_kv_positions_in_block(length, b, block_size);
                note_largest(cache->key_layout, keys + kv_head_offset(cache->key_layout, table[b], h), count, key);
                note_largest(cache->value_layout, values + kv_head_offset(cache->value_layout, table[b], h), count,
                             value);
            }
        }
    }
}

void paged_cache_fork(PagedCache *cache, int parent, int child)
{
    block_table_fork(&cache->pool, &cache->tables[parent], &cache->tables[child]);
    if (cache->recent_keys) {
        size_t floats =
            (size_t)cache->n_layers * cache->shape.n_kv_heads * cache->shape.block_size * cache->shape.head_dim;
        memcpy(recent_key_rows(cache, child, 0, 0), recent_key_rows(cache, parent, 0, 0), sizeof(float) * floats);
    }
}

int paged_cache_match_prefix(PagedCache *cache, int seq, const int32_t *tokens, int n_tokens)
{
    return block_table_match_prefix(&cache->pool, &cache->tables[seq], tokens, n_tokens);
}

void paged_cache_seal(PagedCache *cache, int seq, const int32_t *tokens)
{
    block_table_seal(&cache->pool, &cache->tables[seq], tokens);
}
