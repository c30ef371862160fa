/* The bug that only appears with several rows per block, shown on the CPU.
 *
 * Kernel 3 (kernels/softmax_topk.cu) gives a row warps_per_row of its
 * block's 8 warps; when V is small a block holds 8 / warps_per_row rows at
 * once. Each warp makes a partial state (online max and sum, sorted top K)
 * of its share of its row, and the partial states are merged in a tree. The
 * tree must stay inside each row's group of warps. Merging across all 8
 * warps of the block, as some published kernels do, is right as long as a
 * block holds one row, which is what most tests try, and wrong otherwise.
 *
 * emulate_block_merge runs that block on the CPU with the same building
 * blocks and the same tree (merge_tree_absorbs) as the kernel. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_MERGE_DEMO_H
#define CHAPTERS_03_SOFTMAX_TOPK_MERGE_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "common/table.h"
#include "kernels/softmax_topk.h"

#define EMULATED_BLOCK_WARPS 8

/* A warp's partial state of its share of a row. */
typedef struct {
    SoftmaxState state;
    TopkEntry *list; /* k entries, sorted best first, then sentinels up to topk_list_size(k) */
} Partial;

/* The partial state of member `member` of the `members` warps that share
 * row [vocab]: the logits it reads, in steps of 32 lanes x 4 logits taken
 * by the warps in turn, pushed into its online state and its list. */
void scan_warp_share(const float *row, size_t vocab, int member, int members, int k, Partial *partial);

/* logits [rows_per_block, vocab] -> probs, indices [rows_per_block, k], with
 * rows_per_block in {1, 2, 4, 8}. merge_group is the number of consecutive
 * warps merged together: 8 / rows_per_block is right, 8 is the bug. */
void emulate_block_merge(const float *logits, int rows_per_block, size_t vocab, int k, int merge_group, float *probs,
                         int64_t *indices);

/* The table: rows right, with the right merge and with the bug, for 1, 2,
 * 4 and 8 rows per block. */
void print_merge_demo(TableFormat format);

#endif
