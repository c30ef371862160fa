/* common/goals: a chapter's GPU goals measured in its results file. The
 * file here is written as gpu-bench writes one: a paragraph, then tables. */
#include <stdio.h>
#include <string.h>

#include "common/goals.h"
#include "common/testing.h"

static const char RESULTS[] = "GPU results of demo gpu-bench\n"
                              "\n"
                              "| size | version | ms |\n" /* no share column: not the goals' table */
                              "|-----:|--------:|---:|\n"
                              "|  100 |       1 | 2.0 |\n"
                              "\n"
                              "| size | version |   ms | of read bandwidth (slowest–fastest) |\n"
                              "|-----:|--------:|-----:|------------------------------------:|\n"
                              "|  100 |       1 | 0.90 |                        40% (39–41%) |\n"
                              "|  100 |       2 | 0.41 |                        88% (87–90%) |\n"
                              "|  200 |       1 | 1.90 |                        38% (38–39%) |\n"
                              "|  200 |       2 | 1.00 |                        72% (70–73%) |\n"
                              "|  300 |       1 |    - |                   WRONG: index 7 |\n"
                              "|  300 |       2 | 1.50 |                        70% (70–70%) |\n"
                              "\n"
                              "One row:\n"
                              "\n"
                              "| size | version | microseconds (slowest–fastest) |\n"
                              "|-----:|--------:|-------------------------------:|\n"
                              "|  100 |       1 |            18.9 (19.0–18.9) |\n"
                              "|  100 |       2 |            51.7 (51.7–51.7) |\n";

#define SHARE "of read bandwidth (slowest–fastest)"

/* The verdict on `goal` in RESULTS, and what was measured. */
static GoalMeasured verdict_on(const Goal *goal, char *verdict, size_t size)
{
    FILE *file = fmemopen((void *)RESULTS, strlen(RESULTS), "r");
    GoalMeasured measured = goal_measure(file, goal);
    fclose(file);
    goal_verdict(goal, &measured, verdict, size);
    return measured;
}

int main(void)
{
    char verdict[64];

    Goal met = {"size 100", {{"size", "100"}}, SHARE, 85, false, "%"};
    GoalMeasured m = verdict_on(&met, verdict, sizeof verdict);
    EXPECT(m.rows == 2 && m.best == 88 && strcmp(m.version, "2") == 0,
           "the best of the two rows of size 100 in the share's table is version 2's 88: %d rows, %g, version '%s'",
           m.rows, m.best, m.version);
    EXPECT(strcmp(verdict, "met") == 0, "88%% against 85%%: '%s'", verdict);
    EXPECT(strcmp(m.cell, "88% (87–90%)") == 0, "the best row's cell keeps its spread: '%s'", m.cell);

    Goal missed = {"size 200", {{"size", "200"}}, SHARE, 85, false, "%"};
    m = verdict_on(&missed, verdict, sizeof verdict);
    EXPECT(m.best == 72 && strcmp(verdict, "missed by 13 points") == 0, "72%% against 85%%: '%s'", verdict);

    Goal wrong = {"size 300", {{"size", "300"}}, SHARE, 60, false, "%"};
    m = verdict_on(&wrong, verdict, sizeof verdict);
    EXPECT(m.rows == 2 && m.wrong == 1 && strcmp(verdict, "wrong result in 1 of 2 rows") == 0,
           "a WRONG row is no figure, and no verdict of met: '%s'", verdict);

    Goal time = {"one row", {{"size", "100"}}, "microseconds (slowest–fastest)", 10, true, " µs"};
    m = verdict_on(&time, verdict, sizeof verdict);
    EXPECT(m.best == 18.9 && strcmp(m.version, "1") == 0, "a time's best is the smallest: %g, version '%s'", m.best,
           m.version);
    EXPECT(strcmp(verdict, "missed: 1.9× the goal") == 0, "18.9 µs against 10: '%s'", verdict);

    Goal quick = {"one row", {{"size", "100"}}, "microseconds (slowest–fastest)", 20, true, " µs"};
    verdict_on(&quick, verdict, sizeof verdict);
    EXPECT(strcmp(verdict, "met") == 0, "18.9 µs against 20: '%s'", verdict);

    Goal no_rows = {"size 400", {{"size", "400"}}, SHARE, 85, false, "%"};
    m = verdict_on(&no_rows, verdict, sizeof verdict);
    EXPECT(m.rows == 0 && strcmp(verdict, "not in the file") == 0, "no row of size 400: '%s'", verdict);

    Goal no_column = {"size 100", {{"width", "100"}}, SHARE, 85, false, "%"};
    verdict_on(&no_column, verdict, sizeof verdict);
    EXPECT(strcmp(verdict, "not in the file") == 0, "no table has a column 'width': '%s'", verdict);

    Goal two_columns = {
        "size 200, version 1", {{"size", "200"}, {"version", "1"}},
         SHARE, 30, false, "%"
    };
    m = verdict_on(&two_columns, verdict, sizeof verdict);
    EXPECT(m.rows == 1 && m.best == 38 && strcmp(verdict, "met") == 0, "both columns must match: %d rows, %g", m.rows,
           m.best);
    return test_finish();
}
