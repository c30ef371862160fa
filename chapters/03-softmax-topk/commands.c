#include "chapters/03-softmax-topk/commands.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/03-softmax-topk/admissions.h"
#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/gpu.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/keep_ties.h"
#include "chapters/03-softmax-topk/lanes_diagram.h"
#include "chapters/03-softmax-topk/merge_demo.h"
#include "chapters/03-softmax-topk/merge_tree.h"
#include "chapters/03-softmax-topk/radix_select.h"
#include "chapters/03-softmax-topk/rejection_table.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/check.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/rng.h"

static Logits random_logits(long rows, long vocab, long seed)
{
    Logits x = {.rows = (size_t)rows, .vocab = (size_t)vocab};
    x.logits = ALLOC_ARRAY((x.rows * x.vocab), float);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    rng_fill_normal_f32(&rng, x.logits, x.rows * x.vocab, 0.0, 3.0);
    x.stored = float32_logits(x.logits);
    return x;
}

/* The type in which the fused version reads a file's logits as they are:
 * float32, fp16, or bf16 bits when the user says so; false for anything
 * else. */
static bool readable_as_stored(NpyDtype dtype, NpyFloatEncoding encoding, LogitsType *type)
{
    if (encoding == NPY_BF16_BITS) {
        *type = LOGITS_BFLOAT16;
        return dtype == NPY_INT16 || dtype == NPY_UINT16;
    }
    *type = dtype == NPY_FLOAT16 ? LOGITS_FLOAT16 : LOGITS_FLOAT32;
    return dtype == NPY_FLOAT16 || dtype == NPY_FLOAT32;
}

Logits load_logits(const char *path, const char *dtype)
{
    const size_t any_shape[2] = {0, 0};
    NpyFloatEncoding encoding = npy_float_encoding_option("--dtype", dtype);
    Logits x = {0};
    char err[CLI_MESSAGE_SIZE];
    if (npy_load(path, &x.file, err, sizeof err) != 0) {
        cli_fail("%s", err);
    }
    LogitsType type;
    if (x.file.ndim != 2 || !readable_as_stored(x.file.dtype, encoding, &type)) {
        /* Not logits this program reads as they are: npy_load_as_float32
         * refuses them, with the reason in one line. */
        npy_free(&x.file);
        x.file = npy_load_as_float32_or_exit(path, encoding, 2, any_shape);
        type = LOGITS_FLOAT32;
    }
    x.rows = x.file.shape[0];
    x.vocab = x.file.shape[1];
    if (x.rows == 0 || x.vocab == 0 || x.vocab > SOFTMAX_TOPK_MAX_VOCAB) {
        cli_fail("%s: shape [%zu, %zu]: need at least one row and 1 <= V <= %zu", path, x.rows, x.vocab,
                 SOFTMAX_TOPK_MAX_VOCAB);
    }
    x.stored = (StoredLogits){x.file.data, type};
    x.logits = type == LOGITS_FLOAT32 ? x.file.data : NULL;
    return x;
}

void widen_logits_file(Logits *x)
{
    if (x->logits == NULL) {
        x->logits = ALLOC_ARRAY(x->rows * x->vocab, float);
        widen_logits(x->stored, 0, x->rows * x->vocab, x->logits);
    }
}

void free_logits(Logits *x)
{
    if (x->logits != x->file.data) {
        array_free(x->logits);
    }
    if (x->file.data != NULL) {
        npy_free(&x->file);
    }
}

typedef struct {
    char text[32];
} ProbabilityText;

/* printf spells NaN "nan" or "-nan" after its sign bit, which means nothing here. */
static ProbabilityText probability_text(float p)
{
    ProbabilityText t;
    if (isnan(p)) {
        snprintf(t.text, sizeof t.text, "NaN");
    } else {
        snprintf(t.text, sizeof t.text, "%.4g", (double)p);
    }
    return t;
}

static void print_rows(size_t rows, int k, const float *probs, const int64_t *indices)
{
    enum { SHOWN_ROWS = 4, SHOWN_PLACES = 8 };
    for (size_t row = 0; row < rows && row < SHOWN_ROWS; row++) {
        printf("row %zu:", row);
        for (int j = 0; j < k && j < SHOWN_PLACES; j++) {
            size_t at = row * (size_t)k + (size_t)j;
            printf(" %lld (%s)", (long long)indices[at], probability_text(probs[at]).text);
        }
        printf(k > SHOWN_PLACES ? " ...\n" : "\n");
    }
    if (rows > SHOWN_ROWS) {
        printf("... %zu rows in all\n", rows);
    }
}

