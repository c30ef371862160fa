#include "chapters/02-layernorm/bench_cpu.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "chapters/02-layernorm/layernorm.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "common/alloc.h"
#include "common/bench.h"

typedef struct {
    size_t n, d;
    float *x, *y, *dy, *dx; /* n x d */
    float *gamma, *beta, *dgamma, *dbeta, *mean, *rstd, *scratch;
} BenchArrays;

static void run_forward(void *context)
{
    BenchArrays *a = context;
    layernorm_forward_f32(a->y, a->mean, a->rstd, a->x, a->gamma, a->beta, a->n, a->d, 1e-5f);
}

static void run_backward(void *context)
{
    BenchArrays *a = context;
    layernorm_backward_f32(a->dx, a->dgamma, a->dbeta, a->scratch, a->dy, a->x, a->mean, a->rstd, a->gamma, a->n, a->d);
}

static void run_rms_forward(void *context)
{
    BenchArrays *a = context;
    rmsnorm_forward_f32(a->y, a->rstd, a->x, a->gamma, a->n, a->d, 1e-5f);
}

static void run_rms_backward(void *context)
{
    BenchArrays *a = context;
    rmsnorm_backward_f32(a->dx, a->dgamma, a->scratch, a->dy, a->x, a->rstd, a->gamma, a->n, a->d);
}

/* Values that vary, cheaply: the speed does not depend on them, as long as
 * they are ordinary numbers (no subnormals). Written by the threads that
 * will read them, so that each page sits next to its thread's cores. */
static void fill_in_parallel(float *values, size_t count, float scale)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++)
        values[i] = scale * (float)((i * 2654435761u) % 1024 - 512) / 512.0f;
}

static void set_threads(int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

/* The CPU's name from /proc/cpuinfo, or "unknown CPU". */
static void cpu_name(char *name, size_t size)
{
    snprintf(name, size, "unknown CPU");
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (file == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, file) != NULL) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            snprintf(name, size, "%s", colon + 2);
            name[strcspn(name, "\n")] = '\0';
            break;
        }
    }
    fclose(file);
}

static void add_memcpy_row(Table *table, int threads, const char *when, double gbs)
{
    table_cell(table, "%d", threads);
    table_cell(table, "memcpy, %s", when);
    table_cell(table, "%s", "");
    table_cell(table, "%s", "");
    table_cell(table, "%.1f", gbs);
    table_cell(table, "%s", "");
    table_cell(table, "%s", "");
}

typedef struct {
    const char *pass;
    void (*body)(void *context);
    double bytes_per_element; /* read x + write y; read x, dy + write dx */
} Pass;

// ANCHOR: benchmark_against_memcpy
/* memcpy is measured before and after the kernels, with the same threads,
 * and each kernel is compared with the mean of the two: on a machine
 * shared with other work the two differ, and the table then shows it.
 * (--quick measures it before only: each probe copies a fresh gigabyte.) */
void bench_cpu_print(FILE *out, TableFormat format, bool quick)
{
    const size_t widths[] = {768, 1024, 4096};
    const Pass passes[] = {
        {"layer norm forward",  run_forward,      2 * sizeof(float)},
        {"layer norm backward", run_backward,     3 * sizeof(float)},
        {"RMSNorm forward",     run_rms_forward,  2 * sizeof(float)},
        {"RMSNorm backward",    run_rms_backward, 3 * sizeof(float)},
    };
    enum { PASSES = sizeof passes / sizeof passes[0] };
    const int timed_runs = quick ? 5 : 7;
    size_t bytes = bench_large_bytes(), count = bytes / sizeof(float);
    int thread_counts[] = {1, bench_max_threads()};
    BenchArrays a = {0};
    float **tensors[] = {&a.x, &a.y, &a.dy, &a.dx};
    set_threads(thread_counts[1]);
    for (size_t i = 0; i < 4; i++) {
        *tensors[i] = array_alloc_uninitialized(count, sizeof(float));
        fill_in_parallel(*tensors[i], count, 1.0f);
    }
    char name[160];
    cpu_name(name, sizeof name);
    fprintf(out,
            "%s: %d threads, last-level cache %zu MiB; each n x d tensor %zu MiB, median of %d runs, in brackets "
            "the slowest and the fastest.\n\n",
            name, thread_counts[1], bench_llc_bytes() >> 20, bytes >> 20, timed_runs);
    const char *headers[] = {"threads", "pass", "d", "rows", "GB/s", "elements/s", "of memcpy (range)"};
    Table *table = table_new(7, headers, "rlrrrrr");
    for (int t = 0; t < 2 && (t == 0 || thread_counts[1] != thread_counts[0]); t++) {
        int threads = thread_counts[t];
        set_threads(threads);
        double copy_before = memcpy_bandwidth_gbs(bytes, threads);
        add_memcpy_row(table, threads, "before", copy_before);
        BenchStats kernel_stats[3][PASSES];
        for (size_t w = 0; w < 3; w++) {
            a.d = widths[w];
            a.n = count / a.d;
            float **per_width[] = {&a.gamma, &a.beta, &a.dgamma, &a.dbeta, &a.mean, &a.rstd, &a.scratch};
            /* layer norm's scratch (dgamma and dbeta) holds RMSNorm's (dgamma) too */
            size_t counts[] = {a.d, a.d, a.d, a.d, a.n, a.n, layernorm_backward_f32_scratch_floats(a.n, a.d)};
            for (size_t i = 0; i < 7; i++)
                *per_width[i] = ALLOC_ARRAY(float, counts[i]);
            fill_in_parallel(a.gamma, a.d, 1.0f);
            for (int p = 0; p < PASSES; p++)
                kernel_stats[w][p] = bench_run(passes[p].body, &a, 1, timed_runs);
            for (size_t i = 0; i < 7; i++)
                array_free(*per_width[i]);
        }
        double copy_after = quick ? copy_before : memcpy_bandwidth_gbs(bytes, threads);
        double copy = 0.5 * (copy_before + copy_after);
        for (size_t w = 0; w < 3; w++)
            for (int p = 0; p < PASSES; p++) {
                size_t rows = count / widths[w];
                double elements = (double)(rows * widths[w]), moved = passes[p].bytes_per_element * elements;
                table_cell(table, "%d", threads);
                table_cell(table, "%s", passes[p].pass);
                table_cell(table, "%zu", widths[w]);
                table_cell(table, "%zu", rows);
                table_cell(table, "%.1f", gb_per_s(moved, kernel_stats[w][p].median));
                table_cell(table, "%.2e", elements / kernel_stats[w][p].median);
                bench_share_cell(table, moved, kernel_stats[w][p], copy);
            }
        if (!quick)
            add_memcpy_row(table, threads, "after", copy_after);
    }
    table_print(table, out, format);
    table_free(table);
    for (size_t i = 0; i < 4; i++)
        array_free(*tensors[i]);
}
// ANCHOR_END: benchmark_against_memcpy
