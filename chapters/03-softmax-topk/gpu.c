/* The GPU subcommands of softmax_topk. Compiled in CUDA builds only:
 * without CUDA, gpu.h names cli_without_cuda in place of each. */
#include "chapters/03-softmax-topk/gpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/commands.h"
#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/decode_step_model.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/slow_paths.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/goals.h"
#include "common/instruction_budget.h"
#include "common/kernel_resources.h"
#include "common/occupancy.h"
#include "common/results.h"
#include "common/table.h"
#include "kernels/softmax_topk_gpu.h"

static double gpu_compute(long version, long threads, const Logits *x, int k, float *probs, int64_t *indices)
{
    (void)threads;
    SoftmaxTopkGpuConfig config = {0, 0};
    size_t rows = x->rows, vocab = x->vocab;
    const char *why = softmax_topk_gpu((int)version, x->logits, rows, vocab, k, &config, probs, indices);
    if (why != NULL) {
        cli_fail("--version %ld: %s", version, why);
    }
    printf("GPU version %ld (%s), %zu rows, V = %zu, K = %d\n", version, softmax_topk_gpu_version_name((int)version),
           rows, vocab, k);
    return topk_rtol_gpu(vocab);
}

/* The GPU draws by inverse CDF (method is always that: gpu-sample has no
 * --method) from float32 logits: 16-bit ones are widened, exactly. */
static void gpu_draw(long version, long threads, Logits *x, SamplingParams params, DrawMethod method, uint64_t seed,
                     int samples, int64_t *tokens, float *probs, int64_t *indices)
{
    (void)threads;
    (void)method;
    widen_logits_file(x);
    SoftmaxTopkGpuConfig config = {0, 0};
    const char *why = softmax_topk_gpu_sample((int)version, x->logits, x->rows, x->vocab, params, seed, samples,
                                              &config, tokens, probs, indices);
    if (why != NULL) {
        cli_fail("--version %ld: %s", version, why);
    }
    printf("GPU version %ld (%s)\n", version, softmax_topk_gpu_version_name((int)version));
}

/* A macro's value as a string literal (the second step expands it first),
 * so that --help names the versions there are. */
#define LITERAL(x) #x
#define VALUE_AS_LITERAL(x) LITERAL(x)

static const TopkDevice GPU = {
    .version_help = "GPU version 1 .. " VALUE_AS_LITERAL(
        SOFTMAX_TOPK_GPU_VERSIONS) " (kernels/softmax_topk_gpu.h; gpu-sample: the top K it draws after, 7 drawing "
                                   "in the same kernel)",
    .default_version = 3,
    .default_sample_version = 7,
    .version_count = SOFTMAX_TOPK_GPU_VERSIONS,
    .takes_threads = false,
    .require = cuda_require_device,
    .compute = gpu_compute,
    .draw = gpu_draw,
};

int gpu_run_command(int argc, char **argv)
{
    return topk_random_command(argc, argv, &GPU);
}

int gpu_apply_command(int argc, char **argv)
{
    return topk_apply_command(argc, argv, &GPU);
}

int gpu_sample_command(int argc, char **argv)
{
    return topk_sample_command(argc, argv, &GPU);
}

typedef struct {
    const float *logits;
    size_t rows, vocab;
    int k;
} GpuCase;

/* A version bound to a case; a refusal here is the program's own bug. */
static SoftmaxTopkGpuRun *gpu_run_new(int version, const GpuCase *c, SoftmaxTopkGpuConfig config)
{
    SoftmaxTopkGpuRun *run;
    const char *why = softmax_topk_gpu_run_new(&run, version, c->logits, c->rows, c->vocab, c->k, &config);
    if (why != NULL) {
        cli_fail_status(1, "version %d: %s", version, why);
    }
    return run;
}

/* Launch once and compare rows 0, row_step, 2 row_step, ... with the
 * double reference. */
static TopkComparison validate(SoftmaxTopkGpuRun *run, const GpuCase *c, size_t row_step)
{
    size_t outputs = c->rows * (size_t)c->k;
    float *probs = ALLOC_ARRAY(outputs, float);
    int64_t *indices = ALLOC_ARRAY(outputs, int64_t);
    softmax_topk_gpu_run_once(run, probs, indices);
    TopkComparison check =
        compare_with_reference(c->logits, c->rows, row_step, c->vocab, c->k, probs, indices, topk_rtol_gpu(c->vocab));
    array_free(probs);
    array_free(indices);
    return check;
}

static bool matches(const TopkComparison *check)
{
    return check->wrong_indices + check->wrong_probs == 0;
}

/* What gpu-check found for one version over all its cases. */
typedef struct {
    int cases;
    size_t places, wrong;
    double max_rel_error, tolerance_used;
    char first_mismatch[300];
} VersionVerdict;

/* One case with as many blocks as the rows need, and with 3 blocks, so
 * that each block loops over several rows (shared memory reused). */
static void check_case(int version, const char *what, const GpuCase *c, VersionVerdict *verdict)
{
    const int max_blocks[] = {0, 3};
    for (int b = 0; b < 2; b++) {
        SoftmaxTopkGpuConfig config = {max_blocks[b], 0};
        SoftmaxTopkGpuRun *run = gpu_run_new(version, c, config);
        TopkComparison check = validate(run, c, 1);
        softmax_topk_gpu_run_free(run);
        verdict->cases++;
        verdict->places += check.places;
        verdict->wrong += check.wrong_indices + check.wrong_probs;
        verdict->max_rel_error =
            check.max_rel_error > verdict->max_rel_error ? check.max_rel_error : verdict->max_rel_error;
        verdict->tolerance_used =
            check.tolerance_used > verdict->tolerance_used ? check.tolerance_used : verdict->tolerance_used;
        if (!matches(&check) && verdict->first_mismatch[0] == '\0') {
            snprintf(verdict->first_mismatch, sizeof verdict->first_mismatch, "%s, V %zu, K %d: %s", what, c->vocab,
                     c->k, check.first_mismatch);
        }
    }
}

