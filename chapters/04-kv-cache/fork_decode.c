#include "chapters/04-kv-cache/fork_decode.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"

// ANCHOR: sample_n_continuations_sharing_the_prompt
bool sample_parallel(const Model *model, PagedCache *cache, Request *requests, int n, const Sampler *sampler)
{
    KvCache *kv = &cache->base;
    const ServeOptions plain = {0};
    ServeStats stats = {0};
    int vocab = model->config.vocab_size, prompt_len = requests[0].prompt_len;
    Request **batch = ALLOC_ARRAY(n, Request *);
    for (int i = 0; i < n; i++) {
        batch[i] = &requests[i];
        requests[i].slot = i;
    }
    bool ok = kv->reserve(kv, 0, prompt_len);
    if (ok)
        run_batch(model, kv, batch, 1, sampler, &plain, &stats);
    for (int i = 1; ok && i < n; i++) {
        paged_cache_fork(cache, 0, i);
        requests[i].cached = prompt_len;
        draw_token(&requests[i], requests[0].logits, vocab, sampler);
    }
    while (ok && requests[0].n_generated < requests[0].max_new) {
        for (int i = 0; ok && i < n; i++)
            ok = kv->reserve(kv, i, requests[i].cached + 1);
        if (ok)
            run_batch(model, kv, batch, n, sampler, &plain, &stats);
    }
    for (int i = 0; i < n; i++) {
        kv->release(kv, i);
        requests[i].state = ok ? REQUEST_FINISHED : REQUEST_REFUSED;
    }
    array_free(batch);
    return ok;
}
// ANCHOR_END: sample_n_continuations_sharing_the_prompt

Beam beam_create(const ModelConfig *config, int steps)
{
    return (Beam){
        .tokens = ALLOC_ARRAY(steps, int32_t),
        .logits = ALLOC_ARRAY((size_t)steps * config->vocab_size, float),
    };
}

void beam_free(Beam *beam)
{
    array_free(beam->tokens);
    array_free(beam->logits);
    *beam = (Beam){0};
}

static void log_softmax(const float *logits, int n, double *out)
{
    double max = logits[0], sum = 0.0;
    for (int i = 1; i < n; i++)
        max = fmax(max, logits[i]);
    for (int i = 0; i < n; i++)
        sum += exp(logits[i] - max);
    double log_sum = max + log(sum);
    for (int i = 0; i < n; i++)
        out[i] = logits[i] - log_sum;
}

/* The beams of one step and the slots they do not use. */
typedef struct {
    Beam *live, *next;
    int n_live;
    int *free_slots, n_free;
} BeamState;

/* Every live beam extended by every token; the `width` best become the next
 * beams, each forked from its parent (sharing its blocks). */
static void extend_beams(PagedCache *cache, BeamState *s, const float *logits, int vocab, int width, int t)
{
    size_t n_candidates = (size_t)s->n_live * vocab;
    double *score = ALLOC_ARRAY(n_candidates, double);
    int *best = ALLOC_ARRAY(width, int);
    for (int b = 0; b < s->n_live; b++) {
        log_softmax(logits + (size_t)b * vocab, vocab, score + (size_t)b * vocab);
        for (int v = 0; v < vocab; v++)
            score[(size_t)b * vocab + v] += s->live[b].log_prob;
    }
    top_k_indices(score, (int)n_candidates, width, best);
    for (int j = 0; j < width; j++) {
        const Beam *parent = &s->live[best[j] / vocab];
        Beam *child = &s->next[j];
        child->slot = s->free_slots[--s->n_free];
        paged_cache_fork(cache, parent->slot, child->slot);
        memcpy(child->tokens, parent->tokens, sizeof(int32_t) * t);
        memcpy(child->logits, parent->logits, sizeof(float) * t * vocab);
        child->tokens[t] = best[j] % vocab;
        memcpy(child->logits + (size_t)t * vocab, logits + (size_t)(best[j] / vocab) * vocab, sizeof(float) * vocab);
        child->log_prob = score[best[j]];
    }
    for (int b = 0; b < s->n_live; b++) {
        cache->base.release(&cache->base, s->live[b].slot);
        s->free_slots[s->n_free++] = s->live[b].slot;
    }
    Beam *swap = s->live;
    s->live = s->next;
    s->next = swap;
    s->n_live = width;
    array_free(score);
    array_free(best);
}

// ANCHOR: search_with_forked_beams
bool beam_search(const Model *model, PagedCache *cache, const int32_t *prompt, int prompt_len, int width, int steps,
                 Beam *beams)
{
    KvCache *kv = &cache->base;
    int vocab = model->config.vocab_size;
    Beam *scratch = ALLOC_ARRAY(width, Beam);
    for (int j = 0; j < width; j++)
        scratch[j] = beam_create(&model->config, steps);
    BeamState s = {.live = beams, .next = scratch, .n_live = 1, .free_slots = ALLOC_ARRAY(2 * width, int)};
    for (int slot = 2 * width - 1; slot >= 1; slot--)
        s.free_slots[s.n_free++] = slot;
    s.live[0].slot = 0;
    s.live[0].log_prob = 0.0;
    float *logits = ALLOC_ARRAY((size_t)width * vocab, float);
    SeqChunk *chunks = ALLOC_ARRAY(width, SeqChunk);
    bool ok = kv->reserve(kv, 0, prompt_len);
    if (ok)
        model_forward(model, kv, &(SeqChunk){0, 0, prompt_len, prompt}, 1, logits);
    // ANCHOR: extend_fork_and_decode_every_step
    for (int t = 0; ok && t < steps; t++) {
        extend_beams(cache, &s, logits, vocab, width, t);
        if (t + 1 == steps)
            break;
        for (int j = 0; j < width; j++) {
            /* The new token goes into the last block, shared with siblings. */
            ok = ok && kv->reserve(kv, s.live[j].slot, prompt_len + t + 1);
            chunks[j] = (SeqChunk){s.live[j].slot, prompt_len + t, 1, &s.live[j].tokens[t]};
        }
        if (ok)
            model_forward(model, kv, chunks, width, logits);
    }
    // ANCHOR_END: extend_fork_and_decode_every_step
    // ANCHOR: hand_the_final_beams_back
    for (int j = 0; j < s.n_live; j++)
        kv->release(kv, s.live[j].slot);
    if (s.live != beams)
        for (int j = 0; j < width; j++) {
            Beam swap = beams[j];
            beams[j] = scratch[j];
            scratch[j] = swap;
        }
    for (int j = 0; j < width; j++)
        beam_free(&scratch[j]);
    array_free(scratch);
    array_free(s.free_slots);
    array_free(logits);
    array_free(chunks);
    // ANCHOR_END: hand_the_final_beams_back
    return ok;
}
// ANCHOR_END: search_with_forked_beams
