#include "chapters/03-softmax-topk/bench_cpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/exp16.h"
#include "chapters/03-softmax-topk/loop_counts.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/files.h"
#include "common/rng.h"
#include "kernels/float_bits.h"
#include "kernels/fp16.h"

/* Naive and online run far below the memory bandwidth (they are bound by
 * arithmetic), so they are timed on the first SLOW_ROWS rows only: whether
 * their data comes from memory or from the cache makes little difference to
 * them (if any, it flatters them), and the whole grid stays within a couple
 * of minutes. The fused version reads all the rows, above the cache. */
enum { SLOW_ROWS = 32, FUSED_TIMED_RUNS = 5, SLOW_TIMED_RUNS = 3 };

typedef struct {
    float *logits;
    size_t count;
    int threads;
} BenchData;

enum { FILL_BLOCK = 1 << 20 };

float *bench_logits_new(size_t count, int threads)
{
    float *logits = array_alloc_uninitialized(count, sizeof(float));
    size_t blocks = (count + FILL_BLOCK - 1) / FILL_BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        Rng rng;
        rng_seed(&rng, 4000 + b);
        size_t begin = b * FILL_BLOCK, end = begin + FILL_BLOCK < count ? begin + FILL_BLOCK : count;
        rng_fill_normal_f32(&rng, logits + begin, end - begin, 0.0, 3.0);
    }
    return logits;
}

static BenchData bench_data_new(int threads)
{
    BenchData data = {.count = bench_large_bytes() / sizeof(float), .threads = threads};
    data.logits = bench_logits_new(data.count, threads);
    return data;
}

static void bench_data_free(BenchData *data)
{
    array_free(data->logits);
}

typedef struct {
    CpuVersion version;
    StoredLogits logits; /* float32, but for the fused version */
    size_t rows, vocab;
    int k, threads;
    float *probs;
    int64_t *indices;
} BenchCase;

/* A case with room for its rows' results; bench_case_free frees it. */
static BenchCase bench_case_new(CpuVersion version, StoredLogits logits, size_t rows, size_t vocab, int k, int threads)
{
    return (BenchCase){version,
                       logits,
                       rows,
                       vocab,
                       k,
                       threads,
                       ALLOC_ARRAY(rows * (size_t)k, float),
                       ALLOC_ARRAY(rows * (size_t)k, int64_t)};
}

static void bench_case_free(BenchCase *c)
{
    array_free(c->probs);
    array_free(c->indices);
}

static void run_case(void *ctx)
{
    BenchCase *c = ctx;
    if (c->version == CPU_FUSED) {
        softmax_topk_stored_rows(c->logits, c->rows, c->vocab, c->k, c->threads, c->probs, c->indices);
    } else {
        softmax_topk_rows(c->version, c->logits.data, c->rows, c->vocab, c->k, c->threads, c->probs, c->indices);
    }
}

/* Seconds per run as seconds per row. */
static BenchStats seconds_per_row(BenchStats stats, size_t rows)
{
    stats.median /= (double)rows;
    stats.min /= (double)rows;
    stats.max /= (double)rows;
    return stats;
}

/* Seconds per row of `version` on the benchmark data: the median, slowest
 * and fastest of the timed runs. */
static BenchStats row_stats(const BenchData *data, CpuVersion version, size_t vocab, int k, int threads)
{
    bool slow = version != CPU_FUSED;
    size_t rows = slow ? SLOW_ROWS : data->count / vocab;
    BenchCase c = bench_case_new(version, float32_logits(data->logits), rows, vocab, k, threads);
    BenchStats stats = bench_run(run_case, &c, 1, slow ? SLOW_TIMED_RUNS : FUSED_TIMED_RUNS);
    bench_case_free(&c);
    return seconds_per_row(stats, rows);
}

/* The fused version's pass without its top K (softmax_state_stored_rows),
 * on the same rows and threads. */
typedef struct {
    StoredLogits logits;
    size_t rows, vocab;
    int threads;
    SoftmaxState *states;
} PassAlone;

static void run_pass_alone(void *ctx)
{
    PassAlone *p = ctx;
    softmax_state_stored_rows(p->logits, p->rows, p->vocab, p->threads, p->states);
}

/* The fused version on all the rows of `logits` (count logits, as
 * stored), timed in turns with a read of the benchmark data, float32, on
 * the same threads: its time per row, and its share of the read bandwidth
 * round by round. With `with_pass_alone`, the pass without its top K is
 * timed in the same turns, for its share of the same reads. */
