#include "chapters/03-softmax-topk/gpu.h"

#include <stdio.h>

#include "common/cli.h"
#include "common/results.h"

#ifdef HAVE_CUDA

#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/compare.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cuda_util.h"
#include "kernels/softmax_topk_gpu.h"

void gpu_require(void)
{
    if (!cuda_device_available()) {
        cli_fail("--gpu: no CUDA device found");
    }
}

const char *gpu_kernel_name(int kernel)
{
    return softmax_topk_gpu_name(kernel);
}

void gpu_softmax_topk(int kernel, const float *logits, size_t rows, size_t vocab, int k, float *probs, int64_t *indices)
{
    SoftmaxTopkGpuConfig config = {0, 0};
    char err[256];
    if (softmax_topk_gpu(kernel, logits, rows, vocab, k, &config, probs, indices, err, sizeof err) != 0) {
        cli_fail("--kernel %d: %s", kernel, err);
    }
}

enum { BENCH_ROWS = 4096, QUICK_ROWS = 1024, TIMED_LAUNCHES = 21, VALIDATED_ROWS = 16 };

typedef struct {
    const float *logits;
    size_t rows, vocab;
    int k;
} GpuCase;

/* One kernel on one case: validated on VALIDATED_ROWS rows spread over the
 * batch, then timed. Returns the median ms, or -1 if the results are wrong. */
static double validated_time_ms(int kernel, const GpuCase *c, char *why, size_t why_size)
{
    SoftmaxTopkGpuConfig config = {0, 0};
    char err[256];
    SoftmaxTopkGpuRun *run =
        softmax_topk_gpu_run_new(kernel, c->logits, c->rows, c->vocab, c->k, &config, err, sizeof err);
    if (run == NULL) {
        cli_fail_status(1, "kernel %d: %s", kernel, err);
    }
    size_t outputs = c->rows * (size_t)c->k;
    float *probs = ALLOC_ARRAY(float, outputs);
    int64_t *indices = ALLOC_ARRAY(int64_t, outputs);
    softmax_topk_gpu_run_once(run, probs, indices);
    size_t step = c->rows > VALIDATED_ROWS ? c->rows / VALIDATED_ROWS : 1;
    TopkComparison check =
        compare_with_reference(c->logits, c->rows, step, c->vocab, c->k, probs, indices, topk_rtol_gpu(c->vocab));
    double ms = -1.0;
    if (check.wrong_indices + check.wrong_probs == 0) {
        ms = softmax_topk_gpu_run_time_ms(run, TIMED_LAUNCHES);
    } else {
        snprintf(why, why_size, "%s", check.first_mismatch);
    }
    array_free(probs);
    array_free(indices);
    softmax_topk_gpu_run_free(run);
    return ms;
}

