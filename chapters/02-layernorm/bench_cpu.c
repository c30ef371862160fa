#include "chapters/02-layernorm/bench_cpu.h"

#include <math.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "chapters/02-layernorm/storage.h"
#include "common/alloc.h"
#include "common/bench.h"

typedef struct {
    size_t n, d;
    LnStorage storage;     /* of x, y, dy and dx */
    void *x, *y, *dy, *dx; /* n x d */
    float *gamma, *beta, *dgamma, *dbeta, *mean, *rstd, *scratch;
    bool in_one_chunk; /* backward: every row in one chunk (time_the_arithmetic_on_rows_in_cache) */
} BenchArrays;

static void run_forward(void *context)
{
    BenchArrays *a = context;
    layernorm_forward_stored(a->y, a->mean, a->rstd, a->x, a->gamma, a->beta, a->n, a->d, 1e-5f, a->storage);
}

static void run_forward_float_then_round(void *context)
{
    BenchArrays *a = context;
    layernorm_forward_float_then_round(a->y, a->mean, a->rstd, a->x, a->gamma, a->beta, a->n, a->d, 1e-5f, a->storage);
}

/* A backward pass, guarded or float then round, with its rows in
 * LN_BACKWARD_CHUNKS chunks or, for its own work on a few rows in cache,
 * in one. */
static void layer_norm_backward(BenchArrays *a, bool guarded)
{
    if (a->in_one_chunk)
        layernorm_backward_in_one_chunk(a->dx, a->dgamma, a->dbeta, a->scratch, a->dy, a->x, a->mean, a->rstd, a->gamma,
                                        a->n, a->d, 1e-5f, a->storage, guarded);
    else if (guarded)
        layernorm_backward_stored(a->dx, a->dgamma, a->dbeta, a->scratch, a->dy, a->x, a->mean, a->rstd, a->gamma, a->n,
                                  a->d, 1e-5f, a->storage);
    else
        layernorm_backward_float_then_round(a->dx, a->dgamma, a->dbeta, a->scratch, a->dy, a->x, a->mean, a->rstd,
                                            a->gamma, a->n, a->d, a->storage);
}

static void run_backward(void *context)
{
    layer_norm_backward(context, true);
}

static void run_backward_float_then_round(void *context)
{
    layer_norm_backward(context, false);
}

static void run_rms_forward(void *context)
{
    BenchArrays *a = context;
    rmsnorm_forward_stored(a->y, a->rstd, a->x, a->gamma, a->n, a->d, 1e-5f, a->storage);
}

static void rms_norm_backward(BenchArrays *a, bool guarded)
{
    if (a->in_one_chunk)
        rmsnorm_backward_in_one_chunk(a->dx, a->dgamma, a->scratch, a->dy, a->x, a->rstd, a->gamma, a->n, a->d, 1e-5f,
                                      a->storage, guarded);
    else if (guarded)
        rmsnorm_backward_stored(a->dx, a->dgamma, a->scratch, a->dy, a->x, a->rstd, a->gamma, a->n, a->d, 1e-5f,
                                a->storage);
    else
        rmsnorm_backward_float_then_round(a->dx, a->dgamma, a->scratch, a->dy, a->x, a->rstd, a->gamma, a->n, a->d,
                                          a->storage);
}

static void run_rms_backward(void *context)
{
    rms_norm_backward(context, true);
}

static void run_rms_backward_float_then_round(void *context)
{
    rms_norm_backward(context, false);
}

/* Values that vary, cheaply: the speed does not depend on them, as long as
 * they are ordinary numbers (no subnormals) and dy is no function of x.
 * gamma, x and dy each take their own odd multiplier: with one for all,
 * dy was x and g = gamma dy a function of x, whose dx nearly cancels in
 * whole columns, and a 16-bit backward pass sent those elements to double
 * (kernels/layernorm_row.h: the guard). Written by the threads that will
 * read them, so that each page sits next to its thread's cores. */
#define GAMMA_MIX 2654435761u
#define X_MIX 2246822519u
#define DY_MIX 3266489917u

static float varying_value(size_t i, size_t mix)
{
    /* In float before subtracting: in size_t, a residue below 512 minus
     * 512 wraps to about 1.8e19, beyond fp16's range (inf, NaN statistics). */
    return ((float)((i * mix) % 1024) - 512.0f) / 512.0f;
}

