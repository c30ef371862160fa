#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/table.h"
#include "common/testing.h"

static Table *example_table(void)
{
    const char *headers[] = {"kernel", "time", "GB/s"};
    Table *table = TABLE_NEW(headers, "lrr");
    table_cell(table, "%s", "naive");
    table_cell(table, "%.3f ms", 1.234);
    table_cell(table, "%.1f", 12.5);
    table_cell(table, "fused|v%d", 2); /* a '|' that Markdown must escape */
    table_cell(table, "0.5 µs");       /* two characters in three bytes */
    table_cell(table, "%.1f", 1234.0);
    return table;
}

static char *printed(const Table *table, TableFormat format)
{
    CapturedOutput captured;
    table_print(table, capture_output(&captured), format);
    return captured_text(&captured);
}

static void expect_printed(const Table *table, TableFormat format, const char *expected, const char *what)
{
    char *text = printed(table, format);
    EXPECT(strcmp(text, expected) == 0, "%s:\n--- got\n%s--- expected\n%s", what, text, expected);
    free(text);
}

static void test_formats(void)
{
    Table *table = example_table();
    expect_printed(table, TABLE_TEXT,
                   "kernel        time    GB/s\n"
                   "--------  --------  ------\n"
                   "naive     1.234 ms    12.5\n"
                   "fused|v2    0.5 µs  1234.0\n",
                   "aligned text, widths in characters, no trailing spaces");
    expect_printed(table, TABLE_MARKDOWN,
                   "| kernel    |     time |   GB/s |\n"
                   "|:----------|---------:|-------:|\n"
                   "| naive     | 1.234 ms |   12.5 |\n"
                   "| fused\\|v2 |   0.5 µs | 1234.0 |\n",
                   "Markdown pipe table with alignment row and escaped '|'");
    table_free(table);
}

static void test_growth_and_empty(void)
{
    const char *headers[] = {"n"};
    Table *table = TABLE_NEW(headers, "r");
    expect_printed(table, TABLE_TEXT, "n\n-\n", "a table without rows prints its header");
    /* Far more cells than the first allocation holds. */
    for (int i = 0; i < 1000; i++) {
        table_cell(table, "%d", i);
    }
    char *text = printed(table, TABLE_TEXT);
    EXPECT(strncmp(text, "  n\n---\n  0\n  1\n", 16) == 0, "1000 rows start right: %.20s", text);
    EXPECT(strstr(text, "\n998\n999\n") != NULL && strlen(text) == 8 + 1000 * 4, "1000 rows end right");
    free(text);
    table_free(table);
    table_free(NULL);
}

/* A bold cell is wider by its four asterisks in Markdown and its column
 * stays aligned; plain text prints the cell as it is. */
static void test_bold(void)
{
    const char *headers[] = {"model", "KiB"};
    Table *table = TABLE_NEW(headers, "lr");
    table_cell(table, "small");
    table_cell(table, "%d", 800);
    table_bold_last(table);
    table_cell(table, "large");
    table_cell(table, "%d", 320);
    expect_printed(table, TABLE_MARKDOWN,
                   "| model |     KiB |\n"
                   "|:------|--------:|\n"
                   "| small | **800** |\n"
                   "| large |     320 |\n",
                   "the bold cell in ** and its column padded to fit it");
    expect_printed(table, TABLE_TEXT,
                   "model  KiB\n"
                   "-----  ---\n"
                   "small  800\n"
                   "large  320\n",
                   "plain text unchanged by bold");
    table_free(table);
}

static void bold_before_any_cell(void *ctx)
{
    (void)ctx;
    const char *headers[] = {"a"};
    /* Kept in a static (volatile: the store is never read back, and the
     * compiler would drop it), so that the table is still reachable when
     * the error exits: the leak sanitizer would report it on stderr. */
    static Table *volatile table;
    table = TABLE_NEW(headers, "l");
    table_bold_last(table);
}

static void print_short_row(void *ctx)
{
    (void)ctx;
    static Table *volatile table; /* reachable at the error's exit, as above */
    table = example_table();
    table_cell(table, "forgotten");
    table_print(table, stdout, TABLE_TEXT);
}

static void make_bad_alignment(void *ctx)
{
    (void)ctx;
    const char *headers[] = {"a", "b"};
    TABLE_NEW(headers, "lx");
}

static void expect_one_line_exit_1(void (*body)(void *), const char *expected, const char *what)
{
    ChildResult child = test_run_child(body, NULL);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strcmp(child.err, expected) == 0,
           "%s: status %d, stderr:\n%s", what, child.exit_status, child.err);
}

int main(int argc, char **argv)
{
    (void)argc;
    cli_set_program_name(argv[0]);
    test_formats();
    test_growth_and_empty();
    test_bold();
    expect_one_line_exit_1(bold_before_any_cell, "test_table: error: table_bold_last: the table has no cell yet\n",
                           "bold before any cell stops the program");
    expect_one_line_exit_1(print_short_row, "test_table: error: table_print: the last row has 1 of 3 cells\n",
                           "a short last row stops the program");
    expect_one_line_exit_1(
        make_bad_alignment,
        "test_table: error: table_new: align \"lx\" must have one 'l' or 'r' for each of the 2 columns\n",
        "a bad alignment string stops the program");
    return test_finish();
}