typedef struct {
    BenchStats per_row;      /* seconds per row */
    BenchStats shares;       /* GB/s of the pass over GB/s of the read, by round */
    BenchStats alone_shares; /* the same for the pass without its top K, if timed */
    double read_gbs;         /* the median round's read */
} FusedInTurns;

static FusedInTurns fused_in_turns(const BenchData *data, StoredLogits logits, size_t vocab, int k, int threads,
                                   bool with_pass_alone)
{
    size_t rows = data->count / vocab;
    BenchCase c = bench_case_new(CPU_FUSED, logits, rows, vocab, k, threads);
    ReadPass read = {data->logits, data->count, threads, 0.0f};
    PassAlone alone = {logits, rows, vocab, threads, ALLOC_ARRAY(rows, SoftmaxState)};
    BenchBody bodies[] = {
        {read_pass_run,  &read },
        {run_case,       &c    },
        {run_pass_alone, &alone}
    };
    int body_count = with_pass_alone ? 3 : 2;
    double seconds[3 * FUSED_TIMED_RUNS], *read_seconds = seconds, *fused_seconds = seconds + FUSED_TIMED_RUNS,
                                          *alone_seconds = seconds + 2 * FUSED_TIMED_RUNS;
    bench_run_in_turns(bodies, body_count, 1, FUSED_TIMED_RUNS, seconds);
    double read_bytes = (double)(data->count * sizeof(float)),
           bytes = (double)(rows * vocab * logits_type_size(logits.type));
    FusedInTurns result = {0};
    result.shares = bench_share_stats(bytes, fused_seconds, read_bytes, read_seconds, FUSED_TIMED_RUNS);
    if (with_pass_alone) {
        result.alone_shares = bench_share_stats(bytes, alone_seconds, read_bytes, read_seconds, FUSED_TIMED_RUNS);
    }
    /* (bench_stats_from_times sorts the times: the shares are taken first.) */
    result.read_gbs = gb_per_s(read_bytes, bench_stats_from_times(read_seconds, FUSED_TIMED_RUNS).median);
    result.per_row = seconds_per_row(bench_stats_from_times(fused_seconds, FUSED_TIMED_RUNS), rows);
    array_free(alone.states);
    bench_case_free(&c);
    return result;
}

typedef struct {
    const float *logits;
    size_t rows, vocab;
    SamplingParams params;
    int threads;
    int64_t *tokens, *indices;
    float *probs;
} SamplingCase;

static void run_sampling_case(void *ctx)
{
    SamplingCase *c = ctx;
    sample_rows(float32_logits(c->logits), c->rows, c->vocab, c->params, DRAW_INVERSE_CDF, 1, 1, c->threads, c->tokens,
                c->probs, c->indices);
}

/* The fused pass alone, and followed by top-p 0.9 and one inverse-CDF draw
 * over its K candidates (sample_rows), on the benchmark data, timed in
 * turns: seconds per row of each, and sampling's extra time as the ratio of
 * the two times of each round, which a busy machine disturbs far less than
 * it disturbs either time. */
enum { SAMPLING_ROUNDS = 15 };
typedef struct {
    BenchStats fused, sampled, ratio;
    BenchStats step;   /* the sampling step alone, one thread, seconds per row */
    BenchStats region; /* an empty parallel region over the rows, seconds per row */
} SamplingOverhead;

/* An empty parallel region over the rows: what a second pass over them,
 * after the fused one, costs before it does anything. A SamplingCase. */
static void run_empty_region(void *ctx)
{
    SamplingCase *c = ctx;
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (size_t row = 0; row < c->rows; row++) {
        c->tokens[row] = (int64_t)row;
    }
}

/* The sampling step alone, on each row's K candidates held in memory (a
 * SamplingCase whose logits are the candidates', [rows, K]): what
 * sample_rows does after the fused pass finds them, on one thread. */
static void run_sampling_step(void *ctx)
{
    SamplingCase *c = ctx;
    size_t k = (size_t)c->params.top_k;
    for (size_t row = 0; row < c->rows; row++) {
        sample_candidates(c->logits + row * k, c->params, DRAW_INVERSE_CDF, 1, row, 0, 1, c->tokens + row,
                          c->probs + row * k, c->indices + row * k);
    }
}

/* The step alone, timed on one thread over the rows' candidates, which the
 * sampling case has just found: seconds per row. A few microseconds per
 * row, far below what a busy machine adds to or takes from a pass over
 * all V logits: measured apart, it is not lost in the pass's noise. */
