/* The derivative subcommands: the central difference against its error
 * model, and the complex step beside it, as a table and as figure data. */
#include <math.h>

#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/commands.h"
#include "chapters/01-cancellation/derivative.h"
#include "common/cli.h"
#include "common/files.h"

/* The best step of the central difference for exp, predicted and measured. */
static void print_prediction(const TestFunction *exp_function, double u, bool markdown)
{
    BestStep measured = best_grid_step(exp_function, CENTRAL_DIFFERENCE, DERIVATIVE_POINTS);
    double h_star = predicted_best_step(u);
    printf("Central difference of %s, worst relative error over %d points in [%g, %g], steps 10^(-k/%d):\n\n",
           exp_function->name, DERIVATIVE_POINTS, exp_function->lo, exp_function->hi, DERIVATIVE_STEPS_PER_DECADE);
    const char *headers[] = {"", "predicted", "measured"};
    Table *table = TABLE_NEW(headers, "lrr");
    table_cell(table, "best step");
    table_cell(table, "%.1e", h_star);
    table_cell(table, "%.1e", measured.step);
    table_cell(table, "smallest error");
    table_cell(table, "%.1e", predicted_error(h_star, u));
    table_cell(table, "%.1e", measured.error);
    print_table(table, markdown);
}

/* Both methods on every test function: the central difference at the step
 * predicted for exp, the complex step at COMPLEX_STEP. */
static void print_both_methods(double u, bool markdown)
{
    printf("\nBoth methods on several functions, worst relative error over %d points (u = %.1e):\n\n",
           DERIVATIVE_POINTS, u);
    const char *headers[] = {"function", "interval", "central difference, predicted best step",
                             "complex step, h = 2^-66", "complex step / u"};
    Table *table = TABLE_NEW(headers, "lrrrr");
    for (int f = 0; f < test_function_count; f++) {
        const TestFunction *function = &test_functions[f];
        double central = worst_relative_error(function, CENTRAL_DIFFERENCE, predicted_best_step(u), DERIVATIVE_POINTS);
        double complex_error = worst_relative_error(function, COMPLEX_STEP_DERIVATIVE, COMPLEX_STEP, DERIVATIVE_POINTS);
        table_cell(table, "%s", function->name);
        table_cell(table, "[%g, %g]", function->lo, function->hi);
        table_cell(table, "%.1e", central);
        table_cell(table, "%.1e", complex_error);
        table_cell(table, "%.1f", complex_error / u);
    }
    print_table(table, markdown);
}

int derivative_command(int argc, char **argv)
{
    bool markdown = cli_parse_markdown_only(argc, argv);
    double u = unit_roundoff(PRECISION_DOUBLE);
    print_prediction(&test_functions[0], u, markdown);
    print_both_methods(u, markdown);
    return 0;
}

int derivative_data_command(int argc, char **argv)
{
    const char *output = "derivative-error.dat";
    const CliOption options[] = {
        {"--output", CLI_STRING, &output, 0, 0, "the file to write"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    const TestFunction *exp_function = &test_functions[0];
    double u = unit_roundoff(PRECISION_DOUBLE);
    WholeFile written;
    FILE *file = whole_file_open_or_exit(&written, output);
    fprintf(file, "# %s on [%g, %g], worst relative error over %d points; best step predicted at %.6e\n",
            exp_function->name, exp_function->lo, exp_function->hi, DERIVATIVE_POINTS, predicted_best_step(u));
    fprintf(file, "# h central_difference complex_step predicted_central truncation unit_roundoff\n");
    for (int k = 0; k < DERIVATIVE_STEP_COUNT; k++) {
        double h = derivative_grid_step(k);
        fprintf(file, "%.6e %.6e %.6e %.6e %.6e %.6e\n", h,
                worst_relative_error(exp_function, CENTRAL_DIFFERENCE, h, DERIVATIVE_POINTS),
                worst_relative_error(exp_function, COMPLEX_STEP_DERIVATIVE, h, DERIVATIVE_POINTS),
                predicted_error(h, u), h * h / 6, u);
    }
    whole_file_commit_or_exit(&written);
    return 0;
}