static Table *batch_table(const float *logits, size_t rows, const size_t *vocabs, size_t vocab_count, double copy_gbs)
{
    const int ks[] = {1, 8, 64, 256, 1024};
    const char *headers[] = {"V", "K", "kernel", "ms", "GB/s", "of copy bandwidth", "vs kernel 1"};
    Table *table = table_new(7, headers, "rrrrrrr");
    for (size_t v = 0; v < vocab_count; v++) {
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            GpuCase c = {logits, rows, vocabs[v], ks[t]};
            double naive_ms = -1.0;
            for (int kernel = 1; kernel <= GPU_KERNEL_COUNT; kernel++) {
                if (ks[t] > softmax_topk_gpu_max_k(kernel)) {
                    continue;
                }
                char why[200] = "";
                double ms = validated_time_ms(kernel, &c, why, sizeof why);
                table_cell(table, "%zu", c.vocab);
                table_cell(table, "%d", c.k);
                table_cell(table, "%d", kernel);
                if (ms < 0.0) {
                    table_cell(table, "WRONG: %s", why);
                    table_cell(table, "-");
                    table_cell(table, "-");
                    table_cell(table, "-");
                    continue;
                }
                double gbs = (double)(rows * c.vocab * sizeof(float)) / (ms * 1e-3) * 1e-9;
                naive_ms = kernel == 1 ? ms : naive_ms;
                table_cell(table, "%.3f", ms);
                table_cell(table, "%.0f", gbs);
                table_cell(table, "%.0f%%", 100.0 * gbs / copy_gbs);
                if (naive_ms > 0.0) {
                    table_cell(table, "%.1fx", naive_ms / ms);
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
static Table *decode_step_table(const float *logits)
{
    const int ks[] = {1, 8, 64};
    const char *headers[] = {"K", "kernel", "microseconds"};
    Table *table = table_new(3, headers, "rrr");
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        GpuCase c = {logits, 1, 128256, ks[t]};
        for (int kernel = 1; kernel <= GPU_KERNEL_COUNT; kernel++) {
            if (ks[t] > softmax_topk_gpu_max_k(kernel)) {
                continue;
            }
            char why[200] = "";
            double ms = validated_time_ms(kernel, &c, why, sizeof why);
            table_cell(table, "%d", c.k);
            table_cell(table, "%d", kernel);
            if (ms < 0.0) {
                table_cell(table, "WRONG: %s", why);
            } else {
                table_cell(table, "%.1f", ms * 1e3);
            }
        }
    }
    return table;
}

static void print_stamp(FILE *out, const char *device, const char *commit, double copy_gbs, size_t rows)
{
    results_stamp(out, device, commit);
    fprintf(out,
            "device-to-device copy bandwidth: %.0f GB/s (read + write), measured in this run; "
            "%zu rows, each kernel validated against the double reference before timing, median of %d launches\n\n",
            copy_gbs, rows, TIMED_LAUNCHES);
}

void gpu_bench(bool quick, const char *results_path, const char *commit, TableFormat format)
{
    gpu_require();
    const size_t all_vocabs[] = {32000, 50257, 128256, 151936}, quick_vocabs[] = {128256};
    size_t rows = quick ? QUICK_ROWS : BENCH_ROWS, vocab_count = quick ? 1 : 4;
    const size_t *vocabs = quick ? quick_vocabs : all_vocabs;
    commit = results_commit(commit);
    char device[256];
    cuda_device_describe(device, sizeof device);
    float *logits = bench_logits_new(rows * all_vocabs[3], bench_max_threads());
    double copy_gbs = cuda_copy_bandwidth_gbs(rows * all_vocabs[3] * sizeof(float));
    print_stamp(stdout, device, commit, copy_gbs, rows);
    Table *batch = batch_table(logits, rows, vocabs, vocab_count, copy_gbs);
    Table *decode = decode_step_table(logits);
    table_print(batch, stdout, format);
    printf("\none row (a decode step), V = 128256:\n\n");
    table_print(decode, stdout, format);
    if (results_path != NULL) {
        FILE *out = results_create(results_path);
        fprintf(out, "GPU results of softmax_topk --gpu --bench%s\n\n", quick ? " --quick" : "");
        print_stamp(out, device, commit, copy_gbs, rows);
        table_print(batch, out, TABLE_MARKDOWN);
        fprintf(out, "\nOne row (a decode step), V = 128256:\n\n");
        table_print(decode, out, TABLE_MARKDOWN);
        fclose(out);
        printf("\nwrote %s\n", results_path);
    }
    table_free(batch);
    table_free(decode);
    array_free(logits);
}

#else

static _Noreturn void no_cuda(void)
{
    cli_fail("--gpu: this program was built without CUDA");
}

void gpu_require(void)
{
    no_cuda();
}

const char *gpu_kernel_name(int kernel)
{
    (void)kernel;
    no_cuda();
}

void gpu_softmax_topk(int kernel, const float *logits, size_t rows, size_t vocab, int k, float *probs, int64_t *indices)
{
    (void)kernel, (void)logits, (void)rows, (void)vocab, (void)k, (void)probs, (void)indices;
    no_cuda();
}

void gpu_bench(bool quick, const char *results_path, const char *commit, TableFormat format)
{
    (void)quick, (void)results_path, (void)commit, (void)format;
    no_cuda();
}

#endif
