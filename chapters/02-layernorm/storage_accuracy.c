#include "chapters/02-layernorm/storage_accuracy.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "chapters/02-layernorm/problem.h"
#include "common/cli.h"
#include "common/files.h"

// ANCHOR: measure_stored_results
StoredResultsAccuracy storage_case_accuracy(const StorageCase *c, NormKind norm, LnStorage storage, RstdSaving saving)
{
    LnProblem p = ln_problem_new((size_t)c->n, (size_t)c->d, 1e-5f);
    p.norm = norm;
    ln_problem_fill_random(&p, (uint64_t)c->seed, c->offset, 1.0);
    p.storage = storage;
    ln_problem_narrow_inputs(&p);
    ln_problem_run_cpu(&p);
    if (saving == RSTD_SAVED_BF16) {
        ln_storage_narrow_array(STORAGE_BF16, p.rstd, p.n);
        ln_problem_backward_cpu(&p);
    }
    ln_problem_narrow_results(&p);
    LnReference ref = ln_reference_compute(&p);
    StoredResultsAccuracy a = {ln_storage_accuracy(storage, p.y, ref.y, p.n * p.d),
                               ln_storage_accuracy(storage, p.dx, ref.dx, p.n * p.d)};
    ln_reference_free(&ref);
    ln_problem_free(&p);
    return a;
}
// ANCHOR_END: measure_stored_results

bool storage_accuracy_meets_goal(const StorageAccuracy *a)
{
    return a->max_ulps <= 1.0 && ln_storage_correct_share(a) >= 0.999;
}

/* The cases of the table (torch_failure_modes.py --mode storage runs the same ones): row
 * lengths of real models and irregular ones, offsets up to where bf16's
 * spacing (1/8 at 30) is a sizeable part of the spread. */
static const StorageCase TABLE_CASES[] = {
    {512, 768,  11, 0.0 },
    {256, 1000, 12, 0.0 },
    {128, 4096, 13, 0.0 },
    {256, 781,  14, 3.0 },
    {64,  2048, 15, 30.0},
};
enum { TABLE_CASE_COUNT = sizeof TABLE_CASES / sizeof TABLE_CASES[0] };

static StoredResultsAccuracy all_cases(NormKind norm, LnStorage storage, RstdSaving saving)
{
    StoredResultsAccuracy total = {{0}, {0}};
    for (int i = 0; i < TABLE_CASE_COUNT; i++) {
        StoredResultsAccuracy a = storage_case_accuracy(&TABLE_CASES[i], norm, storage, saving);
        total.y = ln_storage_accuracy_merge(total.y, a.y);
        total.dx = ln_storage_accuracy_merge(total.dx, a.dx);
    }
    return total;
}

/* PyTorch's figures on the same stored inputs, as torch_failure_modes.py --mode storage recorded
 * them in torch-storage.tsv: after a '#' stamp line and a header, one line
 * per storage type and case, "storage n d seed offset x_fnv1a64 elements
 * y_correct y_max_ulp y_worst dx_correct dx_max_ulp dx_worst" (worst: the
 * reference value where the max error was reached). */
#define TORCH_STORAGE_RECORD "torch-storage.tsv"
enum { TORCH_STORAGE_MAX_LINES = 16 };

typedef struct {
    LnStorage storage;
    StorageCase c;
    uint64_t x_checksum;
    StoredResultsAccuracy accuracy;
} TorchStorageLine;

typedef struct {
    TorchStorageLine lines[TORCH_STORAGE_MAX_LINES];
    int count;
} TorchStorageRecord;

static int read_torch_storage_line(void *state, char *line, int line_number)
{
    TorchStorageRecord *record = state;
    if (line_number <= 2)
        return 0; /* the stamp and the header */
    TorchStorageLine l;
    char storage[16];
    unsigned long long checksum;
    size_t count;
    if (record->count == TORCH_STORAGE_MAX_LINES ||
        sscanf(line, "%15s %ld %ld %ld %lf %llx %zu %zu %lf %lf %zu %lf %lf", storage, &l.c.n, &l.c.d, &l.c.seed,
               &l.c.offset, &checksum, &count, &l.accuracy.y.correctly_rounded, &l.accuracy.y.max_ulps,
               &l.accuracy.y.worst_ref, &l.accuracy.dx.correctly_rounded, &l.accuracy.dx.max_ulps,
               &l.accuracy.dx.worst_ref) != 13 ||
        !ln_storage_parse(storage, &l.storage))
        return line_number;
    l.x_checksum = checksum;
    l.accuracy.y.count = l.accuracy.dx.count = count;
    record->lines[record->count++] = l;
    return 0;
}

static int parse_torch_storage_record(FILE *stream, void *out, char *err, size_t err_size)
{
    TorchStorageRecord *record = out;
    record->count = 0;
    int bad_line = read_lines(stream, read_torch_storage_line, record);
    if (bad_line != 0)
        snprintf(err, err_size,
                 "%s, line %d: not \"storage n d seed offset checksum elements y_correct y_max_ulp y_worst "
                 "dx_correct dx_max_ulp dx_worst\"",
                 TORCH_STORAGE_RECORD, bad_line);
    return bad_line == 0 ? 0 : -1;
}

