/* A chapter's GPU goals, checked against its results file: each goal names
 * rows of one of the file's tables (column = value), the column that holds
 * the figure, and the bound the best of those rows must meet. The verdicts
 * are computed from the file the book shows, so no measured figure is typed
 * into the prose, and a new results file brings its own verdicts. */
#ifndef COMMON_GOALS_H
#define COMMON_GOALS_H

#include <stdbool.h>
#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define GOAL_MAX_WHERE 3

typedef struct {
    const char *operation;                /* what the verdict's row names */
    const char *where[GOAL_MAX_WHERE][2]; /* (column, value) pairs; a NULL column ends them */
    const char *measure;                  /* the header of the column that holds the figure */
    double bound;                         /* the goal */
    bool at_most;                         /* a time: the figure must be <= bound; else a share, >= */
    const char *unit;                     /* printed after the bound: "%", " µs" */
} Goal;

/* What the file says about one goal. The figure of a cell is its leading
 * number ("77% (77–77%)" is 77); a row whose cell has none (a case the
 * benchmark found WRONG) is counted, and makes the verdict "wrong". */
typedef struct {
    int rows;         /* rows that matched `where` */
    int wrong;        /* of them, rows whose figure is not a number */
    double best;      /* the best figure among the rest: largest, or smallest if at_most */
    char version[16]; /* that row's "version" cell, or "" */
    char cell[64];    /* that row's figure as the file gives it, spread included */
} GoalMeasured;

/* Read the tables of the Markdown file `results` (positioned at its start)
 * and measure `goal` in the first table that has every column it names. */
GoalMeasured goal_measure(FILE *results, const Goal *goal);

/* "met", "missed by 8 points", "missed: 1.9× the goal", "wrong result",
 * "not in the file": the verdict on `measured`, into `out`. */
void goal_verdict(const Goal *goal, const GoalMeasured *measured, char *out, size_t size);

/* The best figure for `goal` in the results file at `path`: NaN where there
 * is no such file, no matching row, or only WRONG ones. A file that exists
 * but cannot be read is one line on stderr and exit 2. How a model's
 * prediction is set beside what a GPU measured. */
double goal_figure_in(const char *path, const Goal *goal);

/* A Markdown table of every goal: the operation, the goal, the best row's
 * figure with the spread the file gives it, its version, the verdict. A file that cannot be read is one line on
 * stderr and exit 2. */
void goals_print(const char *results_path, const Goal *goals, int count, FILE *out);

COMMON_END_C

#endif
