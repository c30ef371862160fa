/* softmax_topk: the K largest softmax probabilities of each row of logits,
 * and their indices, on the CPU (three versions) or the GPU (five kernels),
 * plus the tables and benchmarks of the chapter. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "chapters/03-softmax-topk/admissions.h"
#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/gpu.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/merge_demo.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/results.h"
#include "common/rng.h"

typedef struct {
    long rows, vocab, k, seed, version, kernel, threads;
    bool gpu, bench, quick, hard_inputs, traffic, accuracy, merge_demo, markdown;
    const char *load, *save, *results, *commit, *show_results, *admissions_data;
} Options;

/* Options left at this value were not given. */
#define NOT_GIVEN (-1)

static Options parse_options(int argc, char **argv)
{
    Options o = {.rows = NOT_GIVEN,
                 .vocab = NOT_GIVEN,
                 .k = 8,
                 .seed = 1,
                 .version = NOT_GIVEN,
                 .kernel = NOT_GIVEN,
                 .threads = NOT_GIVEN};
    const CliOption options[] = {
        {"-k",                CLI_INT,    &o.k,               1, 1 << 30,                        "K: how many of the largest probabilities per row"                },
        {"--rows",            CLI_INT,    &o.rows,            1, 1 << 20,                        "rows of random logits (default 4)"                               },
        {"--vocab",           CLI_INT,    &o.vocab,           1, (double)SOFTMAX_TOPK_MAX_VOCAB, "V: logits per row (default 50257)"                               },
        {"--seed",            CLI_INT,    &o.seed,            0, 1e18,                           "seed of the random logits"                                       },
        {"--load",            CLI_STRING, &o.load,            0, 0,                              "read logits from a .npy file, float32 [rows, V]"                 },
        {"--save",            CLI_STRING, &o.save,            0, 0,                              "write probs.npy (float32) and indices.npy (int64) [rows, K] here"},
        {"--version",         CLI_INT,    &o.version,         1, CPU_VERSION_COUNT,              "CPU version: 1 naive, 2 online, 3 fused (default)"               },
        {"--gpu",             CLI_FLAG,   &o.gpu,             0, 0,                              "run on the GPU (with --bench: the GPU benchmark)"                },
        {"--kernel",          CLI_INT,    &o.kernel,          1, GPU_KERNEL_COUNT,               "GPU kernel 1 .. 5; kernel 3 when not given"                      },
        {"--threads",         CLI_INT,    &o.threads,         1, 1024,                           "CPU threads (default: all cores)"                                },
        {"--bench",           CLI_FLAG,   &o.bench,           0, 0,                              "benchmark the CPU versions (with --gpu: the GPU kernels)"        },
        {"--quick",           CLI_FLAG,   &o.quick,           0, 0,                              "with --bench: a reduced grid, V = 128256 and K in {8, 64}"       },
        {"--hard-inputs",     CLI_FLAG,   &o.hard_inputs,     0, 0,                              "table: what the fused version returns for hard inputs"           },
        {"--traffic",         CLI_FLAG,   &o.traffic,         0, 0,                              "table: predicted memory traffic and measured time per version"   },
        {"--accuracy",        CLI_FLAG,   &o.accuracy,        0, 0,                              "table: largest relative error of each version"                   },
        {"--merge-demo",      CLI_FLAG,   &o.merge_demo,      0, 0,                              "table: the cross-warp merge, right and mixing rows"              },
        {"--markdown",        CLI_FLAG,   &o.markdown,        0, 0,                              "print tables as Markdown"                                        },
        {"--results",         CLI_STRING, &o.results,         0, 0,                              "with --gpu --bench: write the results (Markdown) here"           },
        {"--commit",          CLI_STRING, &o.commit,          0, 0,                              "with --gpu --bench: the commit to stamp the results with"        },
        {"--show-results",    CLI_STRING, &o.show_results,    0, 0,                              "print a GPU results file, or say there is none"                  },
        {"--admissions-data", CLI_STRING, &o.admissions_data, 0, 0,
         "write the data of the figure: logits admitted to the top K along a row"                                                                                  },
    };
    cli_parse(argc, argv, options, sizeof options / sizeof options[0],
              "softmax + top-K of rows of logits, from three passes to one fused pass (CPU and CUDA)");
    return o;
}

static int count_true(const bool *flags, int count)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        n += flags[i];
    }
    return n;
}

