#include "chapters/04-kv-cache/attention_bench.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/attention.h"
#include "chapters/04-kv-cache/block_pool.h"
#include "chapters/04-kv-cache/decode_batch.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/check.h"
#include "common/rng.h"

/* The attention shape of an 8B-parameter Llama 3 layer: 32 query heads sharing 8 kv heads of 128. */
enum { BENCH_HEADS = 32, BENCH_KV_HEADS = 8, BENCH_HEAD_DIM = 128 };

typedef struct {
    int batch, context;
    PagedKvShape shape;
    float *queries, *out, *scores;
    float *keys, *values;         /* contiguous: [batch][kv_head][context][head_dim] */
    float *key_pool, *value_pool; /* paged: [block][kv_head][slot][head_dim] */
    BlockPool pool;
    BlockTable *tables; /* [batch] */
} AttentionBench;

static size_t contiguous_offset(const AttentionBench *b, int seq, int kv_head)
{
    return ((size_t)seq * BENCH_KV_HEADS + kv_head) * b->context * BENCH_HEAD_DIM;
}

typedef enum { LAYOUT_CONTIGUOUS, LAYOUT_PAGED } Layout;

/* One decode step: every query head of every sequence attends over its
 * keys and values, in one of the two layouts. */
static void decode_step(AttentionBench *b, Layout layout)
{
    int group = BENCH_HEADS / BENCH_KV_HEADS;
    for (int s = 0; s < b->batch; s++)
        for (int h = 0; h < BENCH_KV_HEADS; h++) {
            size_t q = ((size_t)s * BENCH_HEADS + h * group) * BENCH_HEAD_DIM;
            size_t at = contiguous_offset(b, s, h);
            if (layout == LAYOUT_PAGED)
                attend_paged(b->queries + q, group, b->key_pool, b->value_pool, b->shape, b->tables[s].blocks, h,
                             b->context, b->scores, b->out + q);
            else
                attend_contiguous(b->queries + q, group, b->keys + at, b->values + at, b->context, BENCH_HEAD_DIM,
                                  b->scores, b->out + q);
        }
}

/* The same keys and values in both layouts; the paged blocks are handed out
 * from a shuffled free list, so a sequence's blocks are scattered in memory. */
static AttentionBench bench_create(int batch, int context, int block_size, Rng *rng)
{
    AttentionBench b = {
        .batch = batch, .context = context, .shape = {block_size, BENCH_KV_HEADS, BENCH_HEAD_DIM}
    };
    size_t floats = (size_t)batch * BENCH_KV_HEADS * context * BENCH_HEAD_DIM;
    b.queries = ALLOC_ARRAY((size_t)batch * BENCH_HEADS * BENCH_HEAD_DIM, float);
    b.out = ALLOC_ARRAY((size_t)batch * BENCH_HEADS * BENCH_HEAD_DIM, float);
    b.scores = ALLOC_ARRAY((size_t)(BENCH_HEADS / BENCH_KV_HEADS) * context, float);
    b.keys = ALLOC_ARRAY(floats, float);
    b.values = ALLOC_ARRAY(floats, float);
    rng_fill_uniform_f32(rng, b.queries, (size_t)batch * BENCH_HEADS * BENCH_HEAD_DIM, -1, 1);
    rng_fill_uniform_f32(rng, b.keys, floats, -1, 1);
    rng_fill_uniform_f32(rng, b.values, floats, -1, 1);

    int blocks_per_seq = paged_kv_blocks_for(context, block_size);
    b.pool = block_pool_create(batch * blocks_per_seq, block_size, false);
    block_pool_shuffle(&b.pool, rng);
    size_t pool_floats = (size_t)b.pool.num_blocks * paged_kv_block_floats(b.shape);
    b.key_pool = ALLOC_ARRAY(pool_floats, float);
    b.value_pool = ALLOC_ARRAY(pool_floats, float);
    b.tables = ALLOC_ARRAY(batch, BlockTable);
    size_t row = sizeof(float) * BENCH_HEAD_DIM;
    for (int s = 0; s < batch; s++) {
        BlockCopy no_copy;
        b.tables[s] = block_table_create(blocks_per_seq);
        block_table_reserve(&b.pool, &b.tables[s], context, &no_copy);
        for (int h = 0; h < BENCH_KV_HEADS; h++)
            for (int p = 0; p < context; p++) {
                size_t from = contiguous_offset(&b, s, h) + (size_t)p * BENCH_HEAD_DIM;
                size_t to = paged_kv_position_offset(b.shape, b.tables[s].blocks, h, p);
                memcpy(b.key_pool + to, b.keys + from, row);
                memcpy(b.value_pool + to, b.values + from, row);
            }
    }
    return b;
}

