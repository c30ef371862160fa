/* The GPU subcommands of the chapter program, and what the GPU tests call.
 * Compiled in CUDA builds only: without CUDA, gpu.h names cli_without_cuda
 * in place of each subcommand. */
#include "chapters/02-layernorm/gpu.h"

#include <string.h>

#include "chapters/02-layernorm/commands.h"
#include "chapters/02-layernorm/gpu_device.h"
#include "chapters/02-layernorm/layernorm.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/results.h"
#include "kernels/layernorm.h"

const char *gpu_run_problem(LnProblem *p, int forward, int backward, int misalign)
{
    DeviceProblem *g = device_problem_new(p->n, p->d, misalign, p->storage);
    device_problem_upload(g, p);
    const char *why = device_problem_forward(g, p->norm, forward, p->eps);
    if (why == NULL)
        why = device_problem_backward(g, p->norm, backward);
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

// ANCHOR: bound_what_fma_changes_in_16_bits
/* The GPU's y and dx in a 16-bit storage type, against the float64 result
 * on the same stored inputs and against the CPU's. Before the rounding to
 * 16 bits, the GPU's and the CPU's are floats a few float ulps apart: the
 * sums go in another order, and nvcc contracts a * b + c into one FMA where
 * the CPU build rounds twice. Two floats that close round to the same 16
 * bits unless a midpoint between two 16-bit values falls between them, and
 * then to neighbours, one ulp of the storage type apart. How often: each
 * side meets the accuracy goal on its own (at least 99.9% of its elements
 * the correct rounding of the float64 result), and where both round
 * correctly they agree, so at most 0.1% + 0.1% = 0.2% may differ. More
 * than one ulp apart is allowed only below ln_storage_unresolved_below,
 * where float32's own error exceeds half an ulp of the storage type. */
static StorageAccuracy stored_accuracy(LnStorage storage, const float *y, const double *y_ref, const float *dx,
                                       const double *dx_ref, size_t count)
{
    return ln_storage_accuracy_merge(ln_storage_accuracy(storage, y, y_ref, count),
                                     ln_storage_accuracy(storage, dx, dx_ref, count));
}
// ANCHOR_END: bound_what_fma_changes_in_16_bits

// ANCHOR: check_the_shares_and_the_ulps
/* The shares are rates, checked where there are enough values to measure
 * one: 10^5 of y and dx together, so that 0.1% is 100 elements. On fewer
 * (a single row of 768, 0.1% of it 1.5 elements; d = 1, where every y is
 * near +-gamma[0] and all round alike), only the ulps are checked. */
enum { STORAGE_SHARE_MIN_VALUES = 100000 };

static bool shares_hold(const StorageAccuracy *exact, const StorageAccuracy *with_cpu)
{
    double differing = 1.0 - ln_storage_correct_share(with_cpu);
    return exact->count < STORAGE_SHARE_MIN_VALUES || (ln_storage_correct_share(exact) >= LN_STORAGE_GOAL_SHARE &&
                                                       differing <= 2.0 * (1.0 - LN_STORAGE_GOAL_SHARE));
}

static bool ulps_hold(const StorageAccuracy *exact, const StorageAccuracy *with_cpu, LnStorage storage)
{
    double unresolved = ln_storage_unresolved_below(storage);
    return exact->largest_beyond < unresolved && with_cpu->largest_beyond < unresolved;
}
// ANCHOR_END: check_the_shares_and_the_ulps

/* The CPU's results on p's inputs, in p's storage type, widened to double
 * (exactly) to compare with. */
static void cpu_results(const LnProblem *p, double *y, double *dx)
{
    LnProblem cpu = ln_problem_new(p->n, p->d, p->eps);
    cpu.norm = p->norm;
    cpu.storage = p->storage;
    memcpy(cpu.x, p->x, p->n * p->d * sizeof(float));
    memcpy(cpu.dy, p->dy, p->n * p->d * sizeof(float));
    memcpy(cpu.gamma, p->gamma, p->d * sizeof(float));
    memcpy(cpu.beta, p->beta, p->d * sizeof(float));
    ln_problem_run_cpu(&cpu);
    ln_problem_narrow_results(&cpu);
    widen_f32(y, cpu.y, p->n * p->d);
    widen_f32(dx, cpu.dx, p->n * p->d);
    ln_problem_free(&cpu);
}

bool gpu_meets_storage_goal(const LnProblem *p, const LnReference *ref, FILE *out)
{
    if (p->storage == STORAGE_FLOAT32)
        return true;
    size_t count = p->n * p->d;
    double *cpu_y = ALLOC_ARRAY(count, double), *cpu_dx = ALLOC_ARRAY(count, double);
    cpu_results(p, cpu_y, cpu_dx);
    StorageAccuracy exact = stored_accuracy(p->storage, p->y, ref->y, p->dx, ref->dx, count);
    StorageAccuracy with_cpu = stored_accuracy(p->storage, p->y, cpu_y, p->dx, cpu_dx, count);
    bool ok = shares_hold(&exact, &with_cpu) && ulps_hold(&exact, &with_cpu, p->storage);
    fprintf(out,
            "%s    y, dx: %.3f%% correctly rounded (goal %.1f%%); %zu of %zu differ from the CPU's (bound %.1f%%), "
            "by at most %.0f ulp\n",
            ok ? "" : "FAIL", 100.0 * ln_storage_correct_share(&exact), 100.0 * LN_STORAGE_GOAL_SHARE,
            with_cpu.count - with_cpu.correctly_rounded, with_cpu.count, 200.0 * (1.0 - LN_STORAGE_GOAL_SHARE),
            with_cpu.max_ulps);
    array_free(cpu_y);
    array_free(cpu_dx);
    return ok;
}

static bool check_problem(LnProblem *p, const char *label, int forward, int backward, int misalign, FILE *out)
{
    LnReference ref = ln_reference_compute(p);
    const char *why = gpu_run_problem(p, forward, backward, misalign);
    bool ok = true;
    if (why != NULL) {
        /* A version refusing a row it cannot hold does what it promises. */
        fprintf(out, "skip %s %s forward %d, backward %d, %s: %s\n", norm_kind_name(p->norm),
                ln_storage_name(p->storage), forward, backward, label, why);
    } else {
        LnComparison c = ln_compare(p, &ref);
        double share;
        const char *worst = worst_output(&c, &share);
        fprintf(out, "%s %-5s %-7s forward %d, backward %d, %s: worst %s at %.0f%% of tolerance\n",
                c.ok ? "ok  " : "FAIL", norm_kind_name(p->norm), ln_storage_name(p->storage), forward, backward, label,
                worst, 100.0 * share);
        if (!c.ok)
            ln_comparison_print(out, "    ", &c);
        ok = gpu_meets_storage_goal(p, &ref, out) && c.ok;
    }
    ln_reference_free(&ref);
    return ok;
}

bool gpu_check_versions(const GpuCheckShape *shape, NormKind norm, LnStorage storage, int forward, int backward,
                        uint64_t seed, FILE *out)
{
    LnProblem p = ln_problem_new(shape->n, shape->d, 1e-5f);
    p.norm = norm;
    p.storage = storage;
    ln_problem_fill_random(&p, seed, 0.0, 1.0);
    ln_problem_narrow_inputs(&p);
    char label[96];
    snprintf(label, sizeof label, "%zu x %zu%s", shape->n, shape->d, shape->misalign ? ", misaligned" : "");
    bool ok = check_problem(&p, label, forward, backward, shape->misalign, out);
    ln_problem_free(&p);
    return ok;
}

/* --version N: forward N and backward N (the two have 3 versions each); 0: all of them. */
static int first_version(int version, int versions)
{
    return version == 0 ? 1 : (version < versions ? version : versions);
}

static int last_version(int version, int versions)
{
    return version == 0 ? versions : first_version(version, versions);
}

/* The two norms share their version numbers (kernels/layernorm.h). */
static const NormKind gpu_norms[] = {NORM_LAYER, NORM_RMS};

static const LnStorage gpu_storages[] = {STORAGE_FLOAT32, STORAGE_FP16, STORAGE_BF16};

/* Every version pair (or version N's) of both norms in every storage type
 * on one shape. */
static bool validate_shape(const GpuCheckShape *shape, int version, uint64_t seed)
{
    bool ok = true;
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 3; t++)
            for (int f = first_version(version, LAYERNORM_FORWARD_GPU_VERSIONS);
                 f <= last_version(version, LAYERNORM_FORWARD_GPU_VERSIONS); f++)
                for (int b = first_version(version, LAYERNORM_BACKWARD_GPU_VERSIONS);
                     b <= last_version(version, LAYERNORM_BACKWARD_GPU_VERSIONS); b++)
                    ok = gpu_check_versions(shape, gpu_norms[k], gpu_storages[t], f, b, seed, stdout) && ok;
    return ok;
}

