#include "chapters/02-layernorm/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "chapters/02-layernorm/gpu_device.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/results.h"
#include "kernels/layernorm.h"

const char *gpu_run_problem(LnProblem *p, int forward, int backward, int misalign)
{
    DeviceProblem *g = device_problem_new(p->n, p->d, misalign);
    device_problem_upload(g, p);
    const char *why = device_problem_forward(g, forward, p->eps);
    if (why == NULL)
        why = device_problem_backward(g, backward);
    if (why == NULL)
        device_problem_download(g, p);
    device_problem_free(g);
    return why;
}

// ANCHOR: choose_shapes_that_break_kernels
const GpuCheckShape gpu_check_shapes[] = {
    {1823, 781,   0, "irregular: d not a multiple of 4 (single floats), n not a multiple of any block"},
    {1823, 781,   1, "the same, every array one float off 16-byte alignment"                          },
    {257,  1024,  0, "16-byte vectors, one vector per thread"                                         },
    {256,  1024,  3, "d a multiple of 4 but rows misaligned: single floats"                           },
    {33,   4096,  0, "wide rows: 2 vectors per thread"                                                },
    {7,    8192,  0, "large d: 4 vectors per thread"                                                  },
    {3,    20000, 0, "8 vectors per thread in blocks of 640 threads"                                  },
    {100,  1,     0, "d = 1: xhat = 0, dx = 0"                                                        },
    {5,    3,     0, "fewer values than a warp has lanes"                                             },
    {1,    768,   0, "a single row: one block sums all of dgamma"                                     },
    {4097, 768,   0, "more rows than backward 2 has blocks"                                           },
};
// ANCHOR_END: choose_shapes_that_break_kernels
const int gpu_check_shape_count = sizeof gpu_check_shapes / sizeof gpu_check_shapes[0];

/* The output that used the largest share of its tolerance. */
static const char *worst_output(const LnComparison *c, double *share)
{
    const CloseReport *reports[] = {&c->y, &c->mean, &c->rstd, &c->dx, &c->dgamma, &c->dbeta};
    const char *names[] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
    int worst = 0;
    for (int i = 1; i < 6; i++)
        if (!(reports[i]->tolerance_used <= reports[worst]->tolerance_used))
            worst = i;
    *share = reports[worst]->tolerance_used;
    return names[worst];
}

static bool check_problem(LnProblem *p, const char *label, int forward, int backward, int misalign, FILE *out)
{
    LnReference ref = ln_reference_compute(p);
    const char *why = gpu_run_problem(p, forward, backward, misalign);
    bool ok = true;
    if (why != NULL) {
        /* A version refusing a row it cannot hold does what it promises. */
        fprintf(out, "skip forward %d, backward %d, %s: %s\n", forward, backward, label, why);
    } else {
        LnComparison c = ln_compare(p, &ref);
        double share;
        const char *worst = worst_output(&c, &share);
        fprintf(out, "%s forward %d, backward %d, %s: worst %s at %.0f%% of tolerance\n", c.ok ? "ok  " : "FAIL",
                forward, backward, label, worst, 100.0 * share);
        if (!c.ok)
            ln_comparison_print(out, "    ", &c);
        ok = c.ok;
    }
    ln_reference_free(&ref);
    return ok;
}

bool gpu_check_versions(const GpuCheckShape *shape, int forward, int backward, uint64_t seed, FILE *out)
{
    LnProblem p = ln_problem_new(shape->n, shape->d, 1e-5f);
    ln_problem_fill_random(&p, seed, 0.0, 1.0);
    char label[96];
    snprintf(label, sizeof label, "%zu x %zu%s", shape->n, shape->d, shape->misalign ? ", misaligned" : "");
    bool ok = check_problem(&p, label, forward, backward, shape->misalign, out);
    ln_problem_free(&p);
    return ok;
}

/* --kernel N: forward N and backward min(N, 2); 0: all of them. */
static int first_version(int kernel, int versions)
{
    return kernel == 0 ? 1 : (kernel < versions ? kernel : versions);
}

static int last_version(int kernel, int versions)
{
    return kernel == 0 ? versions : first_version(kernel, versions);
}

static bool validate_all(const GpuOptions *o)
{
    bool ok = true;
    for (int s = 0; s < gpu_check_shape_count; s++)
        for (int f = first_version(o->kernel, LAYERNORM_FORWARD_VERSIONS);
             f <= last_version(o->kernel, LAYERNORM_FORWARD_VERSIONS); f++)
            for (int b = first_version(o->kernel, LAYERNORM_BACKWARD_VERSIONS);
                 b <= last_version(o->kernel, LAYERNORM_BACKWARD_VERSIONS); b++)
                ok = gpu_check_versions(&gpu_check_shapes[s], f, b, o->seed, stdout) && ok;
    return ok;
}

/* The --n x --d (or --load) problem with the highest versions asked for;
 * --save writes their results. */
