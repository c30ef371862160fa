/* The paged KV cache: keys and values live in a pool of fixed-size blocks,
 * laid out [layer][block][kv_head][slot][head_dim] (kernels/paged_kv.h), and
 * each sequence finds its positions through its block table (block_pool.h).
 * Memory is taken one block at a time as a sequence grows, so at most
 * block_size - 1 positions per sequence are reserved and unused. */
#ifndef KV_CACHE_PAGED_CACHE_H
#define KV_CACHE_PAGED_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "block_pool.h"
#include "cache.h"
#include "kernels/paged_kv.h"
#include "model.h"

typedef struct {
    KvCache base; /* first, so a KvCache * is a PagedCache * */
    BlockPool pool;
    PagedKvShape shape;
    int n_layers, n_seqs, max_len;
    size_t layer_floats;  /* floats in one layer's pool */
    float *keys, *values; /* [layer][block][kv_head][slot][head_dim] */
    BlockTable *tables;   /* [n_seqs] */
} PagedCache;

PagedCache paged_cache_create(const ModelConfig *config, int n_seqs, int num_blocks, int block_size,
                              bool prefix_caching);
void paged_cache_free(PagedCache *cache);

/* Sequence `child` (empty) continues from everything `parent` holds. */
void paged_cache_fork(PagedCache *cache, int parent, int child);
/* Reuse cached blocks for an empty sequence about to hold tokens[0..n_tokens);
 * returns the positions it need not compute. */
int paged_cache_match_prefix(PagedCache *cache, int seq, const int32_t *tokens, int n_tokens);
/* Offer the sequence's full blocks to the prefix cache; tokens are all its tokens. */
void paged_cache_seal(PagedCache *cache, int seq, const int32_t *tokens);

#endif