static bool validate_all(int version, uint64_t seed)
{
    bool ok = true;
    for (int s = 0; s < gpu_check_shape_count; s++)
        ok = validate_shape(&gpu_check_shapes[s], version, seed) && ok;
    if (!ok)
        printf("some versions do not match the reference\n");
    return ok;
}

/* The first line of every GPU subcommand's output, kept for a results file. */
static void print_device(char *device, size_t size)
{
    cuda_device_describe(device, size);
    printf("%s\n", device);
}

int gpu_check_command(int argc, char **argv)
{
    RandomProblemArgs args;
    long version = 0;
    CliOption options[RANDOM_PROBLEM_OPTIONS + 1];
    random_problem_options(options, &args);
    const CliOption version_option[] = {
        {"--version", CLI_INT, &version, 0, LAYERNORM_FORWARD_GPU_VERSIONS,
         "only version N: forward N, backward N; 0: all"},
    };
    options[RANDOM_PROBLEM_OPTIONS] = version_option[0];
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    ln_problem_check_size(args.n, args.d);
    cuda_require_device();
    char device[256];
    print_device(device, sizeof device);
    bool ok = validate_all((int)version, (uint64_t)args.seed);
    for (int k = 0; k < 2; k++) {
        LnProblem p = random_problem_new(&args, gpu_norms[k]);
        char label[96];
        snprintf(label, sizeof label, "%zu x %zu", p.n, p.d);
        ok = check_problem(&p, label, last_version((int)version, LAYERNORM_FORWARD_GPU_VERSIONS),
                           last_version((int)version, LAYERNORM_BACKWARD_GPU_VERSIONS), 0, stdout) &&
             ok;
        ln_problem_free(&p);
    }
    return ok ? 0 : 1;
}

