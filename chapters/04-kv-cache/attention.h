/* Single-query softmax attention for decoding, over keys and values stored
 * contiguously or in the blocks of a paged pool.
 *
 * Both versions call the same three steps (score the keys, softmax, sum the
 * weighted values) in the same position order, so for the same keys and
 * values they return bit-for-bit the same output. The softmax scale is
 * 1/sqrt(head_dim). */
#ifndef CHAPTERS_04_KV_CACHE_ATTENTION_H
#define CHAPTERS_04_KV_CACHE_ATTENTION_H

#include <stdint.h>

#include "kernels/kv_quant.h"
#include "kernels/paged_kv.h"

/* How close float attention comes to the same attention in double, for
 * values in [-1, 1] (the output is a weighted mean of them, so of the same
 * size) and float scores and a float softmax over up to a few thousand
 * positions: within a few hundred ulps of 1. The tests and the benchmark's
 * check use these. */
#define ATTENTION_FLOAT_ATOL 2e-5
#define ATTENTION_FLOAT_RTOL 1e-4

/* n_queries query vectors [n_queries][head_dim] attend over `length`
 * positions of keys and values [length][head_dim]; out is [n_queries][head_dim];
 * scores is scratch for n_queries * length floats. */
void attend_contiguous(const float *queries, int n_queries, const float *keys, const float *values, int length,
                       int head_dim, float *scores, float *out);

/* The same, with the positions of one kv head found through a block table in
 * one layer's key and value pools (layout in kernels/paged_kv.h). */
void attend_paged(const float *queries, int n_queries, const float *key_pool, const float *value_pool,
                  PagedKvShape shape, const int32_t *block_table, int kv_head, int length, float *scores, float *out);

/* One layer's pool of keys or of values, in any block format. */
typedef struct {
    const uint8_t *bytes;
    KvBlockLayout layout;
} KvPool;

/* The 256 codes of an FP8 pool's numbers as the floats they read back as
 * (times the scale of its rows, kv_fp8_row_scale): what kv_load_row gives,
 * by lookup. */
enum { KV_FP8_CODES = 256 };
void kv_fp8_decode_table(KvBlockLayout l, float table[KV_FP8_CODES]);

/* attend_paged over blocks in any format: each block is dequantized into
 * `tile` (block_size * head_dim floats) when it is read, and nowhere else. */
void attend_paged_quantized(const float *queries, int n_queries, KvPool keys, KvPool values, const int32_t *block_table,
                            int kv_head, int length, float *tile, float *scores, float *out);

/* What the versions above are checked against: softmax(q k^T / sqrt(head_dim)) v
 * for one query over contiguous keys and values, in double, in the plainest
 * order. `weights` is scratch for `length` doubles; out is [head_dim]. */
void attend_reference(const float *query, const float *keys, const float *values, int length, int head_dim,
                      double *weights, double *out);

#endif
