/* The online softmax building blocks of kernels/softmax_topk.h, on the CPU:
 * the exp they use, the weights with their limits, the recurrence, the
 * merge, and the lane sums of the fused CPU version. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/03-softmax-topk/exp16.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "common/testing.h"

/* An exhaustive run over every float in [-87.3, 0] found the largest
 * relative error 1.52 * 2^-24 (at x = -16.29); 2 * 2^-24 leaves a margin
 * for another compiler's rounding of the constants, nothing more. */
#define EXP_RTOL (2.0 * 0x1p-24)

static void test_exp_accuracy(void)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    size_t checked = 0;
    /* Every 61st float from 0 down to ln(FLT_MIN), where the results stop
     * being normal floats: ~17 million values. */
    for (float x = -0.0f; x >= logf(FLT_MIN); checked++) {
        double ref = exp((double)x);
        double error = fabs(softmax_exp(x) - ref) / ref;
        if (!(error <= worst)) {
            worst = error;
            worst_x = x;
        }
        x = float_from_bits(float_bits(x) + 61u);
    }
    EXPECT(worst <= EXP_RTOL, "softmax_exp: max relative error %.3g at x = %.9g over %zu values", worst,
           (double)worst_x, checked);
    printf("softmax_exp: %zu values, max relative error %.3g (%.2f * 2^-24)\n", checked, worst, worst / 0x1p-24);
}

static void test_exp_special_values(void)
{
    EXPECT(softmax_exp(0.0f) == 1.0f, "exp(0) = %.9g", (double)softmax_exp(0.0f));
    EXPECT(softmax_exp(-0.0f) == 1.0f, "exp(-0) = %.9g", (double)softmax_exp(-0.0f));
    EXPECT(softmax_exp(-INFINITY) == 0.0f, "exp(-inf) = %g", (double)softmax_exp(-INFINITY));
    EXPECT(isnan(softmax_exp(NAN)), "exp(NaN) = %g", (double)softmax_exp(NAN));
    EXPECT(softmax_exp(-1e30f) == 0.0f, "exp(-1e30) = %g", (double)softmax_exp(-1e30f));
    EXPECT(softmax_exp(-FLT_MAX) == 0.0f, "exp(-FLT_MAX) = %g", (double)softmax_exp(-FLT_MAX));
}

/* Below ln(FLT_MIN) exp(x) is a subnormal float, a multiple of
 * FLT_TRUE_MIN = 2^-149, down to ln(2^-150), below which it rounds to 0.
 * softmax_exp rounds twice there (to 24 bits, then to the grid), so it may
 * be one step of the grid from exp in double rounded to float; that is the
 * tolerance. Every float of the range is checked: ~2.2 million. */
static void test_exp_subnormal_results(void)
{
    size_t checked = 0, off_by_one_step = 0, wrong = 0;
    float first_wrong = 0.0f;
    for (float x = logf(FLT_MIN); x >= -104.5f; x = nextafterf(x, -INFINITY), checked++) {
        float expected = (float)exp((double)x);
        float got = softmax_exp(x);
        off_by_one_step += got != expected;
        if (!(fabsf(got - expected) <= FLT_TRUE_MIN)) {
            first_wrong = wrong++ ? first_wrong : x;
        }
    }
    EXPECT(wrong == 0, "softmax_exp: %zu of %zu subnormal results more than 2^-149 off, the first at x = %.9g", wrong,
           checked, (double)first_wrong);
    printf("softmax_exp: %zu values in [-104.5, ln(FLT_MIN)], %zu of them one step of 2^-149 off\n", checked,
           off_by_one_step);
    EXPECT(softmax_exp(-100.0f) == (float)exp(-100.0), "exp(-100) = %g, expected %g", (double)softmax_exp(-100.0f),
           (double)(float)exp(-100.0));
    EXPECT(softmax_exp(-103.0f) > 0.0f, "exp(-103) = %g is not 0", (double)softmax_exp(-103.0f));
}

/* The exponential of a sum of weights is softmax_exp with its subnormal
 * results flushed to 0: equal wherever softmax_exp gives 2^-126 or more, 0
 * below, on every 7th float of [-104.5, 0] (~160 million), and the same
 * special values. (On the GPU it is the special function unit's; the GPU
 * tests hold those sums to their own tolerance.) */
