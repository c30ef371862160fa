/* The GPU subcommands of kv_cache, and the check its GPU test runs.
 * Compiled in CUDA builds only: without CUDA, gpu.h names cli_without_cuda
 * in place of each subcommand. */
#include "chapters/04-kv-cache/gpu.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/decode_batch.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/check.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/results.h"
#include "kernels/paged_attention_gpu.h"

static PagedAttentionProblem problem_of(const DecodeBatch *b, int int4_group)
{
    return (PagedAttentionProblem){
        .batch = b->batch,
        .n_heads = b->n_heads,
        .shape = b->shape,
        .format = b->format,
        .int4_group = int4_group,
        .key_scale = b->key_layout.tensor_scale,
        .value_scale = b->value_layout.tensor_scale,
        .key_head_scales = b->key_head_scales,
        .value_head_scales = b->value_head_scales,
        .queries = b->queries,
        .key_pool = b->key_pool,
        .value_pool = b->value_pool,
        .num_blocks = b->num_blocks,
        .block_tables = b->block_tables,
        .max_blocks = b->max_blocks,
        .lengths = b->lengths,
    };
}

/* The GPU output of sequences `first`, `first + step`, ... against the
 * double reference. A float online softmax over up to a few thousand
 * positions: each rescale and each add rounds once, a few hundred ulps of
 * outputs that are weighted means of values in [-1, 1]. */
static CloseReport compare_with_reference(const DecodeBatch *b, const float *out, int step)
{
    size_t per_seq = (size_t)b->n_heads * b->shape.head_dim;
    int checked = 0;
    for (int s = 0; s < b->batch; s += step)
        checked++;
    float *got = ALLOC_ARRAY(checked * per_seq, float);
    double *ref = ALLOC_ARRAY(checked * per_seq, double);
    int i = 0;
    for (int s = 0; s < b->batch; s += step, i++) {
        decode_batch_reference(b, s, ref + i * per_seq);
        for (size_t j = 0; j < per_seq; j++)
            got[i * per_seq + j] = out[s * per_seq + j];
    }
    CloseReport r = check_close_f32(got, ref, checked * per_seq, 5e-5, 2e-4);
    array_free(got);
    array_free(ref);
    return r;
}

typedef struct {
    int n_heads, n_kv_heads, head_dim, block_size, batch;
    int32_t lengths[8];
} CheckCase;

/* Lengths that are not multiples of any block size used, one of them a
 * single position; several sequences, so blocks of one never serve another.
 * GQA groups of 1, 4, 6 and 8 query heads: versions 3 and 4 carry up to 4 in a
 * thread block, so 6 leaves a chunk of 2 and 1 leaves 3 of 4 unused. */
static const CheckCase CHECK_CASES[] = {
    {4,                      4,                          64,  16, 1, {1}                                     },
    {8,                      2,                          128, 16, 3, {1000, 17, 1}                           },
    {8,                      1,                          256, 7,  3, {33, 4097, 2}                           },
    {GPU_CHECK_WIDEST_HEADS, GPU_CHECK_WIDEST_HEADS / 4, 128, 16, 8, {5, 129, 511, 513, 1500, 2049, 3000, 77}},
    {16,                     2,                          64,  7,  2, {1234, 15}                              },
    {12,                     2,                          64,  16, 2, {300, 9}                                },
};

/* One case in one format (FP8 with scales per tensor or per kv head):
 * every version and partition, one line each. */
static int check_case(FILE *out, const CheckCase *c, KvFormat format, int int4_group, bool fp8_per_head)
{
    const DecodeBatchShape shape = {.batch = c->batch,
                                    .n_heads = c->n_heads,
                                    .n_kv_heads = c->n_kv_heads,
                                    .head_dim = c->head_dim,
                                    .block_size = c->block_size,
                                    .format = format,
                                    .int4_group = int4_group,
                                    .seed = 31,
                                    .fp8_per_head = fp8_per_head};
    char format_name[64];
    snprintf(format_name, sizeof format_name, "%s%s", kv_format_name(format), fp8_per_head ? " per head" : "");
    DecodeBatch b = decode_batch_create(&shape, c->lengths);
    PagedAttentionProblem problem = problem_of(&b, int4_group);
    PagedAttentionGpuRun *run;
    const char *why = paged_attention_gpu_run_new(&run, &problem);
    if (why != NULL)
        cli_fail_status(1, "a check case was refused: %s", why);
    float *result = ALLOC_ARRAY((size_t)c->batch * c->n_heads * c->head_dim, float);
    const int versions[] = {1, 2, 2, 3, 3, 4, 4};
    const int partitions[] = {0, 0, 3 * c->block_size, 0, 3 * c->block_size, 0, 3 * c->block_size};
    int failures = 0;
    for (size_t v = 0; v < CLI_COUNT(versions); v++) {
        char what[200];
        snprintf(what, sizeof what, "version %d%s, %-29s %2d/%d heads of %3d, blocks of %2d, %d sequences", versions[v],
                 partitions[v] != 0 ? " (partitions of 3 blocks)"
                 : v != 0           ? " (default partitions)"
                                    : "",
                 format_name, c->n_heads, c->n_kv_heads, c->head_dim, c->block_size, c->batch);
        why = paged_attention_gpu_run_once(run, versions[v], partitions[v], result);
        if (why != NULL)
            cli_fail_status(1, "%s: %s", what, why);
        CloseReport r = compare_with_reference(&b, result, 1);
        failures += !close_report_print(out, what, &r);
    }
    array_free(result);
    paged_attention_gpu_run_free(run);
    decode_batch_free(&b);
    return failures;
}

