/* The sampler of chapters/03-softmax-topk/sampling.h: the survivors of
 * temperature, top-K, top-p and min-p against a reference in double over
 * the whole row, the hard inputs, the draw's independence of the thread
 * count, the chi-square survival function against closed forms, and
 * chi-square goodness-of-fit tests of both draws, with a wrong
 * renormalisation that must fail them. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/03-softmax-topk/chi_square.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/rejection.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "common/alloc.h"
#include "common/check.h"
#include "common/rng.h"
#include "common/testing.h"
#include "tests/03-softmax-topk/expect_topk.h"

/* The survivors and one token of one row, by sample_rows. */
static int sample_one_row(const float *logits, size_t vocab, SamplingParams params, float *probs, int64_t *indices,
                          int64_t *token)
{
    sample_rows(float32_logits(logits), 1, vocab, params, DRAW_INVERSE_CDF, 1, 1, 1, token, probs, indices);
    int count = 0;
    while (count < params.top_k && indices[count] >= 0) {
        count++;
    }
    return count;
}

/* Float probabilities from weights in double: 2^-24 for the rounding, the
 * rest for the sums of at most a few hundred terms in double; 2 * 2^-149
 * absolute for subnormal probabilities (compare.c). */
#define SURVIVOR_RTOL (4.0 * 0x1p-24)
#define SURVIVOR_ATOL (2.0 * (double)FLT_TRUE_MIN)

static void check_against_reference(const char *what, const float *logits, size_t vocab, SamplingParams params)
{
    size_t k = (size_t)params.top_k;
    float *probs = ALLOC_ARRAY(k, float);
    double *ref_probs = ALLOC_ARRAY(k, double);
    int64_t *indices = ALLOC_ARRAY(k, int64_t), *ref_indices = ALLOC_ARRAY(k, int64_t), token;
    int count = sample_one_row(logits, vocab, params, probs, indices, &token);
    int ref_count = reference_survivors(logits, vocab, params, ref_probs, ref_indices);
    int wrong = 0;
    for (size_t j = 0; j < k; j++) {
        wrong += indices[j] != ref_indices[j] || !is_close(probs[j], ref_probs[j], SURVIVOR_ATOL, SURVIVOR_RTOL);
    }
    EXPECT(count == ref_count && wrong == 0, "%s: %d survivors, expected %d; %d places wrong", what, count, ref_count,
           wrong);
    bool token_survives = false;
    for (int j = 0; j < count; j++) {
        token_survives |= token == indices[j];
    }
    EXPECT(token_survives, "%s: the token %lld is not a survivor", what, (long long)token);
    array_free(probs);
    array_free(ref_probs);
    array_free(indices);
    array_free(ref_indices);
}

static void test_semantics_against_reference(void)
{
    enum { VOCAB = 1823 };
    float *logits = ALLOC_ARRAY(VOCAB, float);
    fill_tied_logits(logits, VOCAB, 5); /* many ties, at every cut */
    const SamplingParams cases[] = {
        {1.0,  1,     1.0,  0.0 }, /* greedy */
        {1.0,  50,    1.0,  0.0 }, /* top-K alone */
        {0.7,  50,    0.9,  0.0 }, /* sharper, top-p */
        {1.3,  200,   0.5,  0.0 }, /* flatter, top-p cuts early */
        {1.0,  200,   1.0,  0.05}, /* min-p alone */
        {0.5,  64,    0.95, 0.2 }, /* all four */
        {2.0,  VOCAB, 1.0,  0.0 }, /* K = V: softmax(x / T) */
        {1.0,  VOCAB, 0.3,  0.01}, /* top-p over the whole row */
        {0.05, 64,    0.99, 0.0 }, /* near the greedy limit */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char what[100];
        snprintf(what, sizeof what, "T %g, K %d, top-p %g, min-p %g", cases[c].temperature, cases[c].top_k,
                 cases[c].top_p, cases[c].min_p);
        check_against_reference(what, logits, VOCAB, cases[c]);
    }
    array_free(logits);
}

/* Ties at the top-p cut: weights 1, 1, 1, 1/e; p = 0.5 of 3.37 is reached
 * after two of the three tied candidates, and the lower indices get in. */
