#include "chapters/04-kv-cache/decode_batch.h"

#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "chapters/04-kv-cache/block_pool.h"
#include "common/alloc.h"
#include "common/rng.h"

/* Hand out every sequence's blocks from a shuffled pool. */
static void scatter_blocks(DecodeBatch *b, Rng *rng)
{
    int block_size = b->shape.block_size;
    b->max_blocks = 0;
    b->num_blocks = 0;
    for (int s = 0; s < b->batch; s++) {
        int blocks = paged_kv_blocks_for(b->lengths[s], block_size);
        b->max_blocks = blocks > b->max_blocks ? blocks : b->max_blocks;
        b->num_blocks += blocks;
    }
    b->block_tables = ALLOC_ARRAY((size_t)b->batch * b->max_blocks, int32_t);
    BlockPool pool = block_pool_create(b->num_blocks, block_size, false);
    block_pool_shuffle(&pool, rng);
    BlockTable *tables = ALLOC_ARRAY(b->batch, BlockTable);
    for (int s = 0; s < b->batch; s++) {
        BlockCopy no_copy;
        tables[s] = block_table_create(b->max_blocks);
        block_table_reserve(&pool, &tables[s], b->lengths[s], &no_copy);
        memcpy(b->block_tables + (size_t)s * b->max_blocks, tables[s].blocks, sizeof(int32_t) * tables[s].n_blocks);
    }
    for (int s = 0; s < b->batch; s++) {
        block_table_release(&pool, &tables[s]);
        block_table_free(&tables[s]);
    }
    array_free(tables);
    block_pool_free(&pool);
}

/* Store a sequence's rows [length][head_dim] of one kv head into its blocks. */
static void store_sequence(KvBlockLayout l, uint8_t *pool, const int32_t *table, int kv_head, const float *rows,
                           int length)
{
    int block_size = l.shape.block_size, head_dim = l.shape.head_dim;
    l = kv_head_layout(l, kv_head);
    for (int blk = 0; blk < paged_kv_blocks_for(length, block_size); blk++) {
        uint8_t *head = pool + kv_head_offset(l, table[blk], kv_head);
        const float *block_rows = rows + (size_t)blk * block_size * head_dim;
        int count = paged_kv_positions_in_block(length, blk, block_size);
        if (l.axis == KV_SCALE_PER_CHANNEL) {
            kv_store_block_per_channel(l, head, block_rows, count);
        } else {
            for (int slot = 0; slot < count; slot++)
                kv_store_row(l, head, slot, block_rows + (size_t)slot * head_dim);
        }
    }
}

/* How much larger kv head h's keys and values are drawn: h + 1 times where
 * the heads have FP8 scales of their own, so that each needs its own. */
static float head_gain(int kv_head, bool scaled_per_head)
{
    return scaled_per_head ? (float)(kv_head + 1) : 1.0f;
}

/* Scales per kv head, calibrated as in decode_batch_create on each head's
 * numbers. */
static void give_heads_scales(DecodeBatch *b)
{
    int heads = b->shape.n_kv_heads;
    b->key_head_scales = ALLOC_ARRAY(heads, float);
    b->value_head_scales = ALLOC_ARRAY(heads, float);
    for (int h = 0; h < heads; h++) {
        b->key_head_scales[h] = kv_fp8_scale_for(4.0f * head_gain(h, true), b->key_layout.number);
        b->value_head_scales[h] = kv_fp8_scale_for(head_gain(h, true), b->value_layout.number);
    }
    b->key_layout = kv_fp8_per_head(b->key_layout, b->key_head_scales);
    b->value_layout = kv_fp8_per_head(b->value_layout, b->value_head_scales);
}

DecodeBatch decode_batch_create(const DecodeBatchShape *s, const int32_t *lengths)
{
    DecodeBatch b = {
        .batch = s->batch,
        .n_heads = s->n_heads,
        .shape = {s->block_size, s->n_kv_heads, s->head_dim},
        .format = s->format,
    };
    b.key_layout = kv_layout(s->format, true, b.shape, s->int4_group);
    b.value_layout = kv_layout(s->format, false, b.shape, s->int4_group);
    if (b.key_layout.axis == KV_SCALE_PER_TENSOR) {
        /* Scales calibrated on the distributions drawn below: keys are normal,
         * and beyond 4 (one key in 16,000) saturate; values lie in [-1, 1]. */
        b.key_layout.tensor_scale = kv_fp8_scale_for(4.0f, b.key_layout.number);
        b.value_layout.tensor_scale = kv_fp8_scale_for(1.0f, b.value_layout.number);
        if (s->fp8_per_head)
            give_heads_scales(&b);
    }
    b.lengths = ALLOC_ARRAY(s->batch, int32_t);
    memcpy(b.lengths, lengths, sizeof(int32_t) * s->batch);
    Rng rng;
    rng_seed(&rng, s->seed);
    scatter_blocks(&b, &rng);
    b.key_pool = ALLOC_ARRAY((size_t)b.num_blocks * kv_block_bytes(b.key_layout), uint8_t);
    b.value_pool = ALLOC_ARRAY((size_t)b.num_blocks * kv_block_bytes(b.value_layout), uint8_t);
    size_t query_floats = (size_t)s->batch * s->n_heads * s->head_dim;
    b.queries = ALLOC_ARRAY(query_floats, float);
    rng_fill_normal_f32(&rng, b.queries, query_floats, 0, 1);

    int longest = b.max_blocks * s->block_size;
    float *keys = ALLOC_ARRAY((size_t)longest * s->head_dim, float);
    float *values = ALLOC_ARRAY((size_t)longest * s->head_dim, float);
    for (int seq = 0; seq < s->batch; seq++) {
        const int32_t *table = b.block_tables + (size_t)seq * b.max_blocks;
        size_t floats = (size_t)lengths[seq] * s->head_dim;
        for (int h = 0; h < s->n_kv_heads; h++) {
            float gain = head_gain(h, b.key_head_scales != NULL);
            rng_fill_normal_f32(&rng, keys, floats, 0, gain);
            rng_fill_uniform_f32(&rng, values, floats, -gain, gain);
            store_sequence(b.key_layout, b.key_pool, table, h, keys, lengths[seq]);
            store_sequence(b.value_layout, b.value_pool, table, h, values, lengths[seq]);
        }
    }
    array_free(keys);
    array_free(values);
    return b;
}

