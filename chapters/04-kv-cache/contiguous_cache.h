/* The contiguous KV cache: one array per keys and values, laid out
 * [layer][sequence][kv_head][position][head_dim] and preallocated for every
 * sequence slot at the model's maximum length. Simple and fast to read; the
 * price is memory reserved for positions a sequence may never reach. */
#ifndef CHAPTERS_04_KV_CACHE_CONTIGUOUS_CACHE_H
#define CHAPTERS_04_KV_CACHE_CONTIGUOUS_CACHE_H

#include <stddef.h>

#include "chapters/04-kv-cache/cache.h"
#include "chapters/04-kv-cache/model.h"

typedef struct {
    KvCache base; /* first, so a KvCache * is a ContiguousCache * */
    int n_layers, n_seqs, n_kv_heads, max_len, head_dim;
    float *keys, *values;
} ContiguousCache;

ContiguousCache contiguous_cache_create(const ModelConfig *config, int n_seqs);
void contiguous_cache_free(ContiguousCache *cache);

/* Offset in floats of (layer, seq, kv_head, position) in keys or values. */
size_t contiguous_cache_offset(const ContiguousCache *cache, int layer, int seq, int kv_head, int position);

#endif
