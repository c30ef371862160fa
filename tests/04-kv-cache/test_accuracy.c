/* The accuracy experiment's claims, with the bounds the chapter derives:
 *
 *   - float32 through the comparing cache is exact, fp16 is within its
 *     rounding (2^-11 of each number);
 *   - per-token INT8 and INT4 on keys and values without outliers: the mean
 *     relative error of an attention output is about the relative rounding
 *     noise of one number, step / sqrt(12) over its row's RMS; the step is
 *     largest / qmax and a row's largest is below sqrt(12) of its RMS for
 *     the rows here, so the error stays below 1 / qmax;
 *   - FP8 (a float: error relative to each number, about 2^-m / sqrt(12) of
 *     it with m mantissa bits): the mean attention error below the relative
 *     step 2^-m (1/8 for E4M3, 1/4 for E5M2), E5M2's at least 1.5 times
 *     E4M3's (one mantissa bit less: twice the error), and per-token INT8
 *     below E4M3 with and without outliers (INT8 wins while a row's largest
 *     is under 127/8 = 16 times its RMS, as in these rows);
 *   - a KL below 1e-4 nats (INT8) or 1e-2 (INT4) without outliers: some
 *     1 / KL tokens must be drawn before a test could tell the distributions
 *     apart;
 *   - with key outliers, per-token INT4 gets at least 1.5 times worse and
 *     per-channel keys (KIVI) at least 1.5 times better than it, in attention
 *     error and in KL;
 *   - FP8 with scales calibrated per tensor and per kv head: both below the
 *     relative step, and within ACCURACY_FP8_SCALES_SAME of each other. */
#include <math.h>
#include <stdio.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "common/testing.h"

static void print(const char *model, const AccuracyResult *r)
{
    for (int f = 0; f < KV_FORMAT_COUNT; f++)
        printf("%s, %-30s attention error %.2e (max %.2e), KL %.2e (max %.2e), top-1 %.1f%%\n", model,
               kv_format_name(r[f].format), r[f].attention_error_mean, r[f].attention_error_max, r[f].kl_mean,
               r[f].kl_max, 100 * r[f].top1_agreement);
}

/* FP8 calibrated per tensor (layer) and per kv head, with and without
 * outliers: both within the relative step; per head within
 * ACCURACY_FP8_SCALES_SAME of per tensor (a float's relative error does not
 * depend on the scale while the numbers stay in its normal range, which the
 * layers' largest keys and values here do not leave by a factor near 2^15). */
static void fp8_scales_agree(const ModelConfig *config, const AccuracySetup *setup)
{
    for (int run = 0; run < 2; run++) {
        Model model = model_create(config);
        if (run)
            model_add_key_outliers(&model, ACCURACY_OUTLIER_PAIRS, ACCURACY_OUTLIER_GAIN);
        AccuracyResult r[2 * FP8_SCALES_COUNT];
        accuracy_measure_fp8_scales(&model, setup, r);
        model_free(&model);
        for (int f = 0; f < 2; f++) {
            const AccuracyResult *tensor = &r[f * FP8_SCALES_COUNT + FP8_SCALES_PER_TENSOR];
            const AccuracyResult *head = &r[f * FP8_SCALES_COUNT + FP8_SCALES_PER_HEAD];
            double step = f == 0 ? 1.0 / 8 : 1.0 / 4;
            printf("%s, %s: calibrated per tensor %.2e, per kv head %.2e\n", run ? "outliers" : "plain",
                   kv_format_name(tensor->format), tensor->attention_error_mean, head->attention_error_mean);
            EXPECT(tensor->format == head->format && tensor->fp8_scales == FP8_SCALES_PER_TENSOR &&
                       head->fp8_scales == FP8_SCALES_PER_HEAD,
                   "results in the order of the header");
            EXPECT(tensor->attention_error_mean < step && head->attention_error_mean < step,
                   "%s: calibrated scales keep the mean attention error below %g", kv_format_name(tensor->format),
                   step);
            EXPECT(fabs(head->attention_error_mean / tensor->attention_error_mean - 1) <= ACCURACY_FP8_SCALES_SAME,
                   "%s%s: per kv head %.3e within %g of per tensor %.3e", kv_format_name(tensor->format),
                   run ? " with outliers" : "", head->attention_error_mean, ACCURACY_FP8_SCALES_SAME,
                   tensor->attention_error_mean);
        }
    }
}

/* The header's INT4 group: --int4-group, or the head where it is narrower
 * (the decoder's default heads of 16 channels took groups of 32 as 16,
 * and the header said 32). */
static void int4_group_is_the_one_used(void)
{
    ModelConfig config = model_default_config();
    AccuracySetup setup = {64, 256, 32, 32, 2025};
    const int head_dims[] = {16, 32, 64, 64}, groups[] = {32, 32, 32, 64}, used[] = {16, 32, 32, 64};
    for (int c = 0; c < 4; c++) {
        config.head_dim = head_dims[c];
        setup.int4_group = groups[c];
        int channels = accuracy_int4_group_channels(&config, &setup);
        EXPECT(channels == used[c], "heads of %d, --int4-group %d: groups of %d channels, expected %d", head_dims[c],
               groups[c], channels, used[c]);
    }
}