/* The options that run and apply share: -k, --version and, on the CPU, --threads. */
typedef struct {
    long k, version, threads;
} TopkOptions;

enum { TOPK_OPTION_COUNT = 3 };

static TopkOptions topk_defaults(const TopkDevice *device)
{
    return (TopkOptions){.k = 8, .version = device->default_version, .threads = bench_max_threads()};
}

/* Fill `options` with the shared ones; returns how many the device takes. */
static size_t topk_options(const TopkDevice *device, TopkOptions *o, CliOption *options)
{
    options[0] = (CliOption){"-k", CLI_INT, &o->k, 1, 1 << 30, "K: how many of the largest probabilities per row"};
    options[1] = (CliOption){"--version", CLI_INT, &o->version, 1, (double)device->version_count, device->version_help};
    options[2] = (CliOption){"--threads", CLI_INT, &o->threads, 1, 1024, "CPU threads"};
    return device->takes_threads ? TOPK_OPTION_COUNT : TOPK_OPTION_COUNT - 1;
}

static void require_device(const TopkDevice *device)
{
    if (device->require != NULL) {
        device->require();
    }
}

void note_nonfinite_logits(const Logits *x, int k, const float *probs)
{
    bool *flagged = ALLOC_ARRAY(x->rows, bool);
    /* A row at a time, widened: 16-bit logits are not widened whole. */
    float *row = ALLOC_ARRAY(x->vocab, float);
    for (size_t r = 0; r < x->rows; r++) {
        widen_logits(x->stored, r * x->vocab, x->vocab, row);
        mark_nonfinite_rows(row, 1, x->vocab, flagged + r);
    }
    array_free(row);
    mark_nonfinite_rows(probs, x->rows, (size_t)k, flagged);
    note_nonfinite_rows(count_flagged(flagged, x->rows), x->rows, "the logits or the probabilities");
    array_free(flagged);
}

void require_k_at_most_vocab(long k, const Logits *x)
{
    if ((size_t)k > x->vocab) {
        cli_fail("-k %ld is larger than V = %zu, the number of logits per row", k, x->vocab);
    }
}

/* The largest logit of a row, NaN ignored (-inf for a row of NaN and -inf). */
static float row_max(const float *row, size_t vocab)
{
    float max = -INFINITY;
    for (size_t i = 0; i < vocab; i++) {
        max = row[i] > max ? row[i] : max;
    }
    return max;
}

/* A logit's quotient by the temperature, rounded to float; a finite logit's
 * is held within float's range, so that it stays finite. */
static float divided_logit(float logit, double quotient)
{
    if (isfinite(logit) && fabs(quotient) > FLT_MAX) {
        return quotient > 0.0 ? FLT_MAX : -FLT_MAX;
    }
    return (float)quotient;
}

/* Temperature: (x - m) / T for the row's largest logit m, in double, rounded
 * to float. A shift changes neither the softmax nor the top K, and shifted,
 * no quotient is above 0: x / T itself overflows float at a small T (10 /
 * 1e-38), and the logits that overflowed would share the probability as
 * +inf. A finite quotient below float's range is held at -FLT_MAX, which
 * weighs exp(-FLT_MAX - 0) = 0 as -inf would, so that the row's logits stay
 * finite (the note on non-finite rows is about the file's values). A row
 * whose largest logit is +inf, or that has only -inf and NaN, cannot be
 * shifted, and is divided as it is, a finite quotient held within float's
 * range: next to +inf a finite logit weighs 0 at any temperature, and
 * 3e38 / 0.5 rounded to +inf would share the probability. T = 1 leaves the
 * logits, and 16-bit ones are read as stored. */
