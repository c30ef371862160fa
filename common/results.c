#include "common/results.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/files.h"

const char *results_commit(const char *given)
{
    if (given != NULL)
        return given;
    const char *from_environment = getenv("GIT_COMMIT");
    return from_environment != NULL ? from_environment : "unknown";
}

void results_stamp(FILE *out, const char *device, const char *commit)
{
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(out, "device: %s  \ndate: %s  \ncommit: %s  \n", device, date, commit);
}

void results_show(const char *path)
{
    const char *why;
    FILE *file = open_regular_file(path, &why);
    if (file == NULL && errno != ENOENT) {
        cli_fail("%s: %s", path, why);
    }
    if (file == NULL) {
        printf("No results recorded yet: there is no file `%s`. On a machine with a GPU,\n"
               "`bash .ci/gpu-session COMMIT OUTDIR` runs this chapter's GPU benchmark and\n"
               "PyTorch's side by side, and writes it, stamped with the device, the CUDA\n"
               "version, the date and the commit.\n",
               path);
        return;
    }
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, file)) > 0)
        fwrite(buffer, 1, n, stdout);
    if (ferror(file))
        cli_fail("%s: read error: %s", path, strerror(errno));
    fclose(file);
}

int results_command_with_goals(int argc, char **argv, const Goal *goals, int count)
{
    const char *file = "gpu-results.md";
    bool verdicts = false;
    const CliOption options[] = {
        {"--file",  CLI_STRING, &file,     0, 0, "the results file: gpu-results.md or torch-results.md"    },
        {"--goals", CLI_FLAG,   &verdicts, 0, 0, "instead of the file, its verdicts on the chapter's goals"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (verdicts && count == 0)
        cli_fail("--goals: this chapter sets no GPU goals");
    struct stat status;
    if (verdicts && (stat(file, &status) == 0 || errno != ENOENT))
        goals_print(file, goals, count, stdout);
    else
        results_show(file);
    return 0;
}

int results_command(int argc, char **argv)
{
    return results_command_with_goals(argc, argv, NULL, 0);
}

GpuBenchOptions results_parse_bench_options(int argc, char **argv, const char *quick_help)
{
    GpuBenchOptions o = {0};
    const CliOption options[] = {
        {"--quick",   CLI_FLAG,   &o.quick,   0, 0, quick_help                                                 },
        {"--results", CLI_STRING, &o.results, 0, 0, "also write the tables to this file (Markdown), stamped"   },
        {"--commit",  CLI_STRING, &o.commit,  0, 0, "the commit to stamp; without it $GIT_COMMIT, else unknown"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    return o;
}

/* vsnprintf into a string of the length it needs. */
static char *format_new(const char *format, va_list args)
{
    va_list again;
    va_copy(again, args);
    int length = vsnprintf(NULL, 0, format, args);
    char *text = ALLOC_ARRAY((size_t)length + 1, char);
    vsnprintf(text, (size_t)length + 1, format, again);
    va_end(again);
    return text;
}

BenchReport *bench_report_new(const char *how_format, ...)
{
    BenchReport *report = ALLOC_ARRAY(1, BenchReport);
    va_list args;
    va_start(args, how_format);
    report->how = format_new(how_format, args);
    va_end(args);
    return report;
}

void bench_report_add(BenchReport *report, Table *table, const char *caption_format, ...)
{
    if (report->table_count == BENCH_REPORT_MAX_TABLES) {
        cli_fail_status(1, "internal error: a report holds at most %d tables", BENCH_REPORT_MAX_TABLES);
    }
    char *caption = NULL;
    if (caption_format != NULL) {
        va_list args;
        va_start(args, caption_format);
        caption = format_new(caption_format, args);
        va_end(args);
    }
    report->captions[report->table_count] = caption;
    report->tables[report->table_count++] = table;
}

void bench_report_print(const BenchReport *report, FILE *out, TableFormat format)
{
    fprintf(out, "%s\n", report->how);
    for (int i = 0; i < report->table_count; i++) {
        fprintf(out, "\n");
        if (report->captions[i] != NULL) {
            fprintf(out, "%s\n\n", report->captions[i]);
        }
        table_print(report->tables[i], out, format);
    }
}

void bench_report_free(BenchReport *report)
{
    for (int i = 0; i < report->table_count; i++) {
        table_free(report->tables[i]);
        array_free(report->captions[i]);
    }
    array_free(report->how);
    array_free(report);
}

void results_write(const char *path, const char *title, const char *device, const char *commit,
                   const BenchReport *report)
{
    WholeFile written; /* a results file is never left cut short */
    FILE *file = whole_file_open_or_exit(&written, path);
    fprintf(file, "%s\n\n", title);
    results_stamp(file, device, results_commit(commit));
    fprintf(file, "\n");
    bench_report_print(report, file, TABLE_MARKDOWN);
    whole_file_commit_or_exit(&written);
    printf("\nwrote %s\n", path);
}

void results_publish(BenchReport *report, const GpuBenchOptions *options, const char *program, const char *device)
{
    printf("\n");
    results_stamp(stdout, device, results_commit(options->commit));
    printf("\n");
    bench_report_print(report, stdout, TABLE_TEXT);
    if (options->results != NULL) {
        char title[256];
        snprintf(title, sizeof title, "GPU results of %s gpu-bench%s", program, options->quick ? " --quick" : "");
        results_write(options->results, title, device, options->commit, report);
    }
    bench_report_free(report);
}

void results_wrong_cells(Table *table, const char *why, int dashes)
{
    table_cell(table, "WRONG: %s", why);
    for (int i = 0; i < dashes; i++) {
        table_cell(table, "-");
    }
}
