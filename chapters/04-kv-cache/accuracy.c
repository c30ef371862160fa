#include "chapters/04-kv-cache/accuracy.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/sampling.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/alloc.h"

const char *kv_format_name(KvFormat format)
{
    static const char *const names[KV_FORMAT_COUNT] = {
        [KV_FORMAT_FLOAT32] = "float32",
        [KV_FORMAT_FP16] = "fp16",
        [KV_FORMAT_INT8] = "INT8",
        [KV_FORMAT_INT4] = "INT4",
        [KV_FORMAT_KIVI4] = "INT4, keys per channel (KIVI)",
        [KV_FORMAT_FP8_E4M3] = "FP8 E4M3",
        [KV_FORMAT_FP8_E5M2] = "FP8 E5M2",
    };
    if (format < 0 || format >= KV_FORMAT_COUNT)
        return "?";
    return names[format];
}

typedef struct {
    double sum, max;
    long count;
} ErrorStats;

/* A cache that keeps every key and value twice, in float32 and in the format
 * measured. Generation runs on the measured one; each attention is also
 * computed from the float copy, and the two outputs are compared. */
typedef struct {
    KvCache base;
    PagedCache exact, measured;
    int head_dim;
    float *exact_out; /* scratch for the float attention */
    ErrorStats *errors;
} ComparingCache;

static bool comparing_reserve(KvCache *base, int seq, int length)
{
    ComparingCache *c = (ComparingCache *)base;
    /* Both pools are the same size and run the same block manager: both
     * succeed or both fail. */
    bool exact = c->exact.base.reserve(&c->exact.base, seq, length);
    bool measured = c->measured.base.reserve(&c->measured.base, seq, length);
    return exact && measured;
}

static void comparing_store(KvCache *base, int seq, int layer, int kv_head, int position, const float *key,
                            const float *value)
{
    ComparingCache *c = (ComparingCache *)base;
    c->exact.base.store(&c->exact.base, seq, layer, kv_head, position, key, value);
    c->measured.base.store(&c->measured.base, seq, layer, kv_head, position, key, value);
}

// ANCHOR: measure_attention_beside_a_float_cache
static void comparing_attend(const KvCache *base, int seq, int layer, int kv_head, int length, const float *queries,
                             int n_queries, float *scores, float *out)
{
    const ComparingCache *c = (const ComparingCache *)base;
    c->measured.base.attend(&c->measured.base, seq, layer, kv_head, length, queries, n_queries, scores, out);
    c->exact.base.attend(&c->exact.base, seq, layer, kv_head, length, queries, n_queries, scores, c->exact_out);
    for (int q = 0; q < n_queries; q++) {
        double difference = 0.0, norm = 0.0;
        for (int i = 0; i < c->head_dim; i++) {
            double exact = c->exact_out[q * c->head_dim + i];
            difference += (out[q * c->head_dim + i] - exact) * (out[q * c->head_dim + i] - exact);
            norm += exact * exact;
        }
        double error = norm > 0.0 ? sqrt(difference / norm) : difference > 0.0 ? INFINITY : 0.0;
        c->errors->sum += error;
        c->errors->max = error > c->errors->max || isnan(error) ? error : c->errors->max;
        c->errors->count++;
    }
}
// ANCHOR_END: measure_attention_beside_a_float_cache

static void comparing_release(KvCache *base, int seq)
{
    ComparingCache *c = (ComparingCache *)base;
    c->exact.base.release(&c->exact.base, seq);
    c->measured.base.release(&c->measured.base, seq);
}

static int comparing_max_length(const KvCache *base)
{
    const ComparingCache *c = (const ComparingCache *)base;
    return c->measured.base.max_length(&c->measured.base);
}

static ComparingCache comparing_cache_create(const ModelConfig *config, int num_blocks, const AccuracySetup *setup,
                                             KvFormat format, ErrorStats *errors)
{
    return (ComparingCache){
        .base = {comparing_reserve, comparing_store, comparing_attend, comparing_release, comparing_max_length},
        .exact = paged_cache_create(config, 1, num_blocks, setup->block_size, false),
        .measured = paged_cache_create_in(config, 1, num_blocks, setup->block_size, false, format, setup->int4_group),
        .head_dim = config->head_dim,
        .exact_out = ALLOC_ARRAY((size_t)config->n_heads * config->head_dim, float),
        .errors = errors,
    };
}

static void comparing_cache_free(ComparingCache *c)
{
    paged_cache_free(&c->exact);
    paged_cache_free(&c->measured);
    array_free(c->exact_out);
}