static void check_hard_inputs(int version, VersionVerdict *verdict)
{
    for (int i = 0; i < HARD_INPUT_COUNT; i++) {
        const HardInput *input = &HARD_INPUTS[i];
        if (input->k > softmax_topk_gpu_max_k(version)) {
            continue;
        }
        float *row = ALLOC_ARRAY(input->vocab, float);
        input->fill(row, input->vocab);
        GpuCase c = {row, 1, input->vocab, input->k};
        check_case(version, input->name, &c, verdict);
        array_free(row);
    }
}

/* Irregular shapes (V not a multiple of 4, a block holding several rows),
 * at every K the version takes up to 1024. */
static void check_random_rows(int version, VersionVerdict *verdict)
{
    const struct {
        size_t rows, vocab;
    } shapes[] = {
        {37, 1823      },
        {9,  50257     },
        {3,  128256 + 3},
    };
    const int ks[] = {1, 8, 64, 256, 1024};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        float *logits = ALLOC_ARRAY((shapes[s].rows * shapes[s].vocab), float);
        fill_tied_logits(logits, shapes[s].rows * shapes[s].vocab, 7 + s);
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            if (ks[t] <= softmax_topk_gpu_max_k(version) && (size_t)ks[t] <= shapes[s].vocab) {
                GpuCase c = {logits, shapes[s].rows, shapes[s].vocab, ks[t]};
                check_case(version, "random rows with ties", &c, verdict);
            }
        }
        array_free(logits);
    }
}

int gpu_check_command(int argc, char **argv)
{
    cli_parse(argc, argv, NULL, 0, NULL);
    cuda_require_device();
    const char *headers[] = {"version", "cases", "places", "largest relative error", "of the tolerance", "result"};
    Table *table = TABLE_NEW(headers, "lrrrrl");
    int failed = 0;
    for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
        VersionVerdict verdict = {0};
        check_hard_inputs(version, &verdict);
        check_random_rows(version, &verdict);
        table_cell(table, "%d %s", version, softmax_topk_gpu_version_name(version));
        table_cell(table, "%d", verdict.cases);
        table_cell(table, "%zu", verdict.places);
        table_cell(table, "%.1e", verdict.max_rel_error);
        table_cell(table, "%.0f%%", 100.0 * verdict.tolerance_used);
        if (verdict.wrong == 0) {
            table_cell(table, "ok");
        } else {
            table_cell(table, "%zu WRONG; first: %s", verdict.wrong, verdict.first_mismatch);
        }
        failed += verdict.wrong > 0;
    }
    table_print(table, stdout, TABLE_TEXT);
    table_free(table);
    if (failed > 0) {
        printf("%d of %d versions differ from the double reference\n", failed, SOFTMAX_TOPK_GPU_VERSIONS);
        return 1;
    }
    printf("every version matches the double reference: indices exact, probabilities within the tolerance\n");
    return 0;
}

enum {
    BENCH_ROWS = 4096,
    QUICK_ROWS = 1024,
    TIMED_LAUNCHES = 21,
    VALIDATED_ROWS = 16,
    DECODE_STEP_LAUNCHES = 100 /* per CUDA graph, replayed once per timed run */
};

static void launch_once(void *run)
{
    softmax_topk_gpu_run_launch(run);
}

static void launch_on_stream(void *run, void *stream)
{
    softmax_topk_gpu_run_launch_on(run, stream);
}

/* The launches alone, the results left on the device, so that the copies
 * back do not count; warm-up launches first. A batch is timed from a cold
 * L2 launch by launch; a single row (a decode step, a few microseconds) as
 * the mean of launches captured in a CUDA graph and replayed, so that
 * neither the host's launch latency nor the gap between two events is most
 * of what is timed. */
static BenchStats time_launches(SoftmaxTopkGpuRun *run, size_t rows)
{
    enum { WARMUP_LAUNCHES = 3 };
    if (rows == 1)
        return cuda_bench_graph(launch_on_stream, run, WARMUP_LAUNCHES, TIMED_LAUNCHES, DECODE_STEP_LAUNCHES);
    return cuda_bench_run(launch_once, run, WARMUP_LAUNCHES, TIMED_LAUNCHES);
}

/* One version on one case: validated on VALIDATED_ROWS rows spread over the
 * batch, then timed. False, with the first mismatch in `why`, if wrong. */
static bool validated_time(int version, const GpuCase *c, BenchStats *stats, char *why, size_t why_size)
{
    SoftmaxTopkGpuConfig automatic = {0, 0};
    SoftmaxTopkGpuRun *run = gpu_run_new(version, c, automatic);
    size_t step = c->rows > VALIDATED_ROWS ? c->rows / VALIDATED_ROWS : 1;
    TopkComparison check = validate(run, c, step);
    bool ok = matches(&check);
    if (ok) {
        *stats = time_launches(run, c->rows);
    } else {
        snprintf(why, why_size, "%s", check.first_mismatch);
    }
    softmax_topk_gpu_run_free(run);
    return ok;
}