static void test_exp_in_sum(void)
{
    size_t checked = 0, different = 0;
    float first_different = 0.0f;
    for (float x = -0.0f; x >= -104.5f; checked++) {
        float full = softmax_exp(x), expected = full >= FLT_MIN ? full : 0.0f;
        if (softmax_exp_in_sum(x) != expected) {
            first_different = different++ ? first_different : x;
        }
        x = float_from_bits(float_bits(x) + 7u);
    }
    EXPECT(different == 0,
           "softmax_exp_in_sum: %zu of %zu values differ from softmax_exp flushed, the first at x = %.9g", different,
           checked, (double)first_different);
    EXPECT(softmax_exp_in_sum(-0.0f) == 1.0f && softmax_exp_in_sum(-INFINITY) == 0.0f &&
               softmax_exp_in_sum(-FLT_MAX) == 0.0f && isnan(softmax_exp_in_sum(NAN)),
           "softmax_exp_in_sum: exp(-0) = %g, exp(-inf) = %g, exp(-FLT_MAX) = %g, exp(NaN) = %g",
           (double)softmax_exp_in_sum(-0.0f), (double)softmax_exp_in_sum(-INFINITY),
           (double)softmax_exp_in_sum(-FLT_MAX), (double)softmax_exp_in_sum(NAN));
    printf("softmax_exp_in_sum: %zu values, all softmax_exp's with subnormals flushed\n", checked);
}

#if defined(EXP16_AVX512)
/* 16 exponentials of exp16_in_sum, one x per lane (x[0] .. x[15]). */
static void exp16_of(const float x[16], float y[16])
{
    _mm512_storeu_ps(y, exp16_in_sum(_mm512_loadu_ps(x), exp16_powers()));
}

/* The bound of exp16.h, in units of 2^-24 of the value: the polynomial
 * 0.894 (the fit's own maximum), the table's entry and the last
 * multiply-add half an ulp each (at most 1 each), and the one-part ln 2,
 * whose float is 0.0459 * 2^-24 of it too large: times 32 n, that is x
 * off by |x| * 0.0459 * 2^-24 (at most |x| / 20). */
static double exp16_bound(float x)
{
    return (2.9 + fabs((double)x) / 20.0) * 0x1p-24;
}

/* The fused pass's exponential with AVX-512 (exp16.h), on every 7th float
 * of [ln(2^-126), 0] (~160 million), against exp in double: the largest
 * share of its bound (exp16_bound) must be at most 1. The largest
 * relative errors themselves are printed for two ranges: where a weight
 * is at least 2^-24 of the maximum's, the weights that can move a sum's
 * last bit, and below. Below the range, 0, as softmax_exp_in_sum; and the
 * same special values. */
static void test_exp16(void)
{
    double worst_share = 0.0, worst[2] = {0.0, 0.0};
    float worst_x = 0.0f, x[16], y[16];
    size_t checked = 0;
    uint32_t last = float_bits(SOFTMAX_EXP_LEAST_NORMAL);
    for (uint32_t first = float_bits(-0.0f); first <= last; first += 16 * 7) {
        for (int lane = 0; lane < 16; lane++) {
            x[lane] = float_from_bits(first + 7u * lane <= last ? first + 7u * lane : last);
        }
        exp16_of(x, y);
        for (int lane = 0; lane < 16; lane++, checked++) {
            double ref = exp((double)x[lane]);
            double error = fabs(y[lane] - ref) / ref, share = error / exp16_bound(x[lane]);
            if (!(share <= worst_share)) {
                worst_share = share;
                worst_x = x[lane];
            }
            int range = ref >= 0x1p-24 ? 0 : 1;
            worst[range] = error > worst[range] ? error : worst[range];
        }
    }
    EXPECT(worst_share <= 1.0, "exp16_in_sum: error %.3g of its bound at x = %.9g over %zu values", worst_share,
           (double)worst_x, checked);
    printf("exp16_in_sum: %zu values, max relative error %.2f * 2^-24 where exp(x) >= 2^-24, %.2f * 2^-24 below; "
           "at most %.2f of the bound\n",
           checked, worst[0] / 0x1p-24, worst[1] / 0x1p-24, worst_share);

    const float special[16] = {
        -0.0f,   0.0f,   -INFINITY, -FLT_MAX, NAN,   nextafterf(SOFTMAX_EXP_LEAST_NORMAL, -INFINITY),
        -100.0f, -1e30f, -0.0f,     -0.0f,    -0.0f, -0.0f,
        -0.0f,   -0.0f,  -0.0f,     -0.0f};
    exp16_of(special, y);
    EXPECT(y[0] == 1.0f && y[1] == 1.0f && y[2] == 0.0f && y[3] == 0.0f && isnan(y[4]) && y[5] == 0.0f &&
               y[6] == 0.0f && y[7] == 0.0f,
           "exp16_in_sum: exp(-0) = %g, exp(0) = %g, exp(-inf) = %g, exp(-FLT_MAX) = %g, exp(NaN) = %g, "
           "below ln(2^-126) %g, exp(-100) = %g, exp(-1e30) = %g",
           (double)y[0], (double)y[1], (double)y[2], (double)y[3], (double)y[4], (double)y[5], (double)y[6],
           (double)y[7]);
}
#endif