int main(void)
{
    int4_group_is_the_one_used();
    ModelConfig config = model_default_config();
    config.head_dim = 128;
    const AccuracySetup setup = {64, 256, 32, KV_DEFAULT_INT4_GROUP, 2025};
    AccuracyResult plain[KV_FORMAT_COUNT], outliers[KV_FORMAT_COUNT];
    Model model = model_create(&config);
    accuracy_measure_all(&model, &setup, plain);
    model_add_key_outliers(&model, ACCURACY_OUTLIER_PAIRS, ACCURACY_OUTLIER_GAIN);
    accuracy_measure_all(&model, &setup, outliers);
    model_free(&model);
    print("plain", plain);
    print("outliers", outliers);

    const AccuracyResult *exact = &plain[KV_FORMAT_FLOAT32], *fp16 = &plain[KV_FORMAT_FP16];
    EXPECT(exact->steps == 256, "256 generated tokens compared");
    EXPECT(exact->attention_error_max == 0.0 && exact->kl_max == 0.0 && exact->top1_agreement == 1.0,
           "float32 against itself: exact");
    EXPECT(fp16->attention_error_mean <= 0x1p-11, "fp16: mean attention error %.2e within 2^-11",
           fp16->attention_error_mean);
    EXPECT(outliers[KV_FORMAT_FP16].attention_error_mean <= 0x1p-11, "fp16 with outliers: within 2^-11");

    const AccuracyResult *int8 = &plain[KV_FORMAT_INT8], *int4 = &plain[KV_FORMAT_INT4];
    EXPECT(int8->attention_error_mean < 1.0 / 127, "INT8: mean attention error %.2e below 1/127",
           int8->attention_error_mean);
    EXPECT(int4->attention_error_mean < 1.0 / 7, "INT4: mean attention error %.2e below 1/7",
           int4->attention_error_mean);
    EXPECT(int8->kl_mean < 1e-4, "INT8: mean KL %.2e below 1e-4 nats", int8->kl_mean);
    EXPECT(int4->kl_mean < 1e-2 && plain[KV_FORMAT_KIVI4].kl_mean < 1e-2, "INT4: mean KL below 1e-2 nats");
    EXPECT(int8->top1_agreement >= 0.97, "INT8: the same most likely token at %.1f%% of steps",
           100 * int8->top1_agreement);

    const AccuracyResult *e4m3 = &plain[KV_FORMAT_FP8_E4M3], *e5m2 = &plain[KV_FORMAT_FP8_E5M2];
    EXPECT(e4m3->attention_error_mean < 1.0 / 8 && e5m2->attention_error_mean < 1.0 / 4,
           "FP8: mean attention error %.2e (E4M3) below 1/8, %.2e (E5M2) below 1/4", e4m3->attention_error_mean,
           e5m2->attention_error_mean);
    for (int run = 0; run < 2; run++) {
        const AccuracyResult *r = run ? outliers : plain;
        const char *which = run ? "with outliers" : "without outliers";
        EXPECT(r[KV_FORMAT_FP8_E5M2].attention_error_mean >= 1.5 * r[KV_FORMAT_FP8_E4M3].attention_error_mean,
               "%s: E5M2's attention error %.2e at least 1.5 times E4M3's %.2e", which,
               r[KV_FORMAT_FP8_E5M2].attention_error_mean, r[KV_FORMAT_FP8_E4M3].attention_error_mean);
        EXPECT(r[KV_FORMAT_INT8].attention_error_mean < r[KV_FORMAT_FP8_E4M3].attention_error_mean,
               "%s: per-token INT8 (%.2e) beats E4M3 (%.2e)", which, r[KV_FORMAT_INT8].attention_error_mean,
               r[KV_FORMAT_FP8_E4M3].attention_error_mean);
    }

    fp8_scales_agree(&config, &setup);

    const AccuracyResult *per_token = &outliers[KV_FORMAT_INT4], *kivi = &outliers[KV_FORMAT_KIVI4];
    EXPECT(per_token->attention_error_mean >= 1.5 * int4->attention_error_mean,
           "outliers make per-token INT4 keys worse: %.2e against %.2e", per_token->attention_error_mean,
           int4->attention_error_mean);
    EXPECT(kivi->attention_error_mean * 1.5 <= per_token->attention_error_mean,
           "with outliers, per-channel keys: attention error %.2e against per-token %.2e", kivi->attention_error_mean,
           per_token->attention_error_mean);
    EXPECT(kivi->kl_mean * 1.5 <= per_token->kl_mean, "with outliers, per-channel keys: KL %.2e against %.2e",
           kivi->kl_mean, per_token->kl_mean);
    EXPECT(kivi->top1_agreement > per_token->top1_agreement, "with outliers, per-channel keys agree more often");
    return test_finish();
}
