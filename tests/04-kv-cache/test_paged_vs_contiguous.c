/* Decoding through the paged cache gives the same logits as the contiguous
 * cache, bit for bit, at several block sizes; every block comes back; and no
 * sequence reads a slot it did not write (the pool starts full of NaN). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/testing.h"

static void paged_equals_contiguous(const Model *model, int block_size, const Sampler *sampler)
{
    Comparison c = verify_paged_vs_contiguous(model, 6, block_size, sampler);
    printf("block %d: %d logit vectors, max relative error %.2e, %d blocks\n", block_size, c.logit_vectors,
           c.max_rel_error, c.events);
    /* Attention visits the positions in the same order and each score is the
     * same dot product, so the rounding is the same: equal to the bit. */
    EXPECT(c.bitwise, "block %d: paged logits bit-identical to contiguous", block_size);
    EXPECT(c.tokens_equal, "block %d: same tokens", block_size);
    EXPECT(c.blocks_returned, "block %d: every block back on the free list", block_size);
}

static void never_reads_unwritten_slots(const Model *model, int block_size, const Sampler *sampler)
{
    const ModelConfig *config = &model->config;
    const int n = 4;
    Rng rng;
    rng_seed(&rng, 4);
    Request *paged_requests = requests_random(config, &rng, n, 1, 45, 2, 33);
    int blocks = 0;
    for (int i = 0; i < n; i++)
        blocks += paged_kv_blocks_for(paged_requests[i].prompt_len + paged_requests[i].max_new, block_size);
    PagedCache cache = paged_cache_create(config, n, blocks, block_size, false);
    /* All bits set is a NaN float. */
    memset(cache.keys, 0xff, config->n_layers * cache.key_layer_bytes);
    memset(cache.values, 0xff, config->n_layers * cache.value_layer_bytes);
    ServeStats stats;
    Comparison c =
        verify_served_vs_alone(model, &cache.base, n, paged_requests, n, sampler, &(ServeOptions){0}, &stats);
    EXPECT(isfinite(c.max_rel_error) && c.bitwise, "block %d, a pool full of NaN: no logit ever saw an unwritten slot",
           block_size);
    paged_cache_free(&cache);
    requests_free(paged_requests, n);
}

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    const int block_sizes[] = {1, 7, 16, 64};
    for (int i = 0; i < 4; i++) {
        paged_equals_contiguous(&model, block_sizes[i], &sampled);
        never_reads_unwritten_slots(&model, block_sizes[i], &sampled);
    }
    model_free(&model);
    return test_finish();
}
