/* Catastrophic cancellation: the program of chapter 1.
 *
 * With no mode option it computes the variance of one data set (offset plus
 * a standard normal spread) four ways and shows each result, its square root
 * and its error. The modes print the chapter's tables and write its figure
 * data; see --help. Every mode is deterministic: fixed seeds. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/derivative.h"
#include "chapters/01-cancellation/layernorm_demo.h"
#include "chapters/01-cancellation/parallel_welford.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/rng.h"
#include "common/table.h"

#ifdef HAVE_CUDA
#include "chapters/01-cancellation/gpu.h"
#include "common/cuda_util.h"
#endif

typedef struct {
    bool offset_sweep, blocked_sweep, layernorm_demo, merge_demo, derivative, gpu, bench, markdown;
    const char *theory_data, *derivative_data, *precision_text;
    long n, seed;
    double offset;
    Precision precision;
} Options;

static TableFormat table_format(const Options *options)
{
    return options->markdown ? TABLE_MARKDOWN : TABLE_TEXT;
}

/* A relative error for a table: exact results say so instead of
 * "0.0e+00", and an error relative to a variance of 0 is undefined. */
static void error_cell(Table *table, double error)
{
    if (isnan(error)) {
        table_cell(table, "undefined");
    } else if (error == 0.0) {
        table_cell(table, "exact");
    } else {
        table_cell(table, "%.1e", error);
    }
}

static void number_cell(Table *table, double value)
{
    if (isnan(value)) {
        table_cell(table, "NaN"); /* printf may write "-nan" */
    } else {
        table_cell(table, "%.7g", value);
    }
}

static FILE *open_for_writing(const char *path)
{
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        cli_fail_status(1, "cannot write %s: %s", path, strerror(errno));
    }
    return file;
}

static void close_written(FILE *file, const char *path)
{
    if (ferror(file) | fclose(file)) { /* "|", not "||": close it either way */
        cli_fail_status(1, "error writing %s", path);
    }
}

/* The square root in the working precision: the standard deviation a
 * program in that precision would go on to use. */
static double standard_deviation(Precision precision, double variance)
{
    return precision == PRECISION_FLOAT ? (double)sqrtf((float)variance) : sqrt(variance);
}

