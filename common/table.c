#include "common/table.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cli.h"

struct Table {
    int columns;
    char **headers;
    char *align;     /* 'l' or 'r' per column */
    char **cells;    /* row-major */
    bool *bold;      /* per cell: emphasised in Markdown */
    size_t count;    /* cells filled */
    size_t capacity; /* cells allocated */
};

static char *copy_text(const char *text)
{
    size_t length = strlen(text);
    char *copy = array_alloc(length + 1, 1);
    memcpy(copy, text, length);
    return copy;
}

Table *table_new(int columns, const char *const headers[], const char *align)
{
    if (columns < 1 || strlen(align) != (size_t)columns || strspn(align, "lr") != (size_t)columns) {
        cli_fail_status(1, "table_new: align \"%s\" must have one 'l' or 'r' for each of the %d columns", align,
                        columns);
    }
    Table *table = array_alloc(1, sizeof *table);
    table->columns = columns;
    table->align = copy_text(align);
    table->headers = array_alloc((size_t)columns, sizeof *table->headers);
    for (int c = 0; c < columns; c++) {
        table->headers[c] = copy_text(headers[c]);
    }
    return table;
}

void table_cell(Table *table, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int length = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (length < 0) {
        cli_fail_status(1, "table_cell: cannot format \"%s\"", fmt);
    }
    char *text = array_alloc((size_t)length + 1, 1);
    va_start(args, fmt);
    vsnprintf(text, (size_t)length + 1, fmt, args);
    va_end(args);

    if (table->count == table->capacity) {
        size_t capacity = table->capacity > 0 ? 2 * table->capacity : 16 * (size_t)table->columns;
        table->cells = array_resize(table->cells, table->count, capacity, sizeof *table->cells);
        table->bold = array_resize(table->bold, table->count, capacity, sizeof *table->bold);
        table->capacity = capacity;
    }
    table->bold[table->count] = false;
    table->cells[table->count++] = text;
}

void table_bold_last(Table *table)
{
    if (table->count == 0) {
        cli_fail_status(1, "table_bold_last: the table has no cell yet");
    }
    table->bold[table->count - 1] = true;
}

/* Columns are aligned by characters on screen, not bytes: "µs" is two
 * characters in three bytes of UTF-8. Continuation bytes are 10xxxxxx. */
static size_t display_width(const char *text)
{
    size_t width = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        width += (*p & 0xC0) != 0x80;
    }
    return width;
}

/* In Markdown a '|' inside a cell would end the cell: escape it. */
static size_t markdown_width(const char *text)
{
    size_t pipes = 0;
    for (const char *p = text; *p != '\0'; p++) {
        pipes += *p == '|';
    }
    return display_width(text) + pipes;
}

static size_t text_width(const char *text, bool bold, TableFormat format)
{
    /* Bold adds the four characters of ** and ** in Markdown. */
    return format == TABLE_MARKDOWN ? markdown_width(text) + (bold ? 4 : 0) : display_width(text);
}

static void print_repeated(FILE *out, char c, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        fputc(c, out);
    }
}

static void print_escaped(FILE *out, const char *text, TableFormat format)
{
    for (const char *p = text; *p != '\0'; p++) {
        if (format == TABLE_MARKDOWN && *p == '|') {
            fputc('\\', out);
        }
        fputc(*p, out);
    }
}

/* `bold` is NULL for the header row. */
static void print_row(const Table *table, FILE *out, TableFormat format, const char *const *texts, const bool *bold,
                      const size_t *widths)
{
    bool markdown = format == TABLE_MARKDOWN;
    for (int c = 0; c < table->columns; c++) {
        const char *text = texts[c];
        bool emphasised = markdown && bold != NULL && bold[c];
        size_t padding = widths[c] - text_width(text, emphasised, format);
        bool last = c == table->columns - 1;
        fputs(markdown ? (c == 0 ? "| " : " | ") : (c == 0 ? "" : "  "), out);
        if (table->align[c] == 'r') {
            print_repeated(out, ' ', padding);
        }
        fputs(emphasised ? "**" : "", out);
        print_escaped(out, text, format);
        fputs(emphasised ? "**" : "", out);
        /* Plain text leaves no trailing spaces after the last column. */
        if (table->align[c] == 'l' && (markdown || !last)) {
            print_repeated(out, ' ', padding);
        }
    }
    fputs(markdown ? " |\n" : "\n", out);
}

/* The line under the header: dashes as wide as each column, and in Markdown
 * a colon on the side a column is aligned to (|:---|---:|). */
static void print_rule(const Table *table, FILE *out, TableFormat format, const size_t *widths)
{
    bool markdown = format == TABLE_MARKDOWN;
    for (int c = 0; c < table->columns; c++) {
        if (markdown) {
            bool right = table->align[c] == 'r';
            fputs(right ? "|" : "|:", out);
            print_repeated(out, '-', widths[c] + 1);
            fputs(right ? ":" : "", out);
        } else {
            fputs(c == 0 ? "" : "  ", out);
            print_repeated(out, '-', widths[c]);
        }
    }
    fputs(markdown ? "|\n" : "\n", out);
}

void table_print(const Table *table, FILE *out, TableFormat format)
{
    size_t columns = (size_t)table->columns;
    /* A short last row means a cell was forgotten: every later cell would
     * otherwise have landed in the wrong column, unnoticed. */
    if (table->count % columns != 0) {
        cli_fail_status(1, "table_print: the last row has %zu of %zu cells", table->count % columns, columns);
    }
    size_t *widths = array_alloc(columns, sizeof *widths);
    for (size_t c = 0; c < columns; c++) {
        widths[c] = text_width(table->headers[c], false, format);
    }
    for (size_t i = 0; i < table->count; i++) {
        size_t width = text_width(table->cells[i], table->bold[i], format);
        widths[i % columns] = width > widths[i % columns] ? width : widths[i % columns];
    }
    print_row(table, out, format, (const char *const *)table->headers, NULL, widths);
    print_rule(table, out, format, widths);
    for (size_t row_start = 0; row_start < table->count; row_start += columns) {
        print_row(table, out, format, (const char *const *)&table->cells[row_start], &table->bold[row_start], widths);
    }
    array_free(widths);
}

void table_free(Table *table)
{
    if (table == NULL) {
        return;
    }
    for (size_t i = 0; i < table->count; i++) {
        array_free(table->cells[i]);
    }
    for (int c = 0; c < table->columns; c++) {
        array_free(table->headers[c]);
    }
    array_free(table->cells);
    array_free(table->bold);
    array_free(table->headers);
    array_free(table->align);
    array_free(table);
}

TableFormat table_format_for(bool markdown)
{
    return markdown ? TABLE_MARKDOWN : TABLE_TEXT;
}