/* The highest versions that take the problem: forward 3 and backward 2 and 3
 * refuse rows too long to keep in registers, and the lower versions take
 * them. */
static void run_highest_versions(LnProblem *p)
{
    for (int f = LAYERNORM_FORWARD_GPU_VERSIONS; f >= 1; f--)
        for (int b = LAYERNORM_BACKWARD_GPU_VERSIONS; b >= 1; b--)
            if (gpu_run_problem(p, f, b, 0) == NULL) {
                printf("forward %d, backward %d\n", f, b);
                return;
            }
    cli_fail_status(1, "every kernel version refused %zu x %zu", p->n, p->d);
}

int gpu_apply_command(int argc, char **argv)
{
    ApplyArgs args = apply_parse(argc, argv);
    cuda_require_device();
    char device[256];
    print_device(device, sizeof device);
    return apply_run(&args, "gpu float vs double reference:", run_highest_versions);
}

typedef struct {
    NormKind norm;
    bool forward;
    int version;
    double bytes_per_element; /* read x + write y; read x, dy + write dx */
} GpuBenchRow;

/* 512 MiB: ten times an H200's 50 MB L2, so the kernels stream from HBM. */
#define GPU_BENCH_TENSOR_BYTES ((size_t)512 << 20)

static const GpuBenchRow gpu_bench_rows[] = {
    {NORM_LAYER, true,  1, 8 },
    {NORM_LAYER, true,  2, 8 },
    {NORM_LAYER, true,  3, 8 },
    {NORM_LAYER, false, 1, 12},
    {NORM_LAYER, false, 2, 12},
    {NORM_LAYER, false, 3, 12},
    {NORM_RMS,   true,  1, 8 },
    {NORM_RMS,   true,  2, 8 },
    {NORM_RMS,   true,  3, 8 },
    {NORM_RMS,   false, 1, 12},
    {NORM_RMS,   false, 2, 12},
    {NORM_RMS,   false, 3, 12},
};

typedef struct {
    DeviceProblem *g;
    const GpuBenchRow *row;
} BenchLaunch;

/* NULL, or the reason the version refused the problem. */
static const char *launch_version(DeviceProblem *g, const GpuBenchRow *row)
{
    return row->forward ? device_problem_forward(g, row->norm, row->version, 1e-5f)
                        : device_problem_backward(g, row->norm, row->version);
}

