/* The paged cache in every quantized format keeps the equalities of the
 * float one: batched = alone, chunked prefill = one shot, forked samples =
 * alone (copy-on-write of quantized blocks, and of the float keys that
 * per-channel blocks are quantized from), preempted = alone, prefix-cached =
 * alone, each against the same requests served alone in the same format,
 * bit for bit. And the formats do quantize: their logits differ from the
 * float32 cache's. */
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/fork_decode.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/alloc.h"
#include "common/testing.h"

enum { BLOCK = 8 };

static int blocks_for(const Request *requests, int n)
{
    int blocks = 0;
    for (int i = 0; i < n; i++)
        blocks += paged_kv_blocks_for(requests[i].prompt_len + requests[i].max_new, BLOCK);
    return blocks;
}

static PagedCache cache_in(const Model *model, int n_seqs, int num_blocks, bool prefix, KvFormat format)
{
    return paged_cache_create_in(&model->config, n_seqs, num_blocks, BLOCK, prefix, format, 32);
}

/* Each request alone in a cache of the format: the reference. */
static void serve_alone_in(const Model *model, Request *requests, int n, const Sampler *sampler, KvFormat format)
{
    for (int i = 0; i < n; i++) {
        PagedCache cache = cache_in(model, 1, blocks_for(&requests[i], 1), false, format);
        serve(model, &cache.base, 1, &requests[i], 1, sampler, &(ServeOptions){0});
        paged_cache_free(&cache);
    }
}

static void expect_same(const char *what, KvFormat format, const Request *got, const Request *alone, int n,
                        const Model *model, bool blocks_back)
{
    Comparison c = comparison_new();
    for (int i = 0; i < n; i++)
        compare_requests(&c, &got[i], &alone[i], model->config.vocab_size);
    EXPECT(c.bitwise && c.tokens_equal, "%s, %s: bit-identical to each alone (max rel error %.1e)", what,
           kv_format_name(format), c.max_rel_error);
    EXPECT(blocks_back, "%s, %s: every block back", what, kv_format_name(format));
}

static Request *mixed(const Model *model, int n, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed);
    return requests_random(&model->config, &rng, n, 3, 45, 5, 30);
}

static void served_together(const Model *model, KvFormat format, const Sampler *sampler, int prefill_chunk,
                            const char *what)
{
    const int n = 5;
    Request *together = mixed(model, n, 1), *alone = requests_copy(&model->config, together, n);
    PagedCache cache = cache_in(model, n, blocks_for(together, n), false, format);
    Rng rng;
    rng_seed(&rng, 2);
    block_pool_shuffle(&cache.pool, &rng);
    serve(model, &cache.base, n, together, n, sampler, &(ServeOptions){.prefill_chunk = prefill_chunk});
    serve_alone_in(model, alone, n, sampler, format);
    expect_same(what, format, together, alone, n, model, block_pool_unused(&cache.pool));
    paged_cache_free(&cache);
    requests_free(together, n);
    requests_free(alone, n);
}

static void forked(const Model *model, KvFormat format, const Sampler *sampler)
{
    const int n = 4, prompt_len = 4 * BLOCK + 3, n_new = 12; /* the prompt's last block is shared, partly full */
    Request *first = mixed(model, 1, 3);
    Request *samples = ALLOC_ARRAY(n, Request);
    for (int i = 0; i < n; i++)
        samples[i] = request_create(&model->config, first->tokens, prompt_len, n_new, 50 + i);
    Request *alone = requests_copy(&model->config, samples, n);
    PagedCache cache = cache_in(model, n, n * paged_kv_blocks_for(prompt_len + n_new, BLOCK), false, format);
    bool ok = sample_parallel(model, &cache, samples, n, sampler);
    serve_alone_in(model, alone, n, sampler, format);
    EXPECT(ok && cache.pool.stats.copies > 0, "forked, %s: ran, with copies on write", kv_format_name(format));
    expect_same("4 forked samples", format, samples, alone, n, model, block_pool_unused(&cache.pool));
    paged_cache_free(&cache);
    requests_free(first, 1);
    requests_free(samples, n);
    requests_free(alone, n);
}

