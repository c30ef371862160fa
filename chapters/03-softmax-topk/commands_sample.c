/* `sample` and `gpu-sample`: from logits to tokens, with the chapter's
 * sampler (sampling.h): a top-K pass (the CPU's fused one, or a GPU
 * version), then temperature, top-p and min-p over the K candidates, then
 * draws by the inverse CDF (or, on the CPU, Gumbel-max). */
#include <stdio.h>
#include <string.h>

#include "chapters/03-softmax-topk/commands.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/npy.h"

typedef struct {
    const char *load, *save, *seed_text, *samples_text; /* required: no default */
    const char *dtype, *method_text;
    DrawMethod method;
    long k, seed, samples, threads, version;
    double temperature, top_p, min_p;
} SampleOptions;

enum { MAX_SAMPLES = 1 << 24 };

static DrawMethod draw_method_option(const char *text)
{
    if (strcmp(text, "inverse-cdf") == 0) {
        return DRAW_INVERSE_CDF;
    }
    if (strcmp(text, "rejection") == 0) {
        return DRAW_REJECTION;
    }
    if (strcmp(text, "gumbel") != 0) {
        cli_fail("--method expects inverse-cdf, gumbel or rejection, got '%s'", text);
    }
    return DRAW_GUMBEL_MAX;
}

/* What the option parser cannot say: the options that are required (their
 * texts, parsed here), the draw's name, and the open ends of (0, 1] and
 * T > 0. */
static void require_sample_options(SampleOptions *o)
{
    const char *missing = o->load == NULL           ? "--load FILE"
                          : o->save == NULL         ? "--save DIR"
                          : o->seed_text == NULL    ? "--seed S"
                          : o->samples_text == NULL ? "--samples N"
                                                    : NULL;
    if (missing != NULL) {
        cli_fail("%s is required (see --help)", missing);
    }
    o->seed = cli_parse_long("--seed", o->seed_text, 0, 1000000000000000000L);
    o->samples = cli_parse_long("--samples", o->samples_text, 1, MAX_SAMPLES);
    o->method = draw_method_option(o->method_text);
}

enum { SHARED_SAMPLE_OPTIONS = 9, SAMPLE_OPTIONS = SHARED_SAMPLE_OPTIONS + 2 };

/* The options of every device, then --method and --threads on the CPU or
 * --version on a GPU; returns how many. */
static size_t sample_options(const TopkDevice *device, SampleOptions *o, CliOption *options)
{
    const CliOption shared[SHARED_SAMPLE_OPTIONS] = {
        {"--load",        CLI_STRING,           &o->load,         0, 0,       LOGITS_FILE_HELP                                    },
        {"--dtype",       CLI_STRING,           &o->dtype,        0, 0,       LOGITS_DTYPE_HELP                                   },
        {"--save",        CLI_STRING,           &o->save,         0, 0,
         "write tokens.npy (int64 [rows, N]), and probs.npy (float32) and indices.npy (int64) [rows, K] of the "
         "survivors, each row's padded with probability 0 and index -1; a row without survivors (a NaN, or only "
         "-inf): tokens -1, probabilities NaN"                                                                                    },
        {"-k",            CLI_INT,              &o->k,            1, 1 << 30, "K: the candidates, before top-p and min-p"         },
        {"--top-p",       CLI_DOUBLE_ABOVE_MIN, &o->top_p,        0, 1,
         "P in (0, 1]: the shortest prefix of the K holding P of their probability; 1 cuts nothing, and 0 would keep "
         "no candidate"                                                                                                           },
        {"--min-p",       CLI_DOUBLE,           &o->min_p,        0, 1,
         "M in [0, 1]: cut the candidates less probable than M times the most probable; 0 cuts nothing"                           },
        {"--temperature", CLI_DOUBLE_ABOVE_MIN, &o->temperature,  0, 1e300,   "T > 0: the logits are divided by T"                },
        {"--seed",        CLI_STRING,           &o->seed_text,    0, 0,       "S: the seed of the draws, an integer in [0, 10^18]"},
        {"--samples",     CLI_STRING,           &o->samples_text, 0, 0,       "N: draws per row, 1 to 2^24"                       },
    };
    size_t count = SHARED_SAMPLE_OPTIONS;
    memcpy(options, shared, count * sizeof *options);
    if (device->takes_threads) {
        options[count++] =
            (CliOption){"--method",
                        CLI_STRING,
                        &o->method_text,
                        0,
                        0,
                        "inverse-cdf: one uniform per draw; gumbel: Gumbel-max, one uniform per candidate per draw; "
                        "rejection: sorting-free top-p, one uniform per round"};
        options[count++] =
            (CliOption){"--threads", CLI_INT, &o->threads, 1, 1024, "CPU threads (the tokens do not depend on it)"};
    } else {
        options[count++] =
            (CliOption){"--version", CLI_INT, &o->version, 1, (double)device->version_count, device->version_help};
    }
    return count;
}

