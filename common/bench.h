/* Benchmarks: a timing loop that reports medians, and bandwidth probes that
 * measure the limit a memory-bound kernel is compared against in the same run.
 *
 * Performance in this book is always a ratio: "the fused kernel moves data at
 * 81% of what memcpy achieves on this machine, right now". A ratio to a limit
 * measured in the same process survives a noisy or throttled machine far
 * better than an absolute number, and says how much room is left. */
#ifndef COMMON_BENCH_H
#define COMMON_BENCH_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef struct {
    double median, min, max; /* seconds per run */
    int runs;                /* timed runs (warm-up runs excluded) */
} BenchStats;

/* Monotonic wall-clock time in seconds. */
double clock_seconds(void);

/* Run body(ctx) warmup_runs times untimed, then timed_runs times (>= 1), timing each. */
BenchStats bench_run(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs);

/* Bytes per second as GB/s (1e9 bytes), from a byte count and a time. */
double gb_per_s(double bytes, double seconds);

/* Number of threads OpenMP would use for a parallel region (1 without OpenMP). */
int bench_max_threads(void);

/* Copy bandwidth: median GB/s of memcpy between two buffers of `bytes` each,
 * counting bytes read plus bytes written (2 * bytes per copy), as the kernels'
 * own byte counts do. With threads > 1 the buffers are split into contiguous
 * slices, one per OpenMP thread. Pick `bytes` above the last-level cache. */
double memcpy_bandwidth_gbs(size_t bytes, int threads);

/* Read bandwidth: median GB/s of summing a buffer of `bytes` floats (reads only). */
double read_bandwidth_gbs(size_t bytes, int threads);

/* A working-set size above this machine's last-level cache, for bandwidth
 * claims: reads the LLC size from sysconf or /sys when it can, and returns
 * max(4 * LLC, 256 MiB), capped at 2 GiB. */
size_t bench_large_bytes(void);

COMMON_END_C

#endif
