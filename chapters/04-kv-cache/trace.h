/* Seeded sets of requests: random prompts, and prompts that share system
 * prompts, with lognormal lengths as in chat traces. */
#ifndef CHAPTERS_04_KV_CACHE_TRACE_H
#define CHAPTERS_04_KV_CACHE_TRACE_H

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/scheduler.h"
#include "common/rng.h"

/* round(exp(N(log(median), sigma))), truncated to [lo, hi]. */
int lognormal_length(Rng *rng, double median, double sigma, int lo, int hi);

/* n requests with uniformly random prompt lengths in [prompt_min, prompt_max]
 * and new-token counts in [new_min, new_max], random tokens, distinct seeds. */
Request *requests_random(const ModelConfig *config, Rng *rng, int n, int prompt_min, int prompt_max, int new_min,
                         int new_max);

/* Questions are at most this many times their median length. */
#define QUESTION_MAX_FACTOR 8

/* n requests, each one of n_system system prompts (system_len tokens) followed
 * by its own question (lognormal, median question_median tokens), new tokens
 * in [new_min, new_max]. */
Request *requests_shared_prefixes(const ModelConfig *config, Rng *rng, int n, int n_system, int system_len,
                                  int question_median, int new_min, int new_max);

/* Fresh requests asking the same as `requests` (same prompts, lengths, seeds). */
Request *requests_copy(const ModelConfig *config, const Request *requests, int n);
void requests_free(Request *requests, int n);

#endif