void decode_batch_free(DecodeBatch *b)
{
    array_free(b->lengths);
    array_free(b->block_tables);
    array_free(b->key_pool);
    array_free(b->value_pool);
    array_free(b->queries);
    array_free(b->key_head_scales);
    array_free(b->value_head_scales);
    *b = (DecodeBatch){0};
}

/* The stored numbers of one sequence and kv head, as floats [length][head_dim]. */
static void load_sequence(KvBlockLayout l, const uint8_t *pool, const int32_t *table, int kv_head, int length,
                          float *rows)
{
    int block_size = l.shape.block_size;
    l = kv_head_layout(l, kv_head);
    for (int p = 0; p < length; p++) {
        const uint8_t *head = pool + kv_head_offset(l, table[p / block_size], kv_head);
        kv_load_row(l, head, p % block_size, rows + (size_t)p * l.shape.head_dim);
    }
}

void decode_batch_reference(const DecodeBatch *b, int seq, double *out)
{
    int d = b->shape.head_dim, length = b->lengths[seq], group = b->n_heads / b->shape.n_kv_heads;
    const int32_t *table = b->block_tables + (size_t)seq * b->max_blocks;
    float *keys = ALLOC_ARRAY((size_t)length * d, float), *values = ALLOC_ARRAY((size_t)length * d, float);
    double *weights = ALLOC_ARRAY(length, double);
    for (int kv = 0; kv < b->shape.n_kv_heads; kv++) {
        load_sequence(b->key_layout, b->key_pool, table, kv, length, keys);
        load_sequence(b->value_layout, b->value_pool, table, kv, length, values);
        for (int h = kv * group; h < (kv + 1) * group; h++) {
            const float *q = b->queries + ((size_t)seq * b->n_heads + h) * d;
            attend_reference(q, keys, values, length, d, weights, out + (size_t)h * d);
        }
    }
    array_free(keys);
    array_free(values);
    array_free(weights);
}

void decode_batch_attend_cpu(const DecodeBatch *b, float *out)
{
    int d = b->shape.head_dim, group = b->n_heads / b->shape.n_kv_heads, longest = b->max_blocks * b->shape.block_size;
    float *scores = ALLOC_ARRAY((size_t)group * longest, float);
    float *tile = ALLOC_ARRAY((size_t)b->shape.block_size * d, float);
    KvPool keys = {b->key_pool, b->key_layout}, values = {b->value_pool, b->value_layout};
    for (int s = 0; s < b->batch; s++)
        for (int kv = 0; kv < b->shape.n_kv_heads; kv++) {
            size_t q = ((size_t)s * b->n_heads + (size_t)kv * group) * d;
            const int32_t *table = b->block_tables + (size_t)s * b->max_blocks;
            if (b->format == KV_FORMAT_FLOAT32)
                attend_paged(b->queries + q, group, (const float *)b->key_pool, (const float *)b->value_pool, b->shape,
                             table, kv, b->lengths[s], scores, out + q);
            else
                attend_paged_quantized(b->queries + q, group, keys, values, table, kv, b->lengths[s], tile, scores,
                                       out + q);
        }
    array_free(scores);
    array_free(tile);
}

/* Bytes one kv head of a sequence of `length` reads from one pool. */
static double bytes_read(KvBlockLayout l, int length)
{
    double rows = (double)length * kv_row_bytes(l);
    switch (l.axis) {
    case KV_SCALE_PER_TOKEN:
        return rows + 2.0 * length * kv_groups_per_row(l);
    case KV_SCALE_PER_CHANNEL:
        return rows + 2.0 * paged_kv_blocks_for(length, l.shape.block_size) * l.shape.head_dim;
    case KV_SCALE_NONE:
    case KV_SCALE_PER_TENSOR:
    case KV_SCALE_PER_HEAD:
        break;
    }
    return rows;
}

double decode_batch_cache_bytes(const DecodeBatch *b)
{
    double bytes = 0.0;
    for (int s = 0; s < b->batch; s++)
        bytes += b->shape.n_kv_heads *
                 (bytes_read(b->key_layout, b->lengths[s]) + bytes_read(b->value_layout, b->lengths[s]));
    return bytes;
}
