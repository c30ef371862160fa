/* The CPU benchmark: forward and backward throughput of the fused float
 * kernels for d = 768, 1024, 4096, on one thread and on all cores, each as
 * a share of the memcpy bandwidth measured in the same run with the same
 * threads. Bytes counted: read x + write y (forward), read x and dy +
 * write dx (backward). */
#ifndef CHAPTERS_02_LAYERNORM_BENCH_CPU_H
#define CHAPTERS_02_LAYERNORM_BENCH_CPU_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"

/* quick: 5 timed runs instead of 7, and memcpy measured before the kernels
 * only (not also after); the working set stays above the last-level cache. */
void bench_cpu_print(FILE *out, TableFormat format, bool quick);

#endif