static BenchStats sampling_step_stats(const BenchData *data, size_t vocab, const SamplingCase *sampled)
{
    size_t k = (size_t)sampled->params.top_k, rows = sampled->rows;
    float *candidate_logits = ALLOC_ARRAY(rows * k, float);
    softmax_topk_stored_rows(float32_logits(data->logits), rows, vocab, (int)k, data->threads, sampled->probs,
                             sampled->indices);
    for (size_t i = 0; i < rows * k; i++) {
        candidate_logits[i] = data->logits[i / k * vocab + (size_t)sampled->indices[i]];
    }
    SamplingCase step = *sampled;
    step.logits = candidate_logits;
    step.threads = 1;
    BenchStats stats = seconds_per_row(bench_run(run_sampling_step, &step, 1, SAMPLING_ROUNDS), rows);
    array_free(candidate_logits);
    return stats;
}

static SamplingOverhead sampling_overhead(const BenchData *data, size_t vocab, int k, int threads)
{
    size_t rows = data->count / vocab;
    SamplingParams params = sampling_params_top_k(k);
    params.top_p = 0.9;
    BenchCase fused = bench_case_new(CPU_FUSED, float32_logits(data->logits), rows, vocab, k, threads);
    SamplingCase sampled = {data->logits,
                            rows,
                            vocab,
                            params,
                            threads,
                            ALLOC_ARRAY(rows, int64_t),
                            ALLOC_ARRAY(rows * (size_t)k, int64_t),
                            ALLOC_ARRAY(rows * (size_t)k, float)};
    const BenchBody bodies[2] = {
        {run_case,          &fused  },
        {run_sampling_case, &sampled}
    };
    double seconds[2 * SAMPLING_ROUNDS], *fused_seconds = seconds, *sampled_seconds = seconds + SAMPLING_ROUNDS;
    bench_run_in_turns(bodies, 2, 1, SAMPLING_ROUNDS, seconds);
    SamplingOverhead overhead;
    /* The ratios first: bench_stats_from_times sorts the times in place. */
    overhead.ratio = bench_ratio_stats(sampled_seconds, fused_seconds, SAMPLING_ROUNDS);
    overhead.fused = seconds_per_row(bench_stats_from_times(fused_seconds, SAMPLING_ROUNDS), rows);
    overhead.sampled = seconds_per_row(bench_stats_from_times(sampled_seconds, SAMPLING_ROUNDS), rows);
    overhead.step = sampling_step_stats(data, vocab, &sampled);
    overhead.region = seconds_per_row(bench_run(run_empty_region, &sampled, 1, SAMPLING_ROUNDS), rows);
    bench_case_free(&fused);
    array_free(sampled.tokens);
    array_free(sampled.indices);
    array_free(sampled.probs);
    return overhead;
}

/* What sampling adds to the fused pass, on all threads. Sampling reads only
 * the K candidates' logits, which the pass holds, so its cost should not
 * grow with V. Predicted: each thread samples its own rows after their
 * pass, so the step alone, per row on one thread, over `threads` times the
 * fused pass's time per row (all threads). */
static void print_sampling_overhead(const BenchData *data, int threads, TableFormat format)
{
    const size_t vocab = 128256;
    const int ks[] = {1, 8, 64};
    const char *headers[] = {"V",
                             "K",
                             "threads",
                             "fused, µs per row",
                             "fused + top-p 0.9 + a draw, µs per row",
                             "the step alone, µs per row, 1 thread (least–most)",
                             "predicted extra time",
                             "measured extra time, round by round (least–most)",
                             "an empty parallel region, µs per row (least–most)"};
    Table *table = TABLE_NEW(headers, "rrrrrrrrr");
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        SamplingOverhead overhead = sampling_overhead(data, vocab, ks[t], threads);
        table_cell(table, "%zu", vocab);
        table_cell(table, "%d", ks[t]);
        table_cell(table, "%d", threads);
        table_cell(table, "%.1f", overhead.fused.median * 1e6);
        table_cell(table, "%.1f", overhead.sampled.median * 1e6);
        table_cell(table, "%.3f (%.3f–%.3f)", overhead.step.median * 1e6, overhead.step.min * 1e6,
                   overhead.step.max * 1e6);
        table_cell(table, "%.1f%%", 100.0 * overhead.step.median / (threads * overhead.fused.median));
        table_cell(table, "%.1f%% (%.1f–%.1f%%)", 100.0 * (overhead.ratio.median - 1.0),
                   100.0 * (overhead.ratio.min - 1.0), 100.0 * (overhead.ratio.max - 1.0));
        table_cell(table, "%.3f (%.3f–%.3f)", overhead.region.median * 1e6, overhead.region.min * 1e6,
                   overhead.region.max * 1e6);
    }
    printf("\nSampling after the fused pass, %d rounds, the two timed in turns:\n\n", SAMPLING_ROUNDS);
    table_print(table, stdout, format);
    table_free(table);
}