static void check_combinations(const Options *o)
{
    const bool modes[] = {o->bench,
                          o->hard_inputs,
                          o->traffic,
                          o->accuracy,
                          o->merge_demo,
                          o->show_results != NULL,
                          o->admissions_data != NULL};
    if (count_true(modes, 7) > 1) {
        cli_fail("--bench, --hard-inputs, --traffic, --accuracy, --merge-demo, --show-results and --admissions-data "
                 "exclude each other");
    }
    if (o->load != NULL && (o->rows != NOT_GIVEN || o->vocab != NOT_GIVEN)) {
        cli_fail("--rows and --vocab describe random logits; with --load they come from the file");
    }
    if (o->quick && !o->bench) {
        cli_fail("--quick goes with --bench");
    }
    if ((o->results != NULL || o->commit != NULL) && !(o->gpu && o->bench)) {
        cli_fail("--results and --commit go with --gpu --bench");
    }
    if (o->kernel != NOT_GIVEN && !o->gpu) {
        cli_fail("--kernel selects a GPU kernel: add --gpu (or use --version for the CPU)");
    }
    if (o->version != NOT_GIVEN && o->gpu) {
        cli_fail("--version selects a CPU version; on the GPU use --kernel");
    }
    if (o->gpu) {
        gpu_require();
    }
}

typedef struct {
    float *logits;
    size_t rows, vocab;
    NpyArray file; /* when loaded */
} Logits;

static Logits get_logits(const Options *o)
{
    Logits x = {0};
    if (o->load != NULL) {
        const size_t any_shape[2] = {0, 0};
        x.file = npy_load_or_exit(o->load, NPY_FLOAT32, 2, any_shape);
        x.rows = x.file.shape[0];
        x.vocab = x.file.shape[1];
        if (x.rows == 0 || x.vocab == 0 || x.vocab > SOFTMAX_TOPK_MAX_VOCAB) {
            cli_fail("%s: shape [%zu, %zu]: need at least one row and 1 <= V <= %zu", o->load, x.rows, x.vocab,
                     SOFTMAX_TOPK_MAX_VOCAB);
        }
        x.logits = x.file.data;
        return x;
    }
    x.rows = o->rows == NOT_GIVEN ? 4 : (size_t)o->rows;
    x.vocab = o->vocab == NOT_GIVEN ? 50257 : (size_t)o->vocab;
    x.logits = ALLOC_ARRAY(float, x.rows *x.vocab);
    Rng rng;
    rng_seed(&rng, (uint64_t)o->seed);
    rng_fill_normal_f32(&rng, x.logits, x.rows * x.vocab, 0.0, 3.0);
    return x;
}

static void free_logits(Logits *x)
{
    if (x->file.data != NULL) {
        npy_free(&x->file);
    } else {
        array_free(x->logits);
    }
}

static void save_results(const char *dir, size_t rows, int k, const float *probs, const int64_t *indices)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cli_fail_status(1, "--save %s: cannot create the directory: %s", dir, strerror(errno));
    }
    char path[4096];
    const size_t shape[2] = {rows, (size_t)k};
    snprintf(path, sizeof path, "%s/probs.npy", dir);
    npy_save_or_exit(path, NPY_FLOAT32, 2, shape, probs);
    snprintf(path, sizeof path, "%s/indices.npy", dir);
    npy_save_or_exit(path, NPY_INT64, 2, shape, indices);
    printf("wrote %s/probs.npy and %s/indices.npy\n", dir, dir);
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

/* Compute, print a few rows, check against the double reference (on up to
 * 64 rows spread over the input), save if asked. Exit 1 on a mismatch. */