/* The K and version cells of a row, then the version validated and timed:
 * true with `stats` filled, or false with the row finished as WRONG (and
 * `dashes` cells where its times would have been) and *wrong counted. */
static bool row_validated_time(Table *table, int version, const GpuCase *c, int dashes, BenchStats *stats, int *wrong)
{
    char why[200] = "";
    table_cell(table, "%d", c->k);
    table_cell(table, "%d", version);
    if (validated_time(version, c, stats, why, sizeof why)) {
        return true;
    }
    ++*wrong;
    results_wrong_cells(table, why, dashes);
    return false;
}

static Table *batch_table(const float *logits, size_t rows, const size_t *vocabs, size_t vocab_count, double read_gbs,
                          int *wrong)
{
    const int ks[] = {1, 8, 64, 256, 1024};
    const char *headers[] = {
        "V", "K", "version", "ms", "GB/s", "of read bandwidth (slowest–fastest)", "vs version 1 (slowest–fastest)"};
    Table *table = TABLE_NEW(headers, "rrrrrrr");
    for (size_t v = 0; v < vocab_count; v++) {
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            GpuCase c = {logits, rows, vocabs[v], ks[t]};
            BenchStats naive = {0};
            for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
                /* A top K alone on version 7 is version 6's kernel. */
                if (ks[t] > softmax_topk_gpu_max_k(version) || softmax_topk_gpu_fuses_sampling(version)) {
                    continue;
                }
                BenchStats stats;
                table_cell(table, "%zu", c.vocab);
                if (!row_validated_time(table, version, &c, 3, &stats, wrong)) {
                    continue;
                }
                double bytes = (double)(rows * c.vocab * sizeof(float));
                naive = version == 1 ? stats : naive;
                table_cell(table, "%.3f", stats.median * 1e3);
                table_cell(table, "%.0f", gb_per_s(bytes, stats.median));
                bench_share_cell(table, bytes, stats, read_gbs);
                if (naive.runs > 0) {
                    bench_speedup_cell(table, naive, stats);
                } else {
                    table_cell(table, "-");
                }
            }
        }
    }
    return table;
}

/* One row of V = 128256 logits: a single decode step, where launch latency
 * and the parallelism of one row decide. */
static Table *decode_step_table(const float *logits, int *wrong)
{
    const int ks[] = {1, 8, 64};
    const char *headers[] = {"K", "version", "microseconds (slowest–fastest)"};
    Table *table = TABLE_NEW(headers, "rrr");
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        GpuCase c = {logits, 1, 128256, ks[t]};
        for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
            if (ks[t] > softmax_topk_gpu_max_k(version) || softmax_topk_gpu_fuses_sampling(version)) {
                continue;
            }
            BenchStats stats;
            if (row_validated_time(table, version, &c, 0, &stats, wrong)) {
                table_cell(table, "%.1f (%.1f–%.1f)", stats.median * 1e6, stats.max * 1e6, stats.min * 1e6);
            }
        }
    }
    return table;
}

/* One draw per row, as a decode step draws, at V = 128256: version 6's
 * top K then the sampling kernel, against version 7, which draws in its
 * top-K kernel. Each version's tokens are first checked against
 * sample_rows on the CPU. */
enum { SAMPLING_VOCAB = 128256, SAMPLING_SEED = 1 };

static bool validated_sampling_time(int version, const GpuCase *c, SamplingParams params, const int64_t *cpu_tokens,
                                    BenchStats *stats)
{
    SoftmaxTopkGpuRun *run = gpu_run_new(version, c, (SoftmaxTopkGpuConfig){0, 0});
    const char *why = softmax_topk_gpu_run_sample(run, params, SAMPLING_SEED, 1);
    if (why != NULL) {
        cli_fail_status(1, "version %d: %s", version, why);
    }
    int64_t *tokens = ALLOC_ARRAY(c->rows, int64_t), *indices = ALLOC_ARRAY(c->rows * (size_t)c->k, int64_t);
    float *probs = ALLOC_ARRAY(c->rows * (size_t)c->k, float);
    softmax_topk_gpu_run_launch(run);
    softmax_topk_gpu_run_tokens(run, tokens, probs, indices);
    bool ok = memcmp(tokens, cpu_tokens, c->rows * sizeof(int64_t)) == 0;
    if (ok) {
        *stats = cuda_bench_run(launch_once, run, 3, TIMED_LAUNCHES);
    }
    array_free(tokens);
    array_free(indices);
    array_free(probs);
    softmax_topk_gpu_run_free(run);
    return ok;
}

static Table *sampling_table(const float *logits, size_t rows, int *wrong)
{
    const int ks[] = {1, 8, 64}, versions[] = {6, 7};
    const size_t k_count = sizeof ks / sizeof ks[0], largest_k = (size_t)ks[k_count - 1];
    const char *headers[] = {"K", "version", "ms (slowest–fastest)", "vs version 6 then the sampling kernel"};
    Table *table = TABLE_NEW(headers, "rrrr");
    int64_t *cpu_tokens = ALLOC_ARRAY(rows, int64_t), *cpu_indices = ALLOC_ARRAY(rows * largest_k, int64_t);
    float *cpu_probs = ALLOC_ARRAY(rows * largest_k, float);
    for (size_t t = 0; t < k_count; t++) {
        GpuCase c = {logits, rows, SAMPLING_VOCAB, ks[t]};
        SamplingParams params = {1.0, ks[t], 0.9, 0.0};
        sample_rows(float32_logits(logits), rows, SAMPLING_VOCAB, params, DRAW_INVERSE_CDF, SAMPLING_SEED, 1,
                    bench_max_threads(), cpu_tokens, cpu_probs, cpu_indices);
        BenchStats after = {0};
        for (int v = 0; v < 2; v++) {
            BenchStats stats;
            table_cell(table, "%d", ks[t]);
            table_cell(table, "%d", versions[v]);
            if (!validated_sampling_time(versions[v], &c, params, cpu_tokens, &stats)) {
                ++*wrong;
                results_wrong_cells(table, "tokens differ from sample_rows'", 2);
                continue;
            }
            after = versions[v] == 6 ? stats : after;
            table_cell(table, "%.3f (%.3f–%.3f)", stats.median * 1e3, stats.max * 1e3, stats.min * 1e3);
            if (after.runs > 0) {
                bench_speedup_cell(table, after, stats);
            } else {
                table_cell(table, "-");
            }
        }
    }
    array_free(cpu_tokens);
    array_free(cpu_indices);
    array_free(cpu_probs);
    return table;
}

