#include "chapters/03-softmax-topk/rejection.h"

#include <math.h>

#include "common/rng.h"

bool rejection_weights(RejectionCandidates *c, SamplingParams params)
{
    float max = -INFINITY;
    for (int i = 0; i < c->n; i++) {
        if (isnan(c->logits[i])) {
            return false;
        }
        max = c->logits[i] > max ? c->logits[i] : max;
    }
    c->total = 0.0;
    for (int i = 0; i < c->n; i++) {
        c->weights[i] = max == -INFINITY ? 0.0 : tempered_weight(c->logits[i], max, params.temperature);
        c->total += c->weights[i];
    }
    return max != -INFINITY;
}

/* The chapter's order: the larger logit first, of equal ones the lower
 * place (no NaN here). */
static bool ranks_before(const float *x, int i, int j)
{
    return x[i] > x[j] || (x[i] == x[j] && i < j);
}

// ANCHOR: draw_below_the_pivot
/* Inverse CDF over the candidates that rank before `pivot` (-1: over all),
 * in the order they lie: the first whose cumulative weight exceeds target,
 * a uniform times their weight. Rounding may leave target above the last
 * sum: then the last of them that can be drawn. */
static int draw_below_pivot(const RejectionCandidates *c, int pivot, double target)
{
    double cumulative = 0.0;
    int last_possible = -1;
    for (int i = 0; i < c->n; i++) {
        if (pivot >= 0 && !ranks_before(c->logits, i, pivot)) {
            continue;
        }
        cumulative += c->weights[i];
        if (target < cumulative) {
            return i;
        }
        last_possible = c->weights[i] > 0.0 ? i : last_possible;
    }
    return last_possible;
}
// ANCHOR_END: draw_below_the_pivot

// ANCHOR: test_one_candidate
/* The weight of the candidates that rank before place j. */
static double weight_before(const RejectionCandidates *c, int j)
{
    double before = 0.0;
    for (int i = 0; i < c->n; i++) {
        before += ranks_before(c->logits, i, j) ? c->weights[i] : 0.0;
    }
    return before;
}

/* Does a candidate survive top-p and min-p? Top-p keeps the shortest
 * prefix, in rank order, holding p of the total: a candidate is in it when
 * what ranks before it holds less than p. Min-p: its weight, relative to
 * the largest (1), is at least min_p. */
static bool survives(double before, double own, double total, SamplingParams params)
{
    bool in_top_p = params.top_p >= 1.0 || before < params.top_p * total;
    return in_top_p && own >= params.min_p;
}
// ANCHOR_END: test_one_candidate

/* The control the tests must see fail: "before and its own weight below
 * p" keeps the prefix one shorter than top-p's. */
static bool survives_wrongly(double before, double own, double total, SamplingParams params)
{
    bool in_top_p = params.top_p >= 1.0 || before + own < params.top_p * total;
    return in_top_p && own >= params.min_p;
}

typedef bool (*Acceptance)(double before, double own, double total, SamplingParams params);

// ANCHOR: accept_or_raise_the_pivot
/* Draw below the pivot; accept, or raise the pivot to the candidate drawn:
 * it is cut, and so is every candidate that ranks after it (what ranks
 * before them holds even more; their weights are no larger). What stays
 * is what ranks before it, whose weight the test has just summed. */
static RejectionDraw draw_in_rounds(const RejectionCandidates *c, SamplingParams params, uint64_t seed, uint64_t row,
                                    uint32_t draw, Acceptance accept)
{
    RejectionDraw result = {-1, 0};
    double eligible = c->total;
    for (int pivot = -1;;) {
        double u = philox_uniform(seed, row, draw, (uint32_t)result.rounds);
        int j = draw_below_pivot(c, pivot, u * eligible);
        result.rounds++;
        if (j < 0) {
            return result; /* nothing left: only a wrong rule gets here */
        }
        double before = weight_before(c, j);
        if (accept(before, c->weights[j], c->total, params)) {
            result.place = j;
            return result;
        }
        pivot = j;
        eligible = before;
    }
}
// ANCHOR_END: accept_or_raise_the_pivot

RejectionDraw sample_by_rejection(const RejectionCandidates *c, SamplingParams params, uint64_t seed, uint64_t row,
                                  uint32_t draw)
{
    return draw_in_rounds(c, params, seed, row, draw, survives);
}

RejectionDraw sample_by_rejection_wrongly(const RejectionCandidates *c, SamplingParams params, uint64_t seed,
                                          uint64_t row, uint32_t draw)
{
    return draw_in_rounds(c, params, seed, row, draw, survives_wrongly);
}

// ANCHOR: expect_the_rounds
double rejection_expected_rounds(const double *ranked_weights, int n, int survivors)
{
    double at_or_before = 0.0, extra = 0.0;
    for (int i = 0; i < n; i++) {
        at_or_before += ranked_weights[i];
        if (i >= survivors && ranked_weights[i] > 0.0) {
            extra += ranked_weights[i] / at_or_before;
        }
    }
    return 1.0 + extra;
}
// ANCHOR_END: expect_the_rounds