/* The benchmark's logits in 16 bits of `type`: fp16 rounded to nearest
 * even, bf16 the top half of the float. */
static void round_to_16_bits(const BenchData *data, LogitsType type, uint16_t *bits)
{
#pragma omp parallel for num_threads(data->threads) schedule(static)
    for (size_t i = 0; i < data->count; i++) {
        bits[i] =
            type == LOGITS_FLOAT16 ? half_from_float(data->logits[i]) : (uint16_t)(float_bits(data->logits[i]) >> 16);
    }
}

// ANCHOR: time_the_arithmetic_on_a_row_in_cache
/* The fused pass on a row in L2, on one thread. Before each pass a row of
 * the benchmark's logits is copied into the same buffer, which leaves it
 * in L2, so what is timed is the pass's own work, with no wait for memory.
 * Each pass gets a row it has not seen: on one row again and again the
 * processor learns the row, which way each of its branches goes and which
 * lines its top K reads again, and the pass looks faster than it is
 * (`same_row` times that, copying the first row every time, to show by how
 * much). Each pass is timed on its own, without the copy, and a run
 * counts CACHED_PASSES times its median pass: on a shared machine a thread
 * waits for a core for milliseconds at a time, which spoils a few passes,
 * not their median. */
enum { CACHED_PASSES = 50, CACHED_TIMED_RUNS = 9 };

typedef struct {
    StoredLogits rows; /* the benchmark's logits: `count` rows of `vocab` */
    size_t count, vocab, next;
    int k;
    bool same_row;
    void *row; /* the buffer each pass reads */
    RowScratch scratch;
    float *probs;
    int64_t *indices;
} CachedRowCase;

static double time_one_pass(CachedRowCase *c)
{
    size_t row_bytes = c->vocab * logits_type_size(c->rows.type), row = c->same_row ? 0 : c->next++ % c->count;
    memcpy(c->row, (const char *)c->rows.data + row * row_bytes, row_bytes);
    double start = clock_seconds();
    softmax_topk_stored_row((StoredLogits){c->row, c->rows.type}, c->vocab, c->k, &c->scratch, c->probs, c->indices);
    return clock_seconds() - start;
}
// ANCHOR_END: time_the_arithmetic_on_a_row_in_cache

/* A run: CACHED_PASSES times its median pass. */
static double time_cached_run(CachedRowCase *c)
{
    double seconds[CACHED_PASSES];
    for (int pass = 0; pass < CACHED_PASSES; pass++) {
        seconds[pass] = time_one_pass(c);
    }
    return CACHED_PASSES * bench_stats_from_times(seconds, CACHED_PASSES).median;
}

/* Seconds per logit of the fused pass on a row in L2, one thread, on new
 * rows and on the same row: the median, slowest and fastest run of each.
 * The two take turns, run by run, in one buffer, so that whatever else the
 * machine does at the time falls on both alike. */
typedef struct {
    BenchStats new_rows, same_row;
} CachedRowStats;

static CachedRowStats cached_logit_stats(StoredLogits logits, size_t count, size_t vocab, int k)
{
    void *row = array_alloc_uninitialized(vocab, logits_type_size(logits.type));
    CachedRowCase cases[2];
    for (int c = 0; c < 2; c++) {
        cases[c] = (CachedRowCase){logits,
                                   count / vocab,
                                   vocab,
                                   0,
                                   k,
                                   c == 1,
                                   row,
                                   row_scratch_new(CPU_FUSED, vocab, k),
                                   ALLOC_ARRAY((size_t)k, float),
                                   ALLOC_ARRAY((size_t)k, int64_t)};
        time_cached_run(&cases[c]); /* not timed */
    }
    double seconds[2][CACHED_TIMED_RUNS];
    for (int run = 0; run < CACHED_TIMED_RUNS; run++) {
        for (int c = 0; c < 2; c++) {
            seconds[c][run] = time_cached_run(&cases[c]);
        }
    }
    for (int c = 0; c < 2; c++) {
        row_scratch_free(&cases[c].scratch);
        array_free(cases[c].probs);
        array_free(cases[c].indices);
    }
    array_free(row);
    return (CachedRowStats){
        seconds_per_row(bench_stats_from_times(seconds[0], CACHED_TIMED_RUNS), CACHED_PASSES * vocab),
        seconds_per_row(bench_stats_from_times(seconds[1], CACHED_TIMED_RUNS), CACHED_PASSES * vocab)};
}

