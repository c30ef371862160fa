/* The GPU row statistics against the quadruple-precision CPU reference, and
 * their timing. Compiled in CUDA builds only: without CUDA, gpu.h names
 * cli_without_cuda in place of each subcommand. */
#include "chapters/01-cancellation/gpu.h"

#include <float.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/results.h"
#include "common/rng.h"
#include "common/table.h"
#include "kernels/welford_gpu.h"

const GpuCheckShape gpu_check_shapes[] = {
    {1823, 781,    256,  "irregular rows and columns"},
    {7,    5,      32,   "fewer columns than threads"},
    {3,    1,      64,   "one column"                },
    {5,    1000,   100,  "block not a multiple of 32"},
    {64,   300,    33,   "a last warp of one thread" },
    {9,    37,     1,    "one thread per row"        },
    {33,   4096,   1024, "the largest block"         },
    {2,    100000, 96,   "long rows"                 },
};
const int gpu_check_shape_count = (int)(sizeof gpu_check_shapes / sizeof gpu_check_shapes[0]);

bool check_gpu_rows(const GpuCheckShape *shape, uint64_t seed, FILE *out)
{
    size_t rows = shape->rows, cols = shape->cols;
    float *x = ALLOC_ARRAY(rows * cols, float);
    float *mean = ALLOC_ARRAY(rows, float), *variance = ALLOC_ARRAY(rows, float);
    double *exact_mean = ALLOC_ARRAY(rows, double), *exact_variance = ALLOC_ARRAY(rows, double);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, x, rows * cols, GPU_CHECK_OFFSET, DATA_SPREAD);
    for (size_t r = 0; r < rows; r++) {
        VarianceReference reference = variance_reference_f32(x + r * cols, cols);
        exact_mean[r] = reference.mean;
        exact_variance[r] = reference.variance;
    }

    const char *why = welford_rows_gpu(x, rows, cols, shape->threads, mean, variance);

    /* The results are rounded to float (relative error u = 2^-24); the double
     * states add at most the Welford bound in double, below 2e-9 for rows of
     * up to 1e5 values with kappa near 100: 2u covers both. */
    const double rtol = FLT_EPSILON;
    char what[128];
    snprintf(what, sizeof what, "%zu x %zu, %d threads (%s): variance", rows, cols, shape->threads, shape->why);
    bool ok = why == NULL;
    if (!ok) {
        fprintf(out, "FAIL %s: the launcher refused the shape: %s\n", what, why);
    } else {
        CloseReport variance_report = check_close_f32(variance, exact_variance, rows, 0.0, rtol);
        ok = close_report_print(out, what, &variance_report);
        snprintf(what, sizeof what, "%zu x %zu, %d threads (%s): mean", rows, cols, shape->threads, shape->why);
        CloseReport mean_report = check_close_f32(mean, exact_mean, rows, 0.0, rtol);
        ok = close_report_print(out, what, &mean_report) && ok;
    }
    array_free(x);
    array_free(mean);
    array_free(variance);
    array_free(exact_mean);
    array_free(exact_variance);
    return ok;
}

/* The device line, then every shape checked: are they all within tolerance? */
static bool check_every_shape(uint64_t seed)
{
    char device[256];
    cuda_device_describe(device, sizeof device);
    printf("%s\nRow means and variances of float data %g + N(0, 1) against the exact ones:\n", device,
           GPU_CHECK_OFFSET);
    bool all_ok = true;
    for (int s = 0; s < gpu_check_shape_count; s++) {
        all_ok = check_gpu_rows(&gpu_check_shapes[s], seed, stdout) && all_ok;
    }
    return all_ok;
}

