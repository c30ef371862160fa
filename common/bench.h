/* Benchmarks: a timing loop that reports medians, and bandwidth probes that
 * measure the limit a memory-bound kernel is compared against in the same run.
 *
 * Performance in this book is always a ratio: "the fused kernel moves data at
 * 81% of what memcpy achieves on this machine, right now". A ratio to a limit
 * measured in the same process survives a noisy or throttled machine far
 * better than an absolute number, and says how much room is left. */
#ifndef COMMON_BENCH_H
#define COMMON_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/hostdevice.h"
#include "common/table.h"

COMMON_BEGIN_C

typedef struct {
    double median, min, max; /* seconds per run; or the ratio or share that the function filling it names */
    int runs;                /* timed runs (warm-up runs excluded) */
} BenchStats;

/* Monotonic wall-clock time in seconds. */
double clock_seconds(void);

/* The CPU time the calling thread has used, in seconds. On a shared
 * machine a thread waits for a core for milliseconds at a time; the wall
 * clock counts those waits, this clock does not. */
double thread_cpu_seconds(void);

/* Run body(ctx) warmup_runs times untimed, then timed_runs times (>= 1), timing each. */
BenchStats bench_run(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs);

/* The same, timed by the calling thread's CPU time (thread_cpu_seconds):
 * for a body that runs on that thread alone, on data in cache, whose own
 * work is what is measured. */
BenchStats bench_run_thread_cpu(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs);

/* The statistics of `runs` (>= 1) measured times in seconds; sorts `seconds`
 * in place. The median of an even count is the mean of the middle two. */
BenchStats bench_stats_from_times(double *seconds, int runs);

/* Run the `count` bodies in turns, each once per round: warmup_runs rounds
 * untimed, then timed_runs (>= 1) timed, body b's time of round r going to
 * seconds[b * timed_runs + r]. Whatever else a busy machine does then falls
 * on every body alike, and so do ratios taken round by round. */
typedef struct {
    void (*run)(void *ctx);
    void *ctx;
} BenchBody;
void bench_run_in_turns(const BenchBody *bodies, int count, int warmup_runs, int timed_runs, double *seconds);

/* The statistics of numerators[r] / denominators[r] over the runs: ratios
 * of times measured in the same round (bench_run_in_turns). */
BenchStats bench_ratio_stats(const double *numerators, const double *denominators, int runs);

/* Bytes per second as GB/s (1e9 bytes), from a byte count and a time. */
double gb_per_s(double bytes, double seconds);

/* The spread goes beside every ratio a benchmark reports: these machines
 * are shared, and a median alone has misled.
 *
 * A throughput as a share of a limit measured in the same run, `bytes`
 * moved per run: "81% (76–85%)", the median run's share, then the slowest
 * and the fastest run's. */
void bench_share_cell(Table *table, double bytes, BenchStats stats, double limit_gbs);

/* Shares of a limit as "81% (76–85%)": the median share, then the least
 * and the greatest (shares as fractions: 0.81). */
void bench_percent_cell(Table *table, BenchStats shares);

/* "meets 80%", or "misses 80% by N points", for a median share of a limit
 * against a goal, both in percent, into `text` (`size` bytes). The points
 * are counted from the share as a table prints it, rounded to a whole
 * percent, so that the two cells agree; a share that rounds up to the goal
 * but is below it misses "by under 1 point"; a NaN share is "no share
 * measured". */
void bench_goal_verdict(char *text, size_t size, double share, double goal);

/* The same, as a table cell. */
void bench_goal_cell(Table *table, double share, double goal);

/* Shares of a limit round by round, from the times of bench_run_in_turns:
 * in round r a kernel moved `bytes` in seconds[r], and the limit's probe
 * moved `limit_bytes` in limit_seconds[r]. The share of a round is the
 * kernel's bytes per second over the probe's; the statistics are of those
 * shares. */
BenchStats bench_share_stats(double bytes, const double *seconds, double limit_bytes, const double *limit_seconds,
                             int runs);

/* How many times less time than a baseline: "2.31× (2.10–2.45)", the
 * baseline's median over this median, then over this slowest and fastest. */
void bench_speedup_cell(Table *table, BenchStats baseline, BenchStats stats);

/* Number of threads OpenMP would use for a parallel region (1 without OpenMP). */
int bench_max_threads(void);

/* Copy bandwidth: median GB/s of memcpy between two buffers of `bytes` each,
 * counting bytes read plus bytes written (2 * bytes per copy), as the kernels'
 * own byte counts do. With threads > 1 the buffers are split into contiguous
 * slices, one per OpenMP thread, and each thread first touches its own slices
 * (so their pages live on its NUMA node). threads <= 0 means
 * bench_max_threads(). Pick `bytes` above the last-level cache. */
double memcpy_bandwidth_gbs(size_t bytes, int threads);

/* Read bandwidth: median GB/s of summing a buffer of `bytes` bytes of floats
 * (reads only), split across threads like memcpy_bandwidth_gbs. */
double read_bandwidth_gbs(size_t bytes, int threads);

/* One memcpy of `bytes` from `source` to `destination`, split across
 * threads as memcpy_bandwidth_gbs splits its buffers: a body for
 * bench_run_in_turns (ctx: a CopyPass), as ReadPass below is for reads.
 * threads <= 0 means bench_max_threads(). */
typedef struct {
    void *destination;
    const void *source;
    size_t bytes;
    int threads;
} CopyPass;
void copy_pass_run(void *ctx);

/* One read of a caller's floats, split across threads as
 * read_bandwidth_gbs splits its own buffer, and summed the same way: a
 * body for bench_run_in_turns (ctx: a ReadPass). A memory-bound kernel
 * timed in turns with a read of its own input gets its share of the read
 * bandwidth round by round, each from two runs a moment apart. A limit
 * measured once, seconds before the kernel, can come from another state
 * of the machine: the memory of a shared machine has been seen to switch
 * between a slower and a much faster speed from one run to the next.
 * threads <= 0 means bench_max_threads(). */
typedef struct {
    const float *values;
    size_t count;
    int threads;
    /* volatile: stored after every pass, so that every value must be read. */
    volatile float sum;
} ReadPass;
void read_pass_run(void *ctx);

/* The last-level cache size in bytes from sysconf or /sys, 0 if unknown. */
size_t bench_llc_bytes(void);

/* Whether this build checks every memory access with AddressSanitizer
 * (./configure --sanitize). Such a build runs the benchmarks to check the
 * code they time, and the book's tables with it, not to time anything: the
 * sanitizer's checks are most of what a timer would measure there. */
bool bench_sanitized(void);

/* A working-set size above this machine's last-level cache, for bandwidth
 * claims: max(2 * LLC, 256 MiB), capped at 1 GiB (256 MiB when the LLC size
 * is unknown). Twice the LLC leaves at most half the data in cache between
 * runs; the cap keeps two buffers well inside a small machine's memory.
 * In a sanitized build, BENCH_SANITIZED_BYTES: every kernel still runs on
 * data far beyond L2, and the sanitizer build of the book no longer spends
 * most of its time there (layer norm's `bench --quick` took 21 minutes on
 * 600 MiB tensors under the sanitizers). */
enum { BENCH_SANITIZED_BYTES = 32 << 20 };
size_t bench_large_bytes(void);

/* One line saying where and when a CPU benchmark ran, for under its table:
 * "Measured on <CPU model> (N cores, T threads used), <date, UTC>." The
 * model is /proc/cpuinfo's "model name" ("an unknown CPU" elsewhere). A
 * sanitized build says so, after the date. */
void bench_print_machine(FILE *out, int threads_used);

COMMON_END_C

#endif