/* The fused version on the same logits stored as float32, fp16 and bf16,
 * on all threads: logits per second, and the bytes actually read per
 * second, against the read bandwidth. 16-bit rows are half the bytes, so
 * where memory is the limit they go up to twice as many logits per second;
 * where the arithmetic is, no faster. Beside them the prediction: the
 * pass's time per logit on one thread, on new rows in L2 (and, last, on the
 * same row again and again), and the bytes per second that
 * `threads` cores at the fastest run's pace would ask of memory (whatever
 * slows a run on a row in cache is not the pass's work), against the read
 * bandwidth; below 100%, the arithmetic is the limit, and the share read
 * from memory can at best reach it. */
static void print_16_bit_bench(const BenchData *data, const int *ks, size_t k_count, int threads, TableFormat format)
{
    const size_t vocab = 128256;
    const LogitsType types[] = {LOGITS_FLOAT32, LOGITS_FLOAT16, LOGITS_BFLOAT16};
    const char *type_names[] = {"float32", "fp16", "bf16"};
    uint16_t *bits = array_alloc_uninitialized(data->count, sizeof(uint16_t));
    const char *headers[] = {"logits",
                             "K",
                             "G logits/s",
                             "GB/s read",
                             "read bandwidth",
                             "GB/s read / read bandwidth, round by round (least–most)",
                             "ns per logit, a new row in L2 each pass, 1 thread (least–most)",
                             "the same on all threads / read bandwidth",
                             "ns per logit, the same row each pass (least–most)"};
    Table *table = TABLE_NEW(headers, "lrrrrrrrr");
    for (int t = 0; t < 3; t++) {
        StoredLogits logits = float32_logits(data->logits);
        if (types[t] != LOGITS_FLOAT32) {
            round_to_16_bits(data, types[t], bits);
            logits = (StoredLogits){bits, types[t]};
        }
        double row_bytes = (double)(vocab * logits_type_size(types[t]));
        for (size_t c = 0; c < k_count; c++) {
            FusedInTurns fused = fused_in_turns(data, logits, vocab, ks[c], threads, false);
            CachedRowStats in_cache = cached_logit_stats(logits, data->count, vocab, ks[c]);
            BenchStats cached = in_cache.new_rows, learned = in_cache.same_row;
            double cached_gbs = threads * (double)logits_type_size(types[t]) / cached.min * 1e-9;
            table_cell(table, "%s", type_names[t]);
            table_cell(table, "%d", ks[c]);
            table_cell(table, "%.3f", (double)vocab / fused.per_row.median * 1e-9);
            table_cell(table, "%.1f", row_bytes / fused.per_row.median * 1e-9);
            table_cell(table, "%.1f GB/s", fused.read_gbs);
            bench_percent_cell(table, fused.shares);
            table_cell(table, "%.3f (%.3f–%.3f)", cached.median * 1e9, cached.min * 1e9, cached.max * 1e9);
            table_cell(table, "%.0f%%", 100.0 * cached_gbs / fused.read_gbs);
            table_cell(table, "%.3f (%.3f–%.3f)", learned.median * 1e9, learned.min * 1e9, learned.max * 1e9);
        }
    }
    printf("\nThe fused version on 16-bit logits, V = %zu, %d threads:\n\n", vocab, threads);
    table_print(table, stdout, format);
    table_free(table);
    array_free(bits);
}

#if defined(EXP16_AVX512)
/* The sum's exponential alone, as the fused pass sums it: 64 lane sums of
 * exp(x) over the 256 logits of a chunk in L1, again and again, on one
 * thread, by its own CPU time. First softmax_exp_in_sum, as gcc vectorises
 * it; then exp16_in_sum. Seconds per logit. Each pass tells the compiler
 * that the chunk may have changed (an empty asm that clobbers memory), or
 * it would compute the exponentials once and add them 20000 times. */