static void test_weight_limits(void)
{
    EXPECT(softmax_weight(INFINITY, INFINITY) == 1.0f, "+inf at an infinite max weighs 1");
    EXPECT(softmax_weight(5.0f, INFINITY) == 0.0f, "a finite logit next to +inf weighs 0");
    EXPECT(softmax_weight(-INFINITY, -INFINITY) == 0.0f, "-inf at a -inf max weighs 0");
    EXPECT(softmax_weight(-INFINITY, 3.0f) == 0.0f, "-inf weighs 0");
    EXPECT(softmax_weight(3.0f, 3.0f) == 1.0f, "the max weighs 1");
    EXPECT(isnan(softmax_weight(NAN, 3.0f)), "NaN weighs NaN");
}

/* The recurrence, fed a stream, against the definition in double. */
static void check_state(SoftmaxState state, const float *x, size_t n, const char *what)
{
    double max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        max = x[i] > max ? x[i] : max;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        sum += exp(x[i] - max);
    }
    EXPECT(state.max == (float)max, "%s: max %.9g, expected %.9g", what, (double)state.max, max);
    /* Each push rounds the sum once and may rescale it once: the relative
     * error grows like n * 2^-24 at worst; n <= 5000 here, so 5e-4 is the
     * worst case, and the observed error is far smaller. */
    EXPECT(is_close(state.sum, sum, 0.0, 5e-4), "%s: sum %.9g, expected %.9g", what, (double)state.sum, sum);
}

static SoftmaxState push_all(const float *x, size_t n)
{
    SoftmaxState state = softmax_state_empty();
    for (size_t i = 0; i < n; i++) {
        state = softmax_state_push(state, x[i]);
    }
    return state;
}

static void test_recurrence(void)
{
    Rng rng;
    rng_seed(&rng, 4);
    enum { N = 5000 };
    float *x = ALLOC_ARRAY(N, float);
    rng_fill_normal_f32(&rng, x, N, 0.0, 4.0);
    check_state(push_all(x, N), x, N, "random order");
    /* Increasing logits: a new maximum at every step, the sum rescaled each time. */
    for (size_t i = 0; i < N; i++) {
        x[i] = -20.0f + 40.0f * (float)i / N;
    }
    check_state(push_all(x, N), x, N, "increasing");
    for (size_t i = 0; i < N; i++) {
        x[i] = 20.0f - 40.0f * (float)i / N;
    }
    check_state(push_all(x, N), x, N, "decreasing");
    array_free(x);
}

/* Merging the states of two halves gives the state of the whole, for every
 * split point, and merging with the empty state changes nothing. */
