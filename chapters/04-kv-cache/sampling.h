/* Choosing the next token from the logits: greedy, or temperature with
 * top-k, drawn from a seeded generator so that a run can be repeated. */
#ifndef CHAPTERS_04_KV_CACHE_SAMPLING_H
#define CHAPTERS_04_KV_CACHE_SAMPLING_H

#include "common/rng.h"

typedef struct {
    double temperature; /* 0: greedy */
    int top_k;          /* sample among the k largest logits; 0: all of them */
} Sampler;

/* Index of the largest logit; the lowest index wins a tie. */
int sample_greedy(const float *logits, int vocab_size);
/* Greedy when temperature is 0, else a draw from softmax(logits / temperature)
 * restricted to the top_k largest logits. */
int sample_token(const Sampler *sampler, const float *logits, int vocab_size, Rng *rng);
/* Indices of the k largest of n values, largest first; on a tie the lower
 * index comes first. */
void top_k_indices(const double *values, int n, int k, int *top);

#endif
