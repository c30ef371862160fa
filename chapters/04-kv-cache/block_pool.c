#include "chapters/04-kv-cache/block_pool.h"

#include <string.h>

#include "common/alloc.h"
#include "kernels/paged_kv.h"

BlockPool block_pool_create(int num_blocks, int block_size, bool prefix_caching)
{
    BlockPool pool = {
        .num_blocks = num_blocks,
        .block_size = block_size,
        .prefix_caching = prefix_caching,
        .copy_on_write = true,
        .ref_count = ALLOC_ARRAY(num_blocks, int),
        .free_stack = ALLOC_ARRAY(num_blocks, int32_t),
        .free_count = num_blocks,
        .lru_prev = ALLOC_ARRAY(num_blocks, int32_t),
        .lru_next = ALLOC_ARRAY(num_blocks, int32_t),
        .lru_head = NO_BLOCK,
        .lru_tail = NO_BLOCK,
        .cached = ALLOC_ARRAY(num_blocks, bool),
        .hash = ALLOC_ARRAY(num_blocks, uint64_t),
        .parent_hash = ALLOC_ARRAY(num_blocks, uint64_t),
        .tokens = ALLOC_ARRAY((size_t)num_blocks * block_size, int32_t),
        .bucket_next = ALLOC_ARRAY(num_blocks, int32_t),
    };
    /* Block 0 on top of the stack: a fresh pool hands out 0, 1, 2, ... */
    for (int i = 0; i < num_blocks; i++)
        pool.free_stack[i] = num_blocks - 1 - i;
    pool.n_buckets = 1;
    while (pool.n_buckets < num_blocks)
        pool.n_buckets *= 2;
    pool.bucket_head = ALLOC_ARRAY(pool.n_buckets, int32_t);
    for (int i = 0; i < pool.n_buckets; i++)
        pool.bucket_head[i] = NO_BLOCK;
    return pool;
}

void block_pool_free(BlockPool *pool)
{
    void *arrays[] = {pool->ref_count, pool->free_stack,  pool->lru_prev, pool->lru_next,    pool->cached,
                      pool->hash,      pool->parent_hash, pool->tokens,   pool->bucket_head, pool->bucket_next};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    *pool = (BlockPool){0};
}

void block_pool_shuffle(BlockPool *pool, Rng *rng)
{
    for (int i = pool->free_count - 1; i > 0; i--) {
        int j = (int)rng_below(rng, (uint64_t)i + 1);
        int32_t t = pool->free_stack[i];
        pool->free_stack[i] = pool->free_stack[j];
        pool->free_stack[j] = t;
    }
}

int block_pool_available(const BlockPool *pool)
{
    return pool->free_count + pool->idle_count;
}

bool block_pool_unused(const BlockPool *pool)
{
    for (int b = 0; b < pool->num_blocks; b++)
        if (pool->ref_count[b] != 0)
            return false;
    return block_pool_available(pool) == pool->num_blocks;
}

static void lru_append(BlockPool *pool, int32_t b)
{
    pool->lru_prev[b] = pool->lru_tail;
    pool->lru_next[b] = NO_BLOCK;
    if (pool->lru_tail != NO_BLOCK)
        pool->lru_next[pool->lru_tail] = b;
    else
        pool->lru_head = b;
    pool->lru_tail = b;
    pool->idle_count++;
}

static void lru_remove(BlockPool *pool, int32_t b)
{
    int32_t prev = pool->lru_prev[b], next = pool->lru_next[b];
    if (prev != NO_BLOCK)
        pool->lru_next[prev] = next;
    else
        pool->lru_head = next;
    if (next != NO_BLOCK)
        pool->lru_prev[next] = prev;
    else
        pool->lru_tail = prev;
    pool->idle_count--;
}

static int32_t *bucket_of(BlockPool *pool, uint64_t hash)
{
    return &pool->bucket_head[hash & (uint64_t)(pool->n_buckets - 1)];
}

static void uncache(BlockPool *pool, int32_t b)
{
    int32_t *link = bucket_of(pool, pool->hash[b]);
    while (*link != b)
        link = &pool->bucket_next[*link];
    *link = pool->bucket_next[b];
    pool->cached[b] = false;
}

// ANCHOR: take_a_free_or_evict_a_cached_block
/* A block for new data: a free one if any, else the least recently used
 * cached block, which leaves the prefix cache. */
static int32_t take_block(BlockPool *pool)
{
    int32_t b;
    if (pool->free_count > 0) {
        b = pool->free_stack[--pool->free_count];
    } else {
        b = pool->lru_head;
        lru_remove(pool, b);
        uncache(pool, b);
        pool->stats.evictions++;
    }
    pool->ref_count[b] = 1;
    return b;
}

/* One user fewer. A block nobody uses goes back to the free list, or, if it
 * holds a cached prefix, to the most recently used end of the LRU list. */
static void drop_block(BlockPool *pool, int32_t b)
{
    if (--pool->ref_count[b] > 0)
        return;
    if (pool->cached[b])
        lru_append(pool, b);
    else
        pool->free_stack[pool->free_count++] = b;
}
// ANCHOR_END: take_a_free_or_evict_a_cached_block

BlockTable block_table_create(int capacity)
{
    return (BlockTable){.blocks = ALLOC_ARRAY(capacity, int32_t), .capacity = capacity};
}

void block_table_free(BlockTable *table)
{
    array_free(table->blocks);
    *table = (BlockTable){0};
}