static void show_one_data_set(const Options *options)
{
    AccuracyTrial trial =
        run_accuracy_trial(options->precision, options->offset, (size_t)options->n, (uint64_t)options->seed);
    printf("%ld values %g + N(0, 1), stored and computed in %s (u = %.1e).\n", options->n, options->offset,
           precision_name(options->precision), unit_roundoff(options->precision));
    printf("Exact variance of the stored values: %.7g; condition number kappa = %.1e.\n\n", trial.reference.variance,
           trial.reference.kappa);
    const char *headers[] = {"method", "variance", "square root", "relative error"};
    Table *table = table_new(4, headers, "lrrr");
    for (int m = 0; m < TEXTBOOK_METHOD_COUNT; m++) {
        table_cell(table, "%s", method_names[m]);
        number_cell(table, trial.variance[m]);
        number_cell(table, standard_deviation(options->precision, trial.variance[m]));
        error_cell(table, trial.relative_error[m]);
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
}

/* A column of the offset sweep: what a method gave, its relative error, or
 * the bound its analysis puts on that error. */
typedef enum { COLUMN_VALUE, COLUMN_ERROR, COLUMN_BOUND } ColumnKind;

typedef struct {
    const char *header;
    ColumnKind kind;
    Method method;
} SweepColumn;

static const SweepColumn textbook_columns[] = {
    {"naive gives",        COLUMN_VALUE, METHOD_NAIVE             },
    {"naive",              COLUMN_ERROR, METHOD_NAIVE             },
    {"two-pass",           COLUMN_ERROR, METHOD_TWO_PASS          },
    {"Welford",            COLUMN_ERROR, METHOD_WELFORD           },
    {"corrected two-pass", COLUMN_ERROR, METHOD_CORRECTED_TWO_PASS},
};

static const SweepColumn blocked_columns[] = {
    {"two-pass",           COLUMN_ERROR, METHOD_TWO_PASS          },
    {"Welford",            COLUMN_ERROR, METHOD_WELFORD           },
    {"corrected two-pass", COLUMN_ERROR, METHOD_CORRECTED_TWO_PASS},
    {"blocked",            COLUMN_ERROR, METHOD_BLOCKED           },
    {"blocked bound",      COLUMN_BOUND, METHOD_BLOCKED           },
};

static void sweep_cell(Table *table, const SweepColumn *column, Precision precision, const AccuracyTrial *trial)
{
    switch (column->kind) {
    case COLUMN_VALUE:
        table_cell(table, "%.3g", trial->variance[column->method]);
        break;
    case COLUMN_ERROR:
        error_cell(table, trial->relative_error[column->method]);
        break;
    case COLUMN_BOUND:
        table_cell(table, "%.1e", error_bound(column->method, precision, trial));
        break;
    }
}

/* One row per decade of offset, from 1 until rounding to the format leaves
 * no spread: the offset, kappa, then the given columns. */
static void show_offset_sweep(const Options *options, const SweepColumn *columns, size_t count)
{
    const char **headers = ALLOC_ARRAY(const char *, count + 2);
    headers[0] = "offset";
    headers[1] = "kappa";
    for (size_t c = 0; c < count; c++) {
        headers[2 + c] = columns[c].header;
    }
    char *alignment = ALLOC_ARRAY(char, count + 3); /* zero-filled, so the string ends */
    memset(alignment, 'r', count + 2);
    Table *table = table_new((int)count + 2, headers, alignment);
    array_free(alignment);
    array_free(headers);
    double offset = 1.0;
    for (; spread_survives_rounding(options->precision, offset); offset *= 10) {
        AccuracyTrial trial =
            run_accuracy_trial(options->precision, offset, (size_t)options->n, (uint64_t)options->seed);
        table_cell(table, "%.0e", offset);
        table_cell(table, "%.1e", trial.reference.kappa);
        for (size_t c = 0; c < count; c++) {
            sweep_cell(table, &columns[c], options->precision, &trial);
        }
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
    printf("\nRelative errors of the variance of %ld values offset + N(0, 1) in %s. The sweep ends at %.0e: "
           "at %.0e the spacing of %s numbers is %g, more than twice the spread, and rounding the data "
           "leaves almost no variance to compute.\n",
           options->n, precision_name(options->precision), offset / 10, offset, precision_name(options->precision),
           format_spacing(options->precision, offset));
}

/* One block per precision (gnuplot's `index`): at each offset of the
 * figure's grid, the worst error over its data sets and the largest bound. */
static void write_theory_block(FILE *file, Precision precision, size_t n)
{
    fprintf(file, "# %s, n = %zu, worst of %d data sets per offset\n", precision_name(precision), n, FIGURE_SEEDS);
    fprintf(file,
            "# kappa naive two_pass welford corrected bound_naive bound_two_pass bound_welford bound_corrected\n");
    for (int step = 0;; step++) {
        double offset = figure_offset(step);
        if (!spread_survives_rounding(precision, offset)) {
            break;
        }
        double kappa = 0.0, worst[TEXTBOOK_METHOD_COUNT] = {0}, bound[TEXTBOOK_METHOD_COUNT] = {0};
        for (uint64_t seed = 1; seed <= FIGURE_SEEDS; seed++) {
            AccuracyTrial trial = run_accuracy_trial(precision, offset, n, seed);
            kappa = fmax(kappa, trial.reference.kappa);
            for (int m = 0; m < TEXTBOOK_METHOD_COUNT; m++) {
                worst[m] = fmax(worst[m], trial.relative_error[m]);
                bound[m] = fmax(bound[m], error_bound((Method)m, precision, &trial));
            }
        }
        fprintf(file, "%.6e", kappa);
        for (int m = 0; m < TEXTBOOK_METHOD_COUNT; m++) {
            fprintf(file, " %.6e", worst[m]);
        }
        for (int m = 0; m < TEXTBOOK_METHOD_COUNT; m++) {
            fprintf(file, " %.6e", bound[m]);
        }
        fprintf(file, "\n");
    }
}

static void write_theory_data(const Options *options)
{
    FILE *file = open_for_writing(options->theory_data);
    write_theory_block(file, PRECISION_FLOAT, (size_t)options->n);
    fprintf(file, "\n\n");
    write_theory_block(file, PRECISION_DOUBLE, (size_t)options->n);
    close_written(file, options->theory_data);
}

static void outcome_cells(Table *table, const LayerNormOutcome *outcome, long n)
{
    table_cell(table, "%.4g", (double)outcome->variance);
    if (outcome->nonfinite == (size_t)n) {
        table_cell(table, "not finite");
    } else if (outcome->nonfinite > 0) {
        table_cell(table, "%zu not finite, rest %.1e", outcome->nonfinite, outcome->max_abs_error);
    } else {
        table_cell(table, "%.1e", outcome->max_abs_error);
    }
}

static void show_layernorm_demo(const Options *options)
{
    const char *headers[] = {"offset",         "kappa",         "naive variance", "naive error", "two-pass variance",
                             "two-pass error", "two-pass bound"};
    Table *table = table_new(7, headers, "rrrrrrr");
    for (double offset = 1.0; offset <= 1e5; offset *= 10) {
        LayerNormTrial trial = run_layernorm_trial(offset, (size_t)options->n, (uint64_t)options->seed);
        table_cell(table, "%.0e", offset);
        table_cell(table, "%.1e", trial.kappa);
        outcome_cells(table, &trial.naive, options->n);
        outcome_cells(table, &trial.two_pass, options->n);
        table_cell(table, "%.1e", trial.two_pass_bound);
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
}

static void show_merge_demo(const Options *options)
{
    size_t n = (size_t)options->n;
    double *x = ALLOC_ARRAY(double, n);
    Rng rng;
    rng_seed(&rng, (uint64_t)options->seed);
    rng_fill_normal_f64(&rng, x, n, options->offset, DATA_SPREAD);
    VarianceReference reference = variance_reference_f64(x, n);
    double single_pass = welford_variance(welford_accumulate(x, n));

    printf("%zu values %g + N(0, 1) in double; kappa = %.1e. One pass of welford_push over all of them: "
           "relative error %.1e.\n\n",
           n, options->offset, reference.kappa, fabs(single_pass - reference.variance) / reference.variance);
    const char *headers[] = {"chunks", "values per chunk", "relative error", "difference from one pass"};
    Table *table = table_new(4, headers, "rrrr");
    size_t *bounds = ALLOC_ARRAY(size_t, n + 1);
    for (size_t chunks = 1; chunks <= 1024 && chunks <= n; chunks *= 2) {
        for (size_t c = 0; c <= chunks; c++) {
            bounds[c] = c * n / chunks;
        }
        double merged = welford_variance(welford_by_chunks(x, bounds, chunks));
        table_cell(table, "%zu", chunks);
        table_cell(table, n % chunks == 0 ? "%zu" : "%zu or more", n / chunks);
        error_cell(table, fabs(merged - reference.variance) / reference.variance);
        error_cell(table, fabs(merged - single_pass) / reference.variance);
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
    array_free(bounds);
    array_free(x);
}

enum { DERIVATIVE_POINTS = 101, STEPS_PER_DECADE = 8, DECADES = 16 };

static double step_size(int k)
{
    return pow(10.0, -(double)k / STEPS_PER_DECADE);
}

// ANCHOR: predict_the_best_step
/* For exp, f = f' = f''': the central difference's relative error is
 * at most h^2/6 (truncation) + u/h (the rounding of f, magnified by
 * 1/h), smallest at h = (3u)^(1/3), where it is (3u)^(2/3)/2. */
static double predicted_error(double h, double u)
{
    return h * h / 6 + u / h;
}

static double predicted_best_step(double u)
{
    return cbrt(3 * u);
}
// ANCHOR_END: predict_the_best_step

static void show_derivative(const Options *options)
{
    const TestFunction *exp_function = &test_functions[0];
    double u = unit_roundoff(PRECISION_DOUBLE);
    double best_step = 0.0, best_error = INFINITY;
    for (int k = 0; k <= STEPS_PER_DECADE * DECADES; k++) {
        double error = worst_relative_error(exp_function, CENTRAL_DIFFERENCE, step_size(k), DERIVATIVE_POINTS);
        if (error < best_error) {
            best_error = error;
            best_step = step_size(k);
        }
    }
    double h_star = predicted_best_step(u);
    printf("Central difference of %s, worst relative error over %d points in [%g, %g], steps 10^(-k/%d):\n\n",
           exp_function->name, DERIVATIVE_POINTS, exp_function->lo, exp_function->hi, STEPS_PER_DECADE);
    const char *prediction_headers[] = {"", "predicted", "measured"};
    Table *prediction = table_new(3, prediction_headers, "lrr");
    table_cell(prediction, "best step");
    table_cell(prediction, "%.1e", h_star);
    table_cell(prediction, "%.1e", best_step);
    table_cell(prediction, "smallest error");
    table_cell(prediction, "%.1e", predicted_error(h_star, u));
    table_cell(prediction, "%.1e", best_error);
    table_print(prediction, stdout, table_format(options));
    table_free(prediction);

    printf("\nBoth methods on several functions, worst relative error over %d points (u = %.1e):\n\n",
           DERIVATIVE_POINTS, u);
    const char *headers[] = {"function", "interval", "central difference, predicted best step",
                             "complex step, h = 2^-66", "complex step / u"};
    Table *table = table_new(5, headers, "lrrrr");
    for (int f = 0; f < test_function_count; f++) {
        const TestFunction *function = &test_functions[f];
        double complex_error = worst_relative_error(function, COMPLEX_STEP_DERIVATIVE, COMPLEX_STEP, DERIVATIVE_POINTS);
        table_cell(table, "%s", function->name);
        table_cell(table, "[%g, %g]", function->lo, function->hi);
        table_cell(table, "%.1e", worst_relative_error(function, CENTRAL_DIFFERENCE, h_star, DERIVATIVE_POINTS));
        table_cell(table, "%.1e", complex_error);
        table_cell(table, "%.1f", complex_error / u);
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
}

static void write_derivative_data(const Options *options)
{
    const TestFunction *exp_function = &test_functions[0];
    double u = unit_roundoff(PRECISION_DOUBLE);
    FILE *file = open_for_writing(options->derivative_data);
    fprintf(file, "# %s on [%g, %g], worst relative error over %d points; best step predicted at %.6e\n",
            exp_function->name, exp_function->lo, exp_function->hi, DERIVATIVE_POINTS, predicted_best_step(u));
    fprintf(file, "# h central_difference complex_step predicted_central truncation unit_roundoff\n");
    for (int k = 0; k <= STEPS_PER_DECADE * DECADES; k++) {
        double h = step_size(k);
        fprintf(file, "%.6e %.6e %.6e %.6e %.6e %.6e\n", h,
                worst_relative_error(exp_function, CENTRAL_DIFFERENCE, h, DERIVATIVE_POINTS),
                worst_relative_error(exp_function, COMPLEX_STEP_DERIVATIVE, h, DERIVATIVE_POINTS),
                predicted_error(h, u), h * h / 6, u);
    }
    close_written(file, options->derivative_data);
}

static int run_gpu_check(const Options *options)
{
#ifdef HAVE_CUDA
    if (!cuda_device_available()) {
        cli_fail("--gpu: no CUDA device is available");
    }
    char device[256];
    cuda_device_describe(device, sizeof device);
    printf("%s\nRow means and variances of float data %g + N(0, 1) against the exact ones:\n", device,
           GPU_CHECK_OFFSET);
    bool all_ok = true;
    for (int s = 0; s < gpu_check_shape_count; s++) {
        all_ok = check_gpu_rows(&gpu_check_shapes[s], (uint64_t)options->seed, stdout) && all_ok;
    }
    return all_ok ? 0 : 1;
#else
    (void)options;
    cli_fail("--gpu: this program was built without CUDA (./configure found no nvcc, or --no-cuda)");
#endif
}

typedef struct {
    double (*variance)(const double *x, size_t n);
    const double *x;
    size_t n;
    double result; /* kept, so that the compiler cannot drop the work */
} BenchContext;

static void bench_body(void *context)
{
    BenchContext *bench = context;
    bench->result = bench->variance(bench->x, bench->n);
}

enum { BENCH_WARMUP = 2, BENCH_RUNS = 7 };

static void run_bench(const Options *options)
{
    size_t bytes = bench_large_bytes(), n = bytes / sizeof(double);
    double *x = ALLOC_ARRAY(double, n);
    Rng rng;
    rng_seed(&rng, (uint64_t)options->seed);
    rng_fill_normal_f64(&rng, x, n, 1e4, DATA_SPREAD);
    double memcpy_gbs = memcpy_bandwidth_gbs(bytes, 1), read_gbs = read_bandwidth_gbs(bytes, 1);
    char cache[64] = "last-level cache size unknown";
    if (bench_llc_bytes() > 0) {
        snprintf(cache, sizeof cache, "last-level cache %.0f MiB", bench_llc_bytes() / 1048576.0);
    }
    printf("One thread, %zu doubles (%.0f MiB; %s), median of %d runs.\n"
           "memcpy, one thread: %.1f GB/s (bytes read + bytes written).\n"
           "read, one thread: %.1f GB/s (a sum in independent lanes: bytes read).\n\n",
           n, bytes / 1048576.0, cache, BENCH_RUNS, memcpy_gbs, read_gbs);

    // ANCHOR: count_the_bytes_each_method_reads
    struct {
        const char *name;
        double (*variance)(const double *x, size_t n);
        int passes; /* reads of the data: passes * 8n bytes */
    } methods[] = {
        {"naive",              variance_naive_f64,              1},
        {"two-pass",           variance_two_pass_f64,           2},
        {"Welford",            variance_welford_f64,            1},
        {"corrected two-pass", variance_corrected_two_pass_f64, 2},
        {"blocked",            variance_blocked_f64,            1}, /* the second pass hits L1 */
    };
    // ANCHOR_END: count_the_bytes_each_method_reads
    const char *headers[] = {"method", "passes", "ms", "GB/s read", "of memcpy", "of read", "time / naive"};
    Table *table = table_new(7, headers, "lrrrrrr");
    double naive_seconds = 0.0;
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        BenchContext context = {.variance = methods[m].variance, .x = x, .n = n};
        BenchStats stats = bench_run(bench_body, &context, BENCH_WARMUP, BENCH_RUNS);
        double gbs = gb_per_s((double)methods[m].passes * (double)bytes, stats.median);
        if (m == 0) {
            naive_seconds = stats.median;
        }
        table_cell(table, "%s", methods[m].name);
        table_cell(table, "%d", methods[m].passes);
        table_cell(table, "%.0f", stats.median * 1e3);
        table_cell(table, "%.1f", gbs);
        table_cell(table, "%.0f%%", 100 * gbs / memcpy_gbs);
        table_cell(table, "%.0f%%", 100 * gbs / read_gbs);
        table_cell(table, "%.2f", stats.median / naive_seconds);
    }
    table_print(table, stdout, table_format(options));
    table_free(table);
    array_free(x);
}

static Precision parse_precision(const char *text)
{
    if (strcmp(text, "float") == 0) {
        return PRECISION_FLOAT;
    }
    if (strcmp(text, "double") == 0) {
        return PRECISION_DOUBLE;
    }
    cli_fail("--precision expects float or double, got '%s'", text);
}

int main(int argc, char **argv)
{
    Options options = {.n = 4096, .seed = 1, .offset = 1e8, .precision_text = "double"};
    const CliOption cli[] = {
        {"--offset-sweep",    CLI_FLAG,   &options.offset_sweep,    0,     0,
         "mode: table of each method's relative error for offsets 1, 10, 100, ..."                                                                },
        {"--blocked-sweep",   CLI_FLAG,   &options.blocked_sweep,   0,     0,
         "mode: the same sweep for the blocked method, with its bound, next to the stable ones"                                                   },
        {"--theory-data",     CLI_STRING, &options.theory_data,     0,     0,
         "mode: write errors and bounds against kappa, float and double, to this file"                                                            },
        {"--layernorm-demo",  CLI_FLAG,   &options.layernorm_demo,  0,     0,
         "mode: layer norm of one float row with the naive and the two-pass variance"                                                             },
        {"--merge-demo",      CLI_FLAG,   &options.merge_demo,      0,     0,
         "mode: Welford states of 1, 2, 4, ..., 1024 chunks merged, against one pass"                                                             },
        {"--derivative",      CLI_FLAG,   &options.derivative,      0,     0,
         "mode: central difference and complex step, predicted and measured"                                                                      },
        {"--derivative-data", CLI_STRING, &options.derivative_data, 0,     0,
         "mode: write the derivative errors against the step to this file"                                                                        },
        {"--gpu",             CLI_FLAG,   &options.gpu,             0,     0,    "mode: row variances on the GPU against the CPU reference"       },
        {"--bench",           CLI_FLAG,   &options.bench,           0,     0,    "mode: throughput of each method against memcpy and a plain read"},
        {"--n",               CLI_INT,    &options.n,               2,     1e7,  "values per data set (all but --derivative*, --gpu, --bench)"    },
        {"--offset",          CLI_DOUBLE, &options.offset,          -1e30, 1e30, "offset of the data (no mode, --merge-demo)"                     },
        {"--precision",       CLI_STRING, &options.precision_text,  0,     0,
         "float or double (no mode, --offset-sweep, --blocked-sweep)"                                                                             },
        {"--seed",            CLI_INT,    &options.seed,            0,     1e18, "random seed"                                                    },
        {"--markdown",        CLI_FLAG,   &options.markdown,        0,     0,    "print tables as Markdown"                                       },
    };
    cli_parse(argc, argv, cli, sizeof cli / sizeof cli[0],
              "the variance four ways (five with the blocked one), in float and double, against the exact value; "
              "no mode: one data set");
    options.precision = parse_precision(options.precision_text);

    int modes = options.offset_sweep + options.blocked_sweep + options.layernorm_demo + options.merge_demo +
                options.derivative + options.gpu + options.bench + (options.theory_data != NULL) +
                (options.derivative_data != NULL);
    if (modes > 1) {
        cli_fail("choose one mode at a time (see --help)");
    }
    if (options.offset_sweep) {
        show_offset_sweep(&options, textbook_columns, sizeof textbook_columns / sizeof textbook_columns[0]);
    } else if (options.blocked_sweep) {
        show_offset_sweep(&options, blocked_columns, sizeof blocked_columns / sizeof blocked_columns[0]);
    } else if (options.theory_data != NULL) {
        write_theory_data(&options);
    } else if (options.layernorm_demo) {
        show_layernorm_demo(&options);
    } else if (options.merge_demo) {
        show_merge_demo(&options);
    } else if (options.derivative) {
        show_derivative(&options);
    } else if (options.derivative_data != NULL) {
        write_derivative_data(&options);
    } else if (options.gpu) {
        return run_gpu_check(&options);
    } else if (options.bench) {
        run_bench(&options);
    } else {
        show_one_data_set(&options);
    }
    return 0;
}