/* Feed the reference's tokens, one step at a time after the prompt, and
 * keep the logits every step draws from: logits[step][vocab]. */
static void run_teacher_forced(const Model *model, KvCache *cache, const Request *reference, float *logits)
{
    int prompt_len = reference->prompt_len, vocab = model->config.vocab_size;
    cache->reserve(cache, 0, prompt_len);
    model_forward(model, cache, &(SeqChunk){0, 0, prompt_len, reference->tokens}, 1, logits);
    for (int step = 1; step < reference->n_generated; step++) {
        int position = prompt_len + step - 1;
        cache->reserve(cache, 0, position + 1);
        model_forward(model, cache, &(SeqChunk){0, position, 1, reference->tokens + position}, 1,
                      logits + (size_t)step * vocab);
    }
}

static double log_sum_exp(const float *x, int n)
{
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++)
        max = fmax(max, x[i]);
    for (int i = 0; i < n; i++)
        sum += exp(x[i] - max);
    return max + log(sum);
}

// ANCHOR: compare_next_token_distributions
/* KL(p || q) in nats, p = softmax(reference), q = softmax(logits). */
static double kl_divergence(const float *reference, const float *logits, int n)
{
    double log_norm_p = log_sum_exp(reference, n), log_norm_q = log_sum_exp(logits, n), kl = 0.0;
    for (int i = 0; i < n; i++) {
        double log_p = reference[i] - log_norm_p, log_q = logits[i] - log_norm_q;
        kl += exp(log_p) * (log_p - log_q);
    }
    return kl;
}
// ANCHOR_END: compare_next_token_distributions

/* FP8 scales, [layer][kv_head] for keys and for values; none: all 1. */
typedef struct {
    Fp8Scales kind;
    const float *keys, *values;
} ScalesUsed;

static const ScalesUsed NO_SCALES = {FP8_SCALES_NONE, NULL, NULL};

static AccuracyResult measure_format(const Model *model, const AccuracySetup *setup, KvFormat format,
                                     const Request *reference, ScalesUsed scales)
{
    const ModelConfig *c = &model->config;
    int steps = reference->n_generated, vocab = c->vocab_size;
    ErrorStats errors = {0};
    int num_blocks = paged_kv_blocks_for(reference->prompt_len + steps, setup->block_size);
    ComparingCache cache = comparing_cache_create(c, num_blocks, setup, format, &errors);
    if (scales.keys != NULL)
        paged_cache_set_fp8_scales(&cache.measured, scales.keys, scales.values);
    float *logits = ALLOC_ARRAY((size_t)steps * vocab, float);
    run_teacher_forced(model, &cache.base, reference, logits);

    AccuracyResult r = {.format = format, .fp8_scales = scales.kind, .steps = steps};
    PagedCache *measured = &cache.measured;
    double key_bytes = (double)kv_head_bytes(measured->key_layout) / setup->block_size;
    double value_bytes = (double)kv_head_bytes(measured->value_layout) / setup->block_size;
    r.bytes_per_position = c->n_layers * c->n_kv_heads * (key_bytes + value_bytes);
    r.bits_per_key = 8 * key_bytes / c->head_dim;
    r.bits_per_value = 8 * value_bytes / c->head_dim;
    r.attention_error_mean = errors.sum / (double)errors.count;
    r.attention_error_max = errors.max;
    int agree = 0;
    for (int s = 0; s < steps; s++) {
        const float *ref = reference->logits + (size_t)s * vocab, *got = logits + (size_t)s * vocab;
        double kl = kl_divergence(ref, got, vocab);
        r.kl_mean += kl / steps;
        r.kl_max = kl > r.kl_max || isnan(kl) ? kl : r.kl_max;
        agree += sample_greedy(ref, vocab) == sample_greedy(got, vocab);
    }
    r.top1_agreement = (double)agree / steps;
    array_free(logits);
    comparing_cache_free(&cache);
    return r;
}

/* The reference: a random prompt and setup->n_new greedy tokens, served
 * with a float32 cache. */
static Request *greedy_reference(const Model *model, const AccuracySetup *setup)
{
    const Sampler greedy = {0};
    Rng rng;
    rng_seed(&rng, setup->seed);
    Request *reference =
        requests_random(&model->config, &rng, 1, setup->prompt_len, setup->prompt_len, setup->n_new, setup->n_new);
    serve_each_alone(model, reference, 1, &greedy);
    return reference;
}

void accuracy_measure_all(const Model *model, const AccuracySetup *setup, AccuracyResult *results)
{
    Request *reference = greedy_reference(model, setup);
    for (int f = 0; f < KV_FORMAT_COUNT; f++)
        results[f] = measure_format(model, setup, (KvFormat)f, reference, NO_SCALES);
    requests_free(reference, 1);
}