static int run_topk(const Options *o, int threads)
{
    Logits x = get_logits(o);
    int k = (int)o->k;
    if ((size_t)k > x.vocab) {
        cli_fail("-k %d is larger than V = %zu, the number of logits per row", k, x.vocab);
    }
    float *probs = ALLOC_ARRAY(float, x.rows *(size_t)k);
    int64_t *indices = ALLOC_ARRAY(int64_t, x.rows * (size_t)k);
    double rtol;
    if (o->gpu) {
        int kernel = o->kernel == NOT_GIVEN ? 3 : (int)o->kernel;
        gpu_softmax_topk(kernel, x.logits, x.rows, x.vocab, k, probs, indices);
        printf("GPU kernel %d (%s), %zu rows, V = %zu, K = %d\n", kernel, gpu_kernel_name(kernel), x.rows, x.vocab, k);
        rtol = topk_rtol_gpu(x.vocab);
    } else {
        CpuVersion version = o->version == NOT_GIVEN ? CPU_FUSED : (CpuVersion)o->version;
        softmax_topk_rows(version, x.logits, x.rows, x.vocab, k, threads, probs, indices);
        printf("CPU version %d (%s), %zu rows, V = %zu, K = %d\n", version, cpu_version_name(version), x.rows, x.vocab,
               k);
        rtol = version == CPU_FUSED ? TOPK_RTOL_TREE_SUM : topk_rtol_sequential_sum(x.vocab);
    }
    print_rows(x.rows, k, probs, indices);
    size_t row_step = x.rows > 64 ? x.rows / 64 : 1;
    TopkComparison c = compare_with_reference(x.logits, x.rows, row_step, x.vocab, k, probs, indices, rtol);
    bool ok = c.wrong_indices + c.wrong_probs == 0;
    if (ok) {
        printf("matches the double reference on %zu places: indices exact, probabilities within %.0f%% of rtol %.2g\n",
               c.places, 100.0 * c.tolerance_used, rtol);
    } else {
        printf("DIFFERS from the double reference: %zu wrong indices, %zu wrong probabilities; first: %s\n",
               c.wrong_indices, c.wrong_probs, c.first_mismatch);
    }
    if (o->save != NULL) {
        save_results(o->save, x.rows, k, probs, indices);
    }
    array_free(probs);
    array_free(indices);
    free_logits(&x);
    return ok ? 0 : 1;
}

static void print_hard_inputs(TableFormat format)
{
    enum { SHOWN = 5 };
    const char *headers[] = {"input", "V", "K", "indices", "probabilities"};
    Table *table = table_new(5, headers, "lrrll");
    for (int c = 0; c < HARD_INPUT_COUNT; c++) {
        const HardInput *input = &HARD_INPUTS[c];
        float *row = ALLOC_ARRAY(float, input->vocab), probs[16];
        int64_t indices[16];
        input->fill(row, input->vocab);
        RowScratch scratch = row_scratch_new(CPU_FUSED, input->vocab, input->k);
        softmax_topk_row(CPU_FUSED, row, input->vocab, input->k, &scratch, probs, indices);
        char index_text[128] = "", prob_text[160] = "";
        for (int j = 0; j < input->k && j < SHOWN; j++) {
            size_t a = strlen(index_text), b = strlen(prob_text);
            snprintf(index_text + a, sizeof index_text - a, "%s%lld", j ? " " : "", (long long)indices[j]);
            snprintf(prob_text + b, sizeof prob_text - b, "%s%s", j ? " " : "", probability_text(probs[j]).text);
        }
        if (input->k > SHOWN) {
            strcat(index_text, " ...");
            strcat(prob_text, " ...");
        }
        table_cell(table, "%s", input->name);
        table_cell(table, "%zu", input->vocab);
        table_cell(table, "%d", input->k);
        table_cell(table, "%s", index_text);
        table_cell(table, "%s", prob_text);
        row_scratch_free(&scratch);
        array_free(row);
    }
    table_print(table, stdout, format);
    table_free(table);
}

int main(int argc, char **argv)
{
    Options o = parse_options(argc, argv);
    check_combinations(&o);
    TableFormat format = o.markdown ? TABLE_MARKDOWN : TABLE_TEXT;
    int threads = o.threads == NOT_GIVEN ? bench_max_threads() : (int)o.threads;
    if (o.show_results != NULL) {
        results_show(o.show_results);
    } else if (o.bench && o.gpu) {
        gpu_bench(o.quick, o.results, o.commit, format);
    } else if (o.bench) {
        print_cpu_bench(o.quick, threads, format);
    } else if (o.hard_inputs) {
        print_hard_inputs(format);
    } else if (o.traffic) {
        print_traffic_table(format);
    } else if (o.accuracy) {
        print_accuracy_table(format);
    } else if (o.merge_demo) {
        print_merge_demo(format);
    } else if (o.admissions_data != NULL) {
        write_admissions_data(o.admissions_data);
    } else {
        return run_topk(&o, threads);
    }
    return 0;
}
