#include "common/resource_table.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/occupancy.h"

/* The last name before the template arguments or the parameter list,
 * namespaces and return type dropped: "void a::b<1>(int)" gives "b". */
static bool read_function(const char *demangled, const char **after, KernelSignature *out)
{
    const char *end = demangled + strcspn(demangled, "<(");
    const char *start = end;
    while (start > demangled && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
        start--;
    size_t length = (size_t)(end - start);
    if (length == 0 || length >= sizeof out->function)
        return false;
    memcpy(out->function, start, length);
    out->function[length] = '\0';
    *after = end;
    return true;
}

/* One template argument: "8", "(KvFormat)6", "true" or "false". */
static bool read_argument(const char **cursor, int *value)
{
    const char *c = *cursor;
    if (strncmp(c, "true", 4) == 0 || strncmp(c, "false", 5) == 0) {
        *value = c[0] == 't';
        *cursor = c + (c[0] == 't' ? 4 : 5);
        return true;
    }
    if (*c == '(') {
        c = strchr(c, ')');
        if (c == NULL)
            return false;
        c++;
    }
    char *end;
    long number = strtol(c, &end, 10);
    if (end == c || number < -1000000 || number > 1000000)
        return false;
    *value = (int)number;
    *cursor = end;
    return true;
}

bool kernel_signature_parse(const char *demangled, KernelSignature *out)
{
    *out = (KernelSignature){0};
    const char *cursor;
    if (!read_function(demangled, &cursor, out))
        return false;
    if (*cursor == '(')
        return true;
    cursor++; /* '<' */
    for (;;) {
        if (out->argument_count == KERNEL_SIGNATURE_MAX_ARGUMENTS ||
            !read_argument(&cursor, &out->arguments[out->argument_count++]))
            return false;
        if (*cursor == '>')
            return cursor[1] == '(';
        if (strncmp(cursor, ", ", 2) != 0)
            return false;
        cursor += 2;
    }
}

bool kernel_signature_is(const KernelSignature *signature, const char *function, int argument_count)
{
    return strcmp(signature->function, function) == 0 && signature->argument_count == argument_count;
}

typedef struct {
    char label[128];
    int threads_per_block;
    const KernelResources *kernel;
} ResourceRow;

struct ResourceTableRows {
    ResourceRow *rows;
    int count, capacity;
    const KernelResources *current; /* the kernel the rule is looking at */
};

void resource_table_add(ResourceTableRows *rows, int threads_per_block, const char *label_fmt, ...)
{
    if (rows->count == rows->capacity) {
        int grown = rows->capacity == 0 ? 16 : 2 * rows->capacity;
        rows->rows = array_resize(rows->rows, (size_t)rows->capacity, (size_t)grown, sizeof *rows->rows);
        rows->capacity = grown;
    }
    ResourceRow *row = &rows->rows[rows->count++];
    va_list args;
    va_start(args, label_fmt);
    vsnprintf(row->label, sizeof row->label, label_fmt, args);
    va_end(args);
    row->threads_per_block = threads_per_block;
    row->kernel = rows->current;
}

/* Labels in the order a reader counts: numbers by value, so that
 * "head_dim 64" comes before "head_dim 128". */
static int compare_naturally(const char *a, const char *b)
{
    while (*a != '\0' && *b != '\0') {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            char *a_end, *b_end;
            long x = strtol(a, &a_end, 10), y = strtol(b, &b_end, 10);
            if (x != y)
                return x < y ? -1 : 1;
            a = a_end;
            b = b_end;
        } else if (*a != *b) {
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        } else {
            a++;
            b++;
        }
    }
    return (*a != '\0') - (*b != '\0');
}

static int compare_rows(const void *a, const void *b)
{
    return compare_naturally(((const ResourceRow *)a)->label, ((const ResourceRow *)b)->label);
}