static void test_tie_at_the_top_p_cut(void)
{
    const float logits[] = {0.0f, 1.0f, 1.0f, 1.0f};
    SamplingParams params = {1.0, 4, 0.5, 0.0};
    float probs[4];
    int64_t indices[4], token;
    int count = sample_one_row(logits, 4, params, probs, indices, &token);
    EXPECT(count == 2 && indices[0] == 1 && indices[1] == 2 && probs[0] == 0.5f && probs[1] == 0.5f,
           "ties at the cut: %d survivors, indices %lld %lld, probabilities %g %g", count, (long long)indices[0],
           (long long)indices[1], (double)probs[0], (double)probs[1]);
}

/* The same row by rejection, over the whole row (the candidates as they
 * lie): the draws fall on indices 1 and 2 only, about half each; the third
 * tied logit, which a pivot on the value alone would keep, never. 4000
 * draws: each share within 0.05 of 1/2 is 6 standard deviations. */
static void test_tie_at_the_cut_by_rejection(void)
{
    enum { TIE_DRAWS = 4000 };
    const float logits[] = {0.0f, 1.0f, 1.0f, 1.0f};
    SamplingParams params = {1.0, 4, 0.5, 0.0};
    double weights[4];
    RejectionCandidates c = {logits, 4, weights, 0.0};
    rejection_weights(&c, params);
    int drawn[4] = {0, 0, 0, 0};
    for (int d = 0; d < TIE_DRAWS; d++) {
        int place = sample_by_rejection(&c, params, 7, 0, (uint32_t)d).place;
        drawn[place < 0 ? 0 : place] += place < 0 ? TIE_DRAWS : 1;
    }
    EXPECT(drawn[0] == 0 && drawn[3] == 0 && fabs(drawn[1] / (double)TIE_DRAWS - 0.5) < 0.05,
           "ties at the cut by rejection: drawn %d %d %d %d times", drawn[0], drawn[1], drawn[2], drawn[3]);
}

/* top_p = 1, min_p = 0 and K = V reduce the sampler to the softmax of x / T. */
static void test_reductions(void)
{
    enum { VOCAB = 300 };
    float logits[VOCAB];
    Rng rng;
    rng_seed(&rng, 8);
    rng_fill_normal_f32(&rng, logits, VOCAB, 0.0, 3.0);
    SamplingParams params = {0.8, VOCAB, 1.0, 0.0};
    float probs[VOCAB];
    int64_t indices[VOCAB], token;
    int count = sample_one_row(logits, VOCAB, params, probs, indices, &token);
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < VOCAB; i++) {
        max = fmax(max, logits[i] / 0.8);
    }
    for (int i = 0; i < VOCAB; i++) {
        sum += exp(logits[i] / 0.8 - max);
    }
    int wrong = 0;
    for (int j = 0; j < count; j++) {
        wrong += !is_close(probs[j], exp(logits[indices[j]] / 0.8 - max) / sum, SURVIVOR_ATOL, SURVIVOR_RTOL);
    }
    EXPECT(count == VOCAB && wrong == 0, "K = V, p = 1, min-p = 0: %d survivors, %d not softmax(x / T)", count, wrong);
}

static void test_hard_rows(void)
{
    const float nan_row[] = {0.5f, NAN, 2.0f}, minus_inf[] = {-INFINITY, -INFINITY, -INFINITY},
                two_inf[] = {1.0f, INFINITY, 0.0f, INFINITY};
    float probs[4];
    int64_t indices[4], token;
    SamplingParams params = {1.0, 2, 0.9, 0.1};
    int count = sample_one_row(nan_row, 3, params, probs, indices, &token);
    EXPECT(count == 0 && token == -1 && isnan(probs[0]) && isnan(probs[1]), "NaN row: no survivor, token -1, NaN");
    count = sample_one_row(minus_inf, 3, params, probs, indices, &token);
    EXPECT(count == 0 && token == -1 && isnan(probs[0]), "all -inf: no survivor, token -1, NaN probabilities");
    params.top_k = 3;
    params.top_p = 1.0;
    count = sample_one_row(two_inf, 4, params, probs, indices, &token);
    EXPECT(count == 2 && probs[0] == 0.5f && probs[1] == 0.5f && indices[0] == 1 && indices[1] == 3 &&
               (token == 1 || token == 3),
           "two +inf share the probability (min-p cuts the finite one): %d survivors", count);
}

