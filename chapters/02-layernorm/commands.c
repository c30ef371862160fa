#include "chapters/02-layernorm/commands.h"

#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/analysis.h"
#include "chapters/02-layernorm/bench_cpu.h"
#include "chapters/02-layernorm/edge_cases.h"
#include "chapters/02-layernorm/gradcheck.h"
#include "chapters/02-layernorm/rmsnorm.h"
#include "chapters/02-layernorm/stability.h"
#include "chapters/02-layernorm/storage_accuracy.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/table.h"

static const char norm_help[] = "the norm: layer (default) or rms";

/* The value of --norm (NULL: not given) as a NormKind, or one line and exit 2. */
static NormKind norm_option(const char *name)
{
    NormKind norm = NORM_LAYER;
    if (name != NULL && !norm_kind_parse(name, &norm))
        cli_fail("--norm expects one of %s, got '%s'", norm_kind_names, name);
    return norm;
}

/* p's float results against the double reference. */
static bool check_results(const LnProblem *p, const char *label)
{
    LnReference ref = ln_reference_compute(p);
    LnComparison comparison = ln_compare(p, &ref);
    ln_reference_free(&ref);
    return ln_comparison_print(stdout, label, &comparison);
}

/* compute(p) in float32, then y and dx rounded to p's storage type. */
static void compute_stored(LnProblem *p, void (*compute)(LnProblem *p))
{
    compute(p);
    ln_problem_narrow_results(p);
}

static bool compute_and_check(LnProblem *p, const char *label, void (*compute)(LnProblem *p))
{
    compute_stored(p, compute);
    return check_results(p, label);
}

/* The rows that the non-finite policy flags (README, "Non-finite values"):
 * an inf or a NaN in x or dy, or in the row's y, dx, mean or rstd. */
static bool *flag_nonfinite_rows(const LnProblem *p)
{
    bool *flagged = ALLOC_ARRAY(p->n, bool);
    mark_nonfinite_rows(p->x, p->n, p->d, flagged);
    mark_nonfinite_rows(p->dy, p->n, p->d, flagged);
    mark_nonfinite_rows(p->y, p->n, p->d, flagged);
    mark_nonfinite_rows(p->dx, p->n, p->d, flagged);
    mark_nonfinite_rows(p->mean, p->n, 1, flagged);
    mark_nonfinite_rows(p->rstd, p->n, 1, flagged);
    return flagged;
}

/* A new problem of p's rows that are not flagged, inputs only. */
static LnProblem unflagged_rows(const LnProblem *p, const bool *flagged)
{
    LnProblem kept = ln_problem_new(p->n - count_flagged(flagged, p->n), p->d, p->eps);
    kept.norm = p->norm;
    kept.storage = p->storage;
    size_t row_bytes = p->d * sizeof(float), k = 0;
    for (size_t row = 0; row < p->n; row++) {
        if (!flagged[row]) {
            memcpy(kept.x + k * p->d, p->x + row * p->d, row_bytes);
            memcpy(kept.dy + k * p->d, p->dy + row * p->d, row_bytes);
            k++;
        }
    }
    memcpy(kept.gamma, p->gamma, row_bytes);
    memcpy(kept.beta, p->beta, row_bytes);
    return kept;
}

/* compute(p), then check it against the double reference where that means
 * something: on the rows with no inf or NaN in their inputs or results (a
 * problem of those rows alone, computed again: dgamma and dbeta sum over
 * every row, so one NaN row makes them NaN). The flagged rows are counted
 * in a note on stderr; p keeps every row's results. */
static bool compute_and_check_finite_rows(LnProblem *p, const char *label, void (*compute)(LnProblem *p))
{
    compute_stored(p, compute);
    bool *flagged = flag_nonfinite_rows(p);
    size_t count = count_flagged(flagged, p->n);
    bool ok = true; /* every row flagged: nothing to check */
    if (count == 0) {
        ok = check_results(p, label);
    } else if (count < p->n) {
        LnProblem kept = unflagged_rows(p, flagged);
        ok = compute_and_check(&kept, label, compute);
        ln_problem_free(&kept);
    }
    note_nonfinite_rows(count, p->n, "x, dy or the results");
    array_free(flagged);
    return ok;
}