// ANCHOR: reserve_room_copying_a_shared_last_block
bool block_table_reserve(BlockPool *pool, BlockTable *table, int length, BlockCopy *copy)
{
    *copy = (BlockCopy){NO_BLOCK, NO_BLOCK};
    if (length <= table->length)
        return true;
    int bs = pool->block_size, blocks = paged_kv_blocks_for(length, bs);
    int last = table->n_blocks - 1;
    /* The next position lands in the last block unless that block is full.
     * If other sequences share it, they must not see this write. */
    bool write_shared = table->length % bs != 0 && pool->ref_count[table->blocks[last]] > 1 && pool->copy_on_write;
    int needed = blocks - table->n_blocks + (write_shared ? 1 : 0);
    if (blocks > table->capacity || needed > block_pool_available(pool))
        return false;
    if (write_shared) {
        int32_t shared = table->blocks[last], own = take_block(pool);
        *copy = (BlockCopy){shared, own};
        drop_block(pool, shared);
        table->blocks[last] = own;
        pool->stats.copies++;
    }
    while (table->n_blocks < blocks)
        table->blocks[table->n_blocks++] = take_block(pool);
    table->length = length;
    return true;
}
// ANCHOR_END: reserve_room_copying_a_shared_last_block

// ANCHOR: fork_by_sharing_blocks
void block_table_fork(BlockPool *pool, const BlockTable *parent, BlockTable *child)
{
    for (int i = 0; i < parent->n_blocks; i++) {
        child->blocks[i] = parent->blocks[i];
        pool->ref_count[parent->blocks[i]]++;
    }
    child->n_blocks = parent->n_blocks;
    child->length = parent->length;
    child->n_sealed = parent->n_sealed;
}
// ANCHOR_END: fork_by_sharing_blocks

/* Last block first: among a finished sequence's blocks, its prompt's first
 * blocks are the likeliest to be asked for again, so they are evicted last. */
void block_table_release(BlockPool *pool, BlockTable *table)
{
    for (int i = table->n_blocks - 1; i >= 0; i--)
        drop_block(pool, table->blocks[i]);
    table->n_blocks = table->length = table->n_sealed = 0;
}

/* splitmix64's finaliser: every input bit affects every output bit. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// ANCHOR: hash_a_block_with_its_prefix
/* A block's hash covers its tokens and, through the parent's hash, every
 * token before them: equal hashes mean equal prefixes, so equal keys and
 * values (up to a 64-bit collision; a hit also compares the tokens). */
static uint64_t block_hash(uint64_t parent_hash, const int32_t *tokens, int count)
{
    uint64_t h = mix64(parent_hash + 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < count; i++)
        h = mix64(h ^ (uint32_t)tokens[i]);
    return h;
}
// ANCHOR_END: hash_a_block_with_its_prefix

static int32_t find_cached(BlockPool *pool, uint64_t hash, uint64_t parent_hash, const int32_t *tokens)
{
    size_t bytes = sizeof(int32_t) * pool->block_size;
    for (int32_t b = *bucket_of(pool, hash); b != NO_BLOCK; b = pool->bucket_next[b])
        if (pool->hash[b] == hash && pool->parent_hash[b] == parent_hash &&
            memcmp(pool->tokens + (size_t)b * pool->block_size, tokens, bytes) == 0)
            return b;
    return NO_BLOCK;
}

// ANCHOR: reuse_cached_prefix_blocks
int block_table_match_prefix(BlockPool *pool, BlockTable *table, const int32_t *tokens, int n_tokens)
{
    if (!pool->prefix_caching)
        return 0;
    int bs = pool->block_size;
    uint64_t parent = 0;
    for (int i = 0; (i + 1) * bs < n_tokens && i < table->capacity; i++) {
        const int32_t *block_tokens = tokens + (size_t)i * bs;
        uint64_t h = block_hash(parent, block_tokens, bs);
        int32_t b = find_cached(pool, h, parent, block_tokens);
        if (b == NO_BLOCK)
            break;
        if (pool->ref_count[b]++ == 0)
            lru_remove(pool, b);
        table->blocks[table->n_blocks++] = b;
        parent = h;
    }
    table->n_sealed = table->n_blocks;
    table->length = table->n_blocks * bs;
    return table->length;
}
// ANCHOR_END: reuse_cached_prefix_blocks

void block_table_seal(BlockPool *pool, BlockTable *table, const int32_t *tokens)
{
    if (!pool->prefix_caching)
        return;
    int bs = pool->block_size;
    for (int i = table->n_sealed; i < table->length / bs; i++) {
        int32_t b = table->blocks[i];
        uint64_t parent = i > 0 ? pool->hash[table->blocks[i - 1]] : 0;
        const int32_t *block_tokens = tokens + (size_t)i * bs;
        pool->hash[b] = block_hash(parent, block_tokens, bs);
        pool->parent_hash[b] = parent;
        /* An identical block may be cached already (two requests prefilled
         * the same prompt at once): keep that one, this one stays private. */
        if (find_cached(pool, pool->hash[b], parent, block_tokens) == NO_BLOCK) {
            memcpy(pool->tokens + (size_t)b * bs, block_tokens, sizeof(int32_t) * bs);
            int32_t *bucket = bucket_of(pool, pool->hash[b]);
            pool->bucket_next[b] = *bucket;
            *bucket = b;
            pool->cached[b] = true;
        }
    }
    table->n_sealed = table->length / bs;
}
