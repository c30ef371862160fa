/* CPU measurements for the chapter: the traffic table (each version's
 * predicted memory traffic next to its measured time), the benchmark grid
 * (V x K, one thread and all cores, as ratios to the read bandwidth measured
 * in the same run) and the accuracy table. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_BENCH_CPU_H
#define CHAPTERS_03_SOFTMAX_TOPK_BENCH_CPU_H

#include <stdbool.h>
#include <stddef.h>

#include "common/table.h"

/* `count` logits normal(0, 3), filled in blocks with their own seeds: in
 * parallel (each thread touches its pages first, so they sit next to it),
 * yet the same values for any thread count. Release with array_free. */
float *bench_logits_new(size_t count, int threads);

/* `threads` is the "all cores" count. quick: V = 128256, K in {8, 64}. */
void print_cpu_bench(bool quick, int threads, TableFormat format);

void print_traffic_table(TableFormat format);

void print_accuracy_table(TableFormat format);

#endif
