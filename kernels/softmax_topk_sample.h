/* The sampling step after the top K (chapter 3), on the CPU and the GPU
 * alike: temperature, top-K, top-p and min-p, in that order, then one draw
 * by inverse CDF from the candidates that survive. Written once, as
 * HOST_DEVICE functions, so that chapters/03-softmax-topk/sampling.c and
 * the GPU's sampling kernel (kernels/softmax_topk.cu) compute the same
 * survivors and, with the same philox uniform (common/rng.h), draw the same
 * tokens.
 *
 * The steps need nothing but the logits of the K candidates: temperature
 * keeps the order of the logits, so the top K at temperature T are the top
 * K at 1, and the renormalised probabilities of the K are ratios of their
 * own exponentials. */
#ifndef KERNELS_SOFTMAX_TOPK_SAMPLE_H
#define KERNELS_SOFTMAX_TOPK_SAMPLE_H

#include <math.h>
#include <stddef.h>

#include "common/hostdevice.h"

typedef struct {
    double temperature; /* > 0 and finite: the logits are divided by it */
    int top_k;          /* 1 <= top_k <= vocab; top_k = vocab keeps every logit */
    double top_p;       /* in (0, 1]; 1 cuts nothing */
    double min_p;       /* in [0, 1]; 0 cuts nothing */
} SamplingParams;

/* exp((x - best) / T) in double, with the softmax's limits: an x equal to
 * a +inf best weighs 1, everything else next to it 0. */
HOST_DEVICE static inline double tempered_weight(float x, float best, double temperature)
{
    if (x == best) {
        return 1.0;
    }
    return exp(((double)x - (double)best) / temperature);
}

/* Candidate j's weight: kept in `weights` where the caller has room for K
 * doubles (the CPU), computed again where it has not (a GPU thread): the
 * same double either way, so both still draw the same tokens. */
HOST_DEVICE static inline double candidate_weight(const float *x, int j, SamplingParams params, const double *weights)
{
    return weights != NULL ? weights[j] : tempered_weight(x[j], x[0], params.temperature);
}

HOST_DEVICE static inline void fill_probs(float *probs, int from, int to, float value)
{
    for (int j = from; j < to; j++) {
        probs[j] = value;
    }
}

// ANCHOR: cut_the_top_k_by_top_p
/* Top-p: the shortest prefix of the K holding at least p of their mass.
 * The prefix is in rank order, so of candidates tied at its end the lower
 * index gets in first. p = 1 cuts nothing, even a tail of weight 0. */
HOST_DEVICE static inline int top_p_count(const float *logits, SamplingParams params, const double *weights,
                                          double total)
{
    if (params.top_p >= 1.0) {
        return params.top_k;
    }
    int count = 0;
    for (double mass = 0.0; count < params.top_k && mass < params.top_p * total; count++) {
        mass += candidate_weight(logits, count, params, weights);
    }
    return count;
}
// ANCHOR_END: cut_the_top_k_by_top_p

// ANCHOR: renormalise_what_survives
/* probs[0 .. count-1]: the survivors' weights over their sum, so that they
 * sum to 1; then 0 for the rest of the K. */
HOST_DEVICE static inline void renormalise_survivors(const float *x, int count, SamplingParams params,
                                                     const double *weights, float *probs)
{
    double kept = 0.0;
    for (int j = 0; j < count; j++) {
        kept += candidate_weight(x, j, params, weights);
    }
    for (int j = 0; j < count; j++) {
        probs[j] = (float)(candidate_weight(x, j, params, weights) / kept);
    }
    fill_probs(probs, count, params.top_k, 0.0f);
}
// ANCHOR_END: renormalise_what_survives

// ANCHOR: cut_the_top_k_by_top_p_and_min_p
/* The survivors among the K candidates whose logits are given in rank
 * order (best first, equal logits lower index first, NaN first, as
 * softmax_topk_row returns their indices): their count, a prefix of the K,
 * and in probs[0 .. K-1] their probabilities, renormalised to sum 1, then
 * 0 for the candidates cut. Count 0: the row has a NaN or only -inf, and
 * the probabilities are NaN. `weights`: room for K doubles, where each
 * weight is kept, or NULL, and each is computed again at each step that
 * needs it (up to four times). */
HOST_DEVICE static inline int sampling_survivors(const float *candidate_logits, SamplingParams params, double *weights,
                                                 float *probs)
{
    const float *x = candidate_logits;
    int k = params.top_k;
    if (isnan(x[0]) || x[0] == -INFINITY) {
        fill_probs(probs, 0, k, NAN); /* a NaN row, or 0/0: nothing to draw */
        return 0;
    }
    /* Temperature, then the top K: weights relative to the best
     * candidate's, which is 1, the largest. */
    double total = 0.0;
    for (int j = 0; j < k; j++) {
        double weight = tempered_weight(x[j], x[0], params.temperature);
        if (weights != NULL) {
            weights[j] = weight;
        }
        total += weight;
    }
    int count = top_p_count(x, params, weights, total);
    /* Min-p: weights of at least min_p times the largest; they fall along
     * the ranks, so the survivors stay a prefix. */
    while (count > 1 && candidate_weight(x, count - 1, params, weights) < params.min_p) {
        count--;
    }
    renormalise_survivors(x, count, params, weights, probs);
    return count;
}
// ANCHOR_END: cut_the_top_k_by_top_p_and_min_p

/* The place in probs[0 .. count-1] that the uniform u in [0, 1) picks: the
 * first whose cumulative probability exceeds u. -1 when count is 0. */
// ANCHOR: draw_by_inverse_cdf
HOST_DEVICE static inline int sample_inverse_cdf(const float *probs, int count, double u)
{
    double cumulative = 0.0;
    int last_possible = -1;
    for (int j = 0; j < count; j++) {
        cumulative += probs[j];
        if (u < cumulative) {
            return j;
        }
        last_possible = probs[j] > 0.0f ? j : last_possible;
    }
    /* The rounded probabilities may sum to a little less than 1, and u
     * fall above their sum: that sliver belongs to the last candidate that
     * can be drawn at all. */
    return last_possible;
}
// ANCHOR_END: draw_by_inverse_cdf

#endif