int gpu_check(FILE *out, int widest_heads)
{
    int failures = 0;
    for (size_t i = 0; i < sizeof CHECK_CASES / sizeof CHECK_CASES[0]; i++)
        for (int f = 0; f < KV_FORMAT_COUNT; f++) {
            CheckCase c = CHECK_CASES[i];
            if (c.n_heads == GPU_CHECK_WIDEST_HEADS) {
                c.n_heads = widest_heads;
                c.n_kv_heads = widest_heads / 4;
            }
            failures += check_case(out, &c, (KvFormat)f, 32, false);
            if (f == KV_FORMAT_INT4 || f == KV_FORMAT_KIVI4)
                failures += check_case(out, &c, (KvFormat)f, 64, false);
            if (f == KV_FORMAT_FP8_E4M3 || f == KV_FORMAT_FP8_E5M2)
                failures += check_case(out, &c, (KvFormat)f, 32, true);
        }
    fprintf(out, "%d failed\n", failures);
    return failures;
}

int gpu_check_command(int argc, char **argv)
{
    cli_parse(argc, argv, NULL, 0, NULL);
    cuda_require_device();
    return gpu_check(stdout, GPU_CHECK_WIDEST_HEADS) == 0 ? 0 : 1;
}

/* The attention of a Llama-3-8B layer: 32 query heads, 8 kv heads of 128. */
enum { BENCH_HEADS = 32, BENCH_KV_HEADS = 8, BENCH_HEAD_DIM = 128, BENCH_BLOCK = 16, TIMED_RUNS = 20 };
/* Query heads per kv head in that shape. */
enum { BENCH_GROUP = BENCH_HEADS / BENCH_KV_HEADS };

typedef struct {
    bool ok;          /* the output matched the reference, so it was timed */
    BenchStats stats; /* seconds per decode step */
    double bytes;     /* of cache read */
} Timing;

typedef struct {
    PagedAttentionGpuRun *run;
    int version;
} Step;

/* One decode step at the default partition, already run once (validated,
 * workspace allocated): it cannot be refused here. */
static void launch_step(void *ctx)
{
    const Step *step = ctx;
    const char *why = paged_attention_gpu_run_launch(step->run, step->version, 0);
    if (why != NULL)
        cli_fail_status(1, "version %d: %s", step->version, why);
}

/* Each decode step timed on its own, after two untimed ones, so that the
 * spread over the steps shows. */
static BenchStats time_steps(PagedAttentionGpuRun *run, int version)
{
    enum { WARMUP_STEPS = 2 };
    Step step = {run, version};
    return cuda_bench_run(launch_step, &step, WARMUP_STEPS, TIMED_RUNS);
}

/* Validate on the first and last sequences, then time. */
static Timing validated_timing(PagedAttentionGpuRun *run, const DecodeBatch *b, int version, char *why, size_t size)
{
    Timing t = {.ok = false, .bytes = decode_batch_cache_bytes(b)};
    float *result = ALLOC_ARRAY((size_t)b->batch * b->n_heads * b->shape.head_dim, float);
    const char *refused = paged_attention_gpu_run_once(run, version, 0, result);
    if (refused != NULL)
        cli_fail_status(1, "version %d: %s", version, refused);
    CloseReport r = compare_with_reference(b, result, b->batch > 1 ? b->batch - 1 : 1);
    if (r.ok) {
        t.ok = true;
        t.stats = time_steps(run, version);
    } else {
        snprintf(why, size, "%zu of %zu values off, worst %g against %g", r.failures, r.count, r.worst_got,
                 r.worst_ref);
    }
    array_free(result);
    return t;
}

