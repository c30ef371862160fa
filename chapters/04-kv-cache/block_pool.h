/* The block manager of a paged KV cache: which physical block holds which
 * part of which sequence. It moves no keys or values; it tells its caller
 * when a block must be copied.
 *
 * - A pool of num_blocks blocks of block_size positions, with a free list.
 * - A block table per sequence: logical block i -> physical block.
 * - Reference counts, so that sequences forked from one prompt share its
 *   blocks; writing into a shared block copies it first (copy-on-write).
 * - A prefix cache: a full block is known by a hash of its tokens and of all
 *   tokens before it. A new sequence whose prompt starts with cached blocks
 *   takes them instead of computing them again. Blocks nobody uses stay
 *   cached until the pool runs out; then the least recently used goes first. */
#ifndef CHAPTERS_04_KV_CACHE_BLOCK_POOL_H
#define CHAPTERS_04_KV_CACHE_BLOCK_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/rng.h"

// ANCHOR: define_block_table
typedef struct {
    int32_t *blocks; /* physical block of each logical block */
    int n_blocks;    /* logical blocks in use */
    int capacity;    /* most logical blocks the table can hold */
    int length;      /* positions the sequence has room for (reserved) */
    int n_sealed;    /* leading full blocks already offered to the prefix cache */
} BlockTable;
// ANCHOR_END: define_block_table

typedef struct {
    long evictions; /* cached blocks taken back for new data */
    long copies;    /* copy-on-write copies */
} BlockPoolStats;

#define NO_BLOCK (-1)

typedef struct {
    int num_blocks, block_size;
    bool prefix_caching;
    bool copy_on_write;  /* false only to show what goes wrong without it */
    int *ref_count;      /* [num_blocks] block tables holding each block */
    int32_t *free_stack; /* blocks that hold nothing, taken from the top */
    int free_count;
    /* Blocks with no user that still hold a cached prefix, least recently
     * used first: a doubly linked list through lru_prev and lru_next. */
    int32_t *lru_prev, *lru_next;
    int32_t lru_head, lru_tail;
    int idle_count;
    /* The prefix cache: a hash map from block hash to block, chained through
     * bucket_next. A hit must also match the parent's hash and the tokens. */
    bool *cached;          /* [num_blocks] the block is in the map */
    uint64_t *hash;        /* [num_blocks] of a full block's tokens and all before them */
    uint64_t *parent_hash; /* [num_blocks] hash of the block before it, 0 for the first */
    int32_t *tokens;       /* [num_blocks][block_size] the tokens of a cached block */
    int32_t *bucket_head, *bucket_next;
    int n_buckets;
    BlockPoolStats stats;
} BlockPool;

/* A copy the caller must make before writing: block `from`'s keys and values
 * into block `to`. from == NO_BLOCK when there is nothing to copy. */
typedef struct {
    int32_t from, to;
} BlockCopy;

BlockPool block_pool_create(int num_blocks, int block_size, bool prefix_caching);
void block_pool_free(BlockPool *pool);
/* Put the free list in a random order, as a long-running server's would be. */
void block_pool_shuffle(BlockPool *pool, Rng *rng);
/* Blocks that can be handed out now: free ones plus unused cached ones. */
int block_pool_available(const BlockPool *pool);
/* No block has a user: every one is free, or cached and unused. */
bool block_pool_unused(const BlockPool *pool);

BlockTable block_table_create(int capacity);
void block_table_free(BlockTable *table); /* the table's own memory; release first */

/* Give the sequence room for `length` positions. False when the pool has too
 * few blocks or the table too few entries: then nothing has changed. */
bool block_table_reserve(BlockPool *pool, BlockTable *table, int length, BlockCopy *copy);
/* child (empty) shares every block of parent. */
void block_table_fork(BlockPool *pool, const BlockTable *parent, BlockTable *child);
/* Drop the sequence's blocks (last block first) and empty the table. */
void block_table_release(BlockPool *pool, BlockTable *table);
/* An empty table takes the cached blocks that start tokens[0..n_tokens); at
 * least the last token is left to compute, since its logits are needed.
 * Returns the number of positions reused. */
int block_table_match_prefix(BlockPool *pool, BlockTable *table, const int32_t *tokens, int n_tokens);
/* Offer the table's full blocks to the prefix cache, once the keys and values
 * of tokens[0..table->length) are written. */
void block_table_seal(BlockPool *pool, BlockTable *table, const int32_t *tokens);

#endif
