/* The CPU emulation of kernel 3's cross-warp merge (merge_demo.c): the
 * tree inside each row's warps is right for every number of rows per
 * block; the tree across the whole block (the published bug) is right with
 * one row per block, the case most tests try, and wrong for the rows whose
 * leader absorbs another row's warps. */
#include <stdio.h>

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/merge_demo.h"
#include "common/alloc.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"

enum { VOCAB = 1237, K = 9 };

static int rows_right(const float *logits, int rows_per_block, int merge_group)
{
    float probs[EMULATED_BLOCK_WARPS * K];
    int64_t indices[EMULATED_BLOCK_WARPS * K];
    emulate_block_merge(logits, rows_per_block, VOCAB, K, merge_group, probs, indices);
    int right = 0;
    for (int row = 0; row < rows_per_block; row++) {
        TopkComparison c = compare_with_reference(logits + row * VOCAB, 1, 1, VOCAB, K, probs + row * K,
                                                  indices + row * K, TOPK_RTOL_TREE_SUM);
        right += c.wrong_indices + c.wrong_probs == 0;
    }
    return right;
}

int main(void)
{
    float *logits = ALLOC_ARRAY(EMULATED_BLOCK_WARPS * VOCAB, float);
    fill_tied_logits(logits, EMULATED_BLOCK_WARPS * VOCAB, 11);
    for (int rows = 1; rows <= EMULATED_BLOCK_WARPS; rows *= 2) {
        int within = rows_right(logits, rows, EMULATED_BLOCK_WARPS / rows);
        int across = rows_right(logits, rows, EMULATED_BLOCK_WARPS);
        EXPECT(within == rows, "%d rows per block, merge within rows: %d rows right", rows, within);
        /* Leaders of rows 0, 2, 4, ... absorb the next row in the larger spans. */
        int expected_across = rows == 1 ? 1 : rows / 2;
        EXPECT(across == expected_across, "%d rows per block, merge across the block: %d rows right, expected %d", rows,
               across, expected_across);
        printf("%d rows per block: %d right merging within rows, %d merging across the block\n", rows, within, across);
    }
    array_free(logits);
    return test_finish();
}