static void divide_logits(Logits *x, double temperature)
{
    if (temperature == 1.0) {
        return;
    }
    for (size_t r = 0; r < x->rows; r++) {
        float *row = x->logits + r * x->vocab;
        float max = row_max(row, x->vocab);
        if (!isfinite(max)) {
            for (size_t i = 0; i < x->vocab; i++) {
                row[i] = divided_logit(row[i], (double)row[i] / temperature);
            }
            continue;
        }
        for (size_t i = 0; i < x->vocab; i++) {
            row[i] = divided_logit(row[i], ((double)row[i] - max) / temperature);
        }
    }
    x->stored = float32_logits(x->logits);
}

/* A candidate tied with others at one quotient, and the logit it was read as. */
typedef struct {
    float logit;
    int64_t index;
} TiedCandidate;

/* Larger logit first, then lower index: the ranking at temperature 1. */
static int by_logit_then_index(const void *a, const void *b)
{
    const TiedCandidate *p = a, *q = b;
    if (p->logit != q->logit)
        return p->logit > q->logit ? -1 : 1;
    return (p->index > q->index) - (p->index < q->index);
}

/* The `count` best of the elements of a row whose quotient is `tied`, by the
 * logits as read, into out. */
static void best_tied(int64_t *out, int count, const float *quotients, const float *logits, size_t vocab, float tied)
{
    TiedCandidate *group = ALLOC_ARRAY(vocab, TiedCandidate);
    size_t size = 0;
    for (size_t i = 0; i < vocab; i++)
        if (quotients[i] == tied)
            group[size++] = (TiedCandidate){logits[i], (int64_t)i};
    qsort(group, size, sizeof *group, by_logit_then_index);
    for (int p = 0; p < count; p++)
        out[p] = group[p].index;
    array_free(group);
}

/* Dividing by a temperature keeps the logits' order but not always their
 * differences: a quotient below float's range is held at -FLT_MAX, and at a
 * huge T distinct logits can round to one quotient. The top K take such ties
 * by lower index, where the top K at temperature T are the top K at
 * temperature 1. So each run of candidates tied at one quotient is ranked
 * again by the logits as read, and the last run, at the K-th place, from all
 * the row's elements tied with it. Tied quotients have equal probabilities:
 * only the indices move. */
static void rank_ties_by_logit(const float *quotients, const float *logits, size_t rows, size_t vocab, int k,
                               int64_t *indices)
{
    for (size_t r = 0; r < rows; r++) {
        const float *q = quotients + r * vocab;
        int64_t *top = indices + r * (size_t)k;
        for (int first = 0, end; first < k; first = end) {
            float tied = q[top[first]];
            end = first + 1;
            while (end < k && q[top[end]] == tied)
                end++;
            if (isnan(tied) || (end < k && end - first == 1))
                continue;
            best_tied(top + first, end - first, q, logits + r * vocab, vocab, tied);
        }
    }
}

/* Compute, check against the double reference (on up to 64 rows spread over
 * the input), print a few rows, save if asked. 1 on a mismatch. Where the
 * logits were divided by a temperature, `as_read` holds them undivided,
 * and ties of the quotients are ranked by them after the check (which
 * holds the kernel to the reference on the quotients it was given). */
