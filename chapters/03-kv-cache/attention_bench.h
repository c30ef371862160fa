/* Decode-attention throughput: the paged cache against the contiguous one,
 * over the same keys and values, at several context lengths; then the paged
 * cache in each block format (float32, fp16, INT8, INT4, KIVI). */
#ifndef KV_CACHE_ATTENTION_BENCH_H
#define KV_CACHE_ATTENTION_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "common/table.h"

/* Each context length gets a batch of sequences whose keys and values fill
 * about cache_bytes (rounded to whole sequences, at least one). */
void attention_bench_report(int block_size, size_t cache_bytes, FILE *out, TableFormat format);

#endif