// ANCHOR: calibrate_fp8_scales
/* A calibration run: the reference's text through a float32 cache, and the
 * largest magnitude of the keys and of the values it stored, per layer and
 * kv head: largest_key[layer][kv_head], largest_value[...]. */
static void calibrate(const Model *model, const AccuracySetup *setup, const Request *reference, float *largest_key,
                      float *largest_value)
{
    const ModelConfig *c = &model->config;
    int steps = reference->n_generated, stored = reference->prompt_len + steps - 1;
    PagedCache cache =
        paged_cache_create(c, 1, paged_kv_blocks_for(stored, setup->block_size), setup->block_size, false);
    float *logits = ALLOC_ARRAY((size_t)steps * c->vocab_size, float);
    run_teacher_forced(model, &cache.base, reference, logits);
    paged_cache_largest(&cache, 0, stored, largest_key, largest_value);
    array_free(logits);
    paged_cache_free(&cache);
}

/* The scales that put the largest magnitudes on the format's largest
 * number: each kv head's own, or, per tensor, its layer's largest for all
 * the layer's heads. */
static void scales_from_largest(const ModelConfig *c, const float *largest, KvNumber number, Fp8Scales kind,
                                float *scales)
{
    int heads = c->n_kv_heads;
    for (int layer = 0; layer < c->n_layers; layer++) {
        const float *of_layer = largest + (size_t)layer * heads;
        float layer_largest = kv_largest_magnitude(of_layer, heads, 1);
        for (int h = 0; h < heads; h++)
            scales[layer * heads + h] =
                kv_fp8_scale_for(kind == FP8_SCALES_PER_HEAD ? of_layer[h] : layer_largest, number);
    }
}
// ANCHOR_END: calibrate_fp8_scales

void accuracy_measure_fp8_scales(const Model *model, const AccuracySetup *setup, AccuracyResult *results)
{
    const ModelConfig *c = &model->config;
    size_t count = (size_t)c->n_layers * c->n_kv_heads;
    float *largest_key = ALLOC_ARRAY(count, float), *largest_value = ALLOC_ARRAY(count, float);
    float *key_scales = ALLOC_ARRAY(count, float), *value_scales = ALLOC_ARRAY(count, float);
    Request *reference = greedy_reference(model, setup);
    calibrate(model, setup, reference, largest_key, largest_value);
    const KvFormat formats[2] = {KV_FORMAT_FP8_E4M3, KV_FORMAT_FP8_E5M2};
    for (int f = 0; f < 2; f++) {
        KvNumber number = kv_layout(formats[f], true, (PagedKvShape){1, 1, 1}, 1).number;
        for (int kind = 0; kind < FP8_SCALES_COUNT; kind++) {
            ScalesUsed scales = NO_SCALES;
            if (kind != FP8_SCALES_NONE) {
                scales_from_largest(c, largest_key, number, (Fp8Scales)kind, key_scales);
                scales_from_largest(c, largest_value, number, (Fp8Scales)kind, value_scales);
                scales = (ScalesUsed){(Fp8Scales)kind, key_scales, value_scales};
            }
            results[f * FP8_SCALES_COUNT + kind] = measure_format(model, setup, formats[f], reference, scales);
        }
    }
    requests_free(reference, 1);
    array_free(largest_key);
    array_free(largest_value);
    array_free(key_scales);
    array_free(value_scales);
}

static void sizes_table(const AccuracyResult *results, FILE *out, TableFormat format)
{
    const char *headers[] = {"cache", "bits per key", "bits per value", "bytes per position", "of float32", "of fp16"};
    Table *t = TABLE_NEW(headers, "lrrrrr");
    double float32 = results[KV_FORMAT_FLOAT32].bytes_per_position, fp16 = results[KV_FORMAT_FP16].bytes_per_position;
    for (int f = 0; f < KV_FORMAT_COUNT; f++) {
        const AccuracyResult *r = &results[f];
        table_cell(t, "%s", kv_format_name(r->format));
        table_cell(t, "%.4g", r->bits_per_key);
        table_cell(t, "%.4g", r->bits_per_value);
        table_cell(t, "%.0f", r->bytes_per_position);
        table_cell(t, "%.3f", r->bytes_per_position / float32);
        table_cell(t, "%.3f", r->bytes_per_position / fp16);
    }
    table_print(t, out, format);
    table_free(t);
}

static const char *fp8_scales_name(Fp8Scales scales)
{
    return scales == FP8_SCALES_PER_HEAD ? "per kv head" : scales == FP8_SCALES_PER_TENSOR ? "per tensor" : "all 1";
}

