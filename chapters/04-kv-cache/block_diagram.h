/* The chapter's diagrams, as Graphviz DOT graphs (dot -Tsvg draws them),
 * drawn from the real state of the code they show: the block tables of a
 * fork, and the bytes of a block in each cache format. */
#ifndef CHAPTERS_04_KV_CACHE_BLOCK_DIAGRAM_H
#define CHAPTERS_04_KV_CACHE_BLOCK_DIAGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/kv_quant.h"

/* Runs the fork on a pool of num_blocks blocks of block_size positions,
 * whose free list is shuffled with `seed` as a busy server's would be, and
 * writes the figure. False, with nothing written, when the prompt's last
 * block would be full (no copy to show) or the pool has no block for the copy. */
typedef enum { BLOCK_DIAGRAM_AFTER_FORK, BLOCK_DIAGRAM_AFTER_WRITES } BlockDiagramStage;

bool block_diagram_copy_on_write(FILE *out, BlockDiagramStage stage, int num_blocks, int block_size, int prompt_len,
                                 uint64_t seed);

/* Where the bytes of one layer's pool lie in layout `l`: its first physical
 * blocks, the kv heads of block zoomed_block, and the rows and scales of
 * head zoomed_head, each with its byte offsets. */
void block_diagram_layout(FILE *out, KvBlockLayout l, int zoomed_block, int zoomed_head);

#endif
