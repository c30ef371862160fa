/* Sampling on the GPU (softmax_topk_gpu_sample) against the CPU's
 * sample_rows: after each top-K version that takes the K, the same
 * survivors, probabilities and tokens for the same logits, parameters and
 * seed (version 7 drawing in its top-K kernel), on rows with ties, a NaN,
 * +inf and only -inf, with several rows per
 * thread (a grid capped at one block), and the refusals. Needs a GPU;
 * skipped without (its emulated twin runs everywhere). */
#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/softmax_topk_gpu.h"

enum { ROWS = 300, SAMPLES = 9 };

/* Both sides compute each survivor's weight in double with exp, and round
 * the ratio to float once. The emulator's exp is the CPU's, so it matches
 * to the bit; CUDA's double exp is within 1 ulp of a double, far below the
 * float rounding, so a probability may differ by one float ulp at most
 * when the double lands next to a rounding boundary: 2^-23 relative. A
 * token would differ only if a uniform fell within ~1e-16 of a boundary of
 * the cumulative sums, which for these few thousand draws does not happen. */
#define PROB_RTOL 0x1p-23

static void fill_rows(float *logits, size_t vocab)
{
    fill_tied_logits(logits, ROWS * vocab, 7 + vocab);
    logits[1 * vocab + vocab / 2] = NAN;
    logits[2 * vocab + vocab / 3] = INFINITY;
    logits[2 * vocab + vocab / 5] = INFINITY;
    for (size_t i = 0; i < vocab; i++) {
        logits[3 * vocab + i] = -INFINITY;
    }
}

static int count_differences(const int64_t *a, const int64_t *b, size_t n)
{
    int differ = 0;
    for (size_t i = 0; i < n; i++) {
        differ += a[i] != b[i];
    }
    return differ;
}

static int count_far_probs(const float *got, const float *expected, size_t n)
{
    int far = 0;
    for (size_t i = 0; i < n; i++) {
        bool both_nan = isnan(got[i]) && isnan(expected[i]);
        far += !both_nan && !is_close(got[i], expected[i], 0.0, PROB_RTOL);
    }
    return far;
}

static void check_case(int version, size_t vocab, SamplingParams params, int max_blocks)
{
    size_t k = (size_t)params.top_k, out = ROWS * k;
    float *logits = ALLOC_ARRAY(ROWS * vocab, float), *probs = ALLOC_ARRAY(out, float),
          *cpu_probs = ALLOC_ARRAY(out, float);
    int64_t *indices = ALLOC_ARRAY(out, int64_t), *cpu_indices = ALLOC_ARRAY(out, int64_t);
    int64_t *tokens = ALLOC_ARRAY(ROWS * SAMPLES, int64_t), *cpu_tokens = ALLOC_ARRAY(ROWS * SAMPLES, int64_t);
    fill_rows(logits, vocab);
    SoftmaxTopkGpuConfig config = {max_blocks, 0};
    const char *why =
        softmax_topk_gpu_sample(version, logits, ROWS, vocab, params, 99, SAMPLES, &config, tokens, probs, indices);
    sample_rows(float32_logits(logits), ROWS, vocab, params, DRAW_INVERSE_CDF, 99, SAMPLES, 2, cpu_tokens, cpu_probs,
                cpu_indices);
    EXPECT(why == NULL, "version %d, V %zu, K %zu: refused: %s", version, vocab, k, why ? why : "");
    if (why == NULL) {
        int wrong_tokens = count_differences(tokens, cpu_tokens, ROWS * SAMPLES);
        int wrong_indices = count_differences(indices, cpu_indices, out);
        int far_probs = count_far_probs(probs, cpu_probs, out);
        EXPECT(wrong_tokens + wrong_indices + far_probs == 0,
               "version %d, V %zu, K %zu, top-p %g, min-p %g, T %g, max_blocks %d: %d tokens, %d indices and %d "
               "probabilities differ from sample_rows'",
               version, vocab, k, params.top_p, params.min_p, params.temperature, max_blocks, wrong_tokens,
               wrong_indices, far_probs);
    }
    array_free(logits);
    array_free(probs);
    array_free(cpu_probs);
    array_free(indices);
    array_free(cpu_indices);
    array_free(tokens);
    array_free(cpu_tokens);
}

/* Every version that takes the K, with the steps on and off, the grid as
 * large as the rows need and capped at one block (each thread then samples
 * two rows). */
static void test_same_tokens_as_the_cpu(void)
{
    const size_t vocabs[] = {129, 5003};
    const int ks[] = {1, 8, 64, 256};
    for (size_t v = 0; v < 2; v++) {
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            SamplingParams params = {0.7, ks[t], 0.9, 0.02};
            SamplingParams plain = sampling_params_top_k(ks[t]);
            for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
                if ((size_t)ks[t] > vocabs[v] || ks[t] > softmax_topk_gpu_max_k(version)) {
                    continue;
                }
                check_case(version, vocabs[v], params, 0);
                check_case(version, vocabs[v], plain, 1);
            }
        }
    }
}

static void expect_refused(SamplingParams params, int samples, const char *what)
{
    float logits[300 * 4] = {0}, probs[300 * 4];
    int64_t indices[300 * 4], tokens[300 * 4];
    SoftmaxTopkGpuConfig config = {0, 0};
    const char *why = softmax_topk_gpu_sample(3, logits, 4, 300, params, 1, samples, &config, tokens, probs, indices);
    EXPECT(why != NULL, "%s: not refused", what);
    if (why != NULL) {
        printf("refused, as it should be: %s\n", why);
    }
}

static void test_refusals(void)
{
    SamplingParams params = sampling_params_top_k(4);
    expect_refused(params, 0, "0 samples");
    params.top_k = SOFTMAX_TOPK_GPU_SAMPLE_MAX_K + 1;
    expect_refused(params, 1, "K above the limit");
    params = sampling_params_top_k(4);
    params.temperature = 0.0;
    expect_refused(params, 1, "temperature 0");
    params = sampling_params_top_k(4);
    params.top_p = 0.0;
    expect_refused(params, 1, "top-p 0");
    params = sampling_params_top_k(4);
    params.min_p = 1.5;
    expect_refused(params, 1, "min-p 1.5");
}

int main(void)
{
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }
    test_same_tokens_as_the_cpu();
    test_refusals();
    return test_finish();
}
