#include "common/bench.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "common/alloc.h"
#include "common/cli.h"

/* Bandwidth probes: one untimed run brings the pages in, then the median of
 * an odd number of runs, so the median is one real run. */
enum { PROBE_WARMUP_RUNS = 1, PROBE_TIMED_RUNS = 7 };

double clock_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

BenchStats bench_stats_from_times(double *seconds, int runs)
{
    if (runs < 1) {
        cli_fail_status(1, "bench_stats_from_times: need at least one run, got %d", runs);
    }
    qsort(seconds, (size_t)runs, sizeof *seconds, compare_doubles);
    double median = runs % 2 == 1 ? seconds[runs / 2] : 0.5 * (seconds[runs / 2 - 1] + seconds[runs / 2]);
    return (BenchStats){.median = median, .min = seconds[0], .max = seconds[runs - 1], .runs = runs};
}

double thread_cpu_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static BenchStats run_on_clock(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs,
                               double (*clock)(void))
{
    if (timed_runs < 1) {
        cli_fail_status(1, "bench_run: need at least one timed run, got %d", timed_runs);
    }
    for (int i = 0; i < warmup_runs; i++) {
        body(ctx);
    }
    double *seconds = array_alloc((size_t)timed_runs, sizeof *seconds);
    for (int i = 0; i < timed_runs; i++) {
        double start = clock();
        body(ctx);
        seconds[i] = clock() - start;
    }
    BenchStats stats = bench_stats_from_times(seconds, timed_runs);
    array_free(seconds);
    return stats;
}

BenchStats bench_run(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs)
{
    return run_on_clock(body, ctx, warmup_runs, timed_runs, clock_seconds);
}

BenchStats bench_run_thread_cpu(void (*body)(void *ctx), void *ctx, int warmup_runs, int timed_runs)
{
    return run_on_clock(body, ctx, warmup_runs, timed_runs, thread_cpu_seconds);
}

void bench_run_in_turns(const BenchBody *bodies, int count, int warmup_runs, int timed_runs, double *seconds)
{
    if (timed_runs < 1) {
        cli_fail_status(1, "bench_run_in_turns: need at least one timed run, got %d", timed_runs);
    }
    for (int r = 0; r < warmup_runs; r++) {
        for (int b = 0; b < count; b++) {
            bodies[b].run(bodies[b].ctx);
        }
    }
    for (int r = 0; r < timed_runs; r++) {
        for (int b = 0; b < count; b++) {
            double start = clock_seconds();
            bodies[b].run(bodies[b].ctx);
            seconds[(size_t)b * timed_runs + r] = clock_seconds() - start;
        }
    }
}

BenchStats bench_ratio_stats(const double *numerators, const double *denominators, int runs)
{
    double *ratios = array_alloc((size_t)runs, sizeof *ratios);
    for (int r = 0; r < runs; r++) {
        ratios[r] = numerators[r] / denominators[r];
    }
    BenchStats stats = bench_stats_from_times(ratios, runs);
    array_free(ratios);
    return stats;
}

double gb_per_s(double bytes, double seconds)
{
    return bytes / seconds * 1e-9;
}

void bench_percent_cell(Table *table, BenchStats shares)
{
    table_cell(table, "%.0f%% (%.0f–%.0f%%)", 100.0 * shares.median, 100.0 * shares.min, 100.0 * shares.max);
}

void bench_goal_verdict(char *text, size_t size, double share, double goal)
{
    double shown = round(share);
    if (isnan(share))
        snprintf(text, size, "no share measured");
    else if (share >= goal)
        snprintf(text, size, "meets %.0f%%", goal);
    else if (shown >= goal)
        snprintf(text, size, "misses %.0f%% by under 1 point", goal);
    else if (goal - shown == 1.0)
        snprintf(text, size, "misses %.0f%% by 1 point", goal);
    else
        snprintf(text, size, "misses %.0f%% by %.0f points", goal, goal - shown);
}