static void test_merge(void)
{
    Rng rng;
    rng_seed(&rng, 5);
    enum { N = 777 };
    float x[N];
    rng_fill_normal_f32(&rng, x, N, 2.0, 3.0);
    SoftmaxState whole = push_all(x, N);
    int splits_close = 0;
    for (size_t split = 0; split <= N; split += 37) {
        SoftmaxState merged = softmax_state_merge(push_all(x, split), push_all(x + split, N - split));
        /* Two differently rounded sums of 777 terms: a few ulp apart. */
        splits_close += merged.max == whole.max && is_close(merged.sum, whole.sum, 0.0, 1e-5);
    }
    EXPECT(splits_close == N / 37 + 1, "%d of %d splits merge to the whole state", splits_close, N / 37 + 1);
    SoftmaxState left = softmax_state_merge(softmax_state_empty(), whole);
    SoftmaxState right = softmax_state_merge(whole, softmax_state_empty());
    EXPECT(left.max == whole.max && left.sum == whole.sum, "empty + state = state");
    EXPECT(right.max == whole.max && right.sum == whole.sum, "state + empty = state");
    SoftmaxState none = softmax_state_merge(softmax_state_empty(), softmax_state_empty());
    EXPECT(none.max == -INFINITY && none.sum == 0.0f, "empty + empty = empty (sum %g)", (double)none.sum);
}

static void test_hard_states(void)
{
    const float all_minus_inf[] = {-INFINITY, -INFINITY, -INFINITY};
    SoftmaxState s = push_all(all_minus_inf, 3);
    EXPECT(s.max == -INFINITY && s.sum == 0.0f, "all -inf: sum 0 (so probabilities 0/0 = NaN), got %g", (double)s.sum);
    EXPECT(isnan(softmax_probability(s, -INFINITY)), "all -inf: probability NaN");

    const float one_finite[] = {-INFINITY, 2.0f, -INFINITY};
    s = push_all(one_finite, 3);
    EXPECT(s.sum == 1.0f && softmax_probability(s, 2.0f) == 1.0f && softmax_probability(s, -INFINITY) == 0.0f,
           "one finite among -inf: probability 1 and 0");

    const float two_inf[] = {1.0f, INFINITY, 3.0f, INFINITY};
    s = push_all(two_inf, 4);
    EXPECT(s.max == INFINITY && s.sum == 2.0f, "two +inf: sum %g, expected 2", (double)s.sum);
    EXPECT(softmax_probability(s, INFINITY) == 0.5f && softmax_probability(s, 3.0f) == 0.0f,
           "two +inf share the probability");

    const float with_nan[] = {1.0f, NAN, 3.0f};
    s = push_all(with_nan, 3);
    EXPECT(s.max == 3.0f && isnan(s.sum), "a NaN makes the sum NaN, the max ignores it");
    SoftmaxState merged = softmax_state_merge(push_all(one_finite, 3), s);
    EXPECT(isnan(merged.sum), "a NaN sum survives a merge");
    merged = softmax_state_merge(s, push_all(all_minus_inf, 3));
    EXPECT(isnan(merged.sum), "a NaN sum survives a merge with an all -inf state");

    const float huge[] = {FLT_MAX, -FLT_MAX, FLT_MAX};
    s = push_all(huge, 3);
    EXPECT(s.sum == 2.0f, "FLT_MAX and -FLT_MAX: the difference overflows to -inf and weighs 0 (sum %g)",
           (double)s.sum);
}

/* The branch-free push of four logits against four pushes one at a time:
 * every choice of four from values at the limits (infinities, FLT_MAX, NaN,
 * ties), onto states at the limits (empty, -inf only, finite, +inf, NaN).
 * The same maximum exactly, and the same sum up to the rounding of a few
 * operations in another order (8 2^-24 relative), NaN exactly where the
 * one-at-a-time sum is NaN. */
