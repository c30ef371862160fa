#include "chapters/04-kv-cache/verify.h"

#include <math.h>
#include <string.h>

#include "chapters/04-kv-cache/contiguous_cache.h"
#include "chapters/04-kv-cache/fork_decode.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/uncached.h"
#include "common/alloc.h"

#define VERIFY_SEED 2024

double relative_error(const float *got, const float *ref, int n)
{
    double max_diff = 0.0, max_ref = 0.0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i]))
            return INFINITY;
        max_diff = fmax(max_diff, fabs((double)got[i] - ref[i]));
        max_ref = fmax(max_ref, fabs((double)ref[i]));
    }
    if (max_diff == 0.0)
        return 0.0;
    return max_ref > 0.0 ? max_diff / max_ref : INFINITY;
}

Comparison comparison_new(void)
{
    return (Comparison){.bitwise = true, .tokens_equal = true, .blocks_returned = true};
}

static void fold_vectors(Comparison *c, const float *got, const float *ref, int n)
{
    c->logit_vectors++;
    c->max_rel_error = fmax(c->max_rel_error, relative_error(got, ref, n));
    c->bitwise = c->bitwise && memcmp(got, ref, sizeof(float) * n) == 0;
}

void compare_requests(Comparison *c, const Request *got, const Request *ref, int vocab_size)
{
    c->sequences++;
    int steps = got->n_generated < ref->n_generated ? got->n_generated : ref->n_generated;
    int tokens = got->prompt_len + got->n_generated;
    c->tokens_equal = c->tokens_equal && got->state == REQUEST_FINISHED && ref->state == REQUEST_FINISHED &&
                      got->n_generated == ref->n_generated &&
                      memcmp(got->tokens, ref->tokens, sizeof(int32_t) * tokens) == 0;
    if (steps < got->max_new)
        c->max_rel_error = INFINITY; /* unfinished: nothing to prove */
    for (int k = 0; k < steps; k++)
        fold_vectors(c, got->logits + (size_t)k * vocab_size, ref->logits + (size_t)k * vocab_size, vocab_size);
}

static void compare_request_sets(Comparison *c, const Request *got, const Request *ref, int n, int vocab_size)
{
    for (int i = 0; i < n; i++)
        compare_requests(c, &got[i], &ref[i], vocab_size);
}

void serve_each_alone(const Model *model, Request *requests, int n, const Sampler *sampler)
{
    ContiguousCache cache = contiguous_cache_create(&model->config, 1);
    const ServeOptions plain = {0};
    for (int i = 0; i < n; i++)
        serve(model, &cache.base, 1, &requests[i], 1, sampler, &plain);
    contiguous_cache_free(&cache);
}

/* One request with a seeded random prompt. */
static Request *one_request(const Model *model, int prompt_len, int n_new)
{
    Rng rng;
    rng_seed(&rng, VERIFY_SEED);
    return requests_random(&model->config, &rng, 1, prompt_len, prompt_len, n_new, n_new);
}

/* Enough blocks for every request to hold its whole sequence at once. */
static int blocks_for_all(const Request *requests, int n, int block_size)
{
    int blocks = 0;
    for (int i = 0; i < n; i++)
        blocks += paged_kv_blocks_for(requests[i].prompt_len + requests[i].max_new, block_size);
    return blocks;
}

Comparison verify_cached_vs_uncached(const Model *model, int prompt_len, int n_new, const Sampler *sampler)
{
    Comparison c = comparison_new();
    Request *cached = one_request(model, prompt_len, n_new);
    Request *uncached = requests_copy(&model->config, cached, 1);
    serve_each_alone(model, cached, 1, sampler);
    generate_uncached(model, uncached, sampler);
    compare_requests(&c, cached, uncached, model->config.vocab_size);
    requests_free(cached, 1);
    requests_free(uncached, 1);
    return c;
}

/* Feed a prompt into slot 0 of a cache in chunks of `chunk` tokens (0: at once);
 * the logits of its last token go to `logits`. */
static void prefill(const Model *model, KvCache *cache, const int32_t *prompt, int length, int chunk, float *logits)
{
    for (int start = 0; start < length;) {
        int count = chunk > 0 && length - start > chunk ? chunk : length - start;
        (void)cache->reserve(cache, 0, start + count); /* a contiguous cache has room */
        model_forward(model, cache, &(SeqChunk){0, start, count, prompt + start}, 1, logits);
        start += count;
    }
}

