#include "common/resource_table.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/instruction_budget.h"
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
    long dynamic_shared_bytes;
    int readers; /* thread blocks that load each byte this one loads */
    const KernelResources *kernel;
} ResourceRow;

struct ResourceTableRows {
    ResourceRow *rows;
    int count, capacity;
    const KernelResources *current; /* the kernel the rule is looking at */
};

static void add_row(ResourceTableRows *rows, int threads_per_block, long dynamic_shared_bytes, int readers,
                    const char *label_fmt, va_list args)
{
    if (rows->count == rows->capacity) {
        int grown = rows->capacity == 0 ? 16 : 2 * rows->capacity;
        rows->rows = array_resize(rows->rows, (size_t)rows->capacity, (size_t)grown, sizeof *rows->rows);
        rows->capacity = grown;
    }
    ResourceRow *row = &rows->rows[rows->count++];
    vsnprintf(row->label, sizeof row->label, label_fmt, args);
    row->threads_per_block = threads_per_block;
    row->dynamic_shared_bytes = dynamic_shared_bytes;
    row->readers = readers;
    row->kernel = rows->current;
}

void resource_table_add(ResourceTableRows *rows, int threads_per_block, const char *label_fmt, ...)
{
    va_list args;
    va_start(args, label_fmt);
    add_row(rows, threads_per_block, 0, 1, label_fmt, args);
    va_end(args);
}

void resource_table_add_shared_reads(ResourceTableRows *rows, int threads_per_block, int readers, const char *label_fmt,
                                     ...)
{
    va_list args;
    va_start(args, label_fmt);
    add_row(rows, threads_per_block, 0, readers, label_fmt, args);
    va_end(args);
}

void resource_table_add_with_shared(ResourceTableRows *rows, int threads_per_block, long dynamic_shared_bytes,
                                    const char *label_fmt, ...)
{
    va_list args;
    va_start(args, label_fmt);
    add_row(rows, threads_per_block, dynamic_shared_bytes, 1, label_fmt, args);
    va_end(args);
}

/* What one SM holds of the row's launch: static and dynamic shared memory
 * count alike. */