/* Normal logits with this seed and standard deviation, array_free'd by the caller. */
static float *normal_logits(size_t count, uint64_t seed, double deviation)
{
    float *logits = ALLOC_ARRAY(count, float);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, logits, count, 0.0, deviation);
    return logits;
}

/* The same tokens on 1 and on 3 threads, for both draws. */
static void test_thread_count_does_not_matter(void)
{
    enum { ROWS = 37, VOCAB = 1000, K = 20, SAMPLES = 50 };
    float *logits = normal_logits(ROWS * VOCAB, 9, 2.0), probs[ROWS * K];
    int64_t indices[ROWS * K], *one = ALLOC_ARRAY(ROWS * SAMPLES, int64_t),
                               *three = ALLOC_ARRAY(ROWS * SAMPLES, int64_t);
    SamplingParams params = {1.0, K, 0.9, 0.0};
    for (int method = DRAW_INVERSE_CDF; method <= DRAW_GUMBEL_MAX; method++) {
        sample_rows(float32_logits(logits), ROWS, VOCAB, params, (DrawMethod)method, 77, SAMPLES, 1, one, probs,
                    indices);
        sample_rows(float32_logits(logits), ROWS, VOCAB, params, (DrawMethod)method, 77, SAMPLES, 3, three, probs,
                    indices);
        EXPECT(memcmp(one, three, sizeof(int64_t) * ROWS * SAMPLES) == 0, "method %d: tokens depend on the threads",
               method);
    }
    array_free(logits);
    array_free(one);
    array_free(three);
}

/* One token at a time, as a decoder draws them: draw d of row r is the
 * token sample_rows draws there. */
static void test_one_token_is_the_rows_draw(void)
{
    enum { ROWS = 4, VOCAB = 500, K = 30, SAMPLES = 25 };
    float *logits = normal_logits(ROWS * VOCAB, 10, 1.0), probs[ROWS * K];
    int64_t indices[ROWS * K], tokens[ROWS * SAMPLES];
    SamplingParams params = {1.3, K, 0.95, 0.01};
    for (int method = DRAW_INVERSE_CDF; method <= DRAW_GUMBEL_MAX; method++) {
        sample_rows(float32_logits(logits), ROWS, VOCAB, params, (DrawMethod)method, 41, SAMPLES, 2, tokens, probs,
                    indices);
        int wrong = 0;
        for (int r = 0; r < ROWS; r++) {
            for (int d = 0; d < SAMPLES; d++) {
                int64_t token = sample_one_token(logits + r * VOCAB, VOCAB, params, (DrawMethod)method, 41, (uint64_t)r,
                                                 (uint32_t)d);
                wrong += token != tokens[r * SAMPLES + d];
            }
        }
        EXPECT(wrong == 0, "method %d: %d of %d tokens drawn one at a time differ from sample_rows'", method, wrong,
               ROWS * SAMPLES);
    }
    array_free(logits);
}

/* ---- the chi-square survival function ---- */

static void test_chi_square_survival(void)
{
    /* Closed forms: Q(1/2, x/2) = erfc(sqrt(x/2)), Q(1, x/2) = e^(-x/2),
     * Q(2, x/2) = e^(-x/2) (1 + x/2); both branches (x/2 below and above
     * df/2 + 1) are crossed. 1e-12: the series and fraction stop at 1e-16. */
    const double xs[] = {0.01, 0.5, 1.0, 2.5, 3.84, 7.0, 20.0, 60.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        EXPECT(is_close(chi_square_survival(x, 1), erfc(sqrt(x / 2)), 0.0, 1e-12), "df 1, x %g: %.15g", x,
               chi_square_survival(x, 1));
        EXPECT(is_close(chi_square_survival(x, 2), exp(-x / 2), 0.0, 1e-12), "df 2, x %g: %.15g", x,
               chi_square_survival(x, 2));
        EXPECT(is_close(chi_square_survival(x, 4), exp(-x / 2) * (1 + x / 2), 0.0, 1e-12), "df 4, x %g: %.15g", x,
               chi_square_survival(x, 4));
    }
    /* Printed tables of critical values (to 3 decimals: hence 1e-3 relative). */
    EXPECT(is_close(chi_square_survival(23.209, 10), 0.01, 0.0, 1e-3), "df 10 at 23.209: %.6g",
           chi_square_survival(23.209, 10));
    EXPECT(is_close(chi_square_survival(124.342, 100), 0.05, 0.0, 1e-3), "df 100 at 124.342: %.6g",
           chi_square_survival(124.342, 100));
    EXPECT(is_close(chi_square_survival(29.588, 10), 0.001, 0.0, 1e-3), "df 10 at 29.588: %.6g",
           chi_square_survival(29.588, 10));
}