static void bench_free(AttentionBench *b)
{
    for (int s = 0; s < b->batch; s++) {
        block_table_release(&b->pool, &b->tables[s]);
        block_table_free(&b->tables[s]);
    }
    block_pool_free(&b->pool);
    float *arrays[] = {b->queries, b->out, b->scores, b->keys, b->values, b->key_pool, b->value_pool};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
    array_free(b->tables);
}

/* Before any timing: both layouts give the same output, bit for bit. */
static bool outputs_identical(AttentionBench *b)
{
    size_t floats = (size_t)b->batch * BENCH_HEADS * BENCH_HEAD_DIM;
    float *contiguous = ALLOC_ARRAY(floats, float);
    decode_step(b, LAYOUT_CONTIGUOUS);
    memcpy(contiguous, b->out, sizeof(float) * floats);
    decode_step(b, LAYOUT_PAGED);
    bool same = memcmp(contiguous, b->out, sizeof(float) * floats) == 0;
    array_free(contiguous);
    return same;
}

/* Time the two layouts in turns, so that whatever else the machine does
 * falls on both alike; medians of TIMED_RUNS each, after one untimed round. */
#define TIMED_RUNS 9
typedef struct {
    AttentionBench *bench;
    Layout layout;
} LayoutRun;

static void run_layout(void *ctx)
{
    LayoutRun *run = ctx;
    decode_step(run->bench, run->layout);
}

/* The two layouts' times, and the ratio of contiguous's time to paged's
 * taken round by round, so that a slow round counts against both alike. */
typedef struct {
    BenchStats contiguous, paged, ratio;
} LayoutTimes;

static LayoutTimes time_alternately(AttentionBench *b)
{
    LayoutRun runs[2] = {
        {b, LAYOUT_CONTIGUOUS},
        {b, LAYOUT_PAGED     }
    };
    const BenchBody bodies[2] = {
        {run_layout, &runs[0]},
        {run_layout, &runs[1]}
    };
    double seconds[2 * TIMED_RUNS];
    bench_run_in_turns(bodies, 2, 1, TIMED_RUNS, seconds);
    LayoutTimes times;
    /* Before bench_stats_from_times sorts the times, which unpairs the rounds. */
    times.ratio = bench_ratio_stats(seconds, seconds + TIMED_RUNS, TIMED_RUNS);
    times.contiguous = bench_stats_from_times(seconds, TIMED_RUNS);
    times.paged = bench_stats_from_times(seconds + TIMED_RUNS, TIMED_RUNS);
    return times;
}

typedef struct {
    const DecodeBatch *batch;
    float *out;
} FormatRun;

static void attend_in_format(void *context)
{
    FormatRun *run = context;
    decode_batch_attend_cpu(run->batch, run->out);
}

/* The CPU output of the first sequence against the double reference. */
static bool first_sequence_matches(const DecodeBatch *b, const float *out)
{
    size_t per_seq = (size_t)b->n_heads * b->shape.head_dim;
    double *ref = ALLOC_ARRAY(per_seq, double);
    decode_batch_reference(b, 0, ref);
    bool ok = check_close_f32(out, ref, per_seq, ATTENTION_FLOAT_ATOL, ATTENTION_FLOAT_RTOL).ok;
    array_free(ref);
    return ok;
}

/* Each format's batch and its output. */
typedef struct {
    DecodeBatch batch;
    FormatRun run;
} FormatBench;

/* The goal the chapter sets FP8: fp16's time / FP8's at least this. */
#define FP8_GOAL_SPEEDUP 1.6

/* fp16's time over this format's, round by round; call it before
 * bench_stats_from_times sorts the times, which unpairs the rounds. */
static BenchStats speedup_over_fp16(const double *seconds, KvFormat format)
{
    return bench_ratio_stats(seconds + KV_FORMAT_FP16 * TIMED_RUNS, seconds + format * TIMED_RUNS, TIMED_RUNS);
}

static void print_fp8_verdict(FILE *out, KvFormat fp8, BenchStats speedup)
{
    fprintf(out, "goal, %s at %.1f× fp16's speed or more: ", kv_format_name(fp8), FP8_GOAL_SPEEDUP);
    if (speedup.median >= FP8_GOAL_SPEEDUP)
        fprintf(out, "meets");
    else
        fprintf(out, "misses by %.2f× of fp16's speed", FP8_GOAL_SPEEDUP - speedup.median);
    fprintf(out, "; median %.2f×, rounds %.2f–%.2f×\n", speedup.median, speedup.min, speedup.max);
}

enum { FORMAT_CONTEXT = 4000 };

/* The batch in every format, each run once and checked against the double
 * reference (ok[f]). */