int gpu_bench_command(int argc, char **argv)
{
    GpuBenchOptions options = results_parse_bench_options(argc, argv, "only V = 128256, on 1024 rows");
    cuda_require_device();
    const size_t all_vocabs[] = {32000, 50257, 128256, 151936}, quick_vocabs[] = {128256};
    const size_t all_count = sizeof all_vocabs / sizeof all_vocabs[0], largest_vocab = all_vocabs[all_count - 1];
    size_t rows = options.quick ? QUICK_ROWS : BENCH_ROWS, vocab_count = options.quick ? 1 : all_count;
    const size_t *vocabs = options.quick ? quick_vocabs : all_vocabs;
    float *logits = bench_logits_new(rows * largest_vocab, bench_max_threads());
    double read_gbs = cuda_read_bandwidth_gbs(rows * largest_vocab * sizeof(float));
    int wrong = 0;
    BenchReport *report = bench_report_new(
        "read bandwidth: %.0f GB/s, measured in this run by a kernel of 16-byte loads that writes nothing back, the "
        "limit of a kernel that only reads; %zu rows, each version validated against the double reference before "
        "timing; median of %d launches, each from a cold L2, and the slowest and fastest of them",
        read_gbs, rows, TIMED_LAUNCHES);
    bench_report_add(report, batch_table(logits, rows, vocabs, vocab_count, read_gbs, &wrong), NULL);
    bench_report_add(report, decode_step_table(logits, &wrong),
                     "One row (a decode step), V = 128256: the mean of %d launches captured in a CUDA graph, so that "
                     "the host's launch latency is not timed, the row warm in L2 as a decode step's logits are, just "
                     "written; median of %d replays, and the slowest and fastest:",
                     DECODE_STEP_LAUNCHES, TIMED_LAUNCHES);
    bench_report_add(report, sampling_table(logits, rows, &wrong),
                     "Sampling, one draw per row at top-p 0.9, V = 128256: after the top K (version 6, then the "
                     "sampling kernel) or in the top-K kernel (version 7); each version's tokens equal to sample_rows' "
                     "on the CPU before timing:");
    array_free(logits);
    char device[256];
    cuda_device_describe(device, sizeof device);
    results_publish(report, &options, "softmax_topk", device);
    return wrong > 0 ? 1 : 0;
}

/* Every kernel of every version runs in blocks of the same size. The
 * kernels with a candidate buffer ask for their shared memory at launch, in
 * proportion to K: the rows show them at the goal's largest K, and version
 * 4's merge, which holds every slice's list, on one row (a decode step, the
 * case version 4 is for) of V = 128256, with as many slices as it takes on
 * an H100; version 8's one kernel, which does both, the larger of the two. */
enum { TABLE_K = 64, TABLE_VOCAB = 128256 };

static void softmax_topk_launches(const KernelSignature *kernel, ResourceTableRows *rows)
{
    int threads = softmax_topk_gpu_threads_per_block();
    long scan_bytes = (long)softmax_topk_gpu_scan_shared_bytes(TABLE_K);
    if (kernel_signature_is(kernel, "three_pass_softmax_kernel", 0))
        resource_table_add(rows, threads, "version 1, three-pass softmax");
    else if (kernel_signature_is(kernel, "block_rows_kernel", 1) && kernel->arguments[0] == 0)
        resource_table_add_with_shared(rows, threads, scan_bytes, "version 1, top K of the probabilities, K = %d",
                                       TABLE_K);
    else if (kernel_signature_is(kernel, "warp_per_row_kernel", 1))
        resource_table_add(rows, threads, "version 2, a list of %d in registers", kernel->arguments[0]);
    else if (kernel_signature_is(kernel, "block_rows_kernel", 1))
        resource_table_add_with_shared(rows, threads, scan_bytes, "version 3, block per row, K = %d", TABLE_K);
    else if (kernel_signature_is(kernel, "slice_partials_kernel", 0))
        resource_table_add_with_shared(rows, threads, scan_bytes, "version 4, a partial state per slice, K = %d",
                                       TABLE_K);
    else if (kernel_signature_is(kernel, "merge_partials_kernel", 0))
        resource_table_add_with_shared(rows, threads,
                                       (long)softmax_topk_gpu_merge_shared_bytes(1, TABLE_VOCAB, TABLE_K, H100_SXM.sms),
                                       "version 4, merge of the slices, one row, K = %d", TABLE_K);
    else if (kernel_signature_is(kernel, "slice_and_merge_kernel", 0))
        resource_table_add_with_shared(
            rows, threads, (long)softmax_topk_gpu_slice_and_merge_shared_bytes(1, TABLE_VOCAB, TABLE_K, H100_SXM.sms),
            "version 8, slices merged by the last block, one row, K = %d", TABLE_K);
    else if (kernel_signature_is(kernel, "radix_select_kernel", 0))
        resource_table_add(rows, threads, "version 5, radix select");
    else if (kernel_signature_is(kernel, "shared_threshold_kernel", 1))
        resource_table_add_with_shared(rows, threads, (long)softmax_topk_gpu_shared_threshold_bytes(TABLE_K),
                                       "version %d, one threshold per row%s, K = %d", 6 + kernel->arguments[0],
                                       kernel->arguments[0] ? ", draws fused" : "", TABLE_K);
    else if (kernel_signature_is(kernel, "step_floor_kernel", 0))
        resource_table_add_with_shared(rows, threads, (long)softmax_topk_gpu_step_floor_bytes(TABLE_VOCAB, TABLE_K),
                                       "version 9, the floor of the steps' maxima, V = %d, K = %d", TABLE_VOCAB,
                                       TABLE_K);
    else if (kernel_signature_is(kernel, "argmax_rows_kernel", 1))
        resource_table_add(rows, threads, "version %d, argmax%s, K = 1", 6 + kernel->arguments[0],
                           kernel->arguments[0] ? ", draws fused" : "");
}