static bool run_one_problem(const GpuOptions *o)
{
    LnProblem p;
    if (o->load != NULL) {
        p = ln_problem_load(o->load, o->eps);
    } else {
        p = ln_problem_new(o->n, o->d, o->eps);
        ln_problem_fill_random(&p, o->seed, 0.0, 1.0);
    }
    char label[96];
    snprintf(label, sizeof label, "%zu x %zu%s", p.n, p.d, o->load != NULL ? " (loaded)" : "");
    bool ok = check_problem(&p, label, last_version(o->kernel, LAYERNORM_FORWARD_VERSIONS),
                            last_version(o->kernel, LAYERNORM_BACKWARD_VERSIONS), 0, stdout);
    if (o->save != NULL) {
        ln_problem_save(&p, o->save);
        printf("saved the GPU results to %s/*.npy\n", o->save);
    }
    ln_problem_free(&p);
    return ok;
}

// ANCHOR: benchmark_on_the_gpu
typedef struct {
    bool forward;
    int version;
    double bytes_per_element; /* read x + write y; read x, dy + write dx */
} GpuBenchRow;

/* 512 MiB: ten times an H200's 50 MB L2, so the kernels stream from HBM. */
#define GPU_BENCH_TENSOR_BYTES ((size_t)512 << 20)

static const GpuBenchRow gpu_bench_rows[] = {
    {true,  1, 8 },
    {true,  2, 8 },
    {true,  3, 8 },
    {false, 1, 12},
    {false, 2, 12},
};

/* Time every version at each width and fill a table; `copy` is the
 * device-to-device bandwidth measured in the same run. */
static Table *bench_table(int runs, double copy)
{
    const size_t widths[] = {768, 1024, 4096};
    const char *headers[] = {"pass", "version", "d", "rows", "time", "GB/s", "of copy", "vs version 1"};
    Table *table = table_new(8, headers, "lrrrrrrr");
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t d = widths[w], n = GPU_BENCH_TENSOR_BYTES / sizeof(float) / d;
        DeviceProblem *g = device_problem_new(n, d, 0);
        device_problem_fill_pattern(g);
        double baseline = 0.0;
        for (size_t r = 0; r < sizeof gpu_bench_rows / sizeof gpu_bench_rows[0]; r++) {
            const GpuBenchRow *row = &gpu_bench_rows[r];
            double seconds = device_problem_time(g, row->forward, row->version, runs);
            if (seconds < 0)
                cli_fail_status(1, "%s %d refused %zu x %zu", row->forward ? "forward" : "backward", row->version, n,
                                d);
            double gbs = gb_per_s(row->bytes_per_element * (double)(n * d), seconds);
            if (row->version == 1)
                baseline = seconds;
            table_cell(table, "%s", row->forward ? "forward" : "backward");
            table_cell(table, "%d", row->version);
            table_cell(table, "%zu", d);
            table_cell(table, "%zu", n);
            table_cell(table, "%.3f ms", 1e3 * seconds);
            table_cell(table, "%.0f", gbs);
            table_cell(table, "%.0f%%", 100.0 * gbs / copy);
            table_cell(table, "%.1fx", baseline / seconds);
        }
        device_problem_free(g);
    }
    return table;
}

static void print_bench(FILE *out, const Table *table, TableFormat format, int runs, double copy)
{
    fprintf(out, "Each n x d tensor %zu MiB; median of %d runs; device-to-device copy %.0f GB/s in the same run.\n\n",
            GPU_BENCH_TENSOR_BYTES >> 20, runs, copy);
    table_print(table, out, format);
}

/* Measure once; print the table, and write the same table to the results
 * file, stamped with the device, the date and the commit. */
static void bench(const GpuOptions *o, const char *device)
{
    int runs = o->quick ? 5 : 20;
    double copy = cuda_copy_bandwidth_gbs(GPU_BENCH_TENSOR_BYTES);
    Table *table = bench_table(runs, copy);
    print_bench(stdout, table, o->format, runs, copy);
    if (o->results != NULL) {
        FILE *file = results_create(o->results);
        results_stamp(file, device, results_commit(o->commit));
        fprintf(file, "\n");
        print_bench(file, table, TABLE_MARKDOWN, runs, copy);
        if (fclose(file) != 0)
            cli_fail_status(1, "--results %s: cannot write the file", o->results);
        printf("\nwrote %s\n", o->results);
    }
    table_free(table);
}
// ANCHOR_END: benchmark_on_the_gpu

int gpu_main(const GpuOptions *o)
{
    if (!cuda_device_available())
        cli_fail("--gpu: no CUDA device available");
    char device[256];
    cuda_device_describe(device, sizeof device);
    printf("%s\n", device);
    bool ok = validate_all(o);
    ok = run_one_problem(o) && ok;
    if (!ok) {
        printf("some kernels do not match the reference: nothing is timed\n");
        return 1;
    }
    if (o->bench) {
        printf("\n");
        bench(o, device);
    }
    return 0;
}
