#include "chapters/04-kv-cache/attention.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* Dot product with sixteen fixed partial sums: vectorisable, yet always the
 * same order of additions, whoever calls it. */
static inline float dot(const float *a, const float *b, int n)
{
    float partial[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int lane = 0; lane < 16; lane++)
            partial[lane] += a[i + lane] * b[i + lane];
    for (int lane = 0; i + lane < n; lane++)
        partial[lane] += a[i + lane] * b[i + lane];
    for (int width = 8; width > 0; width /= 2)
        for (int lane = 0; lane < width; lane++)
            partial[lane] += partial[lane + width];
    return partial[0];
}

/* Scores of every query against `count` consecutive keys, written to
 * scores[q * score_stride + p]. Each score is its own dot product, so the
 * order in which runs of keys are visited does not change any of them. */
static void score_keys(const float *queries, int n_queries, const float *keys, int count, int head_dim, float *scores,
                       int score_stride)
{
    float scale = 1.0f / sqrtf((float)head_dim);
    for (int p = 0; p < count; p++)
        for (int q = 0; q < n_queries; q++)
            scores[q * score_stride + p] = dot(queries + q * head_dim, keys + (size_t)p * head_dim, head_dim) * scale;
}

/* Turn each row of scores into probabilities, summing in position order. */
static void softmax_rows(float *scores, int n_queries, int length)
{
    for (int q = 0; q < n_queries; q++) {
        float *row = scores + (size_t)q * length;
        float max = row[0];
        for (int p = 1; p < length; p++)
            max = row[p] > max ? row[p] : max;
        float sum = 0.0f;
        for (int p = 0; p < length; p++) {
            row[p] = expf(row[p] - max);
            sum += row[p];
        }
        float inverse = 1.0f / sum;
        for (int p = 0; p < length; p++)
            row[p] *= inverse;
    }
}

/* out[q] += weight[q][p] * value[p] for `count` consecutive values: the sum
 * that fixes the rounding of the output, taken in position order. */
static void add_weighted_values(const float *weights, int n_queries, int weight_stride, const float *values, int count,
                                int head_dim, float *out)
{
    for (int p = 0; p < count; p++)
        for (int q = 0; q < n_queries; q++) {
            float weight = weights[q * weight_stride + p];
            const float *value = values + (size_t)p * head_dim;
            float *o = out + q * head_dim;
            for (int d = 0; d < head_dim; d++)
                o[d] += weight * value[d];
        }
}

// ANCHOR: attend_over_contiguous_keys
void attend_contiguous(const float *queries, int n_queries, const float *keys, const float *values, int length,
                       int head_dim, float *scores, float *out)
{
    score_keys(queries, n_queries, keys, length, head_dim, scores, length);
    softmax_rows(scores, n_queries, length);
    memset(out, 0, sizeof(float) * n_queries * head_dim);
    add_weighted_values(scores, n_queries, length, values, length, head_dim, out);
}
// ANCHOR_END: attend_over_contiguous_keys

// ANCHOR: request_the_next_block_row_by_row
/* The hardware prefetcher follows a sequential stream but cannot guess where
 * the block table jumps, so the code asks for the next block itself: the
 * same slot's row of it for each row it uses, so the requests go out at the
 * pace the rows are used. Asked for all at once, a block of 16 rows is 128
 * cache lines, more misses than a core keeps in flight, and the loop stalled
 * behind them at every block. A hint; it changes no result. */
static void request_row_of_next_block(const float *next_block, int slot, int head_dim)
{
    if (next_block == NULL)
        return;
    const float *row = next_block + (size_t)slot * head_dim;
    for (int i = 0; i < head_dim; i += 16) /* one request per 64-byte line */
        __builtin_prefetch(row + i);
}
// ANCHOR_END: request_the_next_block_row_by_row

// ANCHOR: attend_through_block_table
/* One kv head's slots of logical block b, found through the block table;
 * NULL past the last block. */
static const float *block_of(const float *pool, PagedKvShape shape, const int32_t *block_table, int kv_head, int b,
                             int blocks)
{
    return b < blocks ? pool + paged_kv_offset(shape, block_table[b], kv_head, 0) : NULL;
}

void attend_paged(const float *queries, int n_queries, const float *key_pool, const float *value_pool,
                  PagedKvShape shape, const int32_t *block_table, int kv_head, int length, float *scores, float *out)
{
    int head_dim = shape.head_dim, block_size = shape.block_size;
    int blocks = paged_kv_blocks_for(length, block_size);
    for (int b = 0; b < blocks; b++) {
        const float *keys = block_of(key_pool, shape, block_table, kv_head, b, blocks);
        const float *next = block_of(key_pool, shape, block_table, kv_head, b + 1, blocks);
        for (int slot = 0; slot < paged_kv_positions_in_block(length, b, block_size); slot++) {
            request_row_of_next_block(next, slot, head_dim);
            score_keys(queries, n_queries, keys + (size_t)slot * head_dim, 1, head_dim, scores + b * block_size + slot,
                       length);
        }
    }
    softmax_rows(scores, n_queries, length);
    memset(out, 0, sizeof(float) * n_queries * head_dim);
    for (int b = 0; b < blocks; b++) {
        const float *values = block_of(value_pool, shape, block_table, kv_head, b, blocks);
        const float *next = block_of(value_pool, shape, block_table, kv_head, b + 1, blocks);
        for (int slot = 0; slot < paged_kv_positions_in_block(length, b, block_size); slot++) {
            request_row_of_next_block(next, slot, head_dim);
            add_weighted_values(scores + b * block_size + slot, n_queries, length, values + (size_t)slot * head_dim, 1,
                                head_dim, out);
        }
    }
}
// ANCHOR_END: attend_through_block_table