int gpu_resources_command(int argc, char **argv)
{
    return resource_table_command(argc, argv, "softmax_topk.resources", softmax_topk_launches);
}

/* The second edition's goal for one row of V = 128K on an H100. */
#define DECODE_STEP_GOAL_S 10e-6

/* "256 + 8": the sizes of the costliest warp's sorts. */
static void sort_sizes_cell(Table *table, const DecodeStepCounts *counts)
{
    char cell[128] = "";
    size_t used = 0;
    int shown = counts->buffer_sorts < DECODE_STEP_MAX_SORTS_SHOWN ? counts->buffer_sorts : DECODE_STEP_MAX_SORTS_SHOWN;
    for (int s = 0; s < shown; s++)
        used += (size_t)snprintf(cell + used, sizeof cell - used, "%s%d", s > 0 ? " + " : "", counts->sort_sizes[s]);
    if (counts->buffer_sorts > shown)
        snprintf(cell + used, sizeof cell - used, " + %d more", counts->buffer_sorts - shown);
    table_cell(table, "%s", cell);
}

static int kernel_warps(void)
{
    return softmax_topk_gpu_threads_per_block() / 32;
}

/* One row of V = 128256, the decode step of gpu-bench: versions 4 and 8
 * at K = 1, 8 and 64, with the slices and buffers their launcher chooses
 * on an H100, counted on the benchmark's own row (decode_step_model.h). */
/* What gpu-bench measured on a GPU for `version` at this K, from the
 * chapter's results file (NaN where there is none): the microseconds of one
 * row, or the GB/s on 4096 rows of V = 128256. How the models below are set
 * beside the GPU's answer: in microseconds and bytes per second, not in
 * shares, since the model's share is of an H100's copy bandwidth and the
 * results file's of the measuring GPU's read bandwidth. */
static double measured_on_gpu(int version, int k, bool one_row)
{
    char version_text[16], k_text[16], vocab_text[16];
    snprintf(version_text, sizeof version_text, "%d", version);
    snprintf(k_text, sizeof k_text, "%d", k);
    snprintf(vocab_text, sizeof vocab_text, "%d", TABLE_VOCAB);
    Goal measured = {
        "",
        {{"version", version_text}, {"K", k_text}, {one_row ? NULL : "V", vocab_text}},
        one_row ? "microseconds (slowest–fastest)" : "GB/s",
        0,
        one_row,
        ""
    };
    return goal_figure_in("gpu-results.md", &measured);
}

/* One version's row at one K: what the model counts on the row and the
 * times it predicts. Returns the verdict against the goal; *merge_steps,
 * the steps of one merge of two lists of K. */
static const char *add_latency_row(Table *table, const float *row, int version, int k, int *merge_steps)
{
    DecodeStepKernel kernel = {version,
                               TABLE_VOCAB,
                               k,
                               softmax_topk_gpu_splits_for(1, TABLE_VOCAB, k, H100_SXM.sms),
                               softmax_topk_gpu_candidate_capacity(k),
                               kernel_warps()};
    DecodeStepCounts counts = decode_step_counts(row, kernel);
    *merge_steps = counts.merge_steps;
    double low = decode_step_seconds(&counts, &DECODE_STEP_LOW);
    double high = decode_step_seconds(&counts, &DECODE_STEP_HIGH);
    double sorts_low = decode_step_sort_seconds(&counts, &DECODE_STEP_LOW);
    double sorts_high = decode_step_sort_seconds(&counts, &DECODE_STEP_HIGH);
    table_cell(table, "%d", k);
    table_cell(table, "%d", version);
    table_cell(table, "%d of %d", kernel.splits, counts.slice_length);
    table_cell(table, "%d", counts.scan_loads);
    sort_sizes_cell(table, &counts);
    table_cell(table, "%d x %d, %d", counts.merge_rounds, counts.merge_steps, counts.block_merges);
    table_cell(table, "%d", counts.round_trips_after);
    table_cell(table, "%d", counts.kernels);
    table_cell(table, "%.0f%%, %.0f%%", 100 * sorts_low / low, 100 * sorts_high / high);
    table_cell(table, "%.1f-%.1f", low * 1e6, high * 1e6);
    double measured = measured_on_gpu(version, k, true);
    if (isnan(measured))
        table_cell(table, "-");
    else
        table_cell(table, "%.1f, %.1f× the high end", measured, measured / (high * 1e6));
    return high <= DECODE_STEP_GOAL_S  ? "within it at both ends"
           : low <= DECODE_STEP_GOAL_S ? "within it at the low costs, above it at the high"
                                       : "above it at both ends";
}

