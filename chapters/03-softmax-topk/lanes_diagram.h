/* Which thread reads which logit of a row, drawn from the kernels' own
 * index arithmetic: kernel 2's lanes, each reading every 32nd logit, and
 * the float4 scan of kernels 3, 4 and 6 to 8 (warp_scan_float4s), whose
 * head and tail are read one by one (float4_split and float4_scalar_index,
 * kernels/softmax_topk.h). */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_LANES_DIAGRAM_H
#define CHAPTERS_03_SOFTMAX_TOPK_LANES_DIAGRAM_H

#include <stdio.h>

/* Write the DOT graph of row `row` of logits [rows, vocab] stored from a
 * 16-byte aligned address (as cudaMalloc returns), so that the row starts
 * row * vocab floats past it: two tables, lanes across, one line per step
 * of the loop, each cell the index of the logit (kernel 2) or of the first
 * logit of the float4 (the scan, `warps` warps sharing the row) that the
 * lane reads. */
void write_lanes_diagram(FILE *out, int vocab, int row, int warps);

#endif
