/* Decoding that forks sequences: parallel sampling and beam search. Forked
 * sequences share the prompt's blocks in the paged cache; a sequence that
 * writes into a shared block gets its own copy first. */
#ifndef CHAPTERS_04_KV_CACHE_FORK_DECODE_H
#define CHAPTERS_04_KV_CACHE_FORK_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/sampling.h"
#include "chapters/04-kv-cache/scheduler.h"

/* n continuations of one prompt: requests[0..n) have the same prompt and
 * max_new and their own sampling seeds. The prompt is computed once, in
 * slot 0, and slots 1..n-1 fork from it. False (with every block given back)
 * when the pool runs out of blocks. */
bool sample_parallel(const Model *model, PagedCache *cache, Request *requests, int n, const Sampler *sampler);

typedef struct {
    int32_t *tokens; /* [steps] */
    float *logits;   /* [steps][vocab_size]: the logits each token was chosen from */
    double log_prob; /* sum of the chosen tokens' log-probabilities */
    int slot;
} Beam;

Beam beam_create(const ModelConfig *config, int steps);
void beam_free(Beam *beam);

/* Beam search: `width` beams of `steps` tokens, returned best first in
 * beams[0..width). Uses slots 0..2*width-1. False (with every block given
 * back) when the pool runs out of blocks. */
bool beam_search(const Model *model, PagedCache *cache, const int32_t *prompt, int prompt_len, int width, int steps,
                 Beam *beams);

#endif
