/* The accuracy subcommands: one data set, the offset sweeps, the theory
 * figure's data, layer norm, and the merge of Welford states. Every one is
 * deterministic: fixed seeds. */
#include "chapters/01-cancellation/commands.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/layernorm_demo.h"
#include "chapters/01-cancellation/parallel_welford.h"
#include "chapters/01-cancellation/sliding_window.h"
#include "chapters/01-cancellation/variance.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/files.h"
#include "common/rng.h"

void print_table(Table *table, bool markdown)
{
    table_print(table, stdout, table_format_for(markdown));
    table_free(table);
}

/* A relative error in words where a number would mislead: exact results
 * say so instead of "0.0e+00", and an error relative to a variance of 0 is
 * undefined (printf would write "-nan"). */
static const char *relative_error_text(char *text, size_t size, double error)
{
    if (isnan(error)) {
        snprintf(text, size, "undefined");
    } else if (error == 0.0) {
        snprintf(text, size, "exact");
    } else {
        snprintf(text, size, "%.1e", error);
    }
    return text;
}

static void error_cell(Table *table, double error)
{
    char text[32];
    table_cell(table, "%s", relative_error_text(text, sizeof text, error));
}

static void number_cell(Table *table, double value)
{
    if (isnan(value)) {
        table_cell(table, "NaN"); /* printf may write "-nan" */
    } else {
        table_cell(table, "%.7g", value);
    }
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

/* The square root in the working precision: the standard deviation a
 * program in that precision would go on to use. */
static double standard_deviation(Precision precision, double variance)
{
    return precision == PRECISION_FLOAT ? (double)sqrtf((float)variance) : sqrt(variance);
}

int show_command(int argc, char **argv)
{
    long n = 4096, seed = 1;
    double offset = 1e8;
    const char *precision_text = "double";
    bool markdown = false;
    const CliOption options[] = {
        {"--n",         CLI_INT,    &n,              2,     1e7,  "values in the data set"                  },
        {"--offset",    CLI_DOUBLE, &offset,         -1e30, 1e30, "offset of the data"                      },
        {"--precision", CLI_STRING, &precision_text, 0,     0,    "float or double: the data and arithmetic"},
        {"--seed",      CLI_INT,    &seed,           0,     1e18, "random seed"                             },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    Precision precision = parse_precision(precision_text);

    AccuracyTrial trial = run_accuracy_trial(precision, offset, (size_t)n, (uint64_t)seed);
    printf("%ld values %g + N(0, 1), stored and computed in %s (u = %.1e).\n", n, offset, precision_name(precision),
           unit_roundoff(precision));
    printf("Exact variance of the stored values: %.7g; condition number kappa = %.1e.\n\n", trial.reference.variance,
           trial.reference.kappa);
    const char *headers[] = {"method", "variance", "square root", "relative error"};
    Table *table = TABLE_NEW(headers, "lrrr");
    for (int m = 0; m < TEXTBOOK_METHOD_COUNT; m++) {
        table_cell(table, "%s", method_names[m]);
        number_cell(table, trial.variance[m]);
        number_cell(table, standard_deviation(precision, trial.variance[m]));
        error_cell(table, trial.relative_error[m]);
    }
    print_table(table, markdown);
    return 0;
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

static Table *sweep_table(const SweepColumn *columns, size_t count)
{
    const char **headers = ALLOC_ARRAY(count + 2, const char *);
    headers[0] = "offset";
    headers[1] = "kappa";
    for (size_t c = 0; c < count; c++) {
        headers[2 + c] = columns[c].header;
    }
    char *alignment = ALLOC_ARRAY(count + 3, char); /* zero-filled, so the string ends */
    memset(alignment, 'r', count + 2);
    Table *table = table_new((int)count + 2, headers, alignment);
    array_free(alignment);
    array_free(headers);
    return table;
}

/* One row per decade of offset, from 1 until rounding to the format leaves
 * no spread: the offset, kappa, then the given columns. */
static int sweep_command(int argc, char **argv, const SweepColumn *columns, size_t count)
{
    long n = 4096, seed = 1;
    const char *precision_text = "double";
    bool markdown = false;
    const CliOption options[] = {
        {"--n",         CLI_INT,    &n,              2, 1e7,  "values per data set"                     },
        {"--precision", CLI_STRING, &precision_text, 0, 0,    "float or double: the data and arithmetic"},
        {"--seed",      CLI_INT,    &seed,           0, 1e18, "random seed"                             },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    Precision precision = parse_precision(precision_text);

    Table *table = sweep_table(columns, count);
    double offset = 1.0;
    for (; spread_survives_rounding(precision, offset); offset *= 10) {
        AccuracyTrial trial = run_accuracy_trial(precision, offset, (size_t)n, (uint64_t)seed);
        table_cell(table, "%.0e", offset);
        table_cell(table, "%.1e", trial.reference.kappa);
        for (size_t c = 0; c < count; c++) {
            sweep_cell(table, &columns[c], precision, &trial);
        }
    }
    print_table(table, markdown);
    printf("\nRelative errors of the variance of %ld values offset + N(0, 1) in %s. The sweep ends at %.0e: "
           "at %.0e the spacing of %s numbers is %g, more than twice the spread, and rounding the data "
           "leaves almost no variance to compute.\n",
           n, precision_name(precision), offset / 10, offset, precision_name(precision),
           format_spacing(precision, offset));
    return 0;
}

int offset_sweep_command(int argc, char **argv)
{
    return sweep_command(argc, argv, textbook_columns, CLI_COUNT(textbook_columns));
}

int blocked_sweep_command(int argc, char **argv)
{
    return sweep_command(argc, argv, blocked_columns, CLI_COUNT(blocked_columns));
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

/* Every offset of the figure's grid runs each method on several data sets
 * of n values, in both precisions, against a reference: at 1e7 values a
 * run took minutes, so 1e6 is the most. */
int theory_data_command(int argc, char **argv)
{
    long n = 4096;
    const char *output = "offset-error.dat";
    const CliOption options[] = {
        {"--n",      CLI_INT,    &n,      2, 1e6, "values per data set (the time grows with it)"},
        {"--output", CLI_STRING, &output, 0, 0,   "the file to write"                           },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    WholeFile written;
    FILE *file = whole_file_open_or_exit(&written, output);
    write_theory_block(file, PRECISION_FLOAT, (size_t)n);
    fprintf(file, "\n\n");
    write_theory_block(file, PRECISION_DOUBLE, (size_t)n);
    whole_file_commit_or_exit(&written);
    return 0;
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

int layernorm_demo_command(int argc, char **argv)
{
    long n = 4096, seed = 1;
    bool markdown = false;
    const CliOption options[] = {
        {"--n",    CLI_INT, &n,    2, 1e7,  "values in the row"},
        {"--seed", CLI_INT, &seed, 0, 1e18, "random seed"      },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);

    const char *headers[] = {"offset",         "kappa",         "naive variance", "naive error", "two-pass variance",
                             "two-pass error", "two-pass bound"};
    Table *table = TABLE_NEW(headers, "rrrrrrr");
    for (double offset = 1.0; offset <= 1e5; offset *= 10) {
        LayerNormTrial trial = run_layernorm_trial(offset, (size_t)n, (uint64_t)seed);
        table_cell(table, "%.0e", offset);
        table_cell(table, "%.1e", trial.kappa);
        outcome_cells(table, &trial.naive, n);
        outcome_cells(table, &trial.two_pass, n);
        table_cell(table, "%.1e", trial.two_pass_bound);
    }
    print_table(table, markdown);
    return 0;
}

/* Cut the data into 1, 2, 4, ..., 1024 chunks (never more than n), merge
 * the chunks' Welford states, and compare with the exact variance and with
 * one pass over everything. */
static Table *merge_table(const double *x, size_t n, double exact, double single_pass)
{
    enum { MOST_CHUNKS = 1024 };
    const char *headers[] = {"chunks", "values per chunk", "relative error", "difference from one pass"};
    Table *table = TABLE_NEW(headers, "rrrr");
    size_t *bounds = ALLOC_ARRAY((n < MOST_CHUNKS ? n : MOST_CHUNKS) + 1, size_t);
    for (size_t chunks = 1; chunks <= MOST_CHUNKS && chunks <= n; chunks *= 2) {
        for (size_t c = 0; c <= chunks; c++) {
            bounds[c] = c * n / chunks;
        }
        double merged = welford_variance(welford_by_chunks(x, bounds, chunks));
        table_cell(table, "%zu", chunks);
        table_cell(table, n % chunks == 0 ? "%zu" : "%zu or more", n / chunks);
        error_cell(table, fabs(merged - exact) / exact);
        error_cell(table, fabs(merged - single_pass) / exact);
    }
    array_free(bounds);
    return table;
}

int merge_demo_command(int argc, char **argv)
{
    long n = 4096, seed = 1;
    double offset = 1e8;
    bool markdown = false;
    const CliOption options[] = {
        {"--n",      CLI_INT,    &n,      2,     1e7,  "values in the data set"},
        {"--offset", CLI_DOUBLE, &offset, -1e30, 1e30, "offset of the data"    },
        {"--seed",   CLI_INT,    &seed,   0,     1e18, "random seed"           },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);

    double *x = ALLOC_ARRAY((size_t)n, double);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    rng_fill_normal_f64(&rng, x, (size_t)n, offset, DATA_SPREAD);
    VarianceReference reference = variance_reference_f64(x, (size_t)n);
    double single_pass = welford_variance(welford_accumulate(x, (size_t)n));
    char error[32];
    printf("%ld values %g + N(0, 1) in double; kappa = %.1e. One pass of welford_push over all of them: "
           "relative error %s.\n\n",
           n, offset, reference.kappa,
           relative_error_text(error, sizeof error, fabs(single_pass - reference.variance) / reference.variance));
    print_table(merge_table(x, (size_t)n, reference.variance, single_pass), markdown);
    array_free(x);
    return 0;
}

/* One row per burst spread s: a window of values N(0, s^2) slid out of the
 * state by values N(0, 1), the variance the state is left with against the
 * exact one of the values now in the window. Removing the burst subtracts
 * an m2 of about window * s^2, rounded to u of itself, from which the
 * window's own m2, about window, must remain: a relative error of about
 * u s^2, the last column. */
static Table *window_table(size_t window, uint64_t seed)
{
    const char *headers[] = {"burst spread s", "slid variance", "exact variance", "relative error", "u s^2"};
    Table *table = TABLE_NEW(headers, "rrrrr");
    double *x = ALLOC_ARRAY(2 * window, double);
    for (double spread = 1.0; spread <= 1e10; spread *= 100.0) {
        Rng rng;
        rng_seed(&rng, seed);
        rng_fill_normal_f64(&rng, x, window, 0.0, spread);
        rng_fill_normal_f64(&rng, x + window, window, 0.0, DATA_SPREAD);
        double slid = welford_variance(welford_slide_through(x, window));
        double exact = variance_reference_f64(x + window, window).variance;
        table_cell(table, "%.0e", spread);
        table_cell(table, "%.7g", slid);
        table_cell(table, "%.7g", exact);
        error_cell(table, fabs(slid - exact) / exact);
        table_cell(table, "%.1e", 0x1p-53 * spread * spread);
    }
    array_free(x);
    return table;
}

int window_demo_command(int argc, char **argv)
{
    long window = 1024, seed = 1;
    bool markdown = false;
    const CliOption options[] = {
        {"--window", CLI_INT, &window, 2, 1e7,  "values in the window"},
        {"--seed",   CLI_INT, &seed,   0, 1e18, "random seed"         },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    printf("A window of %ld values N(0, s^2) in double, slid out of a Welford state by %ld values N(0, 1): "
           "each pushed with welford_push, the oldest taken out with welford_remove.\n\n",
           window, window);
    print_table(window_table((size_t)window, (uint64_t)seed), markdown);
    return 0;
}