/* PyTorch's accuracy over the table's cases in `storage`: found (every case
 * recorded, on our very inputs), or why not ("-": not recorded, "stale":
 * recorded on other inputs). */
typedef struct {
    const char *missing; /* NULL when found */
    StoredResultsAccuracy accuracy;
} TorchStorageFigures;

static const TorchStorageLine *find_line(const TorchStorageRecord *record, LnStorage storage, const StorageCase *c)
{
    for (int i = 0; i < record->count; i++) {
        const TorchStorageLine *l = &record->lines[i];
        if (l->storage == storage && l->c.n == c->n && l->c.d == c->d && l->c.seed == c->seed &&
            l->c.offset == c->offset)
            return l;
    }
    return NULL;
}

static uint64_t stored_inputs_checksum(const StorageCase *c, LnStorage storage)
{
    LnProblem p = ln_problem_new((size_t)c->n, (size_t)c->d, 1e-5f);
    ln_problem_fill_random(&p, (uint64_t)c->seed, c->offset, 1.0);
    p.storage = storage;
    ln_problem_narrow_inputs(&p);
    uint64_t checksum = ln_problem_x_checksum(&p);
    ln_problem_free(&p);
    return checksum;
}

static TorchStorageFigures torch_figures(const TorchStorageRecord *record, LnStorage storage)
{
    TorchStorageFigures f = {
        .missing = NULL, .accuracy = {{0}, {0}}
    };
    for (int i = 0; i < TABLE_CASE_COUNT && f.missing == NULL; i++) {
        const TorchStorageLine *l = find_line(record, storage, &TABLE_CASES[i]);
        if (l == NULL)
            f.missing = "-";
        else if (l->x_checksum != stored_inputs_checksum(&TABLE_CASES[i], storage))
            f.missing = "stale";
        else {
            f.accuracy.y = ln_storage_accuracy_merge(f.accuracy.y, l->accuracy.y);
            f.accuracy.dx = ln_storage_accuracy_merge(f.accuracy.dx, l->accuracy.dx);
        }
    }
    return f;
}

static void accuracy_cells(Table *table, const StorageAccuracy *a)
{
    table_cell(table, "%.3f%%", 100.0 * ln_storage_correct_share(a));
    table_cell(table, "%.3g (at %.2g)", a->max_ulps, a->worst_ref);
}

static void beyond_cell(Table *table, const StorageAccuracy *a)
{
    if (a->beyond_one_ulp == 0)
        table_cell(table, "0");
    else
        table_cell(table, "%zu, |value| <= %.2g", a->beyond_one_ulp, a->largest_beyond);
}

static void add_row(Table *table, NormKind norm, LnStorage storage, const char *output, const char *rstd,
                    const StorageAccuracy *ours, const char *torch_missing, const StorageAccuracy *torch)
{
    table_cell(table, "%s", norm_kind_name(norm));
    table_cell(table, "%s", ln_storage_name(storage));
    table_cell(table, "%s", output);
    table_cell(table, "%s", rstd);
    table_cell(table, "%zu", ours->count);
    accuracy_cells(table, ours);
    beyond_cell(table, ours);
    if (torch_missing != NULL) {
        table_cell(table, "%s", torch_missing);
        table_cell(table, "%s", torch_missing);
    } else {
        accuracy_cells(table, torch);
    }
}

void storage_accuracy_print(FILE *out, TableFormat format)
{
    TorchStorageRecord record = {.count = 0};
    char err[CLI_MESSAGE_SIZE];
    if (access(TORCH_STORAGE_RECORD, F_OK) == 0 &&
        parse_text_file(TORCH_STORAGE_RECORD, parse_torch_storage_record, &record, err, sizeof err))
        cli_fail("%s", err);
    const char *headers[] = {"norm",
                             "storage",
                             "output",
                             "rstd saved in",
                             "elements",
                             "correctly rounded",
                             "max error, ulp (at value)",
                             "beyond 1 ulp",
                             "PyTorch: correctly rounded",
                             "PyTorch: max error, ulp (at value)"};
    Table *table = TABLE_NEW(headers, "llllrrrlrr");
    for (LnStorage s = STORAGE_FP16; s <= STORAGE_BF16; s++) {
        StoredResultsAccuracy ours = all_cases(NORM_LAYER, s, RSTD_SAVED_FLOAT32);
        TorchStorageFigures torch = torch_figures(&record, s);
        add_row(table, NORM_LAYER, s, "y", "float32", &ours.y, torch.missing, &torch.accuracy.y);
        add_row(table, NORM_LAYER, s, "dx", "float32", &ours.dx, torch.missing, &torch.accuracy.dx);
        StoredResultsAccuracy bf16_rstd = all_cases(NORM_LAYER, s, RSTD_SAVED_BF16);
        add_row(table, NORM_LAYER, s, "dx", "bf16", &bf16_rstd.dx, "-", NULL);
        StoredResultsAccuracy rms = all_cases(NORM_RMS, s, RSTD_SAVED_FLOAT32);
        add_row(table, NORM_RMS, s, "y", "float32", &rms.y, "-", NULL);
        add_row(table, NORM_RMS, s, "dx", "float32", &rms.dx, "-", NULL);
    }
    table_print(table, out, format);
    table_free(table);
}