static Occupancy row_occupancy(const ResourceRow *row)
{
    const KernelResources *k = row->kernel;
    return occupancy_compute(&SM90_LIMITS, row->threads_per_block, k->registers,
                             k->shared_bytes + row->dynamic_shared_bytes);
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
    Occupancy o = row_occupancy(row);
    char bound[64];
    bound_names(o.bound, bound, sizeof bound);
    table_cell(table, "%s", row->label);
    table_cell(table, "%d", row->threads_per_block);
    table_cell(table, "%d", k->registers);
    table_cell(table, "%ld / %ld", k->spill_store_bytes, k->spill_load_bytes);
    table_cell(table, "%ld", k->stack_bytes);
    table_cell(table, "%ld + %ld", k->shared_bytes, row->dynamic_shared_bytes);
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

/* The rows the rule gives the kernels of `record`, in the order of their
 * labels; selected[i] says whether kernel i got any. */
static ResourceTableRows collect_rows(const KernelResourceList *record, KernelLaunchRule *rule, bool *selected)
{
    ResourceTableRows rows = {0};
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
    return rows;
}

void resource_table_print(const KernelResourceList *record, KernelLaunchRule *rule, FILE *out, TableFormat format)
{
    bool *selected = ALLOC_ARRAY((size_t)record->count + 1, bool);
    ResourceTableRows rows = collect_rows(record, rule, selected);
    const char *headers[] = {"kernel",
                             "threads per block",
                             "registers per thread",
                             "spilled (bytes stored / loaded)",
                             "stack bytes",
                             "shared bytes (static + dynamic)",
                             "blocks per SM",
                             "warps per SM",
                             "occupancy",
                             "bound by"};
    Table *table = TABLE_NEW(headers, "lrrrrrrrrl");
    for (int r = 0; r < rows.count; r++)
        add_cells(table, &rows.rows[r]);
    table_print(table, out, format);
    table_free(table);
    print_unselected(record, selected, out);
    array_free(selected);
    array_free(rows.rows);
}

static void print_budget_model(const GpuModel *gpu, FILE *out)
{
    InstructionBudget any = instruction_budget(gpu, &(SassSteadyState){0}, 0);
    fprintf(out,
            "The model: %s, %d SMs x %d schedulers x %.3f GHz = %.0f G warp instructions per second; "
            "copy bandwidth %.2f TB/s and memory latency %.0f ns (assumed), so each SM needs %.1f KiB in "
            "flight.\n\n",
            gpu->name, gpu->sms, gpu->schedulers_per_sm, gpu->clock_hz / 1e9,
            gpu->sms * gpu->schedulers_per_sm * gpu->clock_hz / 1e9, gpu->copy_bytes_per_s / 1e12,
            gpu->memory_latency_s * 1e9, any.needed_in_flight_per_sm / 1024);
}

enum { BUDGET_COLUMNS = 11 };

static void add_budget_cells(Table *table, const ResourceRow *row, const SassKernel *code, const GpuModel *gpu)
{
    table_cell(table, "%s", row->label);
    if (code == NULL) {
        table_cell(table, "not in the machine code record");
        for (int c = 2; c < BUDGET_COLUMNS; c++)
            table_cell(table, " ");
        return;
    }
    const SassSteadyState *s = &code->steady;
    Occupancy o = row_occupancy(row);
    InstructionBudget b = instruction_budget_shared_reads(instruction_budget(gpu, s, o.warps_per_sm), row->readers);
    table_cell(table, "%s", s->is_loop ? "loop" : "whole kernel");
    table_cell(table, "%d / %d", s->instructions, s->instructions_on_all_paths);
    table_cell(table, "%ld + %ld", s->global_load_bytes, s->global_store_bytes);
    table_cell(table, "%d of %d", s->wide_global_loads, s->global_loads);
    if (s->global_load_bytes + s->global_store_bytes > 0) {
        table_cell(table, "%.1f", b.instructions_per_16_bytes);
        table_cell(table, "%.0f%%", 100 * b.issue_fraction);
    } else {
        table_cell(table, "-");
        table_cell(table, "-");
    }
    table_cell(table, "%.1f", b.bytes_in_flight_per_sm / 1024);
    table_cell(table, "%.0f%%", 100 * b.in_flight_fraction);
    table_cell(table, "%.0f%%", 100 * (b.predicted_fraction < 1 ? b.predicted_fraction : 1));
    table_cell(table, "%s", budget_limiter_name(b.limiter));
}

void resource_table_print_budget(const KernelResourceList *record, const SassRecord *code, KernelLaunchRule *rule,
                                 FILE *out, TableFormat format)
{
    bool *selected = ALLOC_ARRAY((size_t)record->count + 1, bool);
    ResourceTableRows rows = collect_rows(record, rule, selected);
    print_budget_model(&H100_SXM, out);
    const char *headers[] = {"kernel",
                             "steady state",
                             "instructions per pass (fast path / all)",
                             "bytes per thread (loaded + stored)",
                             "128-bit loads",
                             "instructions per 16 bytes",
                             "issue allows",
                             "in flight per SM (KiB)",
                             "in flight allows",
                             "predicted",
                             "limited by"};
    Table *table = TABLE_NEW(headers, "llrrrrrrrrl");
    for (int r = 0; r < rows.count; r++)
        add_budget_cells(table, &rows.rows[r], sass_record_find(code, rows.rows[r].kernel->name), &H100_SXM);
    table_print(table, out, format);
    table_free(table);
    array_free(selected);
    array_free(rows.rows);
}

/* "layernorm.sass" for "layernorm.resources": the build keeps both side by side. */
static char *sass_path_beside(const char *resources_path)
{
    size_t length = strlen(resources_path);
    const char *suffix = ".resources";
    if (length >= strlen(suffix) && strcmp(resources_path + length - strlen(suffix), suffix) == 0)
        length -= strlen(suffix);
    char *path = ALLOC_ARRAY(length + sizeof ".sass", char);
    memcpy(path, resources_path, length);
    strcpy(path + length, ".sass");
    return path;
}

static void print_budget(const KernelResourceList *record, const char *sass_path, bool sass_given,
                         KernelLaunchRule *rule, TableFormat format)
{
    char *default_path = sass_path_beside(sass_path != NULL ? sass_path : "");
    const char *path = sass_given ? sass_path : default_path;
    SassRecord code;
    char err[CLI_MESSAGE_SIZE];
    if (!sass_given && access(path, F_OK) != 0) {
        printf("No machine code was recorded: this build found no cuobjdump (./configure --sass-tools "
               "installs it), so the instruction budget is skipped.\n");
    } else if (sass_record_read(path, &code, err, sizeof err) != 0) {
        array_free(default_path);
        cli_fail("%s", err);
    } else if (code.count == 0) {
        snprintf(err, sizeof err, "%s: no kernel's machine code in it (not a cuobjdump -sass listing)", path);
        sass_record_free(&code);
        array_free(default_path);
        cli_fail("%s", err);
    } else {
        resource_table_print_budget(record, &code, rule, stdout, format);
        sass_record_free(&code);
    }
    array_free(default_path);
}

int resource_table_command(int argc, char **argv, const char *default_record, KernelLaunchRule *rule)
{
    const char *path = default_record;
    const char *sass_path = NULL;
    bool markdown = false, budget = false;
    const CliOption options[] = {
        {"--record", CLI_STRING, &path,      0, 0, "ptxas's record of the kernels, as the build keeps it"       },
        {"--budget", CLI_FLAG,   &budget,    0, 0, "print the instruction budget and Little's law table instead"},
        {"--sass",   CLI_STRING, &sass_path, 0, 0,
         "the kernels' machine code; without it, the file the build keeps beside the record"                    },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (sass_path != NULL && !budget)
        cli_fail("--sass is read only with --budget");
    KernelResourceList record;
    char err[CLI_MESSAGE_SIZE];
    if (kernel_resources_read(path, &record, err, sizeof err) != 0) {
        bool record_given = path != default_record; /* --record points into argv */
        cli_fail("%s%s", err, record_given ? "" : " (run it in the chapter's directory, or give --record)");
    }
    if (record.count == 0) {
        kernel_resources_free(&record);
        cli_fail("%s: no kernel in it (not a ptxas -v report)", path);
    }
    TableFormat format = table_format_for(markdown);
    if (budget)
        print_budget(&record, sass_path != NULL ? sass_path : path, sass_path != NULL, rule, format);
    else
        resource_table_print(&record, rule, stdout, format);
    kernel_resources_free(&record);
    return 0;
}

int resource_table_without_cuda_command(int argc, char **argv)
{
    bool markdown = false, budget = false;
    const CliOption options[] = {
        {"--budget", CLI_FLAG, &budget, 0, 0, "the instruction budget table (there is none either)"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    printf("This build has no resource records: it was configured without CUDA, so ptxas compiled no kernel.\n");
    return 0;
}
