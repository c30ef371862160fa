/* The table that compares the sorting-free sampler (rejection.h) with the
 * sort-based one (sampling.h): rounds per draw, predicted and measured, and
 * the time of a draw, over a row's top K and over a whole row. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_REJECTION_TABLE_H
#define CHAPTERS_03_SOFTMAX_TOPK_REJECTION_TABLE_H

#include "common/table.h"

void print_rejection_table(TableFormat format);

#endif
