#include "chapters/04-kv-cache/scheduler.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cli.h"

Request request_create(const ModelConfig *config, const int32_t *prompt, int prompt_len, int max_new,
                       uint64_t sample_seed)
{
    if (max_new < 1)
        cli_fail_status(1, "a request for %d new tokens: at least 1 (a program error)", max_new);
    Request r = {
        .prompt_len = prompt_len,
        .max_new = max_new,
        .sample_seed = sample_seed,
        .tokens = ALLOC_ARRAY((size_t)prompt_len + max_new, int32_t),
        .logits = ALLOC_ARRAY((size_t)max_new * config->vocab_size, float),
    };
    memcpy(r.tokens, prompt, sizeof(int32_t) * prompt_len);
    return r;
}

void request_free(Request *request)
{
    array_free(request->tokens);
    array_free(request->logits);
    *request = (Request){0};
}

static int tokens_known(const Request *r)
{
    return r->prompt_len + r->n_generated;
}

static int tokens_to_feed(const Request *r, const ServeOptions *options)
{
    int missing = tokens_known(r) - r->cached;
    return options->prefill_chunk > 0 && missing > options->prefill_chunk ? options->prefill_chunk : missing;
}

/* The queues of one serve() call: indices into the request array. */
typedef struct {
    int *waiting, n_waiting; /* in order of service; a preempted request goes first */
    int *running, n_running; /* in order of admission */
    int *free_slots, n_free_slots;
} Queues;

static void preempt_newest(Queues *q, Request *requests, KvCache *cache, ServeStats *stats)
{
    Request *victim = &requests[q->running[--q->n_running]];
    cache->release(cache, victim->slot);
    q->free_slots[q->n_free_slots++] = victim->slot;
    victim->state = REQUEST_WAITING;
    victim->cached = 0;
    victim->preemptions++;
    stats->preemptions++;
    memmove(q->waiting + 1, q->waiting, sizeof(int) * q->n_waiting);
    q->waiting[0] = (int)(victim - requests);
    q->n_waiting++;
}

// ANCHOR: make_room_or_preempt
/* Room for every running request's next tokens, oldest first; when the cache
 * is full, the newest request gives its room up and will be recomputed. */
static bool reserve_running(Queues *q, Request *requests, KvCache *cache, const ServeOptions *options,
                            ServeStats *stats)
{
    bool preempted = false;
    for (int i = 0; i < q->n_running; i++) {
        Request *r = &requests[q->running[i]];
        int length = r->cached + tokens_to_feed(r, options);
        while (!cache->reserve(cache, r->slot, length)) {
            bool victim_is_r = q->running[q->n_running - 1] == q->running[i];
            preempt_newest(q, requests, cache, stats);
            preempted = true;
            if (victim_is_r)
                break;
        }
    }
    return preempted;
}
// ANCHOR_END: make_room_or_preempt

/* Admit waiting requests in order while a slot and room are free. */
static void admit_waiting(Queues *q, Request *requests, KvCache *cache, const ServeOptions *options, ServeStats *stats)
{
    while (q->n_waiting > 0 && q->n_free_slots > 0) {
        Request *r = &requests[q->waiting[0]];
        r->slot = q->free_slots[q->n_free_slots - 1];
        r->cached = 0;
        if (options->prefix_cache)
            r->cached = paged_cache_match_prefix(options->prefix_cache, r->slot, r->tokens, tokens_known(r));
        if (!cache->reserve(cache, r->slot, r->cached + tokens_to_feed(r, options))) {
            cache->release(cache, r->slot);
            r->cached = 0;
            return;
        }
        stats->reused_tokens += r->cached;
        r->prefill_end = tokens_known(r);
        q->n_free_slots--;
        q->n_waiting--;
        memmove(q->waiting, q->waiting + 1, sizeof(int) * q->n_waiting);
        q->running[q->n_running++] = (int)(r - requests);
        r->state = REQUEST_RUNNING;
    }
}

static bool refuse_if_too_long(Request *r, const KvCache *cache, ServeStats *stats)
{
    /* The last generated token is never fed back, so it needs no room. */
    int needed = r->prompt_len + r->max_new - 1, room = cache->max_length(cache);
    if (needed <= room)
        return false;
    r->state = REQUEST_REFUSED;
    snprintf(r->refusal, sizeof r->refusal,
             "needs room for %d positions; one sequence can hold at most %d in this cache", needed, room);
    stats->refused++;
    return true;
}