// ANCHOR: decode_fp8_through_a_table
/* An FP8 number has 256 possible codes: decoding all of them (and scaling)
 * once per call leaves one load per number, where fp8_to_float takes bit
 * steps and branches per number, which cost a CPU core more than reading
 * the byte. Each entry is kv_load_row's own expression, so the floats come
 * out bit for bit the same. */
void kv_fp8_decode_table(KvBlockLayout l, float table[KV_FP8_CODES])
{
    Fp8Format format = kv_fp8_format(l.number);
    for (int code = 0; code < KV_FP8_CODES; code++)
        table[code] = fp8_to_float((uint8_t)code, format) * kv_fp8_row_scale(l);
}
// ANCHOR_END: decode_fp8_through_a_table

// ANCHOR: attend_through_quantized_blocks
/* One kv head's slots of logical block b, dequantized into the tile; an FP8
 * pool through its table (`fp8`, NULL for the other formats). */
static const float *dequantized_block(KvPool pool, const float *fp8, const int32_t *block_table, int kv_head, int b,
                                      int count, float *tile)
{
    int head_dim = pool.layout.shape.head_dim;
    const uint8_t *head = pool.bytes + kv_head_offset(pool.layout, block_table[b], kv_head);
    if (fp8 != NULL) {
        /* An FP8 row is head_dim bytes, the rows of a block one after another. */
        for (size_t i = 0; i < (size_t)count * head_dim; i++)
            tile[i] = fp8[head[i]];
        return tile;
    }
    for (int slot = 0; slot < count; slot++)
        kv_load_row(pool.layout, head, slot, tile + (size_t)slot * head_dim);
    return tile;
}
// ANCHOR_END: attend_through_quantized_blocks

// ANCHOR: score_and_sum_block_by_block
void attend_paged_quantized(const float *queries, int n_queries, KvPool keys, KvPool values, const int32_t *block_table,
                            int kv_head, int length, float *tile, float *scores, float *out)
{
    int head_dim = keys.layout.shape.head_dim, block_size = keys.layout.shape.block_size;
    int blocks = paged_kv_blocks_for(length, block_size);
    float key_table[KV_FP8_CODES], value_table[KV_FP8_CODES];
    const float *key_fp8 = NULL, *value_fp8 = NULL;
    /* FP8 scales per kv head: this head's (kernels/kv_quant.h). */
    keys.layout = kv_head_layout(keys.layout, kv_head);
    values.layout = kv_head_layout(values.layout, kv_head);
    if (kv_number_is_fp8(keys.layout.number)) {
        kv_fp8_decode_table(keys.layout, key_table);
        key_fp8 = key_table;
    }
    if (kv_number_is_fp8(values.layout.number)) {
        kv_fp8_decode_table(values.layout, value_table);
        value_fp8 = value_table;
    }
    for (int b = 0; b < blocks; b++) {
        int count = paged_kv_positions_in_block(length, b, block_size);
        score_keys(queries, n_queries, dequantized_block(keys, key_fp8, block_table, kv_head, b, count, tile), count,
                   head_dim, scores + b * block_size, length);
    }
    softmax_rows(scores, n_queries, length);
    memset(out, 0, sizeof(float) * n_queries * head_dim);
    for (int b = 0; b < blocks; b++) {
        int count = paged_kv_positions_in_block(length, b, block_size);
        add_weighted_values(scores + b * block_size, n_queries, length,
                            dequantized_block(values, value_fp8, block_table, kv_head, b, count, tile), count, head_dim,
                            out);
    }
}
// ANCHOR_END: score_and_sum_block_by_block

void attend_reference(const float *query, const float *keys, const float *values, int length, int head_dim,
                      double *weights, double *out)
{
    double max = -INFINITY, sum = 0.0;
    for (int p = 0; p < length; p++) {
        double score = 0.0;
        for (int i = 0; i < head_dim; i++)
            score += (double)query[i] * keys[(size_t)p * head_dim + i];
        weights[p] = score / sqrt(head_dim);
        max = fmax(max, weights[p]);
    }
    for (int p = 0; p < length; p++)
        sum += weights[p] = exp(weights[p] - max);
    for (int i = 0; i < head_dim; i++)
        out[i] = 0.0;
    for (int p = 0; p < length; p++)
        for (int i = 0; i < head_dim; i++)
            out[i] += weights[p] / sum * values[(size_t)p * head_dim + i];
}