enum { EXP_CHUNK = 256, EXP_LANES = 64, EXP_PASSES = 20000, EXP_TIMED_RUNS = 7 };

static inline void chunk_may_have_changed(const float *x)
{
    __asm__ volatile("" : : "r"(x) : "memory");
}

static float sum_exp_in_sum(const float *x)
{
    float sums[EXP_LANES] = {0};
    for (int pass = 0; pass < EXP_PASSES; pass++) {
        chunk_may_have_changed(x);
        for (int i = 0; i < EXP_CHUNK; i += EXP_LANES) {
            for (int lane = 0; lane < EXP_LANES; lane++) {
                sums[lane] += softmax_exp_in_sum(x[i + lane]);
            }
        }
    }
    float total = 0.0f;
    for (int lane = 0; lane < EXP_LANES; lane++) {
        total += sums[lane];
    }
    return total;
}

static float sum_exp16(const float *x)
{
    const Exp16Powers powers = exp16_powers();
    __m512 sums[EXP_LANES / 16];
    for (int v = 0; v < EXP_LANES / 16; v++) {
        sums[v] = _mm512_setzero_ps();
    }
    for (int pass = 0; pass < EXP_PASSES; pass++) {
        chunk_may_have_changed(x);
        for (int i = 0; i < EXP_CHUNK; i += EXP_LANES) {
            for (int v = 0; v < EXP_LANES / 16; v++) {
                sums[v] = _mm512_add_ps(sums[v], exp16_in_sum(_mm512_loadu_ps(x + i + 16 * v), powers));
            }
        }
    }
    float total = 0.0f;
    for (int v = 0; v < EXP_LANES / 16; v++) {
        total += _mm512_reduce_add_ps(sums[v]);
    }
    return total;
}

typedef struct {
    const float *x;
    float (*sum)(const float *);
    float total;
} ExpSum;

static void run_exp_sum(void *ctx)
{
    ExpSum *e = ctx;
    e->total = e->sum(e->x);
}

static BenchStats exp_stats(const float *x, float (*sum)(const float *), float *total)
{
    ExpSum e = {x, sum, 0.0f};
    BenchStats stats = bench_run_thread_cpu(run_exp_sum, &e, 0, EXP_TIMED_RUNS);
    *total = e.total;
    return seconds_per_row(stats, (size_t)EXP_PASSES * EXP_CHUNK);
}

/* Two predictions of exp16_in_sum's share of the time, from the machine
 * code the compiler made of the two loops, which the build keeps in
 * exp_loops.asm: the instructions of each per 16 logits (loop_counts.h).
 * If the multiply-add units set the pace, the share is that of the
 * multiplies and multiply-adds. If every vector instruction costs the same
 * issue slot, wherever it runs, it is that of all of them (loads and
 * register copies left out). The first is a floor, the second a ceiling:
 * the verdict says whether the measured share lies between them. */
static const char EXP_LOOPS_RECORD[] = "exp_loops.asm";

static void print_exp_verdict(double measured)
{
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer moves the loops' local arrays off the stack and
     * checks each access to them: what it times is not the chapter's code. */
    printf("\nNo verdict: this build has AddressSanitizer's checks in the two loops (measured %.0f%%).\n", measured);
    return;
#endif
    LoopCountQuery plain = {.function = "sum_exp_in_sum"}, table = {.function = "sum_exp16"};
    char err[512];
    if (parse_text_file(EXP_LOOPS_RECORD, count_function_loop, &plain, err, sizeof err) != 0 ||
        parse_text_file(EXP_LOOPS_RECORD, count_function_loop, &table, err, sizeof err) != 0) {
        printf("\nNo verdict: the two loops' machine code could not be counted (%s; the build keeps it in the "
               "chapter's directory: run bench there).\n",
               err);
        return;
    }
    const LoopCounts *p = &plain.counts, *t = &table.counts;
    double plain_multiplies = per_floats(p->multiplies, p, 16), table_multiplies = per_floats(t->multiplies, t, 16);
    double plain_vector = per_floats(p->vector_instructions, p, 16);
    double table_vector = per_floats(t->vector_instructions, t, 16);
    double fma_share = 100.0 * table_multiplies / plain_multiplies, op_share = 100.0 * table_vector / plain_vector;
    printf("\nVerdict of this run: predicted %.0f%% of the time if the multiply-add units set the pace (%g of %g "
           "multiplies and multiply-adds per 16 logits, in the machine code of the two loops), %.0f%% if every "
           "vector instruction does (%g of %g); measured %.0f%%: %s the two.\n",
           fma_share, table_multiplies, plain_multiplies, op_share, table_vector, plain_vector, measured,
           measured >= fma_share && measured <= op_share ? "between" : "outside");
}