static void test_push4(void)
{
    const float values[] = {-INFINITY, -FLT_MAX, -1.0f, 0.0f, 2.0f, FLT_MAX, INFINITY, NAN};
    enum { VALUES = sizeof values / sizeof values[0] };
    const float starts[][2] = {
        {-INFINITY, -INFINITY},
        {2.0f,      -1.0f    },
        {INFINITY,  0.0f     },
        {1.0f,      NAN      }
    };
    int wrong = 0, cases = 0;
    for (int s = -1; s < 4; s++) {
        SoftmaxState start = softmax_state_empty();
        for (int p = 0; s >= 0 && p < 2; p++) {
            start = softmax_state_push(start, starts[s][p]);
        }
        for (int code = 0; code < VALUES * VALUES * VALUES * VALUES; code++, cases++) {
            float x[4] = {values[code % VALUES], values[code / VALUES % VALUES],
                          values[code / (VALUES * VALUES) % VALUES], values[code / (VALUES * VALUES * VALUES)]};
            SoftmaxState one_by_one = start, four = softmax_state_push4(start, x[0], x[1], x[2], x[3]);
            for (int e = 0; e < 4; e++) {
                one_by_one = softmax_state_push(one_by_one, x[e]);
            }
            bool same_max = four.max == one_by_one.max;
            bool same_sum =
                isnan(one_by_one.sum) ? isnan(four.sum) : is_close(four.sum, one_by_one.sum, 0.0, 8 * 0x1p-24);
            if (!(same_max && same_sum) && wrong++ == 0) {
                printf("push4 onto (%g, %g) of %g %g %g %g: (%g, %g), one by one (%g, %g)\n", (double)start.max,
                       (double)start.sum, (double)x[0], (double)x[1], (double)x[2], (double)x[3], (double)four.max,
                       (double)four.sum, (double)one_by_one.max, (double)one_by_one.sum);
            }
        }
    }
    EXPECT(wrong == 0, "push4: %d of %d cases differ from four pushes", wrong, cases);
    /* A long stream four at a time, increasing (the sum rescaled at every
     * step), against the definition. */
    enum { N = 4000 };
    float *x = ALLOC_ARRAY(N, float);
    for (size_t i = 0; i < N; i++) {
        x[i] = -20.0f + 40.0f * (float)i / N;
    }
    SoftmaxState state = softmax_state_empty();
    for (size_t i = 0; i < N; i += 4) {
        state = softmax_state_push4(state, x[i], x[i + 1], x[i + 2], x[i + 3]);
    }
    check_state(state, x, N, "increasing, four at a time");
    array_free(x);
}

/* The fused version's lane sums, fed a row chunk by chunk. */
static SoftmaxState add_in_chunks(const float *x, int n, int chunk)
{
    LaneSums sums = lane_sums_empty();
    for (int begin = 0; begin < n; begin += chunk) {
        int size = n - begin < chunk ? n - begin : chunk;
        float max = lane_sums_add_chunk(&sums, x + begin, size);
        float expected = -INFINITY;
        for (int i = begin; i < begin + size; i++) {
            expected = x[i] > expected ? x[i] : expected;
        }
        EXPECT(max == expected, "chunk at %d: max %g, expected %g", begin, (double)max, (double)expected);
    }
    return lane_sums_state(&sums);
}

/* They agree with the scalar recurrence, for chunks of one vector block up to
 * several, in random order and with a new maximum in every chunk (the sums
 * rescaled each time). */
static void test_lane_sums(void)
{
    enum { N = 40 * LANES };
    float *x = ALLOC_ARRAY(N, float);
    Rng rng;
    rng_seed(&rng, 6);
    rng_fill_normal_f32(&rng, x, N, 0.0, 5.0);
    const int chunks[] = {LANES, 3 * LANES, 4 * LANES};
    for (int c = 0; c < 3; c++) {
        SoftmaxState lanes = add_in_chunks(x, N, chunks[c]), scalar = push_all(x, N);
        /* Sums of 2560 terms in two orders; each lane adds 40 of them one after
         * another and the lanes meet in a tree: 1e-5 is far above either error. */
        EXPECT(lanes.max == scalar.max && is_close(lanes.sum, scalar.sum, 0.0, 1e-5),
               "chunks of %d: (%g, %.9g) vs recurrence (%g, %.9g)", chunks[c], (double)lanes.max, (double)lanes.sum,
               (double)scalar.max, (double)scalar.sum);
    }
    for (int i = 0; i < N; i++) {
        x[i] = -30.0f + 60.0f * (float)i / N;
    }
    SoftmaxState lanes = add_in_chunks(x, N, LANES), scalar = push_all(x, N);
    EXPECT(lanes.max == scalar.max && is_close(lanes.sum, scalar.sum, 0.0, 1e-5),
           "increasing: (%g, %.9g) vs recurrence (%g, %.9g)", (double)lanes.max, (double)lanes.sum, (double)scalar.max,
           (double)scalar.sum);
    array_free(x);
}

