/* The online attention state of kernels/online_attention.h, which the CUDA
 * decode kernels use: positions pushed one at a time, and partial states of
 * parts of the context merged (as split-K does), both against a double
 * reference, with peaked and flat softmaxes, irregular part sizes and empty
 * parts. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/attention.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/online_attention.h"

/* softmax(q k^T / sqrt(d)) v for one query, in double. */
static void reference(const float *scores, const float *values, int length, int d, double *out)
{
    double max = -INFINITY, sum = 0.0;
    for (int p = 0; p < length; p++)
        max = fmax(max, scores[p]);
    for (int i = 0; i < d; i++)
        out[i] = 0.0;
    for (int p = 0; p < length; p++)
        sum += exp(scores[p] - max);
    for (int p = 0; p < length; p++)
        for (int i = 0; i < d; i++)
            out[i] += exp(scores[p] - max) / sum * values[(size_t)p * d + i];
}

/* The state of positions [begin, end), pushed one at a time. */
static SoftmaxState push_range(const float *scores, const float *values, int begin, int end, int d, float *acc)
{
    SoftmaxState state = softmax_state_empty();
    memset(acc, 0, sizeof(float) * d);
    for (int p = begin; p < end; p++) {
        float rescale, weight;
        state = attention_push(state, scores[p], &rescale, &weight);
        for (int i = 0; i < d; i++)
            acc[i] = acc[i] * rescale + weight * values[(size_t)p * d + i];
    }
    return state;
}

static void check(const char *what, const float *acc, SoftmaxState state, const double *ref, int d)
{
    float out[256];
    for (int i = 0; i < d; i++)
        out[i] = acc[i] / state.sum;
    /* Values in [-1, 1], weights summed in float over up to 5000 positions. */
    CloseReport r = check_close_f32(out, ref, (size_t)d, ATTENTION_FLOAT_ATOL, ATTENTION_FLOAT_RTOL);
    EXPECT(close_report_print(stdout, what, &r), "%s", what);
}

static void check_case(int length, int d, float score_scale, Rng *rng)
{
    float *scores = ALLOC_ARRAY(length, float), *values = ALLOC_ARRAY((size_t)length * d, float);
    float *acc = ALLOC_ARRAY(d, float), *part = ALLOC_ARRAY(d, float);
    double *ref = ALLOC_ARRAY(d, double);
    rng_fill_normal_f32(rng, scores, length, 0, score_scale);
    rng_fill_uniform_f32(rng, values, (size_t)length * d, -1, 1);
    reference(scores, values, length, d, ref);

    char what[128];
    snprintf(what, sizeof what, "length %d, d %d, scores x%g: one at a time", length, d, score_scale);
    check(what, acc, push_range(scores, values, 0, length, d, acc), ref, d);

    /* Parts of irregular sizes, some empty, merged left to right. */
    const int part_sizes[] = {1, 3, 64, 1000};
    for (int s = 0; s < 4; s++) {
        SoftmaxState merged = softmax_state_empty();
        memset(acc, 0, sizeof(float) * d);
        for (int begin = 0; begin <= length; begin += part_sizes[s]) {
            int end = begin + part_sizes[s] < length ? begin + part_sizes[s] : length;
            SoftmaxState state = push_range(scores, values, begin, end, d, part);
            merged = attention_merge(merged, acc, state, part, d);
        }
        snprintf(what, sizeof what, "length %d, d %d, scores x%g: parts of %d merged", length, d, score_scale,
                 part_sizes[s]);
        check(what, acc, merged, ref, d);
    }
    array_free(scores);
    array_free(values);
    array_free(acc);
    array_free(part);
    array_free(ref);
}

/* Merging an empty state changes nothing, on either side. */
static void empty_parts_merge_to_nothing(void)
{
    float acc[2] = {3.0f, -1.0f}, none[2] = {0.0f, 0.0f};
    SoftmaxState state = {1.5f, 2.0f};
    SoftmaxState merged = attention_merge(state, acc, softmax_state_empty(), none, 2);
    EXPECT(merged.max == 1.5f && merged.sum == 2.0f && acc[0] == 3.0f && acc[1] == -1.0f,
           "merging an empty part leaves the state as it was");
    float empty_acc[2] = {0.0f, 0.0f}, other[2] = {3.0f, -1.0f};
    merged = attention_merge(softmax_state_empty(), empty_acc, state, other, 2);
    EXPECT(merged.max == 1.5f && merged.sum == 2.0f && empty_acc[0] == 3.0f && empty_acc[1] == -1.0f,
           "an empty state takes the other part as it is");
}

int main(void)
{
    Rng rng;
    rng_seed(&rng, 12);
    const int lengths[] = {1, 17, 333, 5000};
    for (int i = 0; i < 4; i++) {
        check_case(lengths[i], 128, 1.0f, &rng);
        check_case(lengths[i], 16, 30.0f, &rng); /* nearly one-hot */
    }
    empty_parts_merge_to_nothing();
    return test_finish();
}
