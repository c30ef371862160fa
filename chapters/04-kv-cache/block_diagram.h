/* The figures of forking and copy-on-write, drawn from the block manager's
 * real state: two continuations forked from one prompt, after the fork or
 * after each wrote its next token, as a Graphviz DOT graph (dot -Tsvg draws
 * it). */
#ifndef CHAPTERS_04_KV_CACHE_BLOCK_DIAGRAM_H
#define CHAPTERS_04_KV_CACHE_BLOCK_DIAGRAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Runs the fork on a pool of num_blocks blocks of block_size positions,
 * whose free list is shuffled with `seed` as a busy server's would be, and
 * writes the figure. False, with nothing written, when the prompt's last
 * block would be full (no copy to show) or the pool has no block for the copy. */
typedef enum { BLOCK_DIAGRAM_AFTER_FORK, BLOCK_DIAGRAM_AFTER_WRITES } BlockDiagramStage;

bool block_diagram_copy_on_write(FILE *out, BlockDiagramStage stage, int num_blocks, int block_size, int prompt_len,
                                 uint64_t seed);

#endif