static SampleOptions parse_sample_options(int argc, char **argv, const TopkDevice *device)
{
    SampleOptions o = {.dtype = "auto",
                       .method_text = "inverse-cdf",
                       .k = 8,
                       .threads = bench_max_threads(),
                       .version = device->default_sample_version,
                       .temperature = 1.0,
                       .top_p = 1.0,
                       .min_p = 0.0};
    CliOption options[SAMPLE_OPTIONS];
    size_t count = sample_options(device, &o, options);
    cli_parse(argc, argv, options, count, NULL);
    require_sample_options(&o);
    return o;
}

/* How many of a row's draws gave each surviving candidate. */
static void count_draws(const int64_t *tokens, int samples, const int64_t *indices, int survivors, long *counts)
{
    for (int j = 0; j < survivors; j++) {
        counts[j] = 0;
        for (int d = 0; d < samples; d++) {
            counts[j] += tokens[d] == indices[j];
        }
    }
}

static int survivor_count(const int64_t *indices, int k)
{
    int count = 0;
    while (count < k && indices[count] >= 0) {
        count++;
    }
    return count;
}

/* A few rows: each survivor's index, probability and share of the draws,
 * then the first tokens. */
static void print_sampled_rows(size_t rows, int k, int samples, const float *probs, const int64_t *indices,
                               const int64_t *tokens)
{
    enum { SHOWN_ROWS = 4, SHOWN_PLACES = 8, SHOWN_TOKENS = 12 };
    long counts[SHOWN_PLACES];
    for (size_t row = 0; row < rows && row < SHOWN_ROWS; row++) {
        const float *p = probs + row * (size_t)k;
        const int64_t *index = indices + row * (size_t)k, *token = tokens + row * (size_t)samples;
        int survivors = survivor_count(index, k), shown = survivors < SHOWN_PLACES ? survivors : SHOWN_PLACES;
        printf("row %zu: %d of %d survive%s", row, survivors, k, survivors == 0 ? " (a NaN, or only -inf)" : ":");
        count_draws(token, samples, index, shown, counts);
        for (int j = 0; j < shown; j++) {
            printf(" %lld (p %.4f, drawn %.4f)", (long long)index[j], (double)p[j], (double)counts[j] / samples);
        }
        printf(survivors > shown ? " ...\n  tokens:" : "\n  tokens:");
        for (int d = 0; d < samples && d < SHOWN_TOKENS; d++) {
            printf(" %lld", (long long)token[d]);
        }
        printf(samples > SHOWN_TOKENS ? " ...\n" : "\n");
    }
    if (rows > SHOWN_ROWS) {
        printf("... %zu rows in all\n", rows);
    }
}

static void save_samples(NpyOutputDir *out, size_t rows, int k, int samples, const int64_t *tokens, const float *probs,
                         const int64_t *indices)
{
    const size_t token_shape[2] = {rows, (size_t)samples}, candidate_shape[2] = {rows, (size_t)k};
    npy_output_dir_add(out, "tokens.npy", NPY_INT64, 2, token_shape, tokens);
    npy_output_dir_add(out, "probs.npy", NPY_FLOAT32, 2, candidate_shape, probs);
    npy_output_dir_add(out, "indices.npy", NPY_INT64, 2, candidate_shape, indices);
    npy_output_dir_commit(out);
    printf("wrote %s/tokens.npy, %s/probs.npy and %s/indices.npy\n", out->dir, out->dir, out->dir);
}

int topk_sample_command(int argc, char **argv, const TopkDevice *device)
{
    SampleOptions o = parse_sample_options(argc, argv, device);
    if (device->require != NULL) {
        device->require();
    }
    Logits x = load_logits(o.load, o.dtype);
    require_k_at_most_vocab(o.k, &x);
    NpyOutputDir out = npy_output_dir_open(o.save);
    int k = (int)o.k, samples = (int)o.samples;
    SamplingParams params = {o.temperature, k, o.top_p, o.min_p};
    int64_t *tokens = ALLOC_ARRAY(x.rows * (size_t)samples, int64_t);
    float *probs = ALLOC_ARRAY(x.rows * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY(x.rows * (size_t)k, int64_t);
    device->draw(o.version, o.threads, &x, params, o.method, (uint64_t)o.seed, samples, tokens, probs, indices);
    printf("%zu rows, V = %zu, K = %d, top-p %g, min-p %g, temperature %g, seed %ld, %d draws per row by %s\n", x.rows,
           x.vocab, k, o.top_p, o.min_p, o.temperature, o.seed, samples, o.method_text);
    print_sampled_rows(x.rows, k, samples, probs, indices, tokens);
    note_nonfinite_logits(&x, k, probs);
    save_samples(&out, x.rows, k, samples, tokens, probs, indices);
    array_free(tokens);
    array_free(probs);
    array_free(indices);
    free_logits(&x);
    return 0;
}