void bench_goal_cell(Table *table, double share, double goal)
{
    char verdict[64];
    bench_goal_verdict(verdict, sizeof verdict, share, goal);
    table_cell(table, "%s", verdict);
}

void bench_share_cell(Table *table, double bytes, BenchStats stats, double limit_gbs)
{
    BenchStats shares = {gb_per_s(bytes, stats.median) / limit_gbs, gb_per_s(bytes, stats.max) / limit_gbs,
                         gb_per_s(bytes, stats.min) / limit_gbs, stats.runs};
    bench_percent_cell(table, shares);
}

BenchStats bench_share_stats(double bytes, const double *seconds, double limit_bytes, const double *limit_seconds,
                             int runs)
{
    BenchStats time_ratios = bench_ratio_stats(limit_seconds, seconds, runs);
    double bytes_ratio = bytes / limit_bytes;
    return (BenchStats){time_ratios.median * bytes_ratio, time_ratios.min * bytes_ratio, time_ratios.max * bytes_ratio,
                        runs};
}

void bench_speedup_cell(Table *table, BenchStats baseline, BenchStats stats)
{
    table_cell(table, "%.2f× (%.2f–%.2f)", baseline.median / stats.median, baseline.median / stats.max,
               baseline.median / stats.min);
}

int bench_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* A contiguous slice [begin, end) of `count` items for the calling thread,
 * in whole blocks of `block` items so that no two threads share a cache line
 * (or a SIMD block); the last thread also takes the remainder. The thread
 * count is asked inside the parallel region: OpenMP may start fewer threads
 * than requested, and the slices must still cover everything. */
typedef struct {
    size_t begin, end;
} Slice;

static Slice thread_slice(size_t count, size_t block)
{
#ifdef _OPENMP
    size_t threads = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
#else
    size_t threads = 1, t = 0;
#endif
    size_t blocks = count / block;
    Slice slice = {blocks * t / threads * block, blocks * (t + 1) / threads * block};
    if (t == threads - 1) {
        slice.end = count;
    }
    return slice;
}

static int probe_threads(int threads)
{
    return threads > 0 ? threads : bench_max_threads();
}

/* Each thread writes its own slice of a probe's buffer first, the slice it
 * will copy or sum (slices of whole blocks of `block_bytes`, as the passes
 * below cut them), so that the buffer's pages are placed next to that
 * thread: first touch. The same threads get the same slices every time. */
static void touch_in_slices(void *buffer, size_t bytes, size_t block_bytes, int threads)
{
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
        Slice slice = thread_slice(bytes, block_bytes);
        memset((unsigned char *)buffer + slice.begin, 0, slice.end - slice.begin);
    }
}

static void copy_in_slices(unsigned char *destination, const unsigned char *source, size_t bytes, int threads)
{
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
        Slice slice = thread_slice(bytes, ARRAY_ALIGNMENT);
        memcpy(destination + slice.begin, source + slice.begin, slice.end - slice.begin);
    }
}

void copy_pass_run(void *ctx)
{
    CopyPass *pass = ctx;
    copy_in_slices(pass->destination, pass->source, pass->bytes, probe_threads(pass->threads));
}

double memcpy_bandwidth_gbs(size_t bytes, int threads)
{
    int used = probe_threads(threads);
    unsigned char *source = array_alloc_uninitialized(bytes, 1), *destination = array_alloc_uninitialized(bytes, 1);
    touch_in_slices(source, bytes, ARRAY_ALIGNMENT, used);
    touch_in_slices(destination, bytes, ARRAY_ALIGNMENT, used);
    CopyPass pass = {destination, source, bytes, used};
    BenchStats stats = bench_run(copy_pass_run, &pass, PROBE_WARMUP_RUNS, PROBE_TIMED_RUNS);
    array_free(source);
    array_free(destination);
    return gb_per_s(2.0 * (double)bytes, stats.median);
}

/* Summing into one accumulator is a chain of dependent additions, about one
 * per 4 cycles: far slower than memory. Independent partial sums (C does not
 * let the compiler reorder a float sum by itself) keep several vector adds in
 * flight, so that the loads, not the adds, set the speed. */