void draw_token(Request *r, const float *logits, int vocab_size, const Sampler *sampler)
{
    memcpy(r->logits + (size_t)r->n_generated * vocab_size, logits, sizeof(float) * vocab_size);
    r->tokens[tokens_known(r)] = sample_token(sampler, logits, vocab_size, r->sample_seed, (uint32_t)r->n_generated);
    r->n_generated++;
}

// ANCHOR: run_one_batch_and_draw_tokens
void run_batch(const Model *model, KvCache *cache, Request *const *batch, int n, const Sampler *sampler,
               const ServeOptions *options, ServeStats *stats)
{
    int vocab = model->config.vocab_size;
    SeqChunk *chunks = ALLOC_ARRAY(n, SeqChunk);
    float *logits = ALLOC_ARRAY((size_t)n * vocab, float);
    for (int i = 0; i < n; i++) {
        const Request *r = batch[i];
        chunks[i] = (SeqChunk){r->slot, r->cached, tokens_to_feed(r, options), r->tokens + r->cached};
        int fed_end = chunks[i].start + chunks[i].count;
        int prefill_end = fed_end < r->prefill_end ? fed_end : r->prefill_end;
        if (prefill_end > chunks[i].start)
            stats->prefill_tokens += prefill_end - chunks[i].start;
    }
    model_forward(model, cache, chunks, n, logits);
    for (int i = 0; i < n; i++) {
        Request *r = batch[i];
        r->cached += chunks[i].count;
        if (options->prefix_cache)
            paged_cache_seal(options->prefix_cache, r->slot, r->tokens);
        if (r->cached == tokens_known(r))
            draw_token(r, logits + (size_t)i * vocab, vocab, sampler);
    }
    stats->steps++;
    array_free(chunks);
    array_free(logits);
}
// ANCHOR_END: run_one_batch_and_draw_tokens

/* Run the batch of running requests; the finished ones leave it. */
static void step(const Model *model, KvCache *cache, Queues *q, Request *requests, const Sampler *sampler,
                 const ServeOptions *options, ServeStats *stats)
{
    Request **batch = ALLOC_ARRAY(q->n_running, Request *);
    for (int i = 0; i < q->n_running; i++)
        batch[i] = &requests[q->running[i]];
    run_batch(model, cache, batch, q->n_running, sampler, options, stats);
    int still_running = 0;
    for (int i = 0; i < q->n_running; i++) {
        Request *r = batch[i];
        if (r->n_generated == r->max_new) {
            cache->release(cache, r->slot);
            q->free_slots[q->n_free_slots++] = r->slot;
            r->state = REQUEST_FINISHED;
        } else {
            q->running[still_running++] = q->running[i];
        }
    }
    q->n_running = still_running;
    array_free(batch);
}

ServeStats serve(const Model *model, KvCache *cache, int n_slots, Request *requests, int n_requests,
                 const Sampler *sampler, const ServeOptions *options)
{
    ServeStats stats = {0};
    Queues q = {
        .waiting = ALLOC_ARRAY(n_requests, int),
        .running = ALLOC_ARRAY(n_slots, int),
        .free_slots = ALLOC_ARRAY(n_slots, int),
    };
    for (int s = n_slots - 1; s >= 0; s--)
        q.free_slots[q.n_free_slots++] = s;
    for (int i = 0; i < n_requests; i++) {
        if (refuse_if_too_long(&requests[i], cache, &stats))
            continue;
        requests[i].state = REQUEST_WAITING;
        stats.prompt_tokens += requests[i].prompt_len;
        q.waiting[q.n_waiting++] = i;
    }
    while (q.n_waiting > 0 || q.n_running > 0) {
        bool preempted = reserve_running(&q, requests, cache, options, &stats);
        if (!preempted)
            admit_waiting(&q, requests, cache, options, &stats);
        if (q.n_running > stats.max_running)
            stats.max_running = q.n_running;
        step(model, cache, &q, requests, sampler, options, &stats);
    }
    array_free(q.waiting);
    array_free(q.running);
    array_free(q.free_slots);
    return stats;
}