/* What the table does not show: the busiest warp's merges at K = 8, one
 * merge of two lists of the largest K, and version 8 against the goal. */
static void print_latency_notes(int largest_k, int largest_k_merge_steps, const char *const verdicts[3])
{
    int splits = softmax_topk_gpu_splits_for(1, TABLE_VOCAB, 8, H100_SXM.sms), warps = kernel_warps();
    printf("\nThe last block's merge of the %d slices at K = 8: %d merges for its busiest warp, with each "
           "round's merges dealt to the warps in turn; %d if each warp took the partials whose index is its own "
           "modulo %d.\n",
           splits, decode_step_busiest_warp_merges(splits, warps, false),
           decode_step_busiest_warp_merges(splits, warps, true), warps);
    printf("\nA merge of two lists of K = %d (warp_merge_sorted): %d steps, each a wait for shared memory; by "
           "binary searches, the merge it replaced, %d dependent shared-memory loads for each lane.\n",
           largest_k, largest_k_merge_steps, decode_step_search_merge_loads(largest_k));
    printf("\nVersion 8 against the goal of %.0f microseconds for one row, as the model predicts it: at K = 1 %s; "
           "at K = 8 %s; at K = 64 %s.\n",
           DECODE_STEP_GOAL_S * 1e6, verdicts[0], verdicts[1], verdicts[2]);
    double measured[3] = {measured_on_gpu(8, 1, true), measured_on_gpu(8, 8, true), measured_on_gpu(8, 64, true)};
    if (!isnan(measured[0]) && !isnan(measured[1]) && !isnan(measured[2]))
        printf("\nAs a GPU measured it (the results file below): at K = 1 %s, at K = 8 %s, at K = 64 %s.\n",
               measured[0] <= DECODE_STEP_GOAL_S * 1e6 ? "within it" : "above it",
               measured[1] <= DECODE_STEP_GOAL_S * 1e6 ? "within it" : "above it",
               measured[2] <= DECODE_STEP_GOAL_S * 1e6 ? "within it" : "above it");
}

int gpu_latency_command(int argc, char **argv)
{
    bool markdown = cli_parse_markdown_only(argc, argv);
    const int ks[] = {1, 8, 64}, versions[] = {4, 8};
    const char *verdicts[3];
    int merge_steps = 0; /* the loop's last K is the largest */
    float *row = bench_logits_new(TABLE_VOCAB, 1);
    const char *headers[] = {"K",
                             "version",
                             "slices",
                             "loads in sequence",
                             "entries sorted, sort by sort",
                             "merge rounds x steps, busiest warp's merges",
                             "L2 round trips after the scan",
                             "kernels",
                             "sorts' share, low and high costs",
                             "predicted microseconds",
                             "measured on a GPU, and against the prediction"};
    Table *table = TABLE_NEW(headers, "rrrrrrrrrrr");
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
            const char *verdict = add_latency_row(table, row, versions[v], ks[t], &merge_steps);
            if (versions[v] == 8)
                verdicts[t] = verdict;
        }
    }
    decode_step_print_costs(stdout);
    printf("\n");
    table_print(table, stdout, table_format_for(markdown));
    print_latency_notes(ks[sizeof ks / sizeof ks[0] - 1], merge_steps, verdicts);
    table_free(table);
    array_free(row);
    return 0;
}

/* ---- gpu-slow-paths: versions 6 and 9, the budget with the slow paths --- */

enum { SLOW_PATH_ROWS = 16, GOAL_ROWS_LARGE = 4096, GOAL_ROWS_SMALL = 1024 };

/* The GPU goal of the fused kernels: 85% of the copy bandwidth. */
#define BANDWIDTH_GOAL 0.85

typedef struct {
    const KernelResources *resources;
    const SassKernel *code;
} RecordedKernel;

/* A kernel of the build's records by its function's name (a template's
 * first argument 0, if it has one: no sampling). */
static RecordedKernel find_kernel(const KernelResourceList *record, const SassRecord *code, const char *function)
{
    RecordedKernel found = {0};
    for (int i = 0; i < record->count; i++) {
        KernelSignature signature;
        if (!kernel_signature_parse(record->kernels[i].name, &signature))
            continue;
        bool templated = kernel_signature_is(&signature, function, 1) && signature.arguments[0] == 0;
        if (templated || kernel_signature_is(&signature, function, 0)) {
            found.resources = &record->kernels[i];
            found.code = sass_record_find(code, record->kernels[i].name);
        }
    }
    if (found.resources == NULL || found.code == NULL)
        cli_fail("%s is not in the records", function);
    return found;
}

/* Version 6's kernel for k: the argmax at k = 1. */
static RecordedKernel find_version_6(const KernelResourceList *record, const SassRecord *code, int k)
{
    return find_kernel(record, code, k == 1 ? "argmax_rows_kernel" : "shared_threshold_kernel");
}

