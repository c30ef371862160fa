#include "chapters/03-softmax-topk/merge_demo.h"

#include <stdio.h>

#include "chapters/03-softmax-topk/compare.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "kernels/softmax_topk.h"

/* One warp's share of a row, as the kernel deals it: steps of 32 lanes x
 * 4 logits, taken in turn by the warps of the row. */
enum { LOGITS_PER_WARP_STEP = 128 };

void scan_warp_share(const float *row, size_t vocab, int member, int members, int k, Partial *partial)
{
    partial->state = softmax_state_empty();
    topk_fill_sentinels(partial->list, topk_list_size(k));
    for (size_t i = 0; i < vocab; i++) {
        if ((int)(i / LOGITS_PER_WARP_STEP % (size_t)members) == member) {
            partial->state = softmax_state_push(partial->state, row[i]);
            topk_list_insert(partial->list, k, topk_entry(row[i], (int32_t)i));
        }
    }
}

// ANCHOR: emulate_cross_warp_merge
void emulate_block_merge(const float *logits, int rows_per_block, size_t vocab, int k, int merge_group, float *probs,
                         int64_t *indices)
{
    const int warps_per_row = EMULATED_BLOCK_WARPS / rows_per_block;
    const int list_size = topk_list_size(k);
    Partial partials[EMULATED_BLOCK_WARPS];
    TopkEntry *lists = ALLOC_ARRAY((size_t)EMULATED_BLOCK_WARPS * (size_t)list_size, TopkEntry);
    for (int warp = 0; warp < EMULATED_BLOCK_WARPS; warp++) {
        partials[warp].list = lists + warp * list_size;
        scan_warp_share(logits + (size_t)(warp / warps_per_row) * vocab, vocab, warp % warps_per_row, warps_per_row, k,
                        &partials[warp]);
    }
    for (int span = 1; span < merge_group; span *= 2) {
        for (int warp = 0; warp < EMULATED_BLOCK_WARPS; warp++) {
            if (merge_tree_absorbs(warp % merge_group, span, merge_group)) {
                Partial *into = &partials[warp], *from = &partials[warp + span];
                into->state = softmax_state_merge(into->state, from->state);
                topk_list_merge(into->list, from->list, list_size);
            }
        }
    }
    for (int row = 0; row < rows_per_block; row++) {
        const Partial *leader = &partials[row * warps_per_row];
        for (int j = 0; j < k; j++) {
            probs[row * k + j] = softmax_probability(leader->state, leader->list[j].value);
            indices[row * k + j] = leader->list[j].index;
        }
    }
    array_free(lists);
}
// ANCHOR_END: emulate_cross_warp_merge

/* How many rows of the block come out right. */
static int rows_right(const float *logits, int rows_per_block, size_t vocab, int k, int merge_group)
{
    float *probs = ALLOC_ARRAY((size_t)rows_per_block * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY((size_t)rows_per_block * (size_t)k, int64_t);
    emulate_block_merge(logits, rows_per_block, vocab, k, merge_group, probs, indices);
    int right = 0;
    for (int row = 0; row < rows_per_block; row++) {
        TopkComparison c = compare_with_reference(logits + (size_t)row * vocab, 1, 1, vocab, k, probs + row * k,
                                                  indices + row * k, TOPK_RTOL_TREE_SUM);
        right += c.wrong_indices + c.wrong_probs == 0;
    }
    array_free(probs);
    array_free(indices);
    return right;
}

void print_merge_demo(TableFormat format)
{
    enum { VOCAB = 1000, K = 5 };
    float *logits = ALLOC_ARRAY(EMULATED_BLOCK_WARPS * VOCAB, float);
    Rng rng;
    rng_seed(&rng, 2018);
    rng_fill_normal_f32(&rng, logits, EMULATED_BLOCK_WARPS * VOCAB, 0.0, 3.0);
    const char *headers[] = {"rows per block", "warps per row", "rows right: merge within each row",
                             "rows right: merge across the block"};
    Table *table = TABLE_NEW(headers, "rrrr");
    for (int rows_per_block = 1; rows_per_block <= EMULATED_BLOCK_WARPS; rows_per_block *= 2) {
        int warps_per_row = EMULATED_BLOCK_WARPS / rows_per_block;
        table_cell(table, "%d", rows_per_block);
        table_cell(table, "%d", warps_per_row);
        table_cell(table, "%d of %d", rows_right(logits, rows_per_block, VOCAB, K, warps_per_row), rows_per_block);
        table_cell(table, "%d of %d", rows_right(logits, rows_per_block, VOCAB, K, EMULATED_BLOCK_WARPS),
                   rows_per_block);
    }
    table_print(table, stdout, format);
    table_free(table);
    array_free(logits);
}