/* Rows of results; with_scales names the FP8 scales of each. */
static void accuracy_table(const AccuracyResult *results, int count, bool with_scales, FILE *out, TableFormat format)
{
    const char *headers[] = {"cache", "attention error, mean", "max", "KL, mean (nats)", "max", "same top-1"};
    Table *t = TABLE_NEW(headers, "lrrrrr");
    for (int f = 0; f < count; f++) {
        const AccuracyResult *r = &results[f];
        if (with_scales)
            table_cell(t, "%s, scales %s", kv_format_name(r->format), fp8_scales_name(r->fp8_scales));
        else
            table_cell(t, "%s", kv_format_name(r->format));
        table_cell(t, "%.2e", r->attention_error_mean);
        table_cell(t, "%.2e", r->attention_error_max);
        table_cell(t, "%.2e", r->kl_mean);
        table_cell(t, "%.2e", r->kl_max);
        table_cell(t, "%.1f%%", 100 * r->top1_agreement);
    }
    table_print(t, out, format);
    table_free(t);
}

/* The FP8 formats with each kind of scale, and what per-head scales change
 * against per-tensor ones, beside what a change of scale that moves no
 * number out of range changes (all 1 to per tensor): the size of the
 * differences rounding alone makes. */
static void fp8_scales_report(const Model *model, const AccuracySetup *setup, FILE *out, TableFormat format)
{
    AccuracyResult results[2 * FP8_SCALES_COUNT];
    accuracy_measure_fp8_scales(model, setup, results);
    fprintf(out, "\nFP8 with its scales all 1, calibrated per tensor (layer), and per kv head:\n\n");
    accuracy_table(results, 2 * FP8_SCALES_COUNT, true, out, format);
    fprintf(out, "\nmean attention error, per kv head / per tensor (per tensor / all 1):");
    bool same = true;
    for (int f = 0; f < 2; f++) {
        const AccuracyResult *r = results + f * FP8_SCALES_COUNT;
        double head = r[FP8_SCALES_PER_HEAD].attention_error_mean / r[FP8_SCALES_PER_TENSOR].attention_error_mean;
        double tensor = r[FP8_SCALES_PER_TENSOR].attention_error_mean / r[FP8_SCALES_NONE].attention_error_mean;
        fprintf(out, "%s %s %.3f (%.3f)", f ? "," : "", kv_format_name(r->format), head, tensor);
        same = same && fabs(head - 1) <= ACCURACY_FP8_SCALES_SAME;
    }
    fprintf(out, ": per kv head %s %.0f%% of per tensor%s\n", same ? "within" : "differs by more than",
            100 * ACCURACY_FP8_SCALES_SAME,
            same ? " in both formats, a difference of the size a change of scale alone makes" : "");
}

int accuracy_int4_group_channels(const ModelConfig *config, const AccuracySetup *setup)
{
    return setup->int4_group < config->head_dim ? setup->int4_group : config->head_dim; /* kv_groups_per_row */
}

void accuracy_report(const ModelConfig *config, const AccuracySetup *setup, FILE *out, TableFormat format)
{
    int group = accuracy_int4_group_channels(config, setup);
    fprintf(out,
            "%d layers, %d query heads, %d kv heads of %d; blocks of %d, INT4 groups of %d channels%s. "
            "A prompt of %d tokens, then %d greedy tokens fed again through each cache.\n\n",
            config->n_layers, config->n_heads, config->n_kv_heads, config->head_dim, setup->block_size, group,
            group == config->head_dim ? " (a whole head)" : "", setup->prompt_len, setup->n_new);
    AccuracyResult results[KV_FORMAT_COUNT];
    for (int outliers = 0; outliers < 2; outliers++) {
        Model model = model_create(config);
        if (outliers)
            model_add_key_outliers(&model, ACCURACY_OUTLIER_PAIRS, ACCURACY_OUTLIER_GAIN);
        accuracy_measure_all(&model, setup, results);
        if (outliers) {
            fprintf(out, "\nwith key outliers: the last %d rotary pairs of every kv head's keys %g times larger\n\n",
                    ACCURACY_OUTLIER_PAIRS, ACCURACY_OUTLIER_GAIN);
        } else {
            fprintf(out, "what each format stores:\n\n");
            sizes_table(results, out, format);
            fprintf(out, "\nthe seeded model as it is:\n\n");
        }
        accuracy_table(results, KV_FORMAT_COUNT, false, out, format);
        fp8_scales_report(&model, setup, out, format);
        model_free(&model);
    }
}