static int compute_and_check(const TopkDevice *device, const TopkOptions *o, const Logits *x, const float *as_read,
                             NpyOutputDir *save)
{
    require_k_at_most_vocab(o->k, x);
    int k = (int)o->k;
    float *probs = ALLOC_ARRAY(x->rows * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY(x->rows * (size_t)k, int64_t);
    double rtol = device->compute(o->version, o->threads, x, k, probs, indices);
    size_t row_step = x->rows > 64 ? x->rows / 64 : 1;
    TopkComparison c = compare_with_reference(x->logits, x->rows, row_step, x->vocab, k, probs, indices, rtol);
    if (as_read != NULL)
        rank_ties_by_logit(x->logits, as_read, x->rows, x->vocab, k, indices);
    print_rows(x->rows, k, probs, indices);
    note_nonfinite_logits(x, k, probs);
    bool ok = c.wrong_indices + c.wrong_probs == 0;
    if (ok) {
        printf("matches the double reference on %zu places: indices exact, probabilities within %.0f%% of rtol %.2g\n",
               c.places, 100.0 * c.tolerance_used, rtol);
    } else {
        printf("DIFFERS from the double reference: %zu wrong indices, %zu wrong probabilities; first: %s\n",
               c.wrong_indices, c.wrong_probs, c.first_mismatch);
    }
    if (save != NULL) {
        const size_t shape[2] = {x->rows, (size_t)k};
        npy_output_dir_add(save, "probs.npy", NPY_FLOAT32, 2, shape, probs);
        npy_output_dir_add(save, "indices.npy", NPY_INT64, 2, shape, indices);
        npy_output_dir_commit(save);
        printf("wrote %s/probs.npy and %s/indices.npy\n", save->dir, save->dir);
    }
    array_free(probs);
    array_free(indices);
    return ok ? 0 : 1;
}

int topk_random_command(int argc, char **argv, const TopkDevice *device)
{
    enum { OWN = 3 };
    long rows = 4, vocab = 50257, seed = 1;
    TopkOptions topk = topk_defaults(device);
    CliOption options[OWN + TOPK_OPTION_COUNT] = {
        {"--rows",  CLI_INT, &rows,  1, 1 << 20,                        "rows of random logits"    },
        {"--vocab", CLI_INT, &vocab, 1, (double)SOFTMAX_TOPK_MAX_VOCAB, "V: logits per row"        },
        {"--seed",  CLI_INT, &seed,  0, 1e18,                           "seed of the random logits"},
    };
    size_t count = OWN + topk_options(device, &topk, options + OWN);
    cli_parse(argc, argv, options, count, NULL);
    require_device(device);
    Logits x = random_logits(rows, vocab, seed);
    int status = compute_and_check(device, &topk, &x, NULL, NULL);
    free_logits(&x);
    return status;
}

int topk_apply_command(int argc, char **argv, const TopkDevice *device)
{
    enum { OWN = 4 };
    const char *load = NULL, *save = NULL, *dtype = "auto";
    double temperature = 1.0;
    TopkOptions topk = topk_defaults(device);
    CliOption options[OWN + TOPK_OPTION_COUNT] = {
        {"--load",        CLI_STRING,           &load,        0, 0,     LOGITS_FILE_HELP                                                  },
        {"--dtype",       CLI_STRING,           &dtype,       0, 0,     LOGITS_DTYPE_HELP                                                 },
        {"--save",        CLI_STRING,           &save,        0, 0,     "write probs.npy (float32) and indices.npy (int64) [rows, K] here"},
        {"--temperature", CLI_DOUBLE_ABOVE_MIN, &temperature, 0, 1e300,
         "T > 0: the softmax of the logits divided by T"                                                                                  },
    };
    size_t count = OWN + topk_options(device, &topk, options + OWN);
    cli_parse(argc, argv, options, count, NULL);
    if (load == NULL || save == NULL) {
        cli_fail("%s is required (see --help)", load == NULL ? "--load FILE" : "--save DIR");
    }
    require_device(device);
    Logits x = load_logits(load, dtype);
    widen_logits_file(&x); /* for the reference, and the versions that read float32 */
    float *as_read = NULL;
    if (temperature != 1.0) {
        as_read = ALLOC_ARRAY((x.rows * x.vocab), float);
        memcpy(as_read, x.logits, x.rows * x.vocab * sizeof *as_read);
    }
    divide_logits(&x, temperature);
    NpyOutputDir out = npy_output_dir_open(save);
    int status = compute_and_check(device, &topk, &x, as_read, &out);
    array_free(as_read);
    free_logits(&x);
    return status;
}

/* The fused version reads the logits as stored; the others, float32. */
static double cpu_compute(long version, long threads, const Logits *x, int k, float *probs, int64_t *indices)
{
    CpuVersion cpu_version = (CpuVersion)version;
    size_t rows = x->rows, vocab = x->vocab;
    if (cpu_version == CPU_FUSED) {
        softmax_topk_stored_rows(x->stored, rows, vocab, k, (int)threads, probs, indices);
    } else {
        softmax_topk_rows(cpu_version, x->logits, rows, vocab, k, (int)threads, probs, indices);
    }
    printf("CPU version %d (%s), %zu rows, V = %zu, K = %d\n", cpu_version, cpu_version_name(cpu_version), rows, vocab,
           k);
    return cpu_version == CPU_FUSED ? TOPK_RTOL_TREE_SUM : topk_rtol_sequential_sum(vocab);
}

/* The fused pass reads the logits as they are stored, 16-bit or not. */
static void cpu_draw(long version, long threads, Logits *x, SamplingParams params, DrawMethod method, uint64_t seed,
                     int samples, int64_t *tokens, float *probs, int64_t *indices)
{
    (void)version;
    sample_rows(x->stored, x->rows, x->vocab, params, method, seed, samples, (int)threads, tokens, probs, indices);
}

static const TopkDevice CPU = {
    .version_help = "CPU version: 1 naive, 2 online, 3 fused",
    .default_version = CPU_FUSED,
    .version_count = CPU_VERSION_COUNT,
    .takes_threads = true,
    .require = NULL,
    .compute = cpu_compute,
    .draw = cpu_draw,
};

int run_command(int argc, char **argv)
{
    return topk_random_command(argc, argv, &CPU);
}

int apply_command(int argc, char **argv)
{
    return topk_apply_command(argc, argv, &CPU);
}

int sample_command(int argc, char **argv)
{
    return topk_sample_command(argc, argv, &CPU);
}

/* Up to SHOWN entries of a row, and " ..." after them if there are more. */
typedef struct {
    char indices[128], probs[160];
} ShownEntries;

static ShownEntries shown_entries(const float *probs, const int64_t *indices, int k)
{
    enum { SHOWN = 5 };
    ShownEntries shown = {"", ""};
    for (int j = 0; j < k && j < SHOWN; j++) {
        size_t a = strlen(shown.indices), b = strlen(shown.probs);
        snprintf(shown.indices + a, sizeof shown.indices - a, "%s%lld", j ? " " : "", (long long)indices[j]);
        snprintf(shown.probs + b, sizeof shown.probs - b, "%s%s", j ? " " : "", probability_text(probs[j]).text);
    }
    if (k > SHOWN) {
        strcat(shown.indices, " ...");
        strcat(shown.probs, " ...");
    }
    return shown;
}

int hard_inputs_command(int argc, char **argv)
{
    TableFormat format = table_format_for(cli_parse_markdown_only(argc, argv));
    const char *headers[] = {"input", "V", "K", "indices", "probabilities"};
    Table *table = TABLE_NEW(headers, "lrrll");
    for (int c = 0; c < HARD_INPUT_COUNT; c++) {
        const HardInput *input = &HARD_INPUTS[c];
        float *row = ALLOC_ARRAY(input->vocab, float), probs[16];
        int64_t indices[16];
        input->fill(row, input->vocab);
        RowScratch scratch = row_scratch_new(CPU_FUSED, input->vocab, input->k);
        softmax_topk_row(CPU_FUSED, row, input->vocab, input->k, &scratch, probs, indices);
        ShownEntries shown = shown_entries(probs, indices, input->k);
        table_cell(table, "%s", input->name);
        table_cell(table, "%zu", input->vocab);
        table_cell(table, "%d", input->k);
        table_cell(table, "%s", shown.indices);
        table_cell(table, "%s", shown.probs);
        row_scratch_free(&scratch);
        array_free(row);
    }
    table_print(table, stdout, format);
    table_free(table);
    return 0;
}

int traffic_command(int argc, char **argv)
{
    print_traffic_table(table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int accuracy_command(int argc, char **argv)
{
    print_accuracy_table(table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int merge_demo_command(int argc, char **argv)
{
    print_merge_demo(table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

int bench_command(int argc, char **argv)
{
    bool quick = false, markdown = false;
    long threads = bench_max_threads();
    const CliOption options[] = {
        {"--quick",   CLI_FLAG, &quick,   0, 0,    "a reduced grid: V = 128256 and K in {8, 64}"},
        {"--threads", CLI_INT,  &threads, 1, 1024, "CPU threads of the all-cores rows"          },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    print_cpu_bench(quick, (int)threads, table_format_for(markdown));
    return 0;
}

int admissions_data_command(int argc, char **argv)
{
    cli_parse(argc, argv, NULL, 0, NULL);
    write_admissions_data(stdout);
    return 0;
}

int merge_tree_diagram_command(int argc, char **argv)
{
    long rows_per_block = 1, vocab = 1000, seed = 2018;
    bool across_block = false;
    const CliOption options[] = {
        {"--rows-per-block", CLI_INT,  &rows_per_block, 1, EMULATED_BLOCK_WARPS,
         "rows of the block of 8 warps: 1, 2, 4 or 8"                                                                    },
        {"--across-block",   CLI_FLAG, &across_block,   0, 0,                    "merge across the whole block (the bug)"},
        {"--vocab",          CLI_INT,  &vocab,          1, 1 << 20,              "V: logits per row"                     },
        {"--seed",           CLI_INT,  &seed,           0, 1e18,                 "random seed of the rows"               },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (EMULATED_BLOCK_WARPS % rows_per_block != 0) {
        cli_fail("--rows-per-block must be 1, 2, 4 or 8, got %ld", rows_per_block);
    }
    int merge_group = across_block ? EMULATED_BLOCK_WARPS : EMULATED_BLOCK_WARPS / (int)rows_per_block;
    write_seeded_merge_tree_diagram(stdout, (size_t)vocab, (int)rows_per_block, merge_group, (uint64_t)seed);
    return 0;
}

int lanes_diagram_command(int argc, char **argv)
{
    long vocab = 203, row = 1, warps = 2;
    const CliOption options[] = {
        {"--vocab", CLI_INT, &vocab, 1, 4096,                 "V: logits per row"                                                      },
        {"--row",   CLI_INT, &row,   0, 1000,                 "the row drawn, of rows stored one after another from an aligned address"},
        {"--warps", CLI_INT, &warps, 1, EMULATED_BLOCK_WARPS, "warps sharing the row in the float4 scan: 1, 2, 4 or 8"                 },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    /* The launchers give a row a power of two of the block's warps. */
    if (EMULATED_BLOCK_WARPS % warps != 0) {
        cli_fail("--warps must be 1, 2, 4 or 8, got %ld", warps);
    }
    write_lanes_diagram(stdout, (int)vocab, (int)row, (int)warps);
    return 0;
}

int radix_data_command(int argc, char **argv)
{
    long vocab = 128256, k = 1000, seed = 1;
    const CliOption options[] = {
        {"--vocab", CLI_INT, &vocab, 1, 1 << 30, "V: logits per row"                      },
        {"-k",      CLI_INT, &k,     1, 1 << 30, "K: the rank of the key the select finds"},
        {"--seed",  CLI_INT, &seed,  0, 1e18,    "random seed of the row (normal(0, 3))"  },
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (k > vocab) {
        cli_fail("-k %ld is larger than V = %ld", k, vocab);
    }
    write_radix_histogram_data(stdout, (size_t)vocab, (int)k, (uint64_t)seed);
    return 0;
}

int ties_command(int argc, char **argv)
{
    long vocab = 128256, k = 50, rows = 8, seed = 1;
    bool markdown = false;
    const CliOption options[] = {
        {"--vocab", CLI_INT, &vocab, 1, 1 << 30, "V: logits per row"                              },
        {"-k",      CLI_INT, &k,     1, 1 << 30, "K: how many of the largest logits per row"      },
        {"--rows",  CLI_INT, &rows,  1, 1000,    "rows of random logits (normal(0, 3) in 1/16ths)"},
        {"--seed",  CLI_INT, &seed,  0, 1e18,    "random seed of the first row"                   },
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    if (k > vocab) {
        cli_fail("-k %ld is larger than V = %ld", k, vocab);
    }
    print_ties_table((size_t)vocab, (int)k, (size_t)rows, (uint64_t)seed, table_format_for(markdown));
    return 0;
}

int rejection_command(int argc, char **argv)
{
    print_rejection_table(table_format_for(cli_parse_markdown_only(argc, argv)));
    return 0;
}

#ifndef HAVE_CUDA
int gpu_latency_without_cuda_command(int argc, char **argv)
{
    (void)cli_parse_markdown_only(argc, argv); /* the options of the CUDA build, accepted */
    printf("This build was configured without CUDA: the kernels' launcher, which chooses the slices and buffers "
           "the model counts, was not built.\n");
    return 0;
}

int gpu_slow_paths_without_cuda_command(int argc, char **argv)
{
    (void)cli_parse_markdown_only(argc, argv); /* the options of the CUDA build, accepted */
    printf("This build was configured without CUDA: there is no machine code to cost the slow paths with.\n");
    return 0;
}
#endif