Comparison verify_chunked_prefill(const Model *model, int prompt_len, int chunk)
{
    const ModelConfig *config = &model->config;
    Comparison c = comparison_new();
    Request *one_shot = one_request(model, prompt_len, 8);
    Request *chunked = requests_copy(config, one_shot, 1);

    /* The cache after the prompt: every key and value, and the last logits. */
    ContiguousCache whole = contiguous_cache_create(config, 1), parts = contiguous_cache_create(config, 1);
    float *logits_whole = ALLOC_ARRAY(config->vocab_size, float);
    float *logits_parts = ALLOC_ARRAY(config->vocab_size, float);
    prefill(model, &whole.base, one_shot->tokens, prompt_len, 0, logits_whole);
    prefill(model, &parts.base, one_shot->tokens, prompt_len, chunk, logits_parts);
    int cache_floats = config->n_layers * config->n_kv_heads * config->max_seq_len * config->head_dim;
    fold_vectors(&c, parts.keys, whole.keys, cache_floats);
    fold_vectors(&c, parts.values, whole.values, cache_floats);
    fold_vectors(&c, logits_parts, logits_whole, config->vocab_size);
    c.events = (prompt_len + chunk - 1) / chunk; /* chunks fed */

    /* And a whole generation served with chunked prefill. */
    const Sampler greedy = {0};
    serve_each_alone(model, one_shot, 1, &greedy);
    ContiguousCache cache = contiguous_cache_create(config, 1);
    serve(model, &cache.base, 1, chunked, 1, &greedy, &(ServeOptions){.prefill_chunk = chunk});
    compare_requests(&c, chunked, one_shot, config->vocab_size);

    contiguous_cache_free(&cache);
    contiguous_cache_free(&whole);
    contiguous_cache_free(&parts);
    array_free(logits_whole);
    array_free(logits_parts);
    requests_free(one_shot, 1);
    requests_free(chunked, 1);
    return c;
}

/* Requests of different prompt lengths and stop times. */
static Request *mixed_requests(const Model *model, int n)
{
    Rng rng;
    rng_seed(&rng, VERIFY_SEED + 1);
    return requests_random(&model->config, &rng, n, 3, 61, 5, 41);
}

Comparison verify_served_vs_alone(const Model *model, KvCache *cache, int n_slots, Request *requests, int n,
                                  const Sampler *sampler, const ServeOptions *options, ServeStats *stats)
{
    Comparison c = comparison_new();
    Request *alone = requests_copy(&model->config, requests, n);
    *stats = serve(model, cache, n_slots, requests, n, sampler, options);
    serve_each_alone(model, alone, n, sampler);
    compare_request_sets(&c, requests, alone, n, model->config.vocab_size);
    requests_free(alone, n);
    return c;
}

Comparison verify_batch_vs_alone(const Model *model, int n_requests, const Sampler *sampler)
{
    Request *batched = mixed_requests(model, n_requests);
    ContiguousCache cache = contiguous_cache_create(&model->config, n_requests);
    ServeStats stats;
    Comparison c = verify_served_vs_alone(model, &cache.base, n_requests, batched, n_requests, sampler,
                                          &(ServeOptions){0}, &stats);
    c.events = stats.max_running;
    contiguous_cache_free(&cache);
    requests_free(batched, n_requests);
    return c;
}

Comparison verify_paged_vs_contiguous(const Model *model, int n_requests, int block_size, const Sampler *sampler)
{
    Comparison c = comparison_new();
    Request *paged_requests = mixed_requests(model, n_requests);
    Request *contiguous_requests = requests_copy(&model->config, paged_requests, n_requests);
    int blocks = blocks_for_all(paged_requests, n_requests, block_size);
    PagedCache paged = paged_cache_create(&model->config, n_requests, blocks, block_size, false);
    Rng rng;
    rng_seed(&rng, VERIFY_SEED + 2);
    block_pool_shuffle(&paged.pool, &rng);
    ContiguousCache contiguous = contiguous_cache_create(&model->config, n_requests);
    const ServeOptions plain = {0};
    serve(model, &paged.base, n_requests, paged_requests, n_requests, sampler, &plain);
    serve(model, &contiguous.base, n_requests, contiguous_requests, n_requests, sampler, &plain);
    compare_request_sets(&c, paged_requests, contiguous_requests, n_requests, model->config.vocab_size);
    c.blocks_returned = block_pool_unused(&paged.pool);
    c.events = blocks;
    paged_cache_free(&paged);
    contiguous_cache_free(&contiguous);
    requests_free(paged_requests, n_requests);
    requests_free(contiguous_requests, n_requests);
    return c;
}

Comparison verify_parallel_sampling(const Model *model, int prompt_len, int n, int n_new, int block_size,
                                    const Sampler *sampler)
{
    Comparison c = comparison_new();
    Request *first = one_request(model, prompt_len, n_new);
    Request *forked = ALLOC_ARRAY(n, Request);
    for (int i = 0; i < n; i++)
        forked[i] = request_create(&model->config, first->tokens, prompt_len, n_new, VERIFY_SEED + i);
    Request *alone = requests_copy(&model->config, forked, n);
    int blocks = n * paged_kv_blocks_for(prompt_len + n_new, block_size);
    PagedCache cache = paged_cache_create(&model->config, n, blocks, block_size, false);
    bool ok = sample_parallel(model, &cache, forked, n, sampler);
    serve_each_alone(model, alone, n, sampler);
    compare_request_sets(&c, forked, alone, n, model->config.vocab_size);
    c.tokens_equal = c.tokens_equal && ok;
    c.blocks_returned = block_pool_unused(&cache.pool);
    c.events = (int)cache.pool.stats.copies;
    paged_cache_free(&cache);
    requests_free(first, 1);
    requests_free(forked, n);
    requests_free(alone, n);
    return c;
}