static FormatBench *format_benches_new(int batch, int block_size, bool ok[KV_FORMAT_COUNT])
{
    int32_t *lengths = ALLOC_ARRAY(batch, int32_t);
    for (int s = 0; s < batch; s++)
        lengths[s] = FORMAT_CONTEXT;
    FormatBench *benches = ALLOC_ARRAY(KV_FORMAT_COUNT, FormatBench);
    for (int f = 0; f < KV_FORMAT_COUNT; f++) {
        const DecodeBatchShape shape = {.batch = batch,
                                        .n_heads = BENCH_HEADS,
                                        .n_kv_heads = BENCH_KV_HEADS,
                                        .head_dim = BENCH_HEAD_DIM,
                                        .block_size = block_size,
                                        .format = (KvFormat)f,
                                        .int4_group = KV_DEFAULT_INT4_GROUP,
                                        .seed = 9};
        benches[f].batch = decode_batch_create(&shape, lengths);
        benches[f].run =
            (FormatRun){&benches[f].batch, ALLOC_ARRAY((size_t)batch * BENCH_HEADS * BENCH_HEAD_DIM, float)};
        attend_in_format(&benches[f].run);
        ok[f] = first_sequence_matches(&benches[f].batch, benches[f].run.out);
    }
    array_free(lengths);
    return benches;
}

static void format_benches_free(FormatBench *benches)
{
    for (int f = 0; f < KV_FORMAT_COUNT; f++) {
        array_free(benches[f].run.out);
        decode_batch_free(&benches[f].batch);
    }
    array_free(benches);
}

/* One row per format: its bytes, whether it matched, its time and its
 * speed next to float32's and fp16's. */
static Table *formats_table(const FormatBench *benches, const bool ok[KV_FORMAT_COUNT],
                            const BenchStats stats[KV_FORMAT_COUNT], int batch)
{
    const char *headers[] = {"cache",
                             "bytes read per position",
                             "bytes / float32's",
                             "matches the reference",
                             "ms",
                             "float32's time / this (min–max)",
                             "fp16's time / this (min–max)",
                             "GB/s of cache read"};
    Table *t = TABLE_NEW(headers, "lrrlrrrr");
    double float_bytes = decode_batch_cache_bytes(&benches[KV_FORMAT_FLOAT32].batch);
    for (int f = 0; f < KV_FORMAT_COUNT; f++) {
        double bytes = decode_batch_cache_bytes(&benches[f].batch);
        table_cell(t, "%s", kv_format_name((KvFormat)f));
        table_cell(t, "%.0f", bytes / ((double)batch * FORMAT_CONTEXT));
        table_cell(t, "%.3f", bytes / float_bytes);
        table_cell(t, "%s", ok[f] ? "yes" : "NO");
        table_cell(t, "%.2f", 1e3 * stats[f].median);
        bench_speedup_cell(t, stats[KV_FORMAT_FLOAT32], stats[f]);
        bench_speedup_cell(t, stats[KV_FORMAT_FP16], stats[f]);
        table_cell(t, "%.2f", gb_per_s(bytes, stats[f].median));
    }
    return t;
}

bool attention_bench_formats(int block_size, size_t cache_bytes, FILE *out, TableFormat format)
{
    double float_bytes_per_seq = (double)FORMAT_CONTEXT * 2 * BENCH_KV_HEADS * BENCH_HEAD_DIM * sizeof(float);
    int batch = (int)(cache_bytes / float_bytes_per_seq);
    batch = batch > 0 ? batch : 1;
    fprintf(out,
            "decode attention, one thread: %d query heads, %d kv heads of %d; one step over %d sequences of "
            "%d positions, in each cache format, in turns, %d times; float32 cache %.0f MiB, last-level cache "
            "%.0f MiB (sysconf)\n\n",
            BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD_DIM, batch, FORMAT_CONTEXT, TIMED_RUNS,
            batch * float_bytes_per_seq / 1048576.0, bench_llc_bytes() / 1048576.0);
    bench_print_machine(out, 1);
    fprintf(out, "\n");
    bool ok[KV_FORMAT_COUNT];
    FormatBench *benches = format_benches_new(batch, block_size, ok);
    /* One step in every format per round, after one untimed round, so that a
     * busy machine slows every format alike and the ratios hold. */
    BenchBody bodies[KV_FORMAT_COUNT];
    for (int f = 0; f < KV_FORMAT_COUNT; f++)
        bodies[f] = (BenchBody){attend_in_format, &benches[f].run};
    double seconds[KV_FORMAT_COUNT * TIMED_RUNS];
    bench_run_in_turns(bodies, KV_FORMAT_COUNT, 1, TIMED_RUNS, seconds);
    BenchStats e4m3_speedup = speedup_over_fp16(seconds, KV_FORMAT_FP8_E4M3);
    BenchStats e5m2_speedup = speedup_over_fp16(seconds, KV_FORMAT_FP8_E5M2);
    BenchStats stats[KV_FORMAT_COUNT];
    bool all_match = true;
    for (int f = 0; f < KV_FORMAT_COUNT; f++) {
        stats[f] = bench_stats_from_times(seconds + f * TIMED_RUNS, TIMED_RUNS);
        all_match &= ok[f];
    }
    Table *t = formats_table(benches, ok, stats, batch);
    table_print(t, out, format);
    table_free(t);
    format_benches_free(benches);
    fprintf(out, "\n");
    /* A blank line between them: in Markdown, one paragraph each. */
    print_fp8_verdict(out, KV_FORMAT_FP8_E4M3, e4m3_speedup);
    fprintf(out, "\n");
    print_fp8_verdict(out, KV_FORMAT_FP8_E5M2, e5m2_speedup);
    return all_match;
}

