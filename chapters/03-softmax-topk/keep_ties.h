/* The top K with every logit tied with the K-th kept: the answer to an
 * exercise of the chapter, which changes the tie rule. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_KEEP_TIES_H
#define CHAPTERS_03_SOFTMAX_TOPK_KEEP_TIES_H

#include <stddef.h>
#include <stdint.h>

#include "common/table.h"

/* The fused top K of one row of `vocab` logits (1 <= k <= vocab), then every
 * later index whose logit equals the K-th one, in index order, with the
 * same probability. probs and indices have room for `vocab`; returns how
 * many were written, k or more. */
size_t topk_keep_ties(const float *logits, size_t vocab, int k, float *probs, int64_t *indices);

/* The ties table: rows of tied random logits (fill_tied_logits), and for
 * each, the K-th logit, how many logits equal it, and how many the top K
 * keeps with and without its ties. */
void print_ties_table(size_t vocab, int k, size_t rows, uint64_t seed, TableFormat format);

#endif