/* The kernels add eps as a float. 0 is taken as it is; a positive eps below
 * float's smallest normal number would lose digits, or become 0 below
 * 1.4e-45, without a word. */
static float eps_option(double eps)
{
    if (eps > 0.0 && eps < FLT_MIN)
        cli_fail("--eps %g is below float's smallest normal number, %g, where the kernels' float eps would lose "
                 "digits or be 0: give 0 or at least that",
                 eps, (double)FLT_MIN);
    return (float)eps;
}

void random_problem_options(CliOption *options, RandomProblemArgs *args)
{
    *args = (RandomProblemArgs){.n = 64, .d = 1024, .seed = 1, .eps = 1e-5, .offset = 0.0, .scale = 1.0};
    const CliOption random[RANDOM_PROBLEM_OPTIONS] = {
        {"--n",      CLI_INT,    &args->n,      1,     1 << 24,  "rows of the random problem"              },
        {"--d",      CLI_INT,    &args->d,      1,     1 << 20,  "its row length"                          },
        {"--seed",   CLI_INT,    &args->seed,   0,     1L << 62, "random seed"                             },
        {"--eps",    CLI_DOUBLE, &args->eps,    0.0,   1.0,      "epsilon added to the variance"           },
        {"--offset", CLI_DOUBLE, &args->offset, -1e30, 1e30,     "the mean of x"                           },
        {"--scale",  CLI_DOUBLE, &args->scale,  0.0,   1e35,     "the spread of x (its standard deviation)"},
    };
    for (int i = 0; i < RANDOM_PROBLEM_OPTIONS; i++)
        options[i] = random[i];
}

LnProblem random_problem_new(const RandomProblemArgs *args, NormKind norm)
{
    LnProblem p = ln_problem_new((size_t)args->n, (size_t)args->d, eps_option(args->eps));
    p.norm = norm;
    ln_problem_fill_random(&p, (uint64_t)args->seed, args->offset, args->scale);
    return p;
}

int run_command(int argc, char **argv)
{
    RandomProblemArgs args;
    const char *save_inputs = NULL, *storage_name = "float32";
    CliOption options[RANDOM_PROBLEM_OPTIONS + 2];
    random_problem_options(options, &args);
    options[RANDOM_PROBLEM_OPTIONS] = (CliOption){"--save-inputs",
                                                  CLI_STRING,
                                                  &save_inputs,
                                                  0,
                                                  0,
                                                  "also write x, gamma, beta, dy here, as `apply --load` reads them"};
    options[RANDOM_PROBLEM_OPTIONS + 1] =
        (CliOption){"--storage", CLI_STRING, &storage_name, 0, 0, "x, dy, y and dx in float32 (default), fp16 or bf16"};
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    ln_problem_check_size(args.n, args.d);
    LnProblem p = random_problem_new(&args, NORM_LAYER);
    if (!ln_storage_parse(storage_name, &p.storage))
        cli_fail("--storage expects one of %s, got '%s'", ln_storage_names, storage_name);
    ln_problem_narrow_inputs(&p);
    if (save_inputs != NULL)
        ln_problem_save_inputs(&p, save_inputs);
    printf("%zu x %zu, random %s inputs (seed %ld, offset %g, scale %g), eps %g\n", p.n, p.d,
           ln_storage_name(p.storage), args.seed, args.offset, args.scale, (double)p.eps);
    /* Rows that hold an inf or a NaN, or whose results do (x beyond fp16's
     * range, constant rows with eps 0), are noted, as apply notes them. */
    bool ok = compute_and_check_finite_rows(&p, "cpu float vs double reference:", ln_problem_run_cpu);
    ln_problem_free(&p);
    return ok ? 0 : 1;
}

