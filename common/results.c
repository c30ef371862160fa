#include "common/results.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

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

FILE *results_create(const char *path)
{
    FILE *file = fopen(path, "w");
    if (file == NULL)
        cli_fail_status(1, "--results %s: cannot write the file", path);
    return file;
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
    fclose(file);
}

int results_command(int argc, char **argv)
{
    const char *file = "gpu-results.md";
    const CliOption options[] = {
        {"--file", CLI_STRING, &file, 0, 0, "the results file: gpu-results.md or torch-results.md"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    results_show(file);
    return 0;
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

void results_write(const char *path, const char *title, const char *device, const char *commit,
                   void (*print)(FILE *out, const void *ctx), const void *ctx)
{
    FILE *file = results_create(path);
    fprintf(file, "%s\n\n", title);
    results_stamp(file, device, results_commit(commit));
    fprintf(file, "\n");
    print(file, ctx);
    if (ferror(file) | fclose(file)) { /* "|", not "||": close it either way */
        cli_fail_status(1, "--results %s: cannot write the file", path);
    }
    printf("\nwrote %s\n", path);
}

void results_wrong_cells(Table *table, const char *why, int dashes)
{
    table_cell(table, "WRONG: %s", why);
    for (int i = 0; i < dashes; i++) {
        table_cell(table, "-");
    }
}
