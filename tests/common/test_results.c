/* common/results: the options every chapter's gpu-bench takes, the results
 * file results_write writes, and the row of a case that did not validate.
 * The gpu-bench subcommands themselves run only on a GPU; what they share is
 * checked here, in every build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/results.h"
#include "common/table.h"
#include "common/testing.h"
#include "tests/scratch_directory.h"

#define QUICK_HELP "fewer rows and runs"

static void test_options(void)
{
    char name[] = "gpu-bench", quick[] = "--quick", results[] = "--results", file[] = "out.md",
         commit[] = "--commit=abc";
    char *none[] = {name, NULL};
    GpuBenchOptions o = results_parse_bench_options(1, none, QUICK_HELP);
    EXPECT(!o.quick && o.results == NULL && o.commit == NULL, "no options: not quick, no file, no commit");
    char *all[] = {name, quick, results, file, commit, NULL};
    o = results_parse_bench_options(5, all, QUICK_HELP);
    EXPECT(o.quick && o.results != NULL && strcmp(o.results, "out.md") == 0 && o.commit != NULL &&
               strcmp(o.commit, "abc") == 0,
           "--quick --results out.md --commit=abc are all taken");
}

static void parse_in_child(void *ctx)
{
    char name[] = "gpu-bench";
    char *argv[] = {name, ctx, NULL};
    results_parse_bench_options(2, argv, QUICK_HELP);
}

static void test_option_errors(void)
{
    char markdown[] = "--markdown", help[] = "--help";
    ChildResult child = test_run_child(parse_in_child, markdown);
    EXPECT(child.exit_status == 2 && child.err_lines == 1 && strstr(child.err, "unknown option '--markdown'") != NULL,
           "gpu-bench takes no --markdown: status %d, stderr:\n%s", child.exit_status, child.err);
    child = test_run_child(parse_in_child, help);
    EXPECT(child.exit_status == 0 && strstr(child.out, QUICK_HELP) != NULL && strstr(child.out, "--results") != NULL &&
               strstr(child.out, "--commit") != NULL,
           "--help lists the three options with the chapter's meaning of --quick:\n%s", child.out);
}

/* A report of two tables, the second with a caption. */
static BenchReport *demo_report(void)
{
    const char *headers[] = {"a"};
    BenchReport *report = bench_report_new("how: %d runs", 5);
    for (int i = 0; i < 2; i++) {
        Table *table = TABLE_NEW(headers, "r");
        table_cell(table, "%d", i);
        bench_report_add(report, table, i == 0 ? NULL : "caption %d:", i);
    }
    return report;
}

static void write_in_child(void *ctx)
{
    BenchReport *report = demo_report();
    results_write(ctx, "GPU results of demo gpu-bench --quick", "Demo GPU", "abc", report);
    bench_report_free(report);
}

/* results_publish: the stamp and the report on stdout, then the file with
 * the title that names the program and --quick. */
static void publish_in_child(void *ctx)
{
    char name[] = "gpu-bench", quick[] = "--quick", results[] = "--results", commit[] = "--commit=abc";
    char *argv[] = {name, quick, results, ctx, commit, NULL};
    GpuBenchOptions options = results_parse_bench_options(5, argv, QUICK_HELP);
    results_publish(demo_report(), &options, "demo", "Demo GPU");
}

static char *read_text(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        return NULL;
    }
    static char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
    return text;
}

static void test_write(const char *directory)
{
    char path[512], expected_out[600];
    snprintf(path, sizeof path, "%s/gpu-results.md", directory);
    ChildResult child = test_run_child(write_in_child, path);
    snprintf(expected_out, sizeof expected_out, "\nwrote %s\n", path);
    EXPECT(child.exit_status == 0 && strcmp(child.out, expected_out) == 0, "says where it wrote: status %d, out:\n%s",
           child.exit_status, child.out);
    const char *text = read_text(path);
    const char *head = "GPU results of demo gpu-bench --quick\n\ndevice: Demo GPU  \ndate: ";
    const char *tail =
        " UTC  \ncommit: abc  \n\nhow: 5 runs\n\n| a |\n|--:|\n| 0 |\n\ncaption 1:\n\n| a |\n|--:|\n| 1 |\n";
    EXPECT(text != NULL && strncmp(text, head, strlen(head)) == 0 && strlen(text) > strlen(tail) &&
               strcmp(text + strlen(text) - strlen(tail), tail) == 0,
           "the title, the stamp, a blank line, then the report in Markdown:\n%s", text != NULL ? text : "(no file)");
    unlink(path);

    child = test_run_child(publish_in_child, path);
    text = read_text(path);
    EXPECT(child.exit_status == 0 && strncmp(child.out, "\ndevice: Demo GPU  \n", 20) == 0 &&
               strstr(child.out, "how: 5 runs\n\na\n-\n0\n\ncaption 1:\n\na\n-\n1\n\nwrote ") != NULL && text != NULL &&
               strncmp(text, head, strlen(head)) == 0,
           "publish: the stamp and the text tables on stdout, then the file: status %d, out:\n%s", child.exit_status,
           child.out);
    unlink(path);

    /* A file that cannot be created, and a device (/dev/full), which a
     * file renamed into place would replace: one line, status 1. (A write
     * that fails half-way leaves the path as it was: test_files.) */
    snprintf(path, sizeof path, "%s/no such directory/gpu-results.md", directory);
    child = test_run_child(write_in_child, path);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, "cannot create") != NULL,
           "a file that cannot be created: status %d, stderr:\n%s", child.exit_status, child.err);
    if (access("/dev/full", W_OK) == 0) {
        char full[] = "/dev/full";
        child = test_run_child(write_in_child, full);
        EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, "not a regular file") != NULL &&
                   strstr(child.out, "wrote") == NULL,
               "a device: status %d, stderr:\n%s", child.exit_status, child.err);
    }
}

static void test_wrong_cells(void)
{
    const char *headers[] = {"case", "ms", "GB/s", "speed-up"};
    Table *table = TABLE_NEW(headers, "lrrr");
    table_cell(table, "a");
    results_wrong_cells(table, "3 of 8 values off", 2);
    CapturedOutput captured;
    table_print(table, capture_output(&captured), TABLE_TEXT);
    char *text = captured_text(&captured);
    const char *expected = "case                        ms  GB/s  speed-up\n"
                           "----  ------------------------  ----  --------\n"
                           "a     WRONG: 3 of 8 values off     -         -\n";
    EXPECT(strcmp(text, expected) == 0, "WRONG and why, then a dash for each time:\n%s", text);
    free(text);
    table_free(table);
}

int main(int argc, char **argv)
{
    (void)argc;
    cli_set_program_name(argv[0]);
    if (!scratch_directory_make("/tmp/test_results.XXXXXX")) {
        return 1;
    }
    test_options();
    test_option_errors();
    test_write(scratch_directory);
    test_wrong_cells();
    scratch_directory_remove();
    return test_finish();
}