/* The special values: -inf weighs 0, even while it is the maximum; NaN and
 * +inf make the sum NaN, which tells the fused version to use the scalar
 * recurrence for that row. */
static void test_lane_sums_special(void)
{
    float x[2 * LANES];
    for (int i = 0; i < 2 * LANES; i++) {
        x[i] = -INFINITY;
    }
    SoftmaxState s = add_in_chunks(x, 2 * LANES, LANES);
    EXPECT(s.max == -INFINITY && s.sum == 0.0f, "all -inf: (%g, %g), expected the empty state", (double)s.max,
           (double)s.sum);
    x[LANES + 5] = 2.0f;
    s = add_in_chunks(x, 2 * LANES, LANES);
    EXPECT(s.max == 2.0f && s.sum == 1.0f, "one finite among -inf: (%g, %g), expected (2, 1)", (double)s.max,
           (double)s.sum);
    x[7] = NAN;
    s = add_in_chunks(x, 2 * LANES, LANES);
    EXPECT(s.max == 2.0f && isnan(s.sum), "a NaN: sum %g, expected NaN", (double)s.sum);
    x[7] = INFINITY;
    s = add_in_chunks(x, 2 * LANES, LANES);
    EXPECT(s.max == INFINITY && isnan(s.sum), "a +inf: sum %g, expected NaN", (double)s.sum);
}

static int compare_descending(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* The k-th largest of n floats, ties counted. */
static float kth_largest(const float *values, int n, int k)
{
    float *sorted = ALLOC_ARRAY((size_t)n, float);
    memcpy(sorted, values, (size_t)n * sizeof(float));
    qsort(sorted, (size_t)n, sizeof(float), compare_descending);
    float kth = sorted[k - 1];
    array_free(sorted);
    return kth;
}

/* The floor of a row of FLOOR_CHUNKS chunks of FLOOR_CHUNK logits: at most
 * the k-th largest of the lane maxima of the groups of chunks (chunk c in
 * group c % FLOOR_GROUPS, the groups merged down to
 * lane_sums_floor_groups(k)), ties included, and below it by less than
 * 2^-12 of its size (floor_key leaves the key's low bits 0); so at most
 * the row's k-th largest logit. The expected maxima are found here logit by
 * logit. */
enum { FLOOR_CHUNK = 2 * LANES, FLOOR_CHUNKS = 11, FLOOR_ROW = FLOOR_CHUNKS * FLOOR_CHUNK };

static void check_floor(const char *row_name, const float *x, int k)
{
    LaneSums row = lane_sums_empty();
    for (int c = 0; c < FLOOR_CHUNKS; c++) {
        lane_sums_add_chunk(&row, x + c * FLOOR_CHUNK, FLOOR_CHUNK);
    }
    int groups = lane_sums_floor_groups(k);
    float maxima[MAXIMA_LANES * FLOOR_GROUPS];
    for (int m = 0; m < groups * MAXIMA_LANES; m++) {
        maxima[m] = -INFINITY;
    }
    for (int i = 0; i < FLOOR_ROW; i++) {
        int m = (i / FLOOR_CHUNK % FLOOR_GROUPS) % groups * MAXIMA_LANES + i % MAXIMA_LANES;
        maxima[m] = x[i] > maxima[m] ? x[i] : maxima[m];
    }
    float floor = lane_sums_topk_floor(&row, k), expected = kth_largest(maxima, groups * MAXIMA_LANES, k);
    float kth_logit = kth_largest(x, FLOOR_ROW, k);
    EXPECT(floor <= expected && floor >= expected - fabsf(expected) * 0x1p-12f && floor <= kth_logit,
           "%s, k = %d: floor %.9g, k-th maximum of %d groups %.9g", row_name, k, (double)floor, groups,
           (double)expected);
}

/* Rows with ties among the maxima (values with few bits, whose floor is
 * exact), of Gaussian logits (whose floor drops low bits), of negative
 * ones (whose keys are flipped), and with fewer finite logits than k,
 * whose floor is -inf (the low bits of -inf's key left 0 would make a
 * NaN). Above LANES there is no floor. */
static void test_topk_floor(void)
{
    float *ties = ALLOC_ARRAY(FLOOR_ROW, float), *gaussian = ALLOC_ARRAY(FLOOR_ROW, float);
    float *negative = ALLOC_ARRAY(FLOOR_ROW, float), *few_finite = ALLOC_ARRAY(FLOOR_ROW, float);
    Rng rng;
    rng_seed(&rng, 8);
    rng_fill_normal_f32(&rng, gaussian, FLOOR_ROW, 0.0, 3.0);
    for (int i = 0; i < FLOOR_ROW; i++) {
        ties[i] = (float)((i * 37) % 101) * 0.5f; /* 101 values */
        negative[i] = gaussian[i] - 100.0f;
        few_finite[i] = i % 97 == 0 ? gaussian[i] : -INFINITY;
    }
    const int ks[] = {2, 5, 16, 17, 40, 63, LANES};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        check_floor("ties", ties, ks[t]);
        check_floor("gaussian", gaussian, ks[t]);
        check_floor("negative", negative, ks[t]);
        check_floor("few finite", few_finite, ks[t]);
    }
    LaneSums row = lane_sums_empty();
    lane_sums_add_chunk(&row, gaussian, FLOOR_CHUNK);
    EXPECT(lane_sums_topk_floor(&row, LANES + 1) == -INFINITY, "k = LANES + 1: floor %g, expected -inf",
           (double)lane_sums_topk_floor(&row, LANES + 1));
    array_free(ties);
    array_free(gaussian);
    array_free(negative);
    array_free(few_finite);
}

