/* The equalities the chapter claims, measured: each function runs one way of
 * generating (with a cache, batched, chunked, paged, forked, preempted,
 * prefix-cached) and the simpler way it must agree with, and compares the
 * logits of every generated token. The book prints them with --verify; the
 * tests assert them. */
#ifndef CHAPTERS_04_KV_CACHE_VERIFY_H
#define CHAPTERS_04_KV_CACHE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/sampling.h"
#include "chapters/04-kv-cache/scheduler.h"

typedef struct {
    int sequences;        /* generations compared */
    int logit_vectors;    /* logits vectors compared, over all steps and sequences */
    double max_rel_error; /* max over vectors of max|got - ref| / max|ref|; inf if not finite */
    bool bitwise;         /* every logit identical */
    bool tokens_equal;    /* every generated token identical */
    bool blocks_returned; /* a paged cache got every block back at the end */
    int events;           /* what the run had to show: copies, preemptions, hit tokens... */
} Comparison;

/* Nothing compared yet: every property holds. */
Comparison comparison_new(void);

/* max|got - ref| / max|ref| over n values; +inf when anything is not finite. */
double relative_error(const float *got, const float *ref, int n);

/* Fold the generated tokens and logits of `got` against `ref` into c. */
void compare_requests(Comparison *c, const Request *got, const Request *ref, int vocab_size);

/* Each request run alone, with a contiguous cache: the reference for batching. */
void serve_each_alone(const Model *model, Request *requests, int n, const Sampler *sampler);

/* Serve the requests together in n_slots slots of the cache, and a copy of
 * each alone with a contiguous cache; compare. The served requests keep
 * their results, *stats the serving statistics. */
Comparison verify_served_vs_alone(const Model *model, KvCache *cache, int n_slots, Request *requests, int n,
                                  const Sampler *sampler, const ServeOptions *options, ServeStats *stats);

Comparison verify_cached_vs_uncached(const Model *model, int prompt_len, int n_new, const Sampler *sampler);
/* Cache contents and logits after prefill in chunks of `chunk` against one shot. */
Comparison verify_chunked_prefill(const Model *model, int prompt_len, int chunk);
Comparison verify_batch_vs_alone(const Model *model, int n_requests, const Sampler *sampler);
Comparison verify_paged_vs_contiguous(const Model *model, int n_requests, int block_size, const Sampler *sampler);
Comparison verify_parallel_sampling(const Model *model, int prompt_len, int n, int n_new, int block_size,
                                    const Sampler *sampler);
Comparison verify_beam_search(const Model *model, int prompt_len, int width, int steps, int block_size);
/* A paged pool with room for the longest request and one block more, so
 * that requests served together are preempted. */
Comparison verify_preemption(const Model *model, int n_requests, int block_size, const Sampler *sampler);
/* A paged pool of num_blocks, or of the blocks the longest request needs
 * alone where that is more, whose requests share prefixes. */
Comparison verify_prefix_caching(const Model *model, int n_requests, int num_blocks, int block_size,
                                 const Sampler *sampler);

#endif