/* ---- goodness of fit of the draws ---- */

enum { DRAWS = 1000000, FIT_VOCAB = 5000 };

typedef struct {
    const char *name;
    SamplingParams params;
    void (*fill)(float *logits, size_t vocab);
} FitCase;

static void peaked(float *logits, size_t vocab)
{
    Rng rng;
    rng_seed(&rng, 21);
    rng_fill_normal_f32(&rng, logits, vocab, 0.0, 2.0);
}

static void flat(float *logits, size_t vocab)
{
    Rng rng;
    rng_seed(&rng, 22);
    rng_fill_uniform_f32(&rng, logits, vocab, 0.0, 0.05);
}

/* Zipf's law: probability proportional to 1 / rank^1.1. */
static void heavy_tailed(float *logits, size_t vocab)
{
    for (size_t i = 0; i < vocab; i++) {
        logits[i] = (float)(-1.1 * log((double)((i * 7919) % vocab + 1)));
    }
}

static void tied(float *logits, size_t vocab)
{
    fill_tied_logits(logits, vocab, 23);
}

static const FitCase FIT_CASES[] = {
    {"peaked",       {1.0, 50, 0.95, 0.0}, peaked      },
    {"flat",         {1.0, 64, 1.0, 0.0},  flat        },
    {"heavy-tailed", {0.8, 64, 1.0, 0.01}, heavy_tailed},
    {"tied",         {1.0, 40, 0.7, 0.0},  tied        },
 /* Top-p < 1 on the two rows above that keep it at 1: the rejection
     * sampler's cut, where its rounds are many. */
    {"flat, p 0.5",  {1.0, 64, 0.5, 0.0},  flat        },
    {"heavy, p 0.8", {0.8, 64, 0.8, 0.01}, heavy_tailed},
};

/* The chi-square fit of the tokens drawn to the expected probabilities of
 * the survivors with these indices. */
static ChiSquare fit_of_tokens(const int64_t *tokens, const int64_t *indices, const double *expected, int count)
{
    int64_t *observed = ALLOC_ARRAY((size_t)count, int64_t);
    for (int j = 0; j < count; j++) {
        observed[j] = 0;
    }
    for (int d = 0; d < DRAWS; d++) {
        for (int j = 0; j < count; j++) {
            if (tokens[d] == indices[j]) {
                observed[j]++;
                break;
            }
        }
    }
    ChiSquare fit = chi_square_test(observed, expected, count, DRAWS);
    array_free(observed);
    return fit;
}

static ChiSquare fit_of_draws(const FitCase *c, DrawMethod method, const float *logits, int64_t *tokens)
{
    int k = c->params.top_k;
    float *probs = ALLOC_ARRAY((size_t)k, float);
    double *expected = ALLOC_ARRAY((size_t)k, double);
    int64_t *indices = ALLOC_ARRAY((size_t)k, int64_t), *ref_indices = ALLOC_ARRAY((size_t)k, int64_t);
    sample_rows(float32_logits(logits), 1, FIT_VOCAB, c->params, method, 2024, DRAWS, 1, tokens, probs, indices);
    int count = reference_survivors(logits, FIT_VOCAB, c->params, expected, ref_indices);
    ChiSquare fit = fit_of_tokens(tokens, ref_indices, expected, count);
    array_free(probs);
    array_free(expected);
    array_free(indices);
    array_free(ref_indices);
    return fit;
}

