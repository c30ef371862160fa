/* The CPU benchmark: forward and backward throughput of the fused kernels
 * of both norms, rows in float32, fp16 and bf16, on one thread and on all
 * cores, each as a share of the memcpy bandwidth measured in the same run
 * with the same threads, with a verdict against the goals (80% forward,
 * 70% backward, all cores). Bytes counted in the storage type: read x +
 * write y (forward), read x and dy + write dx (backward), plus the float32
 * statistics and parameters. */
#ifndef CHAPTERS_02_LAYERNORM_BENCH_CPU_H
#define CHAPTERS_02_LAYERNORM_BENCH_CPU_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"

/* quick: d = 4096 only, 5 rounds instead of 7 (3 for 16-bit rows), each
 * pass still timed in turns with its memcpy; the working set stays above
 * the last-level cache. */
void bench_cpu_print(FILE *out, TableFormat format, bool quick);

#endif