static DecodeBatch bench_batch(int batch, int context, KvFormat format)
{
    int32_t *lengths = ALLOC_ARRAY(batch, int32_t);
    for (int s = 0; s < batch; s++)
        lengths[s] = context;
    const DecodeBatchShape shape = {.batch = batch,
                                    .n_heads = BENCH_HEADS,
                                    .n_kv_heads = BENCH_KV_HEADS,
                                    .head_dim = BENCH_HEAD_DIM,
                                    .block_size = BENCH_BLOCK,
                                    .format = format,
                                    .int4_group = KV_DEFAULT_INT4_GROUP,
                                    .seed = 77};
    DecodeBatch b = decode_batch_create(&shape, lengths);
    array_free(lengths);
    return b;
}

static PagedAttentionGpuRun *bench_run_new(const DecodeBatch *b)
{
    PagedAttentionProblem problem = problem_of(b, 32);
    PagedAttentionGpuRun *run;
    const char *why = paged_attention_gpu_run_new(&run, &problem);
    if (why != NULL)
        cli_fail_status(1, "the benchmark was refused: %s", why);
    return run;
}

/* Every format and version at one long context: the bytes each reads,
 * the bandwidth it reaches, and its speed against fp16's. */
static Table *formats_table(int batch, int context, double read_gbs)
{
    const KvFormat formats[] = {KV_FORMAT_FP16, KV_FORMAT_FLOAT32, KV_FORMAT_FP8_E4M3, KV_FORMAT_FP8_E5M2,
                                KV_FORMAT_INT8, KV_FORMAT_INT4,    KV_FORMAT_KIVI4};
    const char *headers[] = {"cache",
                             "version",
                             "MB read",
                             "bytes / fp16's",
                             "ms",
                             "GB/s",
                             "of read bandwidth (min–max)",
                             "fp16's time / this (min–max)"};
    Table *t = TABLE_NEW(headers, "lrrrrrrr");
    Timing fp16[PAGED_ATTENTION_GPU_VERSIONS + 1] = {0};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        DecodeBatch b = bench_batch(batch, context, formats[f]);
        char why[256] = "";
        PagedAttentionGpuRun *run = bench_run_new(&b);
        for (int version = 1; version <= PAGED_ATTENTION_GPU_VERSIONS; version++) {
            Timing timing = validated_timing(run, &b, version, why, sizeof why);
            if (f == 0)
                fp16[version] = timing;
            table_cell(t, "%s", kv_format_name(formats[f]));
            table_cell(t, "%d", version);
            table_cell(t, "%.0f", timing.bytes / 1e6);
            table_cell(t, "%.3f", timing.bytes / fp16[version].bytes);
            if (!timing.ok) {
                results_wrong_cells(t, why, 3);
                continue;
            }
            table_cell(t, "%.3f", 1e3 * timing.stats.median);
            table_cell(t, "%.0f", gb_per_s(timing.bytes, timing.stats.median));
            bench_share_cell(t, timing.bytes, timing.stats, read_gbs);
            if (fp16[version].ok)
                bench_speedup_cell(t, fp16[version].stats, timing.stats);
            else
                table_cell(t, "-");
        }
        paged_attention_gpu_run_free(run);
        decode_batch_free(&b);
    }
    return t;
}

/* Every version, fp16, over context lengths and batch sizes: each
 * version's time, and each one's speed-up over the version before it. */
enum { SPLIT_TABLE_COLUMNS = 3 + PAGED_ATTENTION_GPU_VERSIONS + (PAGED_ATTENTION_GPU_VERSIONS - 1) };

static Table *split_table(const int *contexts, int n_contexts, const int *batches, int n_batches)
{
    char names[SPLIT_TABLE_COLUMNS][64];
    const char *headers[SPLIT_TABLE_COLUMNS] = {"context", "sequences", "thread blocks, v1"};
    int column = 3;
    for (int version = 1; version <= PAGED_ATTENTION_GPU_VERSIONS; version++, column++)
        snprintf(names[column], sizeof names[column], "v%d ms", version);
    for (int version = 2; version <= PAGED_ATTENTION_GPU_VERSIONS; version++, column++)
        snprintf(names[column], sizeof names[column], "v%d's time / v%d's (min–max)", version - 1, version);
    for (column = 3; column < SPLIT_TABLE_COLUMNS; column++)
        headers[column] = names[column];
    char align[SPLIT_TABLE_COLUMNS + 1] = "";
    memset(align, 'r', SPLIT_TABLE_COLUMNS);
    Table *t = TABLE_NEW(headers, align);
    for (int c = 0; c < n_contexts; c++)
        for (int s = 0; s < n_batches; s++) {
            DecodeBatch b = bench_batch(batches[s], contexts[c], KV_FORMAT_FP16);
            char why[256] = "";
            PagedAttentionGpuRun *run = bench_run_new(&b);
            Timing v[PAGED_ATTENTION_GPU_VERSIONS + 1];
            bool all_ok = true;
            for (int version = 1; version <= PAGED_ATTENTION_GPU_VERSIONS; version++) {
                v[version] = validated_timing(run, &b, version, why, sizeof why);
                all_ok = all_ok && v[version].ok;
            }
            table_cell(t, "%d", contexts[c]);
            table_cell(t, "%d", batches[s]);
            table_cell(t, "%d", batches[s] * BENCH_HEADS);
            if (all_ok) {
                for (int version = 1; version <= PAGED_ATTENTION_GPU_VERSIONS; version++)
                    table_cell(t, "%.3f", 1e3 * v[version].stats.median);
                for (int version = 2; version <= PAGED_ATTENTION_GPU_VERSIONS; version++)
                    bench_speedup_cell(t, v[version - 1].stats, v[version].stats);
            } else {
                results_wrong_cells(t, why, SPLIT_TABLE_COLUMNS - 4); /* after the cell that says why */
            }
            paged_attention_gpu_run_free(run);
            decode_batch_free(&b);
        }
    return t;
}