static SlowPathCosts costs_of(const RecordedKernel *kernel, int k)
{
    const SassSteadyState *steady = &kernel->code->steady;
    SlowPathCosts costs = {.fast_path = steady->instructions,
                           .straight_slow = steady->instructions_on_all_paths - steady->instructions};
    char why[256];
    if (k > 1 && !slow_path_costs_read(steady, &costs, why, sizeof why))
        cli_fail("version 6, K = %d: %s", k, why);
    if (k == 1 && steady->inner_loop_count > 0)
        cli_fail("version 6, K = 1: the argmax's steady state has %d loops in its body, none expected",
                 steady->inner_loop_count);
    return costs;
}

/* One row of the benchmark's logits, replayed as a GPU runs it. */
static SlowPathCounts replay_row(const float *row, int k)
{
    int warps = softmax_topk_gpu_warps_per_row(TABLE_VOCAB);
    if (k == 1)
        return argmax_slow_paths_replay(row, 1, TABLE_VOCAB, warps);
    SharedThresholdKernel kernel = {TABLE_VOCAB, k, warps, softmax_topk_gpu_kept_size(k),
                                    softmax_topk_gpu_fresh_size(k)};
    return slow_paths_replay(row, 1, kernel, WARPS_IN_STEP);
}

static void add_counts(SlowPathCounts *sum, const SlowPathCounts *c)
{
    sum->rows += c->rows;
    sum->steps += c->steps;
    sum->offer_steps += c->offer_steps;
    sum->merges += c->merges;
    sum->sorted_entries += c->sorted_entries;
    sum->revisited_steps += c->revisited_steps;
}

typedef struct {
    double fewest, most;  /* instructions per 16 bytes of the row over the rows replayed */
    double all, in_loops; /* instructions of all the rows, and of their merges' loops */
    SlowPathCounts sum;
} ReplayedRows;

/* Version 6 (scan_fast_path 0) or version 9 (its scan's fast path; the
 * revisits at version 6's costs). */
static ReplayedRows replay_rows(const float *logits, int k, const SlowPathCosts *costs, int scan_fast_path)
{
    ReplayedRows r = {.fewest = 1e300, .most = 0};
    SharedThresholdKernel kernel = {TABLE_VOCAB, k, softmax_topk_gpu_warps_per_row(TABLE_VOCAB),
                                    softmax_topk_gpu_kept_size(k), softmax_topk_gpu_fresh_size(k)};
    for (int row = 0; row < SLOW_PATH_ROWS; row++) {
        const float *x = logits + (size_t)row * TABLE_VOCAB;
        SlowPathCounts c = scan_fast_path > 0 ? step_floor_replay(x, 1, kernel, WARPS_IN_STEP) : replay_row(x, k);
        double all =
            scan_fast_path > 0 ? step_floor_instructions(&c, scan_fast_path, costs) : slow_path_instructions(&c, costs);
        double per_16_bytes = all / (double)c.steps;
        r.fewest = per_16_bytes < r.fewest ? per_16_bytes : r.fewest;
        r.most = per_16_bytes > r.most ? per_16_bytes : r.most;
        add_counts(&r.sum, &c);
        r.all += all;
        r.in_loops += slow_path_loop_instructions(&c, costs);
    }
    return r;
}

/* A row of the table: version 6's kernel, or version 9's (step_floor) with
 * version 6's costs for its revisits. The bytes a revisit reads again
 * come from DRAM (the rows in flight are more than the L2): in flight
 * allows less by the share they add. */
static void slow_path_row(Table *table, int k, const RecordedKernel *kernel, const SlowPathCosts *costs,
                          bool step_floor, const float *logits, double *worst)
{
    const int scan_fast_path = step_floor ? kernel->code->steady.instructions : 0;
    ReplayedRows r = replay_rows(logits, k, costs, scan_fast_path);
    long dynamic_shared = step_floor ? (long)softmax_topk_gpu_step_floor_bytes(TABLE_VOCAB, k)
                                     : (long)softmax_topk_gpu_shared_threshold_bytes(k);
    Occupancy o = occupancy_compute(&SM90_LIMITS, softmax_topk_gpu_threads_per_block(), kernel->resources->registers,
                                    kernel->resources->shared_bytes + dynamic_shared);
    InstructionBudget fast = instruction_budget(&H100_SXM, &kernel->code->steady, o.warps_per_sm);
    const int fast_path = step_floor ? scan_fast_path : costs->fast_path;
    /* Issue allows in inverse proportion to the instructions per byte. */
    double issue = fast.issue_fraction * fast_path / r.most;
    double rows = (double)r.sum.rows, reread = (double)r.sum.revisited_steps / (double)r.sum.steps;
    double in_flight = fast.in_flight_fraction / (1 + reread);
    double ceiling = issue < in_flight ? issue : in_flight;
    ceiling = ceiling < 1 ? ceiling : 1;
    int rows_per_block = softmax_topk_gpu_threads_per_block() / 32 / softmax_topk_gpu_warps_per_row(TABLE_VOCAB);
    int slots = H100_SXM.sms * o.blocks_per_sm * rows_per_block;
    table_cell(table, "%d", step_floor ? 9 : 6);
    table_cell(table, "%d", k);
    if (step_floor)
        table_cell(table, "%.0f, %.1f%%", r.sum.revisited_steps / rows, 100 * reread);
    else
        table_cell(table, "-");
    table_cell(table, "%.0f of %.0f", r.sum.offer_steps / rows, r.sum.steps / rows);
    table_cell(table, "%.1f, %.0f", r.sum.merges / rows, r.sum.sorted_entries / rows);
    table_cell(table, "%d", fast_path);
    table_cell(table, "%.1f-%.1f", r.fewest, r.most);
    table_cell(table, "%.0f%%", 100 * r.in_loops / r.all);
    table_cell(table, "%.0f%%", 100 * issue);
    table_cell(table, "%.0f%%", 100 * in_flight);
    table_cell(table, "%d x %d", H100_SXM.sms, o.blocks_per_sm * rows_per_block);
    const int batches[] = {GOAL_ROWS_LARGE, GOAL_ROWS_SMALL};
    double predicted[2];
    for (int b = 0; b < 2; b++) {
        predicted[b] = slow_paths_batch_share(batches[b], slots, ceiling, in_flight);
        table_cell(table, "%.0f%%", 100 * predicted[b]);
        *worst = predicted[b] < *worst ? predicted[b] : *worst;
    }
    double measured_gbs = measured_on_gpu(step_floor ? 9 : 6, k, false);
    double predicted_gbs = predicted[0] * H100_SXM.copy_bytes_per_s * 1e-9;
    if (isnan(measured_gbs))
        table_cell(table, "-");
    else
        table_cell(table, "%.0f, %.2f× the %.0f predicted", measured_gbs, measured_gbs / predicted_gbs, predicted_gbs);
}

