/* Running out of blocks: the scheduler preempts the newest request, frees its
 * blocks and recomputes it later, and every request still produces what it
 * produces alone; a request that could never fit is refused with a reason,
 * and the others are not disturbed. */
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/contiguous_cache.h"
#include "chapters/04-kv-cache/paged_cache.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/alloc.h"
#include "common/testing.h"

static void preempted_equals_alone(const Model *model, int block_size)
{
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    Comparison c = verify_preemption(model, 6, block_size, &sampled);
    printf("block %d: %d preemptions, %d vectors, max relative error %.2e\n", block_size, c.events, c.logit_vectors,
           c.max_rel_error);
    EXPECT(c.events > 0, "block %d: the small pool forced preemptions", block_size);
    EXPECT(c.bitwise && c.tokens_equal, "block %d: preempted requests equal alone", block_size);
    EXPECT(c.blocks_returned, "block %d: every block back", block_size);
}

/* Serve three requests, the middle one too long for the cache; the other two
 * must finish and equal their runs alone. */
static void too_long_is_refused(const Model *model, KvCache *cache, int n_slots, int too_long, const char *what)
{
    const Sampler greedy = {0};
    const ModelConfig *config = &model->config;
    int32_t *prompt = ALLOC_ARRAY(too_long, int32_t);
    for (int i = 0; i < too_long; i++)
        prompt[i] = i % config->vocab_size;
    Request requests[3] = {
        request_create(config, prompt, 20, 10, 1),
        request_create(config, prompt, too_long, 1, 2),
        request_create(config, prompt + 7, 30, 12, 3),
    };
    Request *alone = requests_copy(config, requests, 3);
    ServeStats stats = serve(model, cache, n_slots, requests, 3, &greedy, &(ServeOptions){0});
    printf("%s: refused with \"%s\"\n", what, requests[1].refusal);
    EXPECT(stats.refused == 1 && requests[1].state == REQUEST_REFUSED, "%s: the long request is refused", what);
    EXPECT(strstr(requests[1].refusal, "positions") != NULL, "%s: the refusal says why", what);
    Comparison c = comparison_new();
    serve_each_alone(model, &alone[0], 1, &greedy);
    serve_each_alone(model, &alone[2], 1, &greedy);
    compare_requests(&c, &requests[0], &alone[0], config->vocab_size);
    compare_requests(&c, &requests[2], &alone[2], config->vocab_size);
    EXPECT(c.bitwise && c.tokens_equal, "%s: the other requests are untouched", what);
    for (int i = 0; i < 3; i++)
        request_free(&requests[i]);
    requests_free(alone, 3);
    array_free(prompt);
}

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    preempted_equals_alone(&model, 16);
    preempted_equals_alone(&model, 8);

    PagedCache paged = paged_cache_create(&config, 3, 10, 16, false);
    too_long_is_refused(&model, &paged.base, 3, 10 * 16 + 1, "paged, 10 blocks of 16");
    EXPECT(block_pool_unused(&paged.pool), "paged: every block back");
    paged_cache_free(&paged);
    model_free(&model);

    ModelConfig short_config = config;
    short_config.max_seq_len = 64;
    Model short_model = model_create(&short_config);
    ContiguousCache contiguous = contiguous_cache_create(&short_config, 2);
    too_long_is_refused(&short_model, &contiguous.base, 2, 65, "contiguous, 64 positions");
    contiguous_cache_free(&contiguous);
    model_free(&short_model);
    return test_finish();
}