/* The bug: top-p cuts the K, and the survivors keep their probabilities in
 * the K (summing to less than 1); the inverse CDF then gives what lies
 * above their sum to the last survivor. */
static ChiSquare fit_without_renormalising(const FitCase *c, const float *logits, int64_t *tokens)
{
    int k = c->params.top_k;
    float *in_the_k = ALLOC_ARRAY((size_t)k, float);
    double *expected = ALLOC_ARRAY((size_t)k, double);
    int64_t *indices = ALLOC_ARRAY((size_t)k, int64_t), token;
    int count = reference_survivors(logits, FIT_VOCAB, c->params, expected, indices);
    SamplingParams top_k_only = sampling_params_top_k(k);
    top_k_only.temperature = c->params.temperature;
    sample_one_row(logits, FIT_VOCAB, top_k_only, in_the_k, indices, &token);
    for (int d = 0; d < DRAWS; d++) {
        int place = sample_inverse_cdf(in_the_k, count, philox_uniform(2024, 0, (uint32_t)d, 0));
        tokens[d] = indices[place];
    }
    ChiSquare fit = fit_of_tokens(tokens, indices, expected, count);
    array_free(in_the_k);
    array_free(expected);
    array_free(indices);
    return fit;
}

/* The K candidates of a case, in rank order: their logits, indices and
 * weights relative to the best. */
typedef struct {
    float *logits;
    int64_t *indices;
    double *weights;
    int k;
} RankedCandidates;

static RankedCandidates ranked_candidates(const FitCase *c, const float *logits)
{
    int k = c->params.top_k;
    RankedCandidates r = {ALLOC_ARRAY((size_t)k, float), ALLOC_ARRAY((size_t)k, int64_t),
                          ALLOC_ARRAY((size_t)k, double), k};
    float *probs = ALLOC_ARRAY((size_t)k, float);
    int64_t token;
    sample_one_row(logits, FIT_VOCAB, sampling_params_top_k(k), probs, r.indices, &token);
    for (int j = 0; j < k; j++) {
        r.logits[j] = logits[r.indices[j]];
        r.weights[j] = exp(((double)r.logits[j] - (double)r.logits[0]) / c->params.temperature);
    }
    array_free(probs);
    return r;
}

static void ranked_candidates_free(RankedCandidates *r)
{
    array_free(r->logits);
    array_free(r->indices);
    array_free(r->weights);
}

/* The wrong acceptance rule (rejection.h) over the case's K candidates:
 * it never draws the last survivor. */
static ChiSquare fit_of_wrong_rejection(const FitCase *c, const float *logits, int64_t *tokens)
{
    RankedCandidates r = ranked_candidates(c, logits);
    double *expected = ALLOC_ARRAY((size_t)r.k, double), *weights = ALLOC_ARRAY((size_t)r.k, double);
    int64_t *ref_indices = ALLOC_ARRAY((size_t)r.k, int64_t);
    int count = reference_survivors(logits, FIT_VOCAB, c->params, expected, ref_indices);
    RejectionCandidates candidates = {r.logits, r.k, weights, 0.0};
    rejection_weights(&candidates, c->params);
    for (int d = 0; d < DRAWS; d++) {
        int place = sample_by_rejection_wrongly(&candidates, c->params, 2024, 0, (uint32_t)d).place;
        tokens[d] = place < 0 ? -1 : r.indices[place];
    }
    ChiSquare fit = fit_of_tokens(tokens, ref_indices, expected, count);
    array_free(expected);
    array_free(weights);
    array_free(ref_indices);
    ranked_candidates_free(&r);
    return fit;
}

/* The rounds of DRAWS rejection draws over the case's K candidates: their
 * mean against rejection_expected_rounds. The tolerance: 6 standard errors
 * of the mean, from the rounds' own spread (with a floor for a case whose
 * every draw takes one round); the derivation is exact, so only chance
 * separates the two. */
