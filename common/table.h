/* Tables of results, printed aligned for a terminal or as a Markdown pipe
 * table that pandoc renders in the book. The same code prints both, so the
 * book shows exactly what the program prints. */
#ifndef COMMON_TABLE_H
#define COMMON_TABLE_H

#include <stdbool.h>
#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef enum { TABLE_TEXT, TABLE_MARKDOWN } TableFormat;

typedef struct Table Table;

/* `align` has one character per column: 'l' left, 'r' right (numbers);
 * a table whose columns do not match it is a program error (one line,
 * status 1). */
Table *table_new(int columns, const char *const headers[], const char *align);
/* table_new for an array of headers in scope, whose length is the number of
 * columns: nothing to count by hand. (A pointer in place of the array is
 * caught twice: gcc's -Wsizeof-pointer-div, and table_new's check.) */
#define TABLE_NEW(headers, align) table_new((int)(sizeof(headers) / sizeof(headers)[0]), headers, align)
/* Append the next cell (rows fill left to right, then wrap to a new row). In
 * Markdown a cell is Markdown: `code` and $math$ work; '|' is escaped. */
void table_cell(Table *table, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Emphasise the cell appended last, the one a sentence beside the table is
 * about: **bold** in Markdown; plain text prints it as it is. */
void table_bold_last(Table *table);
/* Print the table; every row must be complete (a short last row is a
 * forgotten cell: the program stops with one line and status 1). */
void table_print(const Table *table, FILE *out, TableFormat format);

/* TABLE_MARKDOWN when --markdown was given, TABLE_TEXT otherwise. */
TableFormat table_format_for(bool markdown);
void table_free(Table *table);

COMMON_END_C

#endif
