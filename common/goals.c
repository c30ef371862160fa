#include "common/goals.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/files.h"
#include "common/table.h"

#define MAX_COLUMNS 16
#define MAX_LINE 1024

static bool is_table_line(const char *line)
{
    return line[strspn(line, " ")] == '|';
}

/* Split a Markdown table line "| a | b |" into its trimmed cells, in place;
 * the number of cells, or -1 for a line that is not a table's. */
static int split_cells(char *line, char *cells[MAX_COLUMNS])
{
    if (!is_table_line(line))
        return -1;
    int count = 0;
    for (char *cell = strchr(line, '|') + 1, *bar; (bar = strchr(cell, '|')) != NULL && count < MAX_COLUMNS;
         cell = bar + 1) {
        *bar = '\0';
        while (*cell == ' ')
            cell++;
        for (char *end = bar; end > cell && end[-1] == ' ';)
            *--end = '\0';
        cells[count++] = cell;
    }
    return count;
}

/* The line under a table's header: cells of '-' and ':' only. */
static bool is_separator(const char *line)
{
    return is_table_line(line) && line[strspn(line, "|-: ")] == '\0';
}

static int column_named(char *const header[], int columns, const char *name)
{
    for (int i = 0; i < columns; i++)
        if (strcmp(header[i], name) == 0)
            return i;
    return -1;
}

typedef struct {
    const Goal *goal;
    char previous[MAX_LINE]; /* the line before, a header if a separator follows */
    bool in_table;           /* in the rows of the table that has the goal's columns */
    int measure, version, where[GOAL_MAX_WHERE];
    GoalMeasured measured;
} Reading;

/* The header of the table that starts here: does it have every column the
 * goal names? If so, remember where they are. */
static bool take_header(Reading *r)
{
    char *header[MAX_COLUMNS];
    int columns = split_cells(r->previous, header);
    r->measure = column_named(header, columns, r->goal->measure);
    r->version = column_named(header, columns, "version");
    bool has_all = r->measure >= 0;
    for (int w = 0; w < GOAL_MAX_WHERE && r->goal->where[w][0] != NULL; w++) {
        r->where[w] = column_named(header, columns, r->goal->where[w][0]);
        has_all = has_all && r->where[w] >= 0;
    }
    return has_all;
}

/* A row of the goal's table: if it matches every (column, value) of the
 * goal, count it, and keep its figure if it is the best so far. */
static void take_row(Reading *r, char *line)
{
    char *cells[MAX_COLUMNS];
    int count = split_cells(line, cells);
    if (count <= r->measure)
        return;
    for (int w = 0; w < GOAL_MAX_WHERE && r->goal->where[w][0] != NULL; w++)
        if (count <= r->where[w] || strcmp(cells[r->where[w]], r->goal->where[w][1]) != 0)
            return;
    GoalMeasured *m = &r->measured;
    m->rows++;
    char *end;
    double figure = strtod(cells[r->measure], &end);
    if (end == cells[r->measure] || !isfinite(figure)) {
        m->wrong++;
        return;
    }
    bool better = r->goal->at_most ? figure < m->best : figure > m->best;
    if (m->rows - m->wrong == 1 || better) {
        m->best = figure;
        snprintf(m->version, sizeof m->version, "%s", r->version >= 0 && count > r->version ? cells[r->version] : "");
        snprintf(m->cell, sizeof m->cell, "%s", cells[r->measure]);
    }
}

static int read_line(void *state, char *line, int line_number)
{
    (void)line_number;
    Reading *r = state;
    if (r->in_table) {
        if (!is_table_line(line))
            return 1; /* the table ended: one table is the goal's */
        take_row(r, line);
        return 0;
    }
    if (is_separator(line) && take_header(r)) {
        r->in_table = true;
        return 0;
    }
    snprintf(r->previous, sizeof r->previous, "%s", line);
    return 0;
}

GoalMeasured goal_measure(FILE *results, const Goal *goal)
{
    Reading r = {.goal = goal, .measured = {.best = NAN}};
    rewind(results);
    read_lines(results, read_line, &r);
    return r.measured;
}

void goal_verdict(const Goal *goal, const GoalMeasured *m, char *out, size_t size)
{
    if (m->rows == 0)
        snprintf(out, size, "not in the file");
    else if (m->wrong > 0)
        snprintf(out, size, "wrong result in %d of %d rows", m->wrong, m->rows);
    else if (goal->at_most ? m->best <= goal->bound : m->best >= goal->bound)
        snprintf(out, size, "met");
    else if (goal->at_most)
        snprintf(out, size, "missed: %.1f× the goal", m->best / goal->bound);
    else
        snprintf(out, size, "missed by %.0f points", goal->bound - m->best);
}

double goal_figure_in(const char *path, const Goal *goal)
{
    const char *why;
    FILE *results = open_regular_file(path, &why);
    if (results == NULL && errno == ENOENT)
        return NAN;
    if (results == NULL)
        cli_fail("%s: %s", path, why);
    GoalMeasured m = goal_measure(results, goal);
    if (ferror(results))
        cli_fail("%s: read error: %s", path, strerror(errno));
    fclose(results);
    return m.rows > m.wrong ? m.best : NAN;
}

void goals_print(const char *results_path, const Goal *goals, int count, FILE *out)
{
    const char *why;
    FILE *results = open_regular_file(results_path, &why);
    if (results == NULL)
        cli_fail("%s: %s", results_path, why);
    const char *headers[] = {"operation", "goal", "best measured, as the file gives it", "version", "verdict"};
    Table *table = table_new(5, headers, "llrrl");
    for (int i = 0; i < count; i++) {
        const Goal *goal = &goals[i];
        GoalMeasured m = goal_measure(results, goal);
        if (ferror(results))
            cli_fail("%s: read error: %s", results_path, strerror(errno));
        char verdict[64];
        goal_verdict(goal, &m, verdict, sizeof verdict);
        table_cell(table, "%s", goal->operation);
        table_cell(table, "%s %g%s", goal->at_most ? "≤" : "≥", goal->bound, goal->unit);
        if (m.rows > m.wrong)
            table_cell(table, "%s", m.cell); /* the median, and the spread the file gives beside it */
        else
            table_cell(table, "-");
        table_cell(table, "%s", m.version[0] != '\0' ? m.version : "-");
        table_cell(table, "%s", verdict);
    }
    fclose(results);
    table_print(table, out, TABLE_MARKDOWN);
    table_free(table);
}
