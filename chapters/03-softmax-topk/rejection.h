/* Top-p and min-p without sorting: rejection sampling with a rising pivot,
 * the idea of FlashInfer's sorting-free sampling kernels, on the CPU.
 *
 * A round draws a candidate by inverse CDF from those that rank before the
 * pivot (at first: all of them), in whatever order they lie. The candidate
 * is accepted if it survives top-p and min-p: the weight of the candidates
 * that rank before it is less than p of the total, and its own weight is
 * at least min_p times the largest. Otherwise it and every candidate that
 * ranks after it are out, so the pivot rises to it, and the next round
 * draws again. Ranks are the chapter's: larger logit first, equal logits
 * lower index first; so the survivors are exactly the sort-based
 * sampler's (sampling_survivors), ties at the cut included.
 *
 * Each round makes two passes over the candidates and sorts nothing. The
 * expected number of rounds is 1 plus, over the candidates cut, their
 * weight over the weight of all that rank at or before them (at most
 * 1 + ln(1/p) for top-p alone): rejection_expected_rounds. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_REJECTION_H
#define CHAPTERS_03_SOFTMAX_TOPK_REJECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/softmax_topk_sample.h"

typedef struct {
    int place;  /* the place drawn in the candidates; -1: nothing to draw */
    int rounds; /* rounds made, the accepted one included */
} RejectionDraw;

/* The candidates: n logits in any order, and `weights`, room for n
 * doubles, which rejection_weights fills once for all the draws of a row.
 * Of equal logits the one at the lower place ranks first: in a whole row
 * that is the lower index; the K candidates of the fused pass lie in rank
 * order, so there too. */
typedef struct {
    const float *logits;
    int n;
    double *weights;
    double total; /* the sum of the weights */
} RejectionCandidates;

/* Fill c->weights with exp((x - max) / T) and c->total; false when the
 * candidates hold a NaN or only -inf (nothing can be drawn). */
bool rejection_weights(RejectionCandidates *c, SamplingParams params);

/* One draw with params' top-p and min-p over the candidates (top_k is
 * ignored: the candidates are the K). Round r draws with the uniform
 * philox_uniform(seed, row, draw, r), so the draw depends on the seed
 * alone. */
RejectionDraw sample_by_rejection(const RejectionCandidates *c, SamplingParams params, uint64_t seed, uint64_t row,
                                  uint32_t draw);

/* The same with a wrong acceptance rule, for the tests to see fail: the
 * weight before the candidate *and its own* must stay below p, which cuts
 * the last survivor of the sort-based rule. */
RejectionDraw sample_by_rejection_wrongly(const RejectionCandidates *c, SamplingParams params, uint64_t seed,
                                          uint64_t row, uint32_t draw);

/* The expected rounds per draw, from candidates in rank order (best first)
 * and their weights: 1 + the sum, over the candidates cut, of each one's
 * weight over the weight of all that rank at or before it. */
double rejection_expected_rounds(const double *ranked_weights, int n, int survivors);

#endif