static void print_slow_path_model(void)
{
    printf("The model: %s as in the budget table; version 6's steps replayed on the first %d rows of gpu-bench's "
           "logits (V = %d), a row's %d warps in step; each loop of a merge costed at its whole body per iteration "
           "and each slow pass at all the straight-line code of the scan's body (upper bounds, so the shares are "
           "lower bounds on what issue allows), the merges after the scan as those in it; the bytes in flight of a "
           "full GPU; whole waves of rows at the prediction, and a partial last wave at what its rows' bytes in flight "
           "allow. Version 9: its scan at the fast path of its own steady "
           "state, its floor's rounds not counted, its revisits as version 6's steps at version 6's costs, and the "
           "bytes they read again from DRAM.\n\n",
           H100_SXM.name, SLOW_PATH_ROWS, TABLE_VOCAB, softmax_topk_gpu_warps_per_row(TABLE_VOCAB));
}

/* Versions 6 and 9 at each K, costed from their machine code on the
 * benchmark's rows; *worst and *worst_9, each version's lowest share of the
 * copy bandwidth. Version 9 runs version 6's argmax at K = 1: that row
 * counts for both. */
static Table *slow_paths_table(const KernelResourceList *record, const SassRecord *code, const float *logits,
                               double *worst, double *worst_9)
{
    const char *headers[] = {"version",
                             "K",
                             "steps read again per row, bytes added",
                             "offer steps per row, of steps",
                             "merges per row, entries sorted",
                             "fast path per 16 bytes",
                             "all paths per 16 bytes (rows' range)",
                             "in the merges' loops",
                             "issue allows (costliest row)",
                             "in flight allows",
                             "rows at once (SMs x per SM)",
                             "predicted, 4096 rows",
                             "predicted, 1024 rows",
                             "measured GB/s on a GPU, 4096 rows, against the prediction's"};
    Table *table = TABLE_NEW(headers, "rrrrrrrrrrrrrr");
    const int ks[] = {1, 8, 64};
    *worst = *worst_9 = 1;
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        RecordedKernel kernel = find_version_6(record, code, ks[t]);
        SlowPathCosts costs = costs_of(&kernel, ks[t]);
        double worst_of_row = 1;
        slow_path_row(table, ks[t], &kernel, &costs, false, logits, &worst_of_row);
        *worst = worst_of_row < *worst ? worst_of_row : *worst;
        if (ks[t] == 1)
            *worst_9 = worst_of_row;
    }
    RecordedKernel step_floor = find_kernel(record, code, "step_floor_kernel");
    for (size_t t = 1; t < sizeof ks / sizeof ks[0]; t++) {
        RecordedKernel revisit = find_version_6(record, code, ks[t]);
        SlowPathCosts costs = costs_of(&revisit, ks[t]);
        slow_path_row(table, ks[t], &step_floor, &costs, true, logits, worst_9);
    }
    return table;
}

int gpu_slow_paths_command(int argc, char **argv)
{
    bool markdown = cli_parse_markdown_only(argc, argv);
    const char *record_path = "softmax_topk.resources", *sass_path = "softmax_topk.sass";
    KernelResourceList record;
    SassRecord code;
    char err[CLI_MESSAGE_SIZE];
    if (kernel_resources_read(record_path, &record, err, sizeof err) != 0)
        cli_fail("%s (run it in the chapter's directory)", err);
    if (sass_record_read(sass_path, &code, err, sizeof err) != 0) {
        kernel_resources_free(&record);
        printf("No machine code was recorded (./configure --sass-tools keeps it), so there are no costs to "
               "count.\n");
        return 0;
    }
    float *logits = bench_logits_new((size_t)SLOW_PATH_ROWS * TABLE_VOCAB, 1);
    double worst, worst_9;
    Table *table = slow_paths_table(&record, &code, logits, &worst, &worst_9);
    print_slow_path_model();
    table_print(table, stdout, table_format_for(markdown));
    printf("\nAgainst the goal of %.0f%% of the copy bandwidth: the lowest prediction above for version 6 is %.0f%%, "
           "%s; for version 9 (at K = 1 version 6's argmax) %.0f%%, %s.\n",
           100 * BANDWIDTH_GOAL, 100 * worst, worst >= BANDWIDTH_GOAL ? "within it" : "short of it", 100 * worst_9,
           worst_9 >= BANDWIDTH_GOAL ? "within it" : "short of it");
    table_free(table);
    array_free(logits);
    sass_record_free(&code);
    kernel_resources_free(&record);
    return 0;
}