enum { SUM_LANES = 64 };

static float sum_values(const float *values, size_t begin, size_t end)
{
    float lanes[SUM_LANES] = {0};
    size_t i = begin;
    for (; i + SUM_LANES <= end; i += SUM_LANES) {
        for (int lane = 0; lane < SUM_LANES; lane++) {
            lanes[lane] += values[i + lane];
        }
    }
    float sum = 0;
    for (; i < end; i++) {
        sum += values[i];
    }
    for (int lane = 0; lane < SUM_LANES; lane++) {
        sum += lanes[lane];
    }
    return sum;
}

static float sum_in_slices(const float *values, size_t count, int threads)
{
    float sum = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sum)
#endif
    {
        Slice slice = thread_slice(count, SUM_LANES);
        sum += sum_values(values, slice.begin, slice.end);
    }
    return sum;
}

void read_pass_run(void *ctx)
{
    ReadPass *pass = ctx;
    pass->sum = sum_in_slices(pass->values, pass->count, probe_threads(pass->threads));
}

double read_bandwidth_gbs(size_t bytes, int threads)
{
    int used = probe_threads(threads);
    size_t count = bytes / sizeof(float);
    float *values = array_alloc_uninitialized(count, sizeof(float));
    touch_in_slices(values, count * sizeof(float), SUM_LANES * sizeof(float), used);
    ReadPass pass = {values, count, used, 0.0f};
    BenchStats stats = bench_run(read_pass_run, &pass, PROBE_WARMUP_RUNS, PROBE_TIMED_RUNS);
    array_free(values);
    return gb_per_s((double)(count * sizeof(float)), stats.median);
}

/* sysconf knows the L3 size on glibc; elsewhere the kernel's cache
 * description in /sys says, e.g., "266240K". */
static size_t llc_bytes_from_sys(void)
{
    FILE *file = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (file == NULL) {
        return 0;
    }
    unsigned long long size = 0;
    char unit = '\0';
    int fields = fscanf(file, "%llu%c", &size, &unit);
    fclose(file);
    if (fields < 1) {
        return 0;
    }
    if (unit == 'K') {
        size <<= 10;
    } else if (unit == 'M') {
        size <<= 20;
    }
    return (size_t)size;
}

size_t bench_llc_bytes(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    long size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size > 0) {
        return (size_t)size;
    }
#endif
    return llc_bytes_from_sys();
}

bool bench_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) /* gcc */
    return true;
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer)
    return true;
#else
    return false;
#endif
#else
    return false;
#endif
}

size_t bench_large_bytes(void)
{
    if (bench_sanitized()) {
        return BENCH_SANITIZED_BYTES;
    }
    const size_t mib = (size_t)1 << 20;
    size_t bytes = 2 * bench_llc_bytes();
    if (bytes < 256 * mib) {
        bytes = 256 * mib;
    }
    if (bytes > 1024 * mib) {
        bytes = 1024 * mib;
    }
    return bytes;
}

/* The "model name" line of /proc/cpuinfo, into `model`; false if there is
 * none (not Linux, or a CPU that does not name itself there). */
static bool cpu_model_name(char *model, size_t size)
{
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (file == NULL) {
        return false;
    }
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, file) != NULL) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            const char *name = colon + strspn(colon + 1, " \t") + 1;
            size_t length = strcspn(name, "\n");
            found = length > 0; /* an empty name leaves the caller's default */
            if (found) {
                snprintf(model, size, "%.*s", (int)length, name);
            }
        }
    }
    fclose(file);
    return found;
}

void bench_print_machine(FILE *out, int threads_used)
{
    char model[256] = "an unknown CPU", date[32] = "an unknown date";
    cpu_model_name(model, sizeof model);
    time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc) != NULL) {
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &utc);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "Measured on %s (%ld cores, %d thread%s used), %s%s.\n", model, cores, threads_used,
            threads_used == 1 ? "" : "s", date,
            bench_sanitized() ? ", in a sanitizer build: the times are mostly the sanitizer's" : "");
}