/* The two side by side, on the benchmark's first 256 logits less their
 * maximum, and the verdict on the predictions. The line ends with how far
 * apart their sums are, for the reader to see that both timed the same
 * result: far beyond float rounding, one of them would be wrong.
 * (test_softmax_state checks the exponentials themselves.) */
static void print_exp_bench(const BenchData *data)
{
    float x[EXP_CHUNK], max = data->logits[0];
    for (int i = 0; i < EXP_CHUNK; i++) {
        max = data->logits[i] > max ? data->logits[i] : max;
    }
    for (int i = 0; i < EXP_CHUNK; i++) {
        x[i] = data->logits[i] - max;
    }
    float plain_total, table_total;
    BenchStats plain = exp_stats(x, sum_exp_in_sum, &plain_total);
    BenchStats table = exp_stats(x, sum_exp16, &table_total);
    printf("\nThe sum's exponential alone, one thread, a chunk of %d logits in L1 summed %d times: "
           "softmax_exp_in_sum %.4f ns per logit (%.4f–%.4f), exp16_in_sum %.4f (%.4f–%.4f); "
           "the two sums differ by %.1e of their value.\n",
           EXP_CHUNK, EXP_PASSES, plain.median * 1e9, plain.min * 1e9, plain.max * 1e9, table.median * 1e9,
           table.min * 1e9, table.max * 1e9, fabs((double)table_total - plain_total) / plain_total);
    print_exp_verdict(100.0 * table.median / plain.median);
}
#endif

static void print_bench_header(const BenchData *data)
{
    printf("logits: %.0f MiB (the last-level cache holds %.0f MiB); fused, and the pass without its top K, timed "
           "on all rows, naive and online on the first %d\n",
           (double)(data->count * sizeof(float)) / (1 << 20), (double)bench_llc_bytes() / (1 << 20), SLOW_ROWS);
}

/* The chapter's goal for the fused pass: at every K up to 64, on all
 * cores, at least 75% of the read bandwidth measured in the same rounds. */
enum { FUSED_GOAL_MAX_K = 64, FUSED_GOAL_PERCENT = 75 };

void print_cpu_bench(bool quick, int threads, TableFormat format)
{
    const size_t all_vocabs[] = {32000, 50257, 128256, 151936}, quick_vocabs[] = {128256};
    const size_t *vocabs = quick ? quick_vocabs : all_vocabs;
    size_t vocab_count = quick ? 1 : sizeof all_vocabs / sizeof all_vocabs[0];
    const int all_ks[] = {1, 8, 16, 32, 64, 256}, quick_ks[] = {8, 64};
    const int *ks = quick ? quick_ks : all_ks;
    size_t k_count = quick ? 2 : sizeof all_ks / sizeof all_ks[0];
    BenchData data = bench_data_new(threads);
    print_bench_header(&data);
    bench_print_machine(stdout, threads);
    printf("\n");
    const char *headers[] = {"V",
                             "K",
                             "threads",
                             "naive G/s",
                             "online G/s",
                             "fused G/s",
                             "fused / naive (slowest–fastest)",
                             "read bandwidth",
                             "fused / read bandwidth, round by round (least–most)",
                             "the pass without its top K / read bandwidth (least–most)",
                             "goal, K ≤ 64 on all cores"};
    Table *table = TABLE_NEW(headers, "rrrrrrrrrrl");
    for (size_t v = 0; v < vocab_count; v++) {
        for (size_t t = 0; t < k_count; t++) {
            const int thread_counts[] = {1, threads};
            for (int c = 0; c < (threads > 1 ? 2 : 1); c++) {
                int run_threads = thread_counts[c];
                BenchStats per_row[CPU_VERSION_COUNT + 1];
                for (CpuVersion version = CPU_NAIVE; version < CPU_FUSED; version++) {
                    per_row[version] = row_stats(&data, version, vocabs[v], ks[t], run_threads);
                }
                FusedInTurns fused =
                    fused_in_turns(&data, float32_logits(data.logits), vocabs[v], ks[t], run_threads, true);
                per_row[CPU_FUSED] = fused.per_row;
                table_cell(table, "%zu", vocabs[v]);
                table_cell(table, "%d", ks[t]);
                table_cell(table, "%d", run_threads);
                for (CpuVersion version = CPU_NAIVE; version <= CPU_FUSED; version++) {
                    table_cell(table, "%.3f", (double)vocabs[v] / per_row[version].median * 1e-9);
                }
                bench_speedup_cell(table, per_row[CPU_NAIVE], per_row[CPU_FUSED]);
                table_cell(table, "%.1f GB/s", fused.read_gbs);
                bench_percent_cell(table, fused.shares);
                bench_percent_cell(table, fused.alone_shares);
                if (run_threads == threads && ks[t] <= FUSED_GOAL_MAX_K) {
                    bench_goal_cell(table, 100.0 * fused.shares.median, FUSED_GOAL_PERCENT);
                } else {
                    table_cell(table, "%s", "");
                }
            }
        }
    }
    table_print(table, stdout, format);
    table_free(table);
    print_sampling_overhead(&data, threads, format);
    print_16_bit_bench(&data, ks, k_count, threads, format);
#if defined(EXP16_AVX512)
    print_exp_bench(&data);
#endif
    bench_data_free(&data);
}

