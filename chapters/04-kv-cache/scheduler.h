/* Serving a list of requests in batches: a continuous-batching loop over any
 * KV cache.
 *
 * Every step, each running request feeds the model the tokens of its own
 * that are not in the cache yet (its prompt at first, then the one token it
 * just drew; at most prefill_chunk of them), and draws its next token once all
 * are in. Requests join as soon as there is room and leave when done, so
 * prompts of different lengths and different stop times share each forward
 * pass. When the cache runs out of room, the most recently admitted request is
 * preempted: its room is freed and it waits to be recomputed from its tokens. */
#ifndef CHAPTERS_04_KV_CACHE_SCHEDULER_H
#define CHAPTERS_04_KV_CACHE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "chapters/04-kv-cache/cache.h"
#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/sampling.h"

typedef enum { REQUEST_WAITING, REQUEST_RUNNING, REQUEST_FINISHED, REQUEST_REFUSED } RequestState;

typedef struct {
    /* What is asked. */
    int prompt_len;
    int max_new;          /* tokens to generate */
    uint64_t sample_seed; /* of this request's draws: token n is draw n of this seed */
    /* What came of it. */
    RequestState state;
    int32_t *tokens; /* [prompt_len + max_new]: the prompt, then the generated tokens */
    int n_generated;
    float *logits; /* [max_new][vocab_size]: what each generated token was drawn from */
    int preemptions;
    char refusal[128]; /* why, when state is REQUEST_REFUSED */
    /* The scheduler's bookkeeping. */
    int slot;        /* the cache's sequence slot while running */
    int cached;      /* tokens whose keys and values are in the cache */
    int prefill_end; /* tokens known when last admitted: feeding them is prefill */
} Request;

typedef struct {
    int prefill_chunk;        /* most tokens one request feeds in one step; 0: no limit */
    PagedCache *prefix_cache; /* the cache itself when it is paged with prefix caching, else NULL */
} ServeOptions;

typedef struct {
    int steps;       /* forward passes */
    int max_running; /* most requests in one forward pass */
    int preemptions;
    int refused;
    long prompt_tokens;  /* prompt tokens of the requests that were served */
    long prefill_tokens; /* tokens fed that were known at admission: prompts, recomputation */
    long reused_tokens;  /* tokens known at admission taken from the prefix cache instead */
} ServeStats;

/* Set up a request: its token array starts with a copy of the prompt.
 * max_new is at least 1: a request generates, and the first token is drawn
 * from the prefill's logits. */
Request request_create(const ModelConfig *config, const int32_t *prompt, int prompt_len, int max_new,
                       uint64_t sample_seed);
void request_free(Request *request);

/* Record the logits a request's next token is drawn from, and draw it. */
void draw_token(Request *request, const float *logits, int vocab_size, const Sampler *sampler);

/* One forward pass over the tokens that n running requests (each in its
 * cache slot, with room reserved) have not fed yet; each request whose tokens
 * are then all in the cache draws its next token. */
void run_batch(const Model *model, KvCache *cache, Request *const *batch, int n, const Sampler *sampler,
               const ServeOptions *options, ServeStats *stats);

/* Serve every request to completion (or refusal, when it could never fit in
 * the cache) in n_slots sequence slots of the cache, in arrival order. */
ServeStats serve(const Model *model, KvCache *cache, int n_slots, Request *requests, int n_requests,
                 const Sampler *sampler, const ServeOptions *options);

#endif
