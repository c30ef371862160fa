/* The paged KV cache: keys and values live in a pool of fixed-size blocks,
 * laid out [layer][block][kv_head][slot][head_dim] (kernels/paged_kv.h), and
 * each sequence finds its positions through its block table (block_pool.h).
 * Memory is taken one block at a time as a sequence grows, so at most
 * block_size - 1 positions per sequence are reserved and unused.
 *
 * The blocks hold float32 numbers, or fp16, INT8, INT4 or FP8 (E4M3, E5M2)
 * ones with their scales (kernels/kv_quant.h): the block manager, copy-on-write and prefix
 * caching work on blocks whatever is inside them. Attention reads quantized
 * blocks directly, one block at a time. */
#ifndef CHAPTERS_04_KV_CACHE_PAGED_CACHE_H
#define CHAPTERS_04_KV_CACHE_PAGED_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/04-kv-cache/block_pool.h"
#include "chapters/04-kv-cache/cache.h"
#include "chapters/04-kv-cache/model.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_kv.h"

/* INT4 channels per scale unless told otherwise. */
#define KV_DEFAULT_INT4_GROUP 32

typedef struct {
    KvCache base; /* first, so a KvCache * is a PagedCache * */
    BlockPool pool;
    PagedKvShape shape;
    KvFormat format;
    KvBlockLayout key_layout, value_layout;
    int n_layers, n_seqs, max_len;
    size_t key_layer_bytes, value_layer_bytes; /* one layer's pool */
    uint8_t *keys, *values;                    /* [layer][block][kv_head]: rows, then scales */
    /* Keys quantized per channel: the float keys of each sequence's last,
     * partly filled block, [seq][layer][kv_head][slot][head_dim], from which
     * that block is quantized again whenever a key is added. NULL otherwise. */
    float *recent_keys;
    /* FP8 scales set by paged_cache_set_fp8_scales, [layer][kv_head] for keys
     * and for values; NULL: the layouts' tensor scale (1) everywhere. */
    float *key_scales, *value_scales;
    float *tile;        /* one block of one kv head, dequantized, while attention reads it */
    BlockTable *tables; /* [n_seqs] */
} PagedCache;

/* A float32 cache. */
PagedCache paged_cache_create(const ModelConfig *config, int n_seqs, int num_blocks, int block_size,
                              bool prefix_caching);
/* A cache in any format; int4_group is the INT4 channels per scale. */
PagedCache paged_cache_create_in(const ModelConfig *config, int n_seqs, int num_blocks, int block_size,
                                 bool prefix_caching, KvFormat format, int int4_group);
void paged_cache_free(PagedCache *cache);

/* An FP8 cache's scales, [n_layers][n_kv_heads] for keys and for values
 * (copied): the same for every head of a layer for vLLM's per-tensor
 * k_scale and v_scale, or one per kv head. Set before anything is stored. */
void paged_cache_set_fp8_scales(PagedCache *cache, const float *key_scales, const float *value_scales);
/* The largest magnitude of the keys and of the values that sequence `seq`
 * holds at positions 0..length-1 of a float32 cache, [n_layers][n_kv_heads]
 * each: what a calibration run measures. */
void paged_cache_largest(const PagedCache *cache, int seq, int length, float *largest_key, float *largest_value);

/* Sequence `child` (empty) continues from everything `parent` holds. */
void paged_cache_fork(PagedCache *cache, int parent, int child);
/* Reuse cached blocks for an empty sequence about to hold tokens[0..n_tokens);
 * returns the positions it need not compute. */
int paged_cache_match_prefix(PagedCache *cache, int seq, const int32_t *tokens, int n_tokens);
/* Offer the sequence's full blocks to the prefix cache; tokens are all its tokens. */
void paged_cache_seal(PagedCache *cache, int seq, const int32_t *tokens);

#endif