/* Only versions that took the problem once are timed: nothing to report. */
static void launch_timed(void *context)
{
    const BenchLaunch *launch = context;
    launch_version(launch->g, launch->row);
}

/* Time every version at each width and fill a table; `copy` is the
 * bandwidth of the copy kernel measured in the same run. */
static Table *bench_table(int runs, double copy)
{
    const size_t widths[] = {768, 1024, 4096};
    const char *headers[] = {
        "norm", "pass", "version", "d", "rows", "time", "GB/s", "of the copy kernel (range)", "vs version 1 (range)"};
    Table *table = TABLE_NEW(headers, "llrrrrrrr");
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        size_t d = widths[w], n = GPU_BENCH_TENSOR_BYTES / sizeof(float) / d;
        DeviceProblem *g = device_problem_new(n, d, 0, STORAGE_FLOAT32);
        device_problem_fill_pattern(g);
        BenchStats baseline = {0};
        for (size_t r = 0; r < sizeof gpu_bench_rows / sizeof gpu_bench_rows[0]; r++) {
            const GpuBenchRow *row = &gpu_bench_rows[r];
            if (launch_version(g, row) != NULL)
                cli_fail_status(1, "%s %s %d refused %zu x %zu", norm_kind_name(row->norm),
                                row->forward ? "forward" : "backward", row->version, n, d);
            BenchLaunch launch = {g, row};
            BenchStats stats = cuda_bench_run(launch_timed, &launch, 3, runs);
            if (row->version == 1)
                baseline = stats;
            double moved = row->bytes_per_element * (double)(n * d);
            table_cell(table, "%s", norm_kind_name(row->norm));
            table_cell(table, "%s", row->forward ? "forward" : "backward");
            table_cell(table, "%d", row->version);
            table_cell(table, "%zu", d);
            table_cell(table, "%zu", n);
            table_cell(table, "%.3f ms", 1e3 * stats.median);
            table_cell(table, "%.0f", gb_per_s(moved, stats.median));
            bench_share_cell(table, moved, stats, copy);
            bench_speedup_cell(table, baseline, stats);
        }
        device_problem_free(g);
    }
    return table;
}

/* Measure once; print the table, and write the same table to the results
 * file, stamped with the device (described again after the runs, for the
 * SM clock they ran at), the date and the commit. */
static void bench(const GpuBenchOptions *options)
{
    int runs = options->quick ? 5 : 20;
    /* A layer norm reads arrays and writes others, as a copy does: its limit
     * is a kernel of 16-byte loads and stores (what a kernel can reach),
     * with cudaMemcpy's figure beside it for reference. */
    double copy_kernel = cuda_copy_kernel_bandwidth_gbs(GPU_BENCH_TENSOR_BYTES);
    double memcpy_gbs = cuda_copy_bandwidth_gbs(GPU_BENCH_TENSOR_BYTES);
    BenchReport *report = bench_report_new(
        "Each n x d tensor %zu MiB; median of %d runs, in brackets the slowest and the fastest, each from a cold L2; "
        "in the same run, a copy kernel of 16-byte loads and stores %.0f GB/s and cudaMemcpy device to device "
        "%.0f GB/s (read + write).",
        GPU_BENCH_TENSOR_BYTES >> 20, runs, copy_kernel, memcpy_gbs);
    bench_report_add(report, bench_table(runs, copy_kernel), NULL);
    char device[256];
    cuda_device_describe(device, sizeof device);
    results_publish(report, options, "layernorm", device);
}

int gpu_bench_command(int argc, char **argv)
{
    GpuBenchOptions options = results_parse_bench_options(argc, argv, "5 timed runs of each version instead of 20");
    cuda_require_device();
    char device[256];
    print_device(device, sizeof device);
    /* The data of `gpu-check` with its defaults: seed 1. */
    if (!validate_all(0, 1)) {
        printf("nothing is timed\n");
        return 1;
    }
    printf("\n");
    bench(&options);
    return 0;
}

typedef LnRowPlan RowPlanner(size_t d, bool rows_16_byte_aligned, LnStorage storage);

/* The most threads a row plan launches the instance <width, items> of a
 * storage type with: its blocks grow with d up to the plan's limit for
 * that many vectors. */