/* The goal the chapter sets the paged layout: contiguous's time / paged's
 * at least this, at blocks of 16. */
#define PAGED_GOAL_RATIO 0.90

/* "meets", or "misses by N points", for the slowest context's median
 * ratio: the goal holds only if it holds at every context length. */
static void print_paged_verdict(FILE *out, int block_size, double worst_median, double least, double most)
{
    fprintf(out, "\ngoal, paged within %.0f%% of contiguous (contiguous's time / paged's at least %.2f in every row), ",
            100.0 * (1.0 - PAGED_GOAL_RATIO), PAGED_GOAL_RATIO);
    fprintf(out, "blocks of %d%s: ", block_size, block_size == 16 ? "" : " (the goal is set for blocks of 16)");
    if (worst_median >= PAGED_GOAL_RATIO)
        fprintf(out, "meets");
    else
        fprintf(out, "misses by %.0f points", 100.0 * (PAGED_GOAL_RATIO - worst_median));
    fprintf(out, "; lowest median %.2f, rounds %.2f–%.2f\n", worst_median, least, most);
}

bool attention_bench_report(int block_size, size_t cache_bytes, FILE *out, TableFormat format)
{
    const int contexts[] = {250, 1000, 4000, 16000};
    double bytes_per_position = 2.0 * BENCH_KV_HEADS * BENCH_HEAD_DIM * sizeof(float);
    double read_gbs = read_bandwidth_gbs(cache_bytes, 1);
    fprintf(out,
            "decode attention, one thread: %d query heads, %d kv heads of %d, float32; "
            "keys and values about %.0f MiB per context length\n\n"
            "read bandwidth of this machine, one thread, same size: %.1f GB/s\n\n",
            BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD_DIM, cache_bytes / 1048576.0, read_gbs);
    bench_print_machine(out, 1);
    fprintf(out, "\n");
    const char *headers[] = {"context",
                             "sequences",
                             "same output",
                             "contiguous GB/s",
                             "paged GB/s",
                             "contiguous's time / paged's, round by round (min–max)",
                             "contiguous, of read bandwidth (min–max)"};
    Table *t = TABLE_NEW(headers, "rrlrrrr");
    bool all_same = true;
    double worst_median = INFINITY, least = INFINITY, most = 0.0;
    Rng rng;
    rng_seed(&rng, 5);
    for (size_t i = 0; i < sizeof contexts / sizeof contexts[0]; i++) {
        int batch = (int)(cache_bytes / (contexts[i] * bytes_per_position));
        AttentionBench b = bench_create(batch > 0 ? batch : 1, contexts[i], block_size, &rng);
        double bytes = b.batch * contexts[i] * bytes_per_position;
        bool same = outputs_identical(&b);
        LayoutTimes times = time_alternately(&b);
        table_cell(t, "%d", contexts[i]);
        table_cell(t, "%d", b.batch);
        table_cell(t, "%s", same ? "bitwise" : "NO");
        all_same &= same;
        table_cell(t, "%.2f", gb_per_s(bytes, times.contiguous.median));
        table_cell(t, "%.2f", gb_per_s(bytes, times.paged.median));
        table_cell(t, "%.2f× (%.2f–%.2f)", times.ratio.median, times.ratio.min, times.ratio.max);
        bench_share_cell(t, bytes, times.contiguous, read_gbs);
        worst_median = fmin(worst_median, times.ratio.median);
        least = fmin(least, times.ratio.min);
        most = fmax(most, times.ratio.max);
        bench_free(&b);
    }
    table_print(t, out, format);
    table_free(t);
    print_paged_verdict(out, block_size, worst_median, least, most);
    return all_same;
}