static void check_rounds(const FitCase *c, const float *logits)
{
    RankedCandidates r = ranked_candidates(c, logits);
    double *weights = ALLOC_ARRAY((size_t)r.k, double);
    RejectionCandidates candidates = {r.logits, r.k, weights, 0.0};
    rejection_weights(&candidates, c->params);
    double sum = 0.0, sum_squares = 0.0;
    for (int d = 0; d < DRAWS; d++) {
        int rounds = sample_by_rejection(&candidates, c->params, 2024, 0, (uint32_t)d).rounds;
        sum += rounds;
        sum_squares += (double)rounds * rounds;
    }
    double mean = sum / DRAWS, variance = sum_squares / DRAWS - mean * mean;
    double *probs = ALLOC_ARRAY((size_t)r.k, double);
    int64_t *indices = ALLOC_ARRAY((size_t)r.k, int64_t);
    int survivors = reference_survivors(logits, FIT_VOCAB, c->params, probs, indices);
    double expected = rejection_expected_rounds(r.weights, r.k, survivors);
    double tolerance = 6.0 * sqrt(variance / DRAWS) + 1e-12;
    printf("%-12s  rejection    rounds per draw %.4f, expected %.4f\n", c->name, mean, expected);
    EXPECT(fabs(mean - expected) <= tolerance, "%s: %.5f rounds per draw, expected %.5f (tolerance %.2g)", c->name,
           mean, expected, tolerance);
    array_free(weights);
    array_free(probs);
    array_free(indices);
    ranked_candidates_free(&r);
}

/* p > 1e-3: a correct sampler fails one case in a thousand by chance; the
 * seeds are fixed, so this run passes or fails the same way every time. */
#define FIT_P_MIN 1e-3

static void test_goodness_of_fit(void)
{
    float *logits = ALLOC_ARRAY(FIT_VOCAB, float);
    int64_t *tokens = ALLOC_ARRAY(DRAWS, int64_t);
    for (size_t c = 0; c < sizeof FIT_CASES / sizeof FIT_CASES[0]; c++) {
        const FitCase *fit_case = &FIT_CASES[c];
        fit_case->fill(logits, FIT_VOCAB);
        const char *methods[] = {"", "inverse CDF", "Gumbel-max", "rejection"};
        for (int method = DRAW_INVERSE_CDF; method <= DRAW_REJECTION; method++) {
            ChiSquare fit = fit_of_draws(fit_case, (DrawMethod)method, logits, tokens);
            printf("%-12s  %-11s  chi2 %9.2f  df %3d  p %.3g\n", fit_case->name, methods[method], fit.statistic, fit.df,
                   fit.p_value);
            EXPECT(fit.p_value > FIT_P_MIN, "%s, %s: chi2 %.2f, df %d, p %.3g", fit_case->name, methods[method],
                   fit.statistic, fit.df, fit.p_value);
        }
        if (fit_case->params.top_p < 1.0) {
            ChiSquare wrong = fit_without_renormalising(fit_case, logits, tokens);
            printf("%-12s  %-11s  chi2 %9.2f  df %3d  p %.3g  (not renormalised after top-p)\n", fit_case->name,
                   methods[1], wrong.statistic, wrong.df, wrong.p_value);
            EXPECT(!(wrong.p_value > FIT_P_MIN), "%s: the wrong renormalisation passes (p %.3g)", fit_case->name,
                   wrong.p_value);
            ChiSquare wrong_rule = fit_of_wrong_rejection(fit_case, logits, tokens);
            printf("%-12s  %-11s  chi2 %9.2f  df %3d  p %.3g  (wrong acceptance rule)\n", fit_case->name, methods[3],
                   wrong_rule.statistic, wrong_rule.df, wrong_rule.p_value);
            EXPECT(!(wrong_rule.p_value > FIT_P_MIN), "%s: the wrong acceptance rule passes (p %.3g)", fit_case->name,
                   wrong_rule.p_value);
        }
        check_rounds(fit_case, logits);
    }
    array_free(logits);
    array_free(tokens);
}

int main(void)
{
    test_semantics_against_reference();
    test_tie_at_the_top_p_cut();
    test_tie_at_the_cut_by_rejection();
    test_reductions();
    test_hard_rows();
    test_thread_count_does_not_matter();
    test_one_token_is_the_rows_draw();
    test_chi_square_survival();
    test_goodness_of_fit();
    return test_finish();
}