int gpu_check_command(int argc, char **argv)
{
    long seed = 1;
    const CliOption options[] = {
        {"--seed", CLI_INT, &seed, 0, 1e18, "random seed of the data"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    cuda_require_device();
    return check_every_shape((uint64_t)seed) ? 0 : 1;
}

/* One launch of the kernel alone, on device memory: what cuda_bench_run
 * times, so that the copies over PCIe do not hide the kernel. */
typedef struct {
    const float *x;
    size_t rows, cols;
    int threads;
    float *mean, *variance;
} RowsLaunch;

static void launch_rows(void *context)
{
    const RowsLaunch *launch = context;
    const char *why =
        welford_rows_gpu_device(launch->x, launch->rows, launch->cols, launch->threads, launch->mean, launch->variance);
    if (why != NULL) {
        cli_fail_status(1, "%d threads per block: %s", launch->threads, why);
    }
}

/* Rows of layer-norm width; 32768 of them are 512 MiB of floats, ten times
 * the L2 of an H100 or H200, the size of the layer norm chapter's tensors.
 * (At 128 MiB, the first H200 run's size, the read probe's kernel lasted
 * tens of microseconds and read at about two thirds of the rate the other
 * chapters' larger probes measured on the same GPU.) */
enum { BENCH_COLS = 4096, BENCH_ROWS = 32768, QUICK_BENCH_ROWS = 1024 };

typedef struct {
    size_t rows;
    int warmup, runs;
} GpuBenchSize;

/* Bytes one launch moves: every value of x read once, a mean and a
 * variance written per row. */
static double rows_bytes(size_t rows, size_t cols)
{
    return (double)((rows * cols + 2 * rows) * sizeof(float));
}

/* One block per row at each block size, against the copy bandwidth
 * measured in the same run; the speed-ups are over one warp per row, the
 * first. */
static const int BENCH_BLOCK_SIZES[] = {32, 128, 256, 1024};

static Table *time_block_sizes(const GpuBenchSize *size, double read_gbs)
{
    size_t rows = size->rows, cols = BENCH_COLS;
    float *x = ALLOC_ARRAY(rows * cols, float);
    Rng rng;
    rng_seed(&rng, 1);
    rng_fill_normal_f32(&rng, x, rows * cols, GPU_CHECK_OFFSET, DATA_SPREAD);
    float *device_x = cuda_device_copy_of(x, rows * cols * sizeof(float));
    RowsLaunch launch = {
        device_x, rows, cols, 0, cuda_device_alloc(rows * sizeof(float)), cuda_device_alloc(rows * sizeof(float))};
    const char *headers[] = {"threads per block", "ms", "GB/s", "of read bandwidth (slowest–fastest)",
                             "speed-up over 32 threads"};
    Table *table = TABLE_NEW(headers, "rrrrr");
    BenchStats baseline = {0};
    double bytes = rows_bytes(rows, cols);
    for (size_t b = 0; b < CLI_COUNT(BENCH_BLOCK_SIZES); b++) {
        launch.threads = BENCH_BLOCK_SIZES[b];
        BenchStats stats = cuda_bench_run(launch_rows, &launch, size->warmup, size->runs);
        if (b == 0) {
            baseline = stats;
        }
        table_cell(table, "%d", launch.threads);
        table_cell(table, "%.3f", stats.median * 1e3);
        table_cell(table, "%.0f", gb_per_s(bytes, stats.median));
        bench_share_cell(table, bytes, stats, read_gbs);
        bench_speedup_cell(table, baseline, stats);
    }
    cuda_device_free(device_x);
    cuda_device_free(launch.mean);
    cuda_device_free(launch.variance);
    array_free(x);
    return table;
}

int gpu_bench_command(int argc, char **argv)
{
    GpuBenchOptions options = results_parse_bench_options(argc, argv, "fewer rows and runs");
    cuda_require_device();
    if (!check_every_shape(1)) {
        printf("some results do not match the reference: nothing is timed\n");
        return 1;
    }
    GpuBenchSize size = options.quick ? (GpuBenchSize){QUICK_BENCH_ROWS, 1, 5} : (GpuBenchSize){BENCH_ROWS, 2, 20};
    double read_gbs = cuda_read_bandwidth_gbs((size_t)size.rows * BENCH_COLS * sizeof(float));
    BenchReport *report = bench_report_new(
        "Row means and variances of %zu x %d floats (%.0f MiB), one block per row, the kernel alone on data "
        "already on the GPU; read bandwidth %.0f GB/s, measured in this run by a kernel of 16-byte loads that "
        "writes nothing back (this kernel, too, only reads). Bytes counted: x read once, a mean and a variance "
        "written per row. The median of %d runs, each from a cold L2, in parentheses the slowest and the fastest.",
        size.rows, BENCH_COLS, (double)(size.rows * BENCH_COLS * sizeof(float)) / 1048576.0, read_gbs, size.runs);
    bench_report_add(report, time_block_sizes(&size, read_gbs), NULL);
    char device[256];
    cuda_device_describe(device, sizeof device);
    results_publish(report, &options, "cancellation", device);
    return 0;
}

/* The one kernel, at each block size gpu-bench times: the launcher takes
 * the block size from its caller. */
static void welford_launches(const KernelSignature *kernel, ResourceTableRows *rows)
{
    if (!kernel_signature_is(kernel, "welford_rows_kernel", 0))
        return;
    for (size_t b = 0; b < CLI_COUNT(BENCH_BLOCK_SIZES); b++)
        resource_table_add(rows, BENCH_BLOCK_SIZES[b], "row statistics, %d threads", BENCH_BLOCK_SIZES[b]);
}

int gpu_resources_command(int argc, char **argv)
{
    return resource_table_command(argc, argv, "welford.resources", welford_launches);
}