int gpu_bench_command(int argc, char **argv)
{
    GpuBenchOptions options = results_parse_bench_options(argc, argv, "fewer sequences, contexts and batch sizes");
    cuda_require_device();
    const int batch = options.quick ? 4 : 8, context = 16384;
    const int all_contexts[] = {1024, 4096, 16384}, all_batches[] = {1, 4, 32};
    const int quick_contexts[] = {1024, 16384}, quick_batches[] = {1, 16};
    /* Decode only reads the cache: its limit is the read probe's, which a
     * copy's read + write figure would flatter. */
    double read_gbs = cuda_read_bandwidth_gbs((size_t)1 << 30);
    BenchReport *report = bench_report_new(
        "read bandwidth: %.0f GB/s (16-byte loads, nothing written), measured in this run. Decode attention of %d "
        "query heads over %d kv heads of %d, blocks of %d scattered through the pool; each case validated against "
        "the double reference before timing, median of %d steps, with the slowest and the fastest. Bytes counted: "
        "the cache's rows and scales, read once.",
        read_gbs, BENCH_HEADS, BENCH_KV_HEADS, BENCH_HEAD_DIM, BENCH_BLOCK, TIMED_RUNS);
    bench_report_add(report, formats_table(batch, context, read_gbs), "%d sequences of %d positions:", batch, context);
    bench_report_add(
        report,
        options.quick ? split_table(quick_contexts, 2, quick_batches, 2) : split_table(all_contexts, 3, all_batches, 3),
        "fp16, version 1 (a thread block per query head), version 2 (split-K), version 3 (split-K, a thread "
        "block per kv head's group) and version 4 (version 3's loop over positions in groups):");
    char device[256];
    cuda_device_describe(device, sizeof device);
    results_publish(report, &options, "kv_cache", device);
    return 0;
}

/* The head dimensions the launcher has an instance for. */
static const int HEAD_DIMS[] = {64, 128, 256};

/* Version 1 and the first kernels of versions 2, 3 and 4 for every cache
 * format and head_dim; the merge they share, one instance, at each head_dim. */
static void paged_attention_launches(const KernelSignature *kernel, ResourceTableRows *rows)
{
    int threads = paged_attention_gpu_threads_per_block();
    const int *arguments = kernel->arguments;
    /* Versions 1 and 2 give each query head a block: in the benchmark's
     * shape, BENCH_GROUP blocks load each byte of a kv head's cache. */
    if (kernel_signature_is(kernel, "whole_context_kernel", 2))
        resource_table_add_shared_reads(rows, threads, BENCH_GROUP, "version 1, %s, head_dim %d, %d reads of each byte",
                                        kv_format_name((KvFormat)arguments[0]), arguments[1], BENCH_GROUP);
    else if (kernel_signature_is(kernel, "partition_kernel", 2))
        resource_table_add_shared_reads(rows, threads, BENCH_GROUP, "version 2, %s, head_dim %d, %d reads of each byte",
                                        kv_format_name((KvFormat)arguments[0]), arguments[1], BENCH_GROUP);
    else if (kernel_signature_is(kernel, "group_partition_kernel", 2))
        resource_table_add(rows, threads, "version 3, %s, head_dim %d", kv_format_name((KvFormat)arguments[0]),
                           arguments[1]);
    else if (kernel_signature_is(kernel, "push_groups_kernel", 2))
        resource_table_add(rows, threads, "version 4, %s, head_dim %d", kv_format_name((KvFormat)arguments[0]),
                           arguments[1]);
    else if (kernel_signature_is(kernel, "merge_partitions_kernel", 0))
        for (size_t i = 0; i < CLI_COUNT(HEAD_DIMS); i++)
            resource_table_add(rows, HEAD_DIMS[i], "versions 2 to 4, merge, head_dim %d", HEAD_DIMS[i]);
}

int gpu_resources_command(int argc, char **argv)
{
    return resource_table_command(argc, argv, "paged_attention.resources", paged_attention_launches);
}
