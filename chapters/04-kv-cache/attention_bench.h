/* Decode-attention throughput: the paged cache against the contiguous one,
 * over the same keys and values, at several context lengths; and the paged
 * cache in each block format (float32, fp16, INT8, INT4, KIVI). */
#ifndef CHAPTERS_04_KV_CACHE_ATTENTION_BENCH_H
#define CHAPTERS_04_KV_CACHE_ATTENTION_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/table.h"

/* Each context length gets a batch of sequences whose keys and values fill
 * about cache_bytes (rounded to whole sequences, at least one). Both benches
 * return true when every output matched, as they print, and end with a
 * verdict line per goal the chapter sets them, "meets" or "misses by": a
 * goal missed is a finding, not a failure, so it leaves the result alone. */
bool attention_bench_report(int block_size, size_t cache_bytes, FILE *out, TableFormat format);

/* One decode step over the same keys and values stored in each block
 * format, sequences of 4000 positions filling about cache_bytes in float32:
 * the bytes read per position and the time, as ratios to float32's and
 * fp16's; the verdicts are FP8's against fp16's. */
bool attention_bench_formats(int block_size, size_t cache_bytes, FILE *out, TableFormat format);

#endif