static void preempted(const Model *model, KvFormat format, const Sampler *sampler)
{
    const int n = 5;
    Request *squeezed = mixed(model, n, 4), *alone = requests_copy(&model->config, squeezed, n);
    int num_blocks = 1;
    for (int i = 0; i < n; i++) {
        int blocks = blocks_for(&squeezed[i], 1);
        num_blocks = blocks + 1 > num_blocks ? blocks + 1 : num_blocks;
    }
    PagedCache cache = cache_in(model, n, num_blocks, false, format);
    ServeStats stats = serve(model, &cache.base, n, squeezed, n, sampler, &(ServeOptions){0});
    serve_alone_in(model, alone, n, sampler, format);
    EXPECT(stats.preemptions > 0, "preempted, %s: %d preemptions", kv_format_name(format), stats.preemptions);
    expect_same("preempted", format, squeezed, alone, n, model, block_pool_unused(&cache.pool));
    paged_cache_free(&cache);
    requests_free(squeezed, n);
    requests_free(alone, n);
}

static void prefix_cached(const Model *model, KvFormat format, const Sampler *sampler)
{
    const int n = 10;
    Rng rng;
    rng_seed(&rng, 5);
    Request *shared = requests_shared_prefixes(&model->config, &rng, n, 2, 4 * BLOCK, 10, 4, 16);
    Request *alone = requests_copy(&model->config, shared, n);
    PagedCache cache = cache_in(model, 3, 40, true, format);
    ServeStats stats = serve(model, &cache.base, 3, shared, n, sampler, &(ServeOptions){.prefix_cache = &cache});
    serve_alone_in(model, alone, n, sampler, format);
    EXPECT(stats.reused_tokens > 0, "prefix-cached, %s: %ld tokens reused", kv_format_name(format),
           stats.reused_tokens);
    expect_same("prefix-cached", format, shared, alone, n, model, block_pool_unused(&cache.pool));
    paged_cache_free(&cache);
    requests_free(shared, n);
    requests_free(alone, n);
}

/* A cache that stored floats under another name would pass every test above. */
static void quantized_logits_differ(const Model *model, KvFormat format, const Sampler *sampler)
{
    Request *quantized = mixed(model, 1, 6), *exact = requests_copy(&model->config, quantized, 1);
    serve_alone_in(model, quantized, 1, sampler, format);
    serve_alone_in(model, exact, 1, sampler, KV_FORMAT_FLOAT32);
    Comparison c = comparison_new();
    compare_requests(&c, quantized, exact, model->config.vocab_size);
    EXPECT(!c.bitwise && c.max_rel_error > 0.0, "%s: logits differ from float32 (max rel error %.1e)",
           kv_format_name(format), c.max_rel_error);
    requests_free(quantized, 1);
    requests_free(exact, 1);
}

/* paged_cache_largest reads float32 blocks: asked of a quantized cache, it
 * is a program error (one line, status 1), not bytes read as floats. */
static void largest_of_an_int8_cache(void *ctx)
{
    const ModelConfig *config = ctx;
    PagedCache cache = paged_cache_create_in(config, 1, 4, BLOCK, false, KV_FORMAT_INT8, 32);
    float largest[64];
    paged_cache_largest(&cache, 0, 1, largest, largest);
    paged_cache_free(&cache);
}

static void largest_needs_float32(const ModelConfig *config)
{
    ChildResult child = test_run_child(largest_of_an_int8_cache, (void *)config);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, "reads float32 caches") != NULL,
           "paged_cache_largest of an INT8 cache: status %d (expected 1), stderr: %s", child.exit_status, child.err);
}

int main(void)
{
    ModelConfig config = model_default_config();
    config.head_dim = 32;
    largest_needs_float32(&config);
    Model model = model_create(&config);
    model_add_key_outliers(&model, 2, 10.0f);
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    for (int format = KV_FORMAT_FP16; format < KV_FORMAT_COUNT; format++) {
        KvFormat f = (KvFormat)format;
        served_together(&model, f, &sampled, 0, "served together");
        served_together(&model, f, &sampled, 5, "prefill in chunks of 5");
        forked(&model, f, &sampled);
        preempted(&model, f, &sampled);
        prefix_cached(&model, f, &sampled);
        quantized_logits_differ(&model, f, &sampled);
    }
    model_free(&model);
    return test_finish();
}