static void fill_in_parallel(float *values, size_t count, size_t mix)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++)
        values[i] = varying_value(i, mix);
}

/* The same values rounded to a 16-bit storage type, as its bits. */
static void fill_stored_in_parallel(void *values, size_t count, size_t mix, LnStorage storage)
{
    if (storage == STORAGE_FLOAT32) {
        fill_in_parallel(values, count, mix);
        return;
    }
    enum { FILL_CHUNK = 1024 }; /* converted a chunk at a time, 8 values per instruction */
#pragma omp parallel for schedule(static)
    for (size_t first = 0; first < count; first += FILL_CHUNK) {
        float chunk[FILL_CHUNK];
        size_t chunk_count = count - first < FILL_CHUNK ? count - first : FILL_CHUNK;
        for (size_t k = 0; k < chunk_count; k++)
            chunk[k] = varying_value(first + k, mix);
        ln_storage_bits(storage, (uint16_t *)values + first, chunk, chunk_count);
    }
}

static void set_threads(int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

// ANCHOR: count_the_bytes_a_pass_moves
/* What a pass moves per run, as the fused kernel must: `tensors` n x d
 * tensors in the storage type (x and y forward; x, dy and dx backward),
 * `stats` floats per row (mean and rstd, written forward and read
 * backward; RMSNorm has rstd only), and `params` float rows of d (gamma
 * and beta; gamma, dgamma and dbeta). The goal is a share of memcpy. A
 * pass "float then round" is a guarded pass without its guard
 * (layernorm.h), timed on 16-bit rows only (on float32 rows it is the
 * float32 pass itself), and on all cores only. */
typedef struct {
    const char *pass;
    void (*body)(void *context);
    void (*forward)(void *context); /* the forward pass that saves the statistics it reads */
    int tensors, stats, params;
    double goal; /* percent of memcpy, on all cores */
    bool sixteen_bit_only;
} Pass;

static double bytes_moved(const Pass *pass, LnStorage storage, size_t n, size_t d)
{
    return (double)(pass->tensors * n * d * ln_storage_bytes(storage)) + (double)(pass->stats * n * sizeof(float)) +
           (double)(pass->params * d * sizeof(float));
}
// ANCHOR_END: count_the_bytes_a_pass_moves

static const Pass PASSES[] = {
    {"layer norm forward",                    run_forward,                       run_forward,     2, 2, 2, 80.0, false},
    {"layer norm forward, float then round",  run_forward_float_then_round,      run_forward,     2, 2, 2, 80.0, true },
    {"layer norm backward",                   run_backward,                      run_forward,     3, 2, 3, 70.0, false},
    {"layer norm backward, float then round", run_backward_float_then_round,     run_forward,     3, 2, 3, 70.0, true },
    {"RMSNorm forward",                       run_rms_forward,                   run_rms_forward, 2, 1, 1, 80.0, false},
    {"RMSNorm backward",                      run_rms_backward,                  run_rms_forward, 3, 1, 2, 70.0, false},
    {"RMSNorm backward, float then round",    run_rms_backward_float_then_round, run_rms_forward, 3, 1, 2, 70.0, true },
};

/* Whether `pass` is timed on rows of `storage`, on all cores or not: a
 * pass without its guard only where the goal is judged, on all cores (it
 * is there to measure, and the timing of 16-bit rows is most of the
 * benchmark's). */
static bool pass_runs_on(const Pass *pass, LnStorage storage, bool all_cores)
{
    return !pass->sixteen_bit_only || (storage != STORAGE_FLOAT32 && all_cores);
}

enum { PASS_COUNT = sizeof PASSES / sizeof PASSES[0], STORAGES = 3, MAX_WIDTHS = 3 };

/* A pass timed in turns with memcpy on the same threads: its time per run,
 * and its share of memcpy round by round. */
typedef struct {
    BenchStats stats;  /* seconds per run */
    BenchStats shares; /* GB/s of the pass over GB/s of memcpy, by round */
    double copy_gbs;   /* the median round's memcpy */
} PassResult;

enum { MAX_TIMED_RUNS = 7 };

/* memcpy copies x into y: the passes only read x, and y is the forward
 * passes' output, which they write again, and no backward pass's input. */
static PassResult time_pass_in_turns(const Pass *pass, BenchArrays *a, size_t bytes, int threads, int timed_runs)
{
    CopyPass copy = {a->y, a->x, bytes, threads};
    BenchBody bodies[] = {
        {copy_pass_run, &copy},
        {pass->body,    a    }
    };
    double seconds[2 * MAX_TIMED_RUNS], *copy_seconds = seconds, *pass_seconds = seconds + timed_runs;
    bench_run_in_turns(bodies, 2, 1, timed_runs, seconds);
    double copied = 2.0 * (double)bytes; /* read and written */
    PassResult result;
    result.shares =
        bench_share_stats(bytes_moved(pass, a->storage, a->n, a->d), pass_seconds, copied, copy_seconds, timed_runs);
    /* (bench_stats_from_times sorts the times: the shares are taken first.) */
    result.copy_gbs = gb_per_s(copied, bench_stats_from_times(copy_seconds, timed_runs).median);
    result.stats = bench_stats_from_times(pass_seconds, timed_runs);
    return result;
}

/* Each pass of each storage type timed at width d: the tensors keep their
 * size in bytes, so a 16-bit one has twice the rows. */
static void time_width(PassResult results[STORAGES][PASS_COUNT], BenchArrays *a, size_t bytes, int threads,
                       bool all_cores, int timed_runs, int timed_runs_16)
{
    size_t max_rows = bytes / 2 / a->d;
    float **per_width[] = {&a->gamma, &a->beta, &a->dgamma, &a->dbeta, &a->mean, &a->rstd, &a->scratch};
    /* layer norm's scratch (dgamma and dbeta) holds RMSNorm's (dgamma) too */
    size_t counts[] = {
        a->d, a->d, a->d, a->d, max_rows, max_rows, layernorm_backward_f32_scratch_floats(max_rows, a->d)};
    for (size_t i = 0; i < 7; i++)
        *per_width[i] = ALLOC_ARRAY(counts[i], float);
    fill_in_parallel(a->gamma, a->d, GAMMA_MIX);
    for (int s = 0; s < STORAGES; s++) {
        a->storage = (LnStorage)s;
        a->n = bytes / ln_storage_bytes(a->storage) / a->d;
        fill_stored_in_parallel(a->x, a->n * a->d, X_MIX, a->storage);
        fill_stored_in_parallel(a->dy, a->n * a->d, DY_MIX, a->storage);
        for (int p = 0; p < PASS_COUNT; p++)
            if (pass_runs_on(&PASSES[p], a->storage, all_cores))
                results[s][p] = time_pass_in_turns(&PASSES[p], a, bytes, threads,
                                                   a->storage == STORAGE_FLOAT32 ? timed_runs : timed_runs_16);
    }
    for (size_t i = 0; i < 7; i++)
        array_free(*per_width[i]);
}

static void add_kernel_row(Table *table, int threads, bool all_cores, const Pass *pass, LnStorage storage, size_t d,
                           size_t bytes, PassResult result)
{
    size_t rows = bytes / ln_storage_bytes(storage) / d;
    double elements = (double)(rows * d), moved = bytes_moved(pass, storage, rows, d);
    table_cell(table, "%d", threads);
    table_cell(table, "%s", pass->pass);
    table_cell(table, "%s", ln_storage_name(storage));
    table_cell(table, "%zu", d);
    table_cell(table, "%zu", rows);
    table_cell(table, "%.1f", gb_per_s(moved, result.stats.median));
    table_cell(table, "%.2e", elements / result.stats.median);
    table_cell(table, "%.1f", result.copy_gbs);
    bench_percent_cell(table, result.shares);
    if (all_cores)
        bench_goal_cell(table, 100.0 * result.shares.median, pass->goal);
    else
        table_cell(table, "%s", "");
}

// ANCHOR: time_the_arithmetic_on_rows_in_cache
/* A pass on rows that stay in L2 (CACHED_TENSOR_BYTES of x, as much of
 * y, or of dy and of dx), again and again on one thread, timed by the
 * thread's own CPU time: the pass's own work, with no load waiting for
 * memory. All the cores at that pace would move the bytes that the
 * benchmark's first table compares with memcpy; where that falls short of
 * the goal, the pass's work is the limit, and no prefetching reaches the
 * goal. A backward pass runs with its rows in one chunk: each call ends by
 * adding its chunks' partial rows of the parameter gradients, a cost that
 * the benchmark's many rows amortise, and that would be most of a call on
 * a few rows in LN_BACKWARD_CHUNKS chunks of one row each. */
enum { CACHED_TENSOR_BYTES = 256 * 1024, CACHED_PASSES = 256, CACHED_TIMED_RUNS = 7 };

typedef struct {
    const Pass *pass;
    BenchArrays *arrays;
} CachedPass;

static void run_cached_pass(void *ctx)
{
    CachedPass *c = ctx;
    for (int i = 0; i < CACHED_PASSES; i++)
        c->pass->body(c->arrays);
}
// ANCHOR_END: time_the_arithmetic_on_rows_in_cache

/* Seconds per element of a pass on rows in L2, one thread (it leaves
 * OpenMP at one thread): the median, slowest and fastest run. The
 * statistics a backward pass reads are its norm's forward pass's. */
static BenchStats cached_element_stats(const Pass *pass, LnStorage storage, size_t d)
{
    size_t n = CACHED_TENSOR_BYTES / ln_storage_bytes(storage) / d;
    n = n > 0 ? n : 1;
    BenchArrays a = {.n = n, .d = d, .storage = storage, .in_one_chunk = true};
    void **tensors[] = {&a.x, &a.y, &a.dy, &a.dx};
    for (size_t i = 0; i < 4; i++)
        *tensors[i] = array_alloc_uninitialized(n * d, ln_storage_bytes(storage));
    float **floats[] = {&a.gamma, &a.beta, &a.dgamma, &a.dbeta, &a.mean, &a.rstd, &a.scratch};
    size_t counts[] = {d, d, d, d, n, n, 2 * d}; /* scratch: one chunk's partial rows */
    for (size_t i = 0; i < 7; i++)
        *floats[i] = ALLOC_ARRAY(counts[i], float);
    fill_stored_in_parallel(a.x, n * d, X_MIX, storage);
    fill_stored_in_parallel(a.dy, n * d, DY_MIX, storage);
    fill_in_parallel(a.gamma, d, GAMMA_MIX);
    set_threads(1);
    pass->forward(&a);
    CachedPass c = {pass, &a};
    BenchStats stats = bench_run_thread_cpu(run_cached_pass, &c, 1, CACHED_TIMED_RUNS);
    double elements = (double)CACHED_PASSES * (double)(n * d);
    stats.median /= elements;
    stats.min /= elements;
    stats.max /= elements;
    for (size_t i = 0; i < 4; i++)
        array_free(*tensors[i]);
    for (size_t i = 0; i < 7; i++)
        array_free(*floats[i]);
    return stats;
}

/* Each pass's time per element on rows in L2, and what `threads`
 * cores at the fastest run's pace would move (whatever slows a run on rows
 * in cache is not the pass's work), counted as the first table counts its
 * tensors of `bytes`, against the memcpy of the same pass's row of the
 * first table on all cores (`all_cores`). */
static void print_cached_passes(FILE *out, TableFormat format, const size_t *widths, size_t width_count, size_t bytes,
                                int threads, PassResult all_cores[MAX_WIDTHS][STORAGES][PASS_COUNT])
{
    char all_threads[64];
    snprintf(all_threads, sizeof all_threads, "%d threads at that pace / memcpy", threads);
    const char *headers[] = {"pass", "storage", "d", "ns per element, rows in L2, 1 thread (least–most)", all_threads};
    Table *table = TABLE_NEW(headers, "llrrr");
    for (size_t w = 0; w < width_count; w++)
        for (int s = 0; s < STORAGES; s++)
            for (int p = 0; p < PASS_COUNT; p++) {
                if (!pass_runs_on(&PASSES[p], (LnStorage)s, true))
                    continue;
                BenchStats stats = cached_element_stats(&PASSES[p], (LnStorage)s, widths[w]);
                size_t rows = bytes / ln_storage_bytes((LnStorage)s) / widths[w];
                double bytes_per_element =
                    bytes_moved(&PASSES[p], (LnStorage)s, rows, widths[w]) / (double)(rows * widths[w]);
                table_cell(table, "%s", PASSES[p].pass);
                table_cell(table, "%s", ln_storage_name((LnStorage)s));
                table_cell(table, "%zu", widths[w]);
                table_cell(table, "%.3f (%.3f–%.3f)", 1e9 * stats.median, 1e9 * stats.min, 1e9 * stats.max);
                table_cell(table, "%.0f%%",
                           100.0 * gb_per_s(bytes_per_element * threads, stats.min) / all_cores[w][s][p].copy_gbs);
            }
    fprintf(out,
            "\nThe passes' own work: rows in L2 (%d KiB of x, and as much of dy backward; y and dx streamed to "
            "memory, as always; a backward pass's rows in one chunk), %d passes a run, one thread, by its CPU time, "
            "median of %d runs.\n\n",
            CACHED_TENSOR_BYTES / 1024, CACHED_PASSES, CACHED_TIMED_RUNS);
    table_print(table, out, format);
    table_free(table);
}

/* Each pass is timed in turns with memcpy, with the same threads, and its
 * share of memcpy taken round by round (time_pass_in_turns). --quick times
 * d = 4096 only, 5 rounds (3 for 16-bit rows) where the full run takes 7.
 * The verdict is on all cores. */
void bench_cpu_print(FILE *out, TableFormat format, bool quick)
{
    const size_t all_widths[MAX_WIDTHS] = {768, 1024, 4096}, quick_widths[] = {4096};
    const size_t *widths = quick ? quick_widths : all_widths, width_count = quick ? 1 : MAX_WIDTHS;
    const int timed_runs = quick ? 5 : MAX_TIMED_RUNS, timed_runs_16 = quick ? 3 : MAX_TIMED_RUNS;
    size_t bytes = bench_large_bytes();
    int thread_counts[] = {1, bench_max_threads()};
    BenchArrays a = {0};
    void **tensors[] = {&a.x, &a.y, &a.dy, &a.dx};
    set_threads(thread_counts[1]);
    for (size_t i = 0; i < 4; i++) {
        *tensors[i] = array_alloc_uninitialized(bytes / sizeof(float), sizeof(float));
        fill_in_parallel(*tensors[i], bytes / sizeof(float), X_MIX);
    }
    bench_print_machine(out, thread_counts[1]);
    fprintf(out,
            "Last-level cache %zu MiB; each n x d tensor %zu MiB. Each pass timed in turns with memcpy (of one tensor, "
            "on the same threads), %d rounds (%d for 16-bit rows): the median, and in brackets the least and the "
            "most of the rounds' shares.\n\n",
            bench_llc_bytes() >> 20, bytes >> 20, timed_runs, timed_runs_16);
    const char *headers[] = {"threads",    "pass",        "storage",
                             "d",          "rows",        "GB/s",
                             "elements/s", "memcpy GB/s", "of memcpy, round by round (least–most)",
                             "verdict"};
    Table *table = TABLE_NEW(headers, "rllrrrrrrl");
    PassResult results[2][MAX_WIDTHS][STORAGES][PASS_COUNT];
    int thread_rows = thread_counts[1] != thread_counts[0] ? 2 : 1;
    for (int t = 0; t < thread_rows; t++) {
        int threads = thread_counts[t];
        set_threads(threads);
        for (size_t w = 0; w < width_count; w++) {
            a.d = widths[w];
            time_width(results[t][w], &a, bytes, threads, t == thread_rows - 1, timed_runs, timed_runs_16);
        }
        for (size_t w = 0; w < width_count; w++)
            for (int s = 0; s < STORAGES; s++)
                for (int p = 0; p < PASS_COUNT; p++)
                    if (pass_runs_on(&PASSES[p], (LnStorage)s, t == thread_rows - 1))
                        add_kernel_row(table, threads, t == thread_rows - 1, &PASSES[p], (LnStorage)s, widths[w], bytes,
                                       results[t][w][s][p]);
    }
    table_print(table, out, format);
    table_free(table);
    for (size_t i = 0; i < 4; i++)
        array_free(*tensors[i]);
    print_cached_passes(out, format, widths, width_count, bytes, thread_counts[1], results[thread_rows - 1]);
}
