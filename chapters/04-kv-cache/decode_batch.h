/* One decode step's attention inputs for a batch of sequences, as a paged
 * cache holds them: a query per head and sequence, and one layer's key and
 * value pools in some block format, the sequences' blocks scattered through
 * a shuffled pool. The CPU tests, the GPU tests and the benchmarks all build
 * their inputs here, and compare with the same double-precision reference. */
#ifndef CHAPTERS_04_KV_CACHE_DECODE_BATCH_H
#define CHAPTERS_04_KV_CACHE_DECODE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kv_quant.h"

typedef struct {
    int batch, n_heads;
    PagedKvShape shape; /* block_size, n_kv_heads, head_dim */
    KvFormat format;
    KvBlockLayout key_layout, value_layout;
    float *key_head_scales, *value_head_scales; /* FP8 per kv head: [n_kv_heads]; NULL otherwise */
    int32_t *lengths;                           /* [batch] */
    int max_blocks;                             /* columns of the block tables: blocks of the longest sequence */
    int32_t *block_tables;                      /* [batch][max_blocks] */
    int num_blocks;
    uint8_t *key_pool, *value_pool; /* [num_blocks] blocks of the layouts */
    float *queries;                 /* [batch][n_heads][head_dim] */
} DecodeBatch;

typedef struct {
    int batch, n_heads, n_kv_heads, head_dim, block_size;
    KvFormat format;
    int int4_group;
    uint64_t seed;
    bool fp8_per_head; /* FP8 formats: a scale per kv head rather than per tensor */
} DecodeBatchShape;

/* Queries and keys normal, values uniform in [-1, 1], quantized into the
 * format as a cache would store them. With FP8 scales per kv head, kv head
 * h's keys and values are h + 1 times larger, and its scales h + 1 times
 * those of the first: a kernel that reads head j's scale for head h gets
 * its numbers off by (j + 1) / (h + 1), and one that ignores the heads'
 * scales for the tensor's (head 0's) gets every other head off by a factor
 * of 2 or more. */
DecodeBatch decode_batch_create(const DecodeBatchShape *shape, const int32_t *lengths);
void decode_batch_free(DecodeBatch *b);

/* The attention output of every query head of sequence `seq`, in double,
 * over the numbers the pools hold (dequantized): out[n_heads][head_dim]. */
void decode_batch_reference(const DecodeBatch *b, int seq, double *out);

/* The chapter's CPU attention over the same pools: out[batch][n_heads][head_dim]. */
void decode_batch_attend_cpu(const DecodeBatch *b, float *out);

/* Bytes of the cache one decode step reads: every position's key and value
 * rows and the scales they use, for every sequence and kv head. */
double decode_batch_cache_bytes(const DecodeBatch *b);

#endif
