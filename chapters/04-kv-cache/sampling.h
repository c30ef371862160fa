/* Choosing the next token from the logits: greedy, or temperature with
 * top-k. The draw is the softmax chapter's sampler
 * (chapters/03-softmax-topk/sampling.h): its fused top-K pass, then one
 * draw by the inverse CDF with a Philox uniform keyed by the request's
 * seed and the token's position, so that a request's tokens depend on its
 * seed and on nothing else. */
#ifndef CHAPTERS_04_KV_CACHE_SAMPLING_H
#define CHAPTERS_04_KV_CACHE_SAMPLING_H

#include <stdint.h>

typedef struct {
    double temperature; /* 0: greedy */
    int top_k;          /* sample among the k largest logits; 0: all of them */
} Sampler;

/* Index of the largest logit; the lowest index wins a tie. */
int sample_greedy(const float *logits, int vocab_size);

/* Greedy when temperature is 0, else a draw from softmax(logits /
 * temperature) restricted to the top_k largest logits (lower index first
 * on a tie at the k-th place). `draw` numbers the request's draws (its
 * generated tokens: 0, 1, ...); the same seed and draw give the same token.
 * Logits that hold a NaN leave nothing to draw: one line and exit 1. */
int sample_token(const Sampler *sampler, const float *logits, int vocab_size, uint64_t seed, uint32_t draw);

/* Indices of the k largest of n values, largest first; on a tie the lower
 * index comes first. Beam search ranks its candidates with it. */
void top_k_indices(const double *values, int n, int k, int *top);

#endif
