/* Results files: what a GPU benchmark measured, written by the program on a
 * machine with a GPU and shown by the book wherever it is built. A results
 * file says where it came from (device, date, commit) in its first lines. */
#ifndef COMMON_RESULTS_H
#define COMMON_RESULTS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/goals.h"
#include "common/hostdevice.h"
#include "common/table.h"

COMMON_BEGIN_C

/* The commit to stamp: `given` if not NULL, else $GIT_COMMIT, else "unknown". */
const char *results_commit(const char *given);

/* "device: ...", "date: ..." (now, UTC) and "commit: ..." lines, each
 * ending in a Markdown line break. */
void results_stamp(FILE *out, const char *device, const char *commit);

/* The options every chapter's gpu-bench takes: --quick (`quick_help` says
 * what it leaves out), --results FILE and --commit C. Parsed, or exit 2. */
typedef struct {
    bool quick;
    const char *results; /* NULL: no results file */
    const char *commit;  /* as given; results_write resolves it */
} GpuBenchOptions;

GpuBenchOptions results_parse_bench_options(int argc, char **argv, const char *quick_help);

/* What a gpu-bench measured, as it is printed and written: a paragraph that
 * says how (the sizes, the copy bandwidth measured in the same run, what the
 * cells mean), then the tables, each after an optional caption. The report
 * owns the paragraph and the tables. */
#define BENCH_REPORT_MAX_TABLES 4

typedef struct {
    char *how;
    int table_count;
    Table *tables[BENCH_REPORT_MAX_TABLES];
    char *captions[BENCH_REPORT_MAX_TABLES]; /* NULL: none */
} BenchReport;

BenchReport *bench_report_new(const char *how_format, ...) __attribute__((format(printf, 1, 2)));
void bench_report_add(BenchReport *report, Table *table, const char *caption_format, ...)
    __attribute__((format(printf, 3, 4)));
void bench_report_print(const BenchReport *report, FILE *out, TableFormat format);
void bench_report_free(BenchReport *report);

/* Write the results file `path`: a title line, the stamp (`device`, the
 * date, results_commit(commit)), then the report in Markdown; then say
 * "wrote PATH" on stdout. A file that cannot be written or closed is one
 * line and exit 1. */
void results_write(const char *path, const char *title, const char *device, const char *commit,
                   const BenchReport *report);

/* The end of every gpu-bench: the stamp and the report on stdout; with
 * --results, the same in Markdown in that file, titled "GPU results of
 * PROGRAM gpu-bench" (and " --quick"); then the report is freed. */
void results_publish(BenchReport *report, const GpuBenchOptions *options, const char *program, const char *device);

/* A gpu-bench validates each case before it times it; a case whose output
 * did not match the reference is not timed, and its row says so the same
 * way in every chapter: "WRONG: why", then `dashes` cells of "-" where its
 * times would have been. */
void results_wrong_cells(Table *table, const char *why, int dashes);

/* Print the results file at `path` (a GPU benchmark's, or PyTorch's
 * side-by-side); when there is none, say so, and what writes it: the GPU
 * session script, .ci/gpu-session, on a machine with a GPU. */
void results_show(const char *path);

/* The `gpu-results` subcommand of every chapter program:
 * `PROGRAM gpu-results [--file FILE] [--goals]` shows FILE (default
 * gpu-results.md, in the chapter's directory) with results_show; with
 * --goals, the verdicts of FILE on the chapter's `goals` instead
 * (goals_print), or that there is no file. A chapter with no goals
 * refuses --goals (one line, exit 2). */
int results_command_with_goals(int argc, char **argv, const Goal *goals, int count);
/* results_command_with_goals for a chapter with no GPU goals. */
int results_command(int argc, char **argv);

COMMON_END_C

#endif