/* What the floor is for: in rows of random logits, few more than k reach
 * it. n maxima leave about -n ln(1 - k/n) logits at or above their k-th
 * largest (softmax_topk.c); with n >= 4k that is at most 1.15 k, and 64
 * maxima alone would leave 1.39 k at k = 32 and several k at k = 64. The
 * mean over 16 rows of 128256 logits, in chunks of 256 as the fused version
 * adds them, must stay below 1.3 k: its spread is about one logit. */
static void test_topk_floor_is_tight(void)
{
    enum { ROWS = 16, V = 128256, CHUNK = 4 * LANES };
    float *x = ALLOC_ARRAY(V, float);
    Rng rng;
    rng_seed(&rng, 9);
    const int ks[] = {8, 16, 32, 64};
    double reaching[4] = {0};
    for (int r = 0; r < ROWS; r++) {
        rng_fill_normal_f32(&rng, x, V, 0.0, 3.0);
        LaneSums row = lane_sums_empty();
        for (int begin = 0; begin + CHUNK <= V; begin += CHUNK) {
            lane_sums_add_chunk(&row, x + begin, CHUNK);
        }
        for (int t = 0; t < 4; t++) {
            float floor = lane_sums_topk_floor(&row, ks[t]);
            for (int i = 0; i < V; i++) {
                reaching[t] += (x[i] >= floor) / (double)ROWS;
            }
        }
    }
    for (int t = 0; t < 4; t++) {
        EXPECT(reaching[t] <= 1.3 * ks[t], "k = %d: %.1f logits reach the floor on average, expected at most %.1f",
               ks[t], reaching[t], 1.3 * ks[t]);
        printf("floor for k = %d: %.1f logits reach it on average\n", ks[t], reaching[t]);
    }
    array_free(x);
}

int main(void)
{
    test_exp_accuracy();
    test_exp_special_values();
    test_exp_subnormal_results();
    test_exp_in_sum();
#if defined(EXP16_AVX512)
    test_exp16();
#else
    printf("exp16_in_sum: not built (no AVX-512)\n");
#endif
    test_weight_limits();
    test_recurrence();
    test_merge();
    test_hard_states();
    test_push4();
    test_lane_sums();
    test_lane_sums_special();
    test_topk_floor();
    test_topk_floor_is_tight();
    return test_finish();
}