/* Reads and writes of a V-sized array per row, as the code is written. */
typedef struct {
    int reads, writes;
} Traffic;

static Traffic predicted_traffic(CpuVersion version)
{
    switch (version) {
    case CPU_NAIVE:
        return (Traffic){3, 1};
    case CPU_ONLINE:
        return (Traffic){2, 0};
    case CPU_FUSED:
        return (Traffic){1, 0};
    }
    return (Traffic){0, 0};
}

void print_traffic_table(TableFormat format)
{
    enum { K = 64 };
    const size_t vocab = 128256;
    BenchData data = bench_data_new(bench_max_threads());
    print_bench_header(&data);
    bench_print_machine(stdout, 1);
    double read_gbs = read_bandwidth_gbs(data.count * sizeof(float), 1);
    printf("\nread bandwidth on 1 thread: %.1f GB/s\n\n", read_gbs);
    const char *headers[] = {"version",
                             "reads of the row",
                             "writes of the row",
                             "bytes per row",
                             "predicted time per row",
                             "measured time per row",
                             "predicted / measured (slowest–fastest)"};
    Table *table = TABLE_NEW(headers, "lrrrrrr");
    for (CpuVersion version = CPU_NAIVE; version <= CPU_FUSED; version++) {
        Traffic traffic = predicted_traffic(version);
        double bytes = (double)((size_t)(traffic.reads + traffic.writes) * vocab * sizeof(float));
        double predicted = bytes / (read_gbs * 1e9);
        BenchStats measured = row_stats(&data, version, vocab, K, 1);
        table_cell(table, "%d %s", version, cpu_version_name(version));
        table_cell(table, "%d", traffic.reads);
        table_cell(table, "%d", traffic.writes);
        table_cell(table, "%.2f MB", bytes * 1e-6);
        table_cell(table, "%.0f us", predicted * 1e6);
        table_cell(table, "%.0f us", measured.median * 1e6);
        bench_share_cell(table, bytes, measured, read_gbs);
    }
    table_print(table, stdout, format);
    table_free(table);
    bench_data_free(&data);
}

void print_accuracy_table(TableFormat format)
{
    enum { ROWS = 4, K = 64 };
    const size_t vocabs[] = {1000, 32000, 151936};
    const char *headers[] = {"V", "naive", "online", "fused"};
    Table *table = TABLE_NEW(headers, "rrrr");
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        size_t vocab = vocabs[v];
        float *logits = ALLOC_ARRAY(ROWS * vocab, float), probs[ROWS * K];
        int64_t indices[ROWS * K];
        Rng rng;
        rng_seed(&rng, vocab);
        rng_fill_normal_f32(&rng, logits, ROWS * vocab, 0.0, 3.0);
        table_cell(table, "%zu", vocab);
        for (CpuVersion version = CPU_NAIVE; version <= CPU_FUSED; version++) {
            softmax_topk_rows(version, logits, ROWS, vocab, K, 1, probs, indices);
            /* rtol 1: every probability counts towards the maximum error. */
            TopkComparison c = compare_with_reference(logits, ROWS, 1, vocab, K, probs, indices, 1.0);
            if (c.wrong_indices > 0) {
                table_cell(table, "wrong order");
            } else {
                table_cell(table, "%.1e", c.max_rel_error);
            }
        }
        array_free(logits);
    }
    table_print(table, stdout, format);
    table_free(table);
}
