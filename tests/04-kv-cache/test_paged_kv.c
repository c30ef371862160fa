/* The block-table address arithmetic of kernels/paged_kv.h, which the CUDA
 * kernels share: every position of every sequence lands in its own slot. */
#include <stdbool.h>

#include "common/alloc.h"
#include "common/testing.h"
#include "kernels/paged_kv.h"

static void blocks_for_rounds_up(void)
{
    EXPECT(paged_kv_blocks_for(0, 16) == 0, "no tokens, no blocks");
    EXPECT(paged_kv_blocks_for(1, 16) == 1, "one token takes a block");
    EXPECT(paged_kv_blocks_for(16, 16) == 1, "a full block");
    EXPECT(paged_kv_blocks_for(17, 16) == 2, "one more token, one more block");
    EXPECT(paged_kv_blocks_for(1000, 1) == 1000, "block size 1");
    EXPECT(paged_kv_positions_in_block(37, 2, 16) == 5, "the last block of 37 holds 5");
    EXPECT(paged_kv_positions_in_block(32, 1, 16) == 16, "a full last block");
    EXPECT(paged_kv_positions_in_block(37, 0, 16) == 16, "an earlier block is full");
}

/* Scatter three sequences over a pool through permuted block tables: each
 * (sequence, kv head, position) must get its own head_dim floats, all inside
 * the pool, and the slots of one block and head must be contiguous. */
static void positions_map_to_distinct_slots(int block_size, int n_kv_heads, int head_dim)
{
    const int lengths[] = {37, 1, 64};
    PagedKvShape shape = {block_size, n_kv_heads, head_dim};
    int total_blocks = 0;
    for (int s = 0; s < 3; s++)
        total_blocks += paged_kv_blocks_for(lengths[s], block_size);
    size_t pool_floats = (size_t)total_blocks * paged_kv_block_floats(shape);
    int *owner = ALLOC_ARRAY(pool_floats, int);
    int32_t *tables = ALLOC_ARRAY(total_blocks, int32_t);
    /* Hand out blocks backwards, so logical and physical order differ. */
    for (int i = 0; i < total_blocks; i++)
        tables[i] = total_blocks - 1 - i;
    bool distinct = true, inside = true, contiguous = true;
    int first_block = 0, stamp = 0;
    for (int s = 0; s < 3; s++) {
        const int32_t *table = tables + first_block;
        for (int h = 0; h < n_kv_heads; h++)
            for (int p = 0; p < lengths[s]; p++) {
                size_t at = paged_kv_position_offset(shape, table, h, p);
                stamp++;
                inside = inside && at + head_dim <= pool_floats;
                for (int d = 0; inside && d < head_dim; d++) {
                    distinct = distinct && owner[at + d] == 0;
                    owner[at + d] = stamp;
                }
                if (p % block_size != 0)
                    contiguous = contiguous && at == paged_kv_position_offset(shape, table, h, p - 1) + head_dim;
            }
        first_block += paged_kv_blocks_for(lengths[s], block_size);
    }
    EXPECT(inside, "block %d, %d heads of %d: every slot inside the pool", block_size, n_kv_heads, head_dim);
    EXPECT(distinct, "block %d, %d heads of %d: no two positions share a float", block_size, n_kv_heads, head_dim);
    EXPECT(contiguous, "block %d: a block's slots of one head follow each other", block_size);
    array_free(owner);
    array_free(tables);
}

/* A contiguous cache [seq][kv_head][position][head_dim] is the paged layout
 * with one block of max_len per sequence, the table {seq}. */
static void contiguous_is_one_block_per_sequence(void)
{
    const int max_len = 50, n_kv_heads = 3, head_dim = 6, seq = 2;
    PagedKvShape shape = {max_len, n_kv_heads, head_dim};
    const int32_t table[] = {seq};
    bool same = true;
    for (int h = 0; h < n_kv_heads; h++)
        for (int p = 0; p < max_len; p++) {
            size_t contiguous = (((size_t)seq * n_kv_heads + h) * max_len + p) * head_dim;
            same = same && paged_kv_position_offset(shape, table, h, p) == contiguous;
        }
    EXPECT(same, "one block per sequence gives the contiguous offsets");
}

int main(void)
{
    blocks_for_rounds_up();
    const int block_sizes[] = {1, 3, 16, 64};
    for (int i = 0; i < 4; i++)
        positions_map_to_distinct_slots(block_sizes[i], 2, 12);
    positions_map_to_distinct_slots(16, 1, 128);
    contiguous_is_one_block_per_sequence();
    return test_finish();
}