/* "registers", or "registers and warps" when two limits tie. */
static void bound_names(unsigned bound, char *names, size_t size)
{
    names[0] = '\0';
    for (unsigned flag = 1; flag <= OCCUPANCY_BOUND_BY_BLOCKS; flag <<= 1) {
        if (!(bound & flag))
            continue;
        size_t used = strlen(names);
        snprintf(names + used, size - used, "%s%s", used > 0 ? " and " : "", occupancy_bound_name(flag));
    }
}

static void add_cells(Table *table, const ResourceRow *row)
{
    const KernelResources *k = row->kernel;
    Occupancy o = occupancy_compute(&SM90_LIMITS, row->threads_per_block, k->registers, k->shared_bytes);
    char bound[64];
    bound_names(o.bound, bound, sizeof bound);
    table_cell(table, "%s", row->label);
    table_cell(table, "%d", row->threads_per_block);
    table_cell(table, "%d", k->registers);
    table_cell(table, "%ld / %ld", k->spill_store_bytes, k->spill_load_bytes);
    table_cell(table, "%ld", k->stack_bytes);
    table_cell(table, "%ld", k->shared_bytes);
    table_cell(table, "%d", o.blocks_per_sm);
    table_cell(table, "%d", o.warps_per_sm);
    table_cell(table, "%.0f%%", 100 * o.fraction);
    table_cell(table, "%s", bound);
}

/* The kernels that the rule gave no row: one line, or nothing. */
static void print_unselected(const KernelResourceList *record, const bool *selected, FILE *out)
{
    int count = 0;
    for (int i = 0; i < record->count; i++)
        if (record->kernels[i].is_kernel && !selected[i])
            fprintf(out, "%s%s", count++ == 0 ? "\nIn the record, selected by no launcher: " : "; ",
                    record->kernels[i].name);
    if (count > 0)
        fprintf(out, ".\n");
}

void resource_table_print(const KernelResourceList *record, KernelLaunchRule *rule, FILE *out, TableFormat format)
{
    ResourceTableRows rows = {0};
    bool *selected = ALLOC_ARRAY(bool, (size_t)record->count + 1);
    for (int i = 0; i < record->count; i++) {
        KernelSignature signature;
        if (!record->kernels[i].is_kernel || !kernel_signature_parse(record->kernels[i].name, &signature))
            continue;
        int before = rows.count;
        rows.current = &record->kernels[i];
        rule(&signature, &rows);
        selected[i] = rows.count > before;
    }
    qsort(rows.rows, (size_t)rows.count, sizeof *rows.rows, compare_rows);
    const char *headers[] = {"kernel",
                             "threads per block",
                             "registers per thread",
                             "spilled (bytes stored / loaded)",
                             "stack bytes",
                             "static shared bytes",
                             "blocks per SM",
                             "warps per SM",
                             "occupancy",
                             "bound by"};
    Table *table = table_new(10, headers, "lrrrrrrrrl");
    for (int r = 0; r < rows.count; r++)
        add_cells(table, &rows.rows[r]);
    table_print(table, out, format);
    table_free(table);
    print_unselected(record, selected, out);
    array_free(selected);
    array_free(rows.rows);
}

int resource_table_command(int argc, char **argv, const char *default_record, KernelLaunchRule *rule)
{
    const char *path = default_record;
    bool markdown = false;
    const CliOption options[] = {
        {"--record",   CLI_STRING, &path,     0, 0, "ptxas's record of the kernels (default: the build's copy)"},
        {"--markdown", CLI_FLAG,   &markdown, 0, 0, "print the table as Markdown"                              },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    KernelResourceList record;
    char err[1024];
    if (kernel_resources_read(path, &record, err, sizeof err) != 0)
        cli_fail("%s (run it in the chapter's directory, or give --record)", err);
    resource_table_print(&record, rule, stdout, markdown ? TABLE_MARKDOWN : TABLE_TEXT);
    kernel_resources_free(&record);
    return 0;
}

int resource_table_without_cuda_command(int argc, char **argv)
{
    bool markdown = false;
    const CliOption options[] = {
        {"--markdown", CLI_FLAG, &markdown, 0, 0, "print the table as Markdown"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    printf("This build has no resource records: it was configured without CUDA, so ptxas compiled no kernel.\n");
    return 0;
}
