/* Decode attention: the contiguous version against the double-precision
 * reference (attend_reference), and the paged version against the contiguous
 * one, bit for bit, for block sizes that do and do not divide the length, GQA
 * groups, MQA and head dimensions that are not a multiple of the eight
 * partial sums. */
#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "chapters/04-kv-cache/block_pool.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "common/testing.h"

typedef struct {
    int length, head_dim, group;
    float key_scale; /* large keys make the softmax nearly one-hot */
} Case;

static void check_case(Case c, Rng *rng)
{
    int d = c.head_dim, n = c.length;
    float *q = ALLOC_ARRAY((size_t)c.group * d, float);
    float *keys = ALLOC_ARRAY((size_t)n * d, float), *values = ALLOC_ARRAY((size_t)n * d, float);
    rng_fill_normal_f32(rng, q, (size_t)c.group * d, 0, 1);
    rng_fill_normal_f32(rng, keys, (size_t)n * d, 0, c.key_scale);
    rng_fill_uniform_f32(rng, values, (size_t)n * d, -1, 1);
    float *scores = ALLOC_ARRAY((size_t)c.group * n, float);
    float *out = ALLOC_ARRAY((size_t)c.group * d, float), *paged_out = ALLOC_ARRAY((size_t)c.group * d, float);
    double *ref = ALLOC_ARRAY((size_t)c.group * d, double), *weights = ALLOC_ARRAY(n, double);

    attend_contiguous(q, c.group, keys, values, n, d, scores, out);
    for (int g = 0; g < c.group; g++)
        attend_reference(q + g * d, keys, values, n, d, weights, ref + g * d);
    CloseReport r = check_close_f32(out, ref, (size_t)c.group * d, ATTENTION_FLOAT_ATOL, ATTENTION_FLOAT_RTOL);
    char what[96];
    snprintf(what, sizeof what, "length %d, head_dim %d, group %d, key scale %g", n, d, c.group, c.key_scale);
    EXPECT(close_report_print(stdout, what, &r), "contiguous attention matches double: %s", what);

    /* The same keys and values, scattered into blocks of several sizes. */
    const int block_sizes[] = {1, 5, 16, 64, n};
    for (int b = 0; b < 5; b++) {
        int bs = block_sizes[b];
        PagedKvShape shape = {bs, 1, d};
        BlockPool pool = block_pool_create(paged_kv_blocks_for(n, bs), bs, false);
        block_pool_shuffle(&pool, rng);
        BlockTable table = block_table_create(pool.num_blocks);
        BlockCopy copy;
        block_table_reserve(&pool, &table, n, &copy);
        size_t pool_floats = (size_t)pool.num_blocks * paged_kv_block_floats(shape);
        float *key_pool = ALLOC_ARRAY(pool_floats, float), *value_pool = ALLOC_ARRAY(pool_floats, float);
        for (int p = 0; p < n; p++) {
            size_t at = paged_kv_position_offset(shape, table.blocks, 0, p);
            memcpy(key_pool + at, keys + (size_t)p * d, sizeof(float) * d);
            memcpy(value_pool + at, values + (size_t)p * d, sizeof(float) * d);
        }
        attend_paged(q, c.group, key_pool, value_pool, shape, table.blocks, 0, n, scores, paged_out);
        EXPECT(memcmp(paged_out, out, sizeof(float) * c.group * d) == 0,
               "%s, block %d: paged output bit-identical to contiguous", what, bs);
        block_table_release(&pool, &table);
        block_table_free(&table);
        block_pool_free(&pool);
        array_free(key_pool);
        array_free(value_pool);
    }
    array_free(q);
    array_free(keys);
    array_free(values);
    array_free(scores);
    array_free(out);
    array_free(paged_out);
    array_free(ref);
    array_free(weights);
}

/* One position: the softmax weight is exactly 1, the output exactly v. */
static void one_position_returns_its_value(void)
{
    float q[12], k[12], v[12], scores[1], out[12];
    for (int i = 0; i < 12; i++) {
        q[i] = (float)i;
        k[i] = 1e3f;
        v[i] = 0.1f * (float)i - 0.3f;
    }
    attend_contiguous(q, 1, k, v, 1, 12, scores, out);
    EXPECT(memcmp(out, v, sizeof out) == 0, "attention over one position returns its value");
}

int main(void)
{
    Rng rng;
    rng_seed(&rng, 11);
    const Case cases[] = {
        {1,    16,  1, 1 },
        {17,   16,  4, 1 },
        {333,  12,  3, 1 },
        {1000, 128, 4, 1 },
        {257,  130, 2, 1 },
        {64,   16,  1, 30},
        {15,   2,   8, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cases[i], &rng);
    one_position_returns_its_value();
    return test_finish();
}
