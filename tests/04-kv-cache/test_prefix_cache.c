/* Prefix caching: requests that share system prompts reuse each other's full
 * blocks and still produce what they produce alone; blocks with no users stay
 * cached and go least recently used first; a block is found only under the
 * same tokens and the same tokens before it. */
#include <stdio.h>

#include "chapters/04-kv-cache/block_pool.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/testing.h"

static void prefix_cached_equals_alone(const Model *model, int num_blocks)
{
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    Comparison c = verify_prefix_caching(model, 12, num_blocks, 16, &sampled);
    printf("pool of %d blocks: %d tokens reused, max relative error %.2e\n", num_blocks, c.events, c.max_rel_error);
    EXPECT(c.events > 0, "pool of %d: some prompt tokens came from the cache", num_blocks);
    EXPECT(c.bitwise && c.tokens_equal, "pool of %d: prefix-cached requests equal alone", num_blocks);
    EXPECT(c.blocks_returned, "pool of %d: no block has a user at the end", num_blocks);
}

static void fill(int32_t *tokens, int n, int first)
{
    for (int i = 0; i < n; i++)
        tokens[i] = first + i;
}

/* Reserve room for tokens, as if their keys and values were written, and seal. */
static void hold(BlockPool *pool, BlockTable *table, const int32_t *tokens, int n)
{
    BlockCopy copy;
    EXPECT(block_table_reserve(pool, table, n, &copy), "room for %d tokens", n);
    block_table_seal(pool, table, tokens);
}

/* The end of a test: every table gives its blocks back, which must leave no
 * block with a user, and the tables and the pool are freed. */
static void release_all_and_free(BlockPool *pool, BlockTable *const tables[], int count)
{
    for (int i = 0; i < count; i++)
        block_table_release(pool, tables[i]);
    EXPECT(block_pool_unused(pool), "no block has a user at the end");
    for (int i = 0; i < count; i++)
        block_table_free(tables[i]);
    block_pool_free(pool);
}

static void least_recently_used_goes_first(void)
{
    BlockPool pool = block_pool_create(8, 4, true);
    BlockTable a = block_table_create(8), c = block_table_create(8), d = block_table_create(8);
    int32_t a_tokens[9], c_tokens[9], d_tokens[24];
    fill(a_tokens, 9, 0);
    fill(c_tokens, 9, 100);
    fill(d_tokens, 24, 200);
    hold(&pool, &a, a_tokens, 9);
    block_table_release(&pool, &a);
    hold(&pool, &c, c_tokens, 9);
    block_table_release(&pool, &c);
    EXPECT(pool.idle_count == 4, "A's and C's two full blocks each stay cached");
    /* Six blocks for D: four free ones, then the two least recently used. */
    hold(&pool, &d, d_tokens, 24);
    EXPECT(pool.stats.evictions == 2, "two cached blocks evicted, got %ld", pool.stats.evictions);
    EXPECT(block_table_match_prefix(&pool, &a, a_tokens, 9) == 0, "A, released first, was evicted");
    EXPECT(block_table_match_prefix(&pool, &c, c_tokens, 9) == 8, "C's 8 cached tokens survive");
    release_all_and_free(&pool, (BlockTable *[]){&a, &c, &d}, 3);
}

/* A finished sequence's last blocks are evicted before its first ones, which
 * other requests are likelier to share. */
static void a_sequence_is_evicted_from_its_end(void)
{
    BlockPool pool = block_pool_create(6, 4, true);
    BlockTable a = block_table_create(6), b = block_table_create(6);
    int32_t a_tokens[13], b_tokens[13];
    fill(a_tokens, 13, 0);
    fill(b_tokens, 13, 50);
    hold(&pool, &a, a_tokens, 13);
    block_table_release(&pool, &a);
    hold(&pool, &b, b_tokens, 13); /* three free blocks and one eviction */
    EXPECT(pool.stats.evictions == 1, "one eviction, got %ld", pool.stats.evictions);
    EXPECT(block_table_match_prefix(&pool, &a, a_tokens, 13) == 8,
           "A's first two blocks are still cached, its third went first");
    EXPECT(pool.ref_count[a.blocks[0]] == 1, "a cached block taken back gets a user");
    block_table_release(&pool, &a);
    block_table_release(&pool, &b);
    block_table_free(&a);
    block_table_free(&b);
    block_pool_free(&pool);
}

static void a_block_is_known_by_its_whole_prefix(void)
{
    BlockPool pool = block_pool_create(16, 4, true);
    BlockTable x = block_table_create(4), y = block_table_create(4), z = block_table_create(4);
    int32_t x_tokens[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t same_block_other_prefix[9] = {9, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t same_first_block[9] = {1, 2, 3, 4, 5, 6, 7, 0, 9};
    hold(&pool, &x, x_tokens, 9);
    EXPECT(block_table_match_prefix(&pool, &y, same_block_other_prefix, 9) == 0,
           "the second block's tokens match but not what precedes them: no hit");
    EXPECT(block_table_match_prefix(&pool, &z, same_first_block, 9) == 4, "only the first block hits");
    EXPECT(pool.ref_count[x.blocks[0]] == 2, "a block in use is shared with a hit, not copied");
    block_table_release(&pool, &z);
    EXPECT(block_table_match_prefix(&pool, &z, x_tokens, 8) == 4,
           "8 tokens, 2 full blocks: the last block is computed, for the last token's logits");
    release_all_and_free(&pool, (BlockTable *[]){&z, &y, &x}, 3);
}

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    prefix_cached_equals_alone(&model, 200); /* everything stays cached */
    prefix_cached_equals_alone(&model, 30);  /* cached blocks are evicted */
    model_free(&model);
    least_recently_used_goes_first();
    a_sequence_is_evicted_from_its_end();
    a_block_is_known_by_its_whole_prefix();
    return test_finish();
}
