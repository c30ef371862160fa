/* Variable-length batches: requests with different prompt lengths and stop
 * times, served together, give what each gives alone; and a sequence never
 * reads a position it has not written (another sequence's, or unused room),
 * shown by filling the cache with NaN before use. */
#include <math.h>
#include <stdio.h>

#include "chapters/04-kv-cache/contiguous_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/testing.h"

static void batch_equals_alone(const Model *model, int n, const Sampler *sampler)
{
    Comparison c = verify_batch_vs_alone(model, n, sampler);
    printf("%d requests: %d logit vectors, max relative error %.2e, %d in one batch\n", n, c.logit_vectors,
           c.max_rel_error, c.events);
    EXPECT(c.events == n, "all %d requests were in one batch together", n);
    /* Each token's row goes through the same operations in the same order
     * whatever else is in the batch: equal to the bit, not merely close. */
    EXPECT(c.bitwise, "%d requests: batched logits bit-identical to alone", n);
    EXPECT(c.tokens_equal, "%d requests: same tokens as alone", n);
}

static void never_reads_unwritten_positions(const Model *model, const Sampler *sampler)
{
    const ModelConfig *config = &model->config;
    const int n = 5;
    Rng rng;
    rng_seed(&rng, 3);
    Request *batched = requests_random(config, &rng, n, 2, 40, 3, 30);
    ContiguousCache cache = contiguous_cache_create(config, n);
    size_t floats = (size_t)config->n_layers * n * config->n_kv_heads * config->max_seq_len * config->head_dim;
    for (size_t i = 0; i < floats; i++)
        cache.keys[i] = cache.values[i] = NAN;
    ServeStats stats;
    Comparison c = verify_served_vs_alone(model, &cache.base, n, batched, n, sampler, &(ServeOptions){0}, &stats);
    EXPECT(isfinite(c.max_rel_error) && c.bitwise, "a cache full of NaN: no logit ever saw an unwritten position");
    contiguous_cache_free(&cache);
    requests_free(batched, n);
}

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    const Sampler greedy = {0}, sampled = {.temperature = 0.8, .top_k = 40};
    batch_equals_alone(&model, 6, &sampled);
    batch_equals_alone(&model, 9, &greedy);
    never_reads_unwritten_positions(&model, &sampled);
    model_free(&model);
    return test_finish();
}