static int most_planned_threads(RowPlanner *plan_for, int width, int items, LnStorage storage)
{
    int most = 0;
    size_t longest = (size_t)width * LN_PLAN_MAX_ITEMS * LN_PLAN_MAX_THREADS;
    for (size_t d = (size_t)width; d <= longest; d += (size_t)width) {
        LnRowPlan plan = plan_for(d, width > 1, storage);
        if (plan.width == width && plan.items == items && plan.threads > most)
            most = plan.threads;
    }
    return most;
}

/* A row kernel's vector: "float4" or "float" as before, "fp16 x 8" or
 * "fp16" for the 16-bit types. */
static void vector_name(char *name, size_t size, int width, LnStorage storage)
{
    if (storage == STORAGE_FLOAT32)
        snprintf(name, size, "%s", width == 1 ? "float" : "float4");
    else if (width == 1)
        snprintf(name, size, "%s", ln_storage_name(storage));
    else
        snprintf(name, size, "%s x %d", ln_storage_name(storage), width);
}

/* The row kernels (forward 3, backward 2 and 3) at the largest block
 * their plans give them; the others at their launcher's fixed block. Every
 * kernel's last template argument is the norm (RMS: 1 for RMSNorm), the
 * one before it the storage type of the rows (but backward 2's finalize,
 * which sums floats whatever the rows held; backward 3's, not a template,
 * serves both norms). Backward 3 at the most vectors per thread launches
 * backward 2's kernel, listed once, as backward 2. */
static void layernorm_launches(const KernelSignature *kernel, ResourceTableRows *rows)
{
    const int *arguments = kernel->arguments;
    int count = kernel->argument_count;
    bool rms = count > 0 && arguments[count - 1] == 1;
    LnStorage storage = count > 1 ? (LnStorage)arguments[count - 2] : STORAGE_FLOAT32;
    const char *norm = rms ? "RMSNorm" : "layer norm", *params = rms ? "dgamma" : "dgamma and dbeta";
    const char *stored = ln_storage_name(storage);
    char vector[32];
    vector_name(vector, sizeof vector, arguments[0], storage);
    if (kernel_signature_is(kernel, "layernorm_forward_v1", 2))
        resource_table_add(rows, LN_THREAD_PER_ROW_THREADS, "%s forward 1, %s", norm, stored);
    else if (kernel_signature_is(kernel, "layernorm_forward_v2", 2))
        resource_table_add(rows, LN_WARP_PER_ROW_THREADS, "%s forward 2, %s", norm, stored);
    else if (kernel_signature_is(kernel, "layernorm_forward_v3", 4))
        resource_table_add(rows, most_planned_threads(ln_row_plan, arguments[0], arguments[1], storage),
                           "%s forward 3, %d %s per thread", norm, arguments[1], vector);
    else if (kernel_signature_is(kernel, "layernorm_backward_v1_dx", 2))
        resource_table_add(rows, LN_THREAD_PER_ROW_THREADS, "%s backward 1, dx, %s", norm, stored);
    else if (kernel_signature_is(kernel, "layernorm_backward_v1_params", 2))
        resource_table_add(rows, LN_THREAD_PER_ROW_THREADS, "%s backward 1, %s, %s", norm, params, stored);
    else if (kernel_signature_is(kernel, "layernorm_backward_v2", 4))
        resource_table_add(rows, most_planned_threads(ln_backward_row_plan, arguments[0], arguments[1], storage),
                           "%s backward 2, %d %s per thread", norm, arguments[1], vector);
    else if (kernel_signature_is(kernel, "layernorm_backward_v2_finalize", 1))
        resource_table_add(rows, LN_FINALIZE_THREADS, "%s backward 2, finalize", norm);
    else if (kernel_signature_is(kernel, "layernorm_backward_v3", 4))
        resource_table_add(rows, most_planned_threads(ln_backward_row_plan, arguments[0], arguments[1], storage),
                           "%s backward 3, %d %s per thread", norm, arguments[1], vector);
    else if (kernel_signature_is(kernel, "layernorm_backward_v3_finalize", 0))
        resource_table_add(rows, LN_FINALIZE_THREADS, "backward 3, finalize (both norms)");
}

int gpu_resources_command(int argc, char **argv)
{
    return resource_table_command(argc, argv, "layernorm.resources", layernorm_launches);
}