/* --load DIR --save DIR [--eps E] [--norm N]. */
ApplyArgs apply_parse(int argc, char **argv)
{
    ApplyArgs args = {.load = NULL, .save = NULL, .eps = 1e-5, .norm = NORM_LAYER};
    const char *norm = NULL, *dtype = "auto";
    const CliOption options[] = {
        {"--load",  CLI_STRING, &args.load, 0,   0,
         "required: read x, dy (float32, fp16 or bf16), gamma and (layer norm) beta (float32) here (.npy)"       },
        {"--save",  CLI_STRING, &args.save, 0,   0,
         "required: write y, dx (in x's storage type), rstd, dgamma and (layer norm) mean, dbeta (float32) here" },
        {"--eps",   CLI_DOUBLE, &args.eps,  0.0, 1.0, "epsilon added to the variance"                            },
        {"--norm",  CLI_STRING, &norm,      0,   0,   "the norm: layer (default) or rms (no beta, mean or dbeta)"},
        {"--dtype", CLI_STRING, &dtype,     0,   0,
         "x and dy: auto, the files' float32 or float16; bf16: bfloat16 bits in int16 or uint16, as "
         "t.view(torch.int16).numpy() saves them"                                                                },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (args.load == NULL || args.save == NULL)
        cli_fail("needs --load DIR and --save DIR");
    eps_option(args.eps);
    args.norm = norm_option(norm);
    args.encoding = npy_float_encoding_option("--dtype", dtype);
    return args;
}

int apply_run(const ApplyArgs *args, const char *label, void (*compute)(LnProblem *p))
{
    LnProblem p = ln_problem_load(args->load, args->norm, (float)args->eps, args->encoding);
    printf("%zu x %zu %s from %s, eps %g\n", p.n, p.d, ln_storage_name(p.storage), args->load, (double)p.eps);
    /* No rows (PyTorch accepts them): nothing to compute, and the zeroed
     * results of ln_problem_new are the answer, empty arrays and, summed
     * over no rows, dgamma = dbeta = 0. The kernels are not asked. */
    bool ok = p.n == 0 || compute_and_check_finite_rows(&p, label, compute);
    ln_problem_save_results(&p, args->save);
    printf("saved %s to %s/*.npy\n", ln_problem_result_names(p.norm), args->save);
    ln_problem_free(&p);
    return ok ? 0 : 1;
}

int apply_command(int argc, char **argv)
{
    ApplyArgs args = apply_parse(argc, argv);
    return apply_run(&args, "cpu float vs double reference:", ln_problem_run_cpu);
}

/* The results of the plan, kept to be printed once all are in: the worst
 * share of tolerance of each check is known only then. */
typedef struct {
    size_t n, d;
    GradCheckResult result;
} GradCheckRow;

typedef struct {
    GradCheckRow *rows;
    size_t count;
} GradCheckRows;

static void keep_gradcheck_row(void *context, size_t n, size_t d, const GradCheckResult *r)
{
    GradCheckRows *rows = context;
    rows->rows = array_resize(rows->rows, rows->count, rows->count + 1, sizeof *rows->rows);
    rows->rows[rows->count++] = (GradCheckRow){n, d, *r};
}

static void tolerance_cell(Table *table, const CloseReport *report)
{
    table_cell(table, "%s%.2g%%", report->ok ? "" : "FAIL ", 100.0 * report->tolerance_used);
}

/* Every column of every check, in the order they ran (gradcheck --all). */
static void print_every_gradcheck_column(const GradCheckRows *rows, TableFormat format)
{
    const char *headers[] = {"check",         "shape",        "gradient",         "compared", "max abs error",
                             "max rel error", "of tolerance", "loss evaluations", "time"};
    Table *table = TABLE_NEW(headers, "lllrrrrrr");
    for (size_t i = 0; i < rows->count; i++) {
        const GradCheckRow *row = &rows->rows[i];
        const GradCheckResult *r = &row->result;
        table_cell(table, "%s", grad_check_method_name(r->method));
        table_cell(table, "%zu x %zu", row->n, row->d);
        table_cell(table, "%s", grad_tensor_name(r->tensor));
        table_cell(table, "%zu %s", r->report.count, grad_check_is_directional(r->method) ? "directions" : "values");
        table_cell(table, "%.1e", r->report.max_abs_error);
        table_cell(table, "%.1e", r->report.max_rel_error);
        tolerance_cell(table, &r->report);
        table_cell(table, "%zu", r->evaluations);
        table_cell(table, "%.3f s", r->seconds);
    }
    table_print(table, stdout, format);
    table_free(table);
}

/* Is this row the one of its check (method) that used most of its tolerance? */
static bool worst_of_its_check(const GradCheckRows *rows, size_t index)
{
    const GradCheckResult *r = &rows->rows[index].result;
    for (size_t i = 0; i < rows->count; i++) {
        const GradCheckResult *other = &rows->rows[i].result;
        if (other->method == r->method && other->report.tolerance_used > r->report.tolerance_used)
            return false;
    }
    return true;
}

static void print_element_checks(const GradCheckRows *rows, TableFormat format)
{
    const char *headers[] = {"check", "shape", "gradient", "max abs error", "of tolerance"};
    Table *table = TABLE_NEW(headers, "lllrr");
    for (size_t i = 0; i < rows->count; i++) {
        const GradCheckRow *row = &rows->rows[i];
        if (grad_check_is_directional(row->result.method))
            continue;
        table_cell(table, "%s", grad_check_method_kind(row->result.method));
        table_cell(table, "%zu x %zu", row->n, row->d);
        table_cell(table, "%s", grad_tensor_name(row->result.tensor));
        table_cell(table, "%.1e", row->result.report.max_abs_error);
        tolerance_cell(table, &row->result.report);
        if (worst_of_its_check(rows, i))
            table_bold_last(table);
    }
    table_print(table, stdout, format);
    table_free(table);
}

static void print_directional_checks(const GradCheckRows *rows, TableFormat format)
{
    const char *headers[] = {"check",        "gradient",         "max abs error", "max rel error",
                             "of tolerance", "loss evaluations", "time"};
    Table *table = TABLE_NEW(headers, "llrrrrr");
    for (size_t i = 0; i < rows->count; i++) {
        const GradCheckRow *row = &rows->rows[i];
        const GradCheckResult *r = &row->result;
        if (!grad_check_is_directional(r->method))
            continue;
        table_cell(table, "%s", grad_check_method_kind(r->method));
        table_cell(table, "%s", grad_tensor_name(r->tensor));
        table_cell(table, "%.1e", r->report.max_abs_error);
        table_cell(table, "%.1e", r->report.max_rel_error);
        tolerance_cell(table, &r->report);
        if (worst_of_its_check(rows, i))
            table_bold_last(table);
        table_cell(table, "%zu", r->evaluations);
        table_cell(table, "%.3f s", r->seconds);
    }
    table_print(table, stdout, format);
    table_free(table);
}

/* The directional rows share one shape and one count of directions. */
static const GradCheckRow *first_directional(const GradCheckRows *rows)
{
    for (size_t i = 0; i < rows->count; i++)
        if (grad_check_is_directional(rows->rows[i].result.method))
            return &rows->rows[i];
    return NULL;
}

/* The book's two tables: the checks of every element, then those along
 * random directions; the worst share of tolerance of each check in bold. */
static void print_gradcheck_tables(const GradCheckRows *rows, TableFormat format)
{
    printf("Every element:\n\n");
    print_element_checks(rows, format);
    const GradCheckRow *directional = first_directional(rows);
    if (directional == NULL)
        return;
    printf("\nAlong %zu random directions, on %zu x %zu:\n\n", directional->result.report.count, directional->n,
           directional->d);
    print_directional_checks(rows, format);
    /* What these directions would catch of an error in one element of dx,
     * the largest tensor, for each directional method that ran. */
    const double relative = 1e-4;
    size_t length = directional->n * directional->d;
    int directions = (int)directional->result.report.count;
    printf("\nOne element of dx off by %g of a typical element (|gradient| / sqrt(N), N = %zu) is caught by "
           "these %d directions with probability about",
           relative, length, directions);
    const char *separator = "";
    for (size_t i = 0; i < rows->count; i++) {
        const GradCheckResult *r = &rows->rows[i].result;
        if (grad_check_is_directional(r->method) && r->tensor == TENSOR_X) {
            printf("%s %.3g (%s)", separator, grad_check_catch_probability(r->method, length, relative, directions),
                   grad_check_method_kind(r->method));
            separator = ",";
        }
    }
    printf(".\n");
}

int gradcheck_command(int argc, char **argv)
{
    long seed = 1;
    bool markdown = false, all = false;
    const char *norm = NULL;
    const CliOption options[] = {
        {"--seed", CLI_INT,    &seed, 0, 1L << 62, "random seed of the points and the directions"    },
        {"--norm", CLI_STRING, &norm, 0, 0,        norm_help                                         },
        {"--all",  CLI_FLAG,   &all,  0, 0,        "one table, every column (counts compared, times)"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    GradCheckRows rows = {0};
    bool ok = grad_check_plan_run(norm_option(norm), (uint64_t)seed, keep_gradcheck_row, &rows);
    if (all)
        print_every_gradcheck_column(&rows, table_format_for(markdown));
    else
        print_gradcheck_tables(&rows, table_format_for(markdown));
    array_free(rows.rows);
    return ok ? 0 : 1;
}

int edge_cases_command(int argc, char **argv)
{
    bool markdown = false;
    const char *norm = NULL;
    const CliOption options[] = {
        {"--norm", CLI_STRING, &norm, 0, 0, norm_help},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    TableFormat format = table_format_for(markdown);
    static EdgeChecks checks;
    bool ok = edge_cases_run_all(norm_option(norm), &checks);
    const char *headers[] = {"case", "shape", "check", "measured", "allowed", "result"};
    Table *table = TABLE_NEW(headers, "llllll");
    for (int i = 0; i < checks.count; i++) {
        const EdgeCheck *c = &checks.checks[i];
        table_cell(table, "%s", c->name);
        table_cell(table, "%s", c->shape);
        table_cell(table, "%s", c->check);
        table_cell(table, "%s", c->measured);
        table_cell(table, "%s", c->allowed);
        table_cell(table, "%s", c->ok ? "ok" : "FAIL");
    }
    table_print(table, stdout, format);
    table_free(table);
    return ok ? 0 : 1;
}

int complexity_command(int argc, char **argv)
{
    complexity_print(stdout, table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int cache_memory_command(int argc, char **argv)
{
    cache_memory_print(stdout, table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int storage_command(int argc, char **argv)
{
    storage_accuracy_print(stdout, table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int failure_command(int argc, char **argv)
{
    const char *mode = NULL;
    bool markdown = false;
    char mode_help[128];
    snprintf(mode_help, sizeof mode_help, "the failure mode to show: %s", failure_mode_names);
    const CliOption options[] = {
        {"--mode", CLI_STRING, &mode, 0, 0, mode_help},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (mode == NULL)
        cli_fail("needs --mode, one of %s", failure_mode_names);
    if (!failure_mode_print(mode, stdout, table_format_for(markdown)))
        cli_fail("--mode expects one of %s, got '%s'", failure_mode_names, mode);
    return 0;
}

int bench_command(int argc, char **argv)
{
    bool quick = false, markdown = false;
    const CliOption options[] = {
        {"--quick", CLI_FLAG, &quick, 0, 0, "d = 4096 only, 5 rounds instead of 7 (3 for 16-bit rows)"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    bench_cpu_print(stdout, table_format_for(markdown), quick);
    return 0;
}