Comparison verify_beam_search(const Model *model, int prompt_len, int width, int steps, int block_size)
{
    const ModelConfig *config = &model->config;
    Comparison c = comparison_new();
    Request *source = one_request(model, prompt_len, 1);
    int blocks = 2 * width * paged_kv_blocks_for(prompt_len + steps, block_size);
    PagedCache cache = paged_cache_create(config, 2 * width, blocks, block_size, false);
    Beam *beams = ALLOC_ARRAY(width, Beam);
    for (int j = 0; j < width; j++)
        beams[j] = beam_create(config, steps);
    c.tokens_equal = beam_search(model, &cache, source->tokens, prompt_len, width, steps, beams);

    /* Alone: the prompt and the beam's first k tokens, one token to draw. The
     * logits it is drawn from must be those the beam chose its token k from. */
    int32_t *sequence = ALLOC_ARRAY(prompt_len + steps, int32_t);
    memcpy(sequence, source->tokens, sizeof(int32_t) * prompt_len);
    const Sampler greedy = {0};
    for (int j = 0; j < width; j++) {
        memcpy(sequence + prompt_len, beams[j].tokens, sizeof(int32_t) * steps);
        for (int k = 0; k < steps; k++) {
            Request alone = request_create(config, sequence, prompt_len + k, 1, 0);
            serve_each_alone(model, &alone, 1, &greedy);
            fold_vectors(&c, beams[j].logits + (size_t)k * config->vocab_size, alone.logits, config->vocab_size);
            request_free(&alone);
        }
        c.sequences++;
    }
    c.blocks_returned = block_pool_unused(&cache.pool);
    c.events = (int)cache.pool.stats.copies;
    for (int j = 0; j < width; j++)
        beam_free(&beams[j]);
    array_free(beams);
    array_free(sequence);
    paged_cache_free(&cache);
    requests_free(source, 1);
    return c;
}

Comparison verify_preemption(const Model *model, int n_requests, int block_size, const Sampler *sampler)
{
    Request *squeezed = mixed_requests(model, n_requests);
    int num_blocks = 1;
    for (int i = 0; i < n_requests; i++) {
        int blocks = paged_kv_blocks_for(squeezed[i].prompt_len + squeezed[i].max_new, block_size);
        if (blocks + 1 > num_blocks)
            num_blocks = blocks + 1;
    }
    PagedCache cache = paged_cache_create(&model->config, n_requests, num_blocks, block_size, false);
    ServeStats stats;
    Comparison c = verify_served_vs_alone(model, &cache.base, n_requests, squeezed, n_requests, sampler,
                                          &(ServeOptions){0}, &stats);
    c.blocks_returned = block_pool_unused(&cache.pool);
    c.events = stats.preemptions;
    paged_cache_free(&cache);
    requests_free(squeezed, n_requests);
    return c;
}

/* Requests that share one of three system prompts of five blocks, with
 * questions of about 12 tokens (up to QUESTION_MAX_FACTOR times that) and
 * answers of 4 to 24. */
enum { PREFIX_SYSTEM_BLOCKS = 5, PREFIX_QUESTION_MEDIAN = 12, PREFIX_ANSWER_MIN = 4, PREFIX_ANSWER_MAX = 24 };

Comparison verify_prefix_caching(const Model *model, int n_requests, int num_blocks, int block_size,
                                 const Sampler *sampler)
{
    Rng rng;
    rng_seed(&rng, VERIFY_SEED + 3);
    Request *shared = requests_shared_prefixes(&model->config, &rng, n_requests, 3, PREFIX_SYSTEM_BLOCKS * block_size,
                                               PREFIX_QUESTION_MEDIAN, PREFIX_ANSWER_MIN, PREFIX_ANSWER_MAX);
    /* Never fewer blocks than the longest request can need alone, so that
     * every request can finish: at block size 1, 40 blocks are 40 positions. */
    int longest = PREFIX_SYSTEM_BLOCKS * block_size + QUESTION_MAX_FACTOR * PREFIX_QUESTION_MEDIAN + PREFIX_ANSWER_MAX;
    int longest_blocks = (longest + block_size - 1) / block_size;
    PagedCache cache = paged_cache_create(&model->config, 4, num_blocks > longest_blocks ? num_blocks : longest_blocks,
                                          block_size, true);
    ServeStats stats;
    Comparison c = verify_served_vs_alone(model, &cache.base, 4, shared, n_requests, sampler,
                                          &(ServeOptions){.prefix_cache = &cache}, &stats);
    c.blocks_returned = block_pool_unused(&cache.pool);
    c.events = (int)stats.reused_tokens;
    paged_cache_free(&cache);
    requests_free(shared, n_requests);
    return c;
}
