/* What a quantized cache does to a generation, measured on the chapter's
 * decoder: a greedy generation with a float32 cache is the reference, and
 * the same tokens are fed again through a cache in each format (teacher
 * forcing), so that every step compares next-token distributions over the
 * same text. Every attention the model computes on the way is also computed
 * over the same keys and values unquantized, and compared. */
#ifndef CHAPTERS_04_KV_CACHE_ACCURACY_H
#define CHAPTERS_04_KV_CACHE_ACCURACY_H

#include <stdio.h>

#include "chapters/04-kv-cache/model.h"
#include "common/table.h"
#include "kernels/kv_quant.h"

typedef struct {
    int prompt_len, n_new; /* the reference: a random prompt, then n_new greedy tokens */
    int block_size, int4_group;
    uint64_t seed; /* of the prompt */
} AccuracySetup;

/* How an FP8 cache's scales are chosen: all 1 (no calibration, what vLLM
 * uses when a checkpoint ships no scales), or calibrated on a float run
 * over the text, one per layer for all the keys and one for all the values
 * (vLLM's k_scale and v_scale), or one per layer and kv head. */
typedef enum { FP8_SCALES_NONE, FP8_SCALES_PER_TENSOR, FP8_SCALES_PER_HEAD, FP8_SCALES_COUNT } Fp8Scales;

typedef struct {
    KvFormat format;
    Fp8Scales fp8_scales;
    double bytes_per_position;           /* keys and values of every layer, scales included */
    double bits_per_key, bits_per_value; /* per number, scales included */
    /* ||attention out - float attention out|| / ||float attention out|| over
     * every layer, query head and position of the run. */
    double attention_error_mean, attention_error_max;
    /* KL(float || quantized) of the next-token distributions, in nats, over steps. */
    double kl_mean, kl_max;
    double top1_agreement; /* share of steps whose most likely next token is the float one's */
    int steps;
} AccuracyResult;

/* The accuracy of each format against the float32 reference, in format
 * order (KV_FORMAT_FLOAT32 first, which must come out exact). */
void accuracy_measure_all(const Model *model, const AccuracySetup *setup, AccuracyResult *results);

/* FP8 E4M3, then E5M2, each with the scales of Fp8Scales in order:
 * results[2 * FP8_SCALES_COUNT]. */
void accuracy_measure_fp8_scales(const Model *model, const AccuracySetup *setup, AccuracyResult *results);

/* Per-head and per-tensor FP8 scales count as the same accuracy when their
 * mean attention errors are within this share of each other: calibrating
 * scales that move no number out of the format's range changes the error
 * by up to several percent (the tables print it), rounding alone. */
#define ACCURACY_FP8_SCALES_SAME 0.10

/* Keys with outlier channels: the pairs and gain the experiment gives them. */
#define ACCURACY_OUTLIER_PAIRS 2
#define ACCURACY_OUTLIER_GAIN 10.0f

/* The channels an INT4 scale covers: --int4-group, or a whole head where
 * the head is narrower (a group never spans two heads). */
int accuracy_int4_group_channels(const ModelConfig *config, const AccuracySetup *setup);

/* The table for the model as it is and with key outliers added, and the
 * cache sizes of the formats. */
void accuracy_report(const ModelConfig *config, const AccuracySetup *setup, FILE *out, TableFormat format);

const char *kv_format_name(KvFormat format);

#endif
