/* The tree in which the warps of a block merge their partial states,
 * drawn from the states themselves: the block of merge_demo.h, its warps'
 * shares of seeded rows, merged by merge_tree_absorbs and
 * softmax_state_merge (kernels/softmax_topk.h) in the kernel's order, each
 * state written as a node of a Graphviz graph. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_MERGE_TREE_H
#define CHAPTERS_03_SOFTMAX_TOPK_MERGE_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Write the DOT graph of the merge of a block holding rows_per_block rows
 * (1, 2, 4 or 8) of `vocab` random logits (normal(0, 3), seeded): the
 * warps' online states (m, d) as leaves, every merge as a node, and under
 * each row's first warp the state it ends with next to the state of its
 * row pushed one logit at a time. merge_group consecutive warps merge
 * together: 8 / rows_per_block is right; 8, with several rows, is the bug,
 * and the merges that mix rows are drawn in red. */
void write_merge_tree_diagram(FILE *out, const float *logits, size_t vocab, int rows_per_block, int merge_group);

/* The same for rows made from `seed`. */
void write_seeded_merge_tree_diagram(FILE *out, size_t vocab, int rows_per_block, int merge_group, uint64_t seed);

#endif
