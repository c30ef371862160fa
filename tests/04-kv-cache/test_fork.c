/* Fork with copy-on-write: four samples of one prompt and a beam search of
 * width four share the prompt's blocks, each continuation equals the same
 * continuation run alone, and every block comes back. Also: without the copy,
 * a write into the shared block does corrupt a sibling (the chapter's
 * demonstration shows something real), and running out of blocks mid-way
 * gives every block back. */
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/fork_decode.h"
#include "chapters/04-kv-cache/trace.h"
#include "chapters/04-kv-cache/verify.h"
#include "common/alloc.h"
#include "common/testing.h"

static void parallel_sampling(const Model *model, int block_size)
{
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    const int n = 4, prompt_len = 37;
    Comparison c = verify_parallel_sampling(model, prompt_len, n, 20, block_size, &sampled);
    printf("parallel sampling, block %d: %d vectors, %d copies\n", block_size, c.logit_vectors, c.events);
    EXPECT(c.bitwise && c.tokens_equal, "block %d: every forked sample equals it alone", block_size);
    EXPECT(c.blocks_returned, "block %d: every block back after parallel sampling", block_size);
    /* The prompt's partial last block is shared by all n; each of the first
     * n - 1 to write copies it, the last finds itself the only user. */
    int expected = prompt_len % block_size != 0 ? n - 1 : 0;
    EXPECT(c.events == expected, "block %d: %d copies-on-write, expected %d", block_size, c.events, expected);
}

static void beam_search_beams_equal_alone(const Model *model, int block_size)
{
    Comparison c = verify_beam_search(model, 37, 4, 12, block_size);
    printf("beam search, block %d: %d vectors, %d copies\n", block_size, c.logit_vectors, c.events);
    EXPECT(c.tokens_equal, "block %d: beam search had the blocks it needed", block_size);
    EXPECT(c.logit_vectors == 4 * 12 && c.bitwise, "block %d: every beam's every step equals it alone", block_size);
    EXPECT(c.blocks_returned, "block %d: every block back after beam search", block_size);
    EXPECT(c.events > 0, "block %d: beams wrote into shared blocks and copied them", block_size);
}

static void beams_are_distinct_and_best_first(const Model *model)
{
    const int width = 4, steps = 10;
    Rng rng;
    rng_seed(&rng, 8);
    Request *source = requests_random(&model->config, &rng, 1, 21, 21, 1, 1);
    PagedCache cache = paged_cache_create(&model->config, 2 * width, 64, 8, false);
    Beam beams[4];
    for (int j = 0; j < width; j++)
        beams[j] = beam_create(&model->config, steps);
    EXPECT(beam_search(model, &cache, source->tokens, 21, width, steps, beams), "beam search ran");
    for (int j = 1; j < width; j++) {
        EXPECT(beams[j - 1].log_prob >= beams[j].log_prob, "beam %d is no better than beam %d", j, j - 1);
        for (int i = 0; i < j; i++)
            EXPECT(memcmp(beams[i].tokens, beams[j].tokens, sizeof(int32_t) * steps) != 0, "beams %d and %d differ", i,
                   j);
    }
    for (int j = 0; j < width; j++)
        beam_free(&beams[j]);
    paged_cache_free(&cache);
    requests_free(source, 1);
}

/* The demonstration's claim: writing the shared block in place corrupts the
 * sibling that wrote first, while copy-on-write keeps both intact. */
static void writing_in_place_corrupts_a_sibling(const Model *model)
{
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    const int n = 2, prompt_len = 40, block_size = 16, n_new = 12;
    Rng rng;
    rng_seed(&rng, 9);
    Request *first = requests_random(&model->config, &rng, 1, prompt_len, prompt_len, n_new, n_new);
    for (int copy_on_write = 0; copy_on_write < 2; copy_on_write++) {
        Request forked[2], alone[2];
        for (int i = 0; i < n; i++) {
            forked[i] = request_create(&model->config, first->tokens, prompt_len, n_new, 100 + i);
            alone[i] = request_create(&model->config, first->tokens, prompt_len, n_new, 100 + i);
        }
        PagedCache cache = paged_cache_create(&model->config, n, 8, block_size, false);
        cache.pool.copy_on_write = copy_on_write;
        sample_parallel(model, &cache, forked, n, &sampled);
        serve_each_alone(model, alone, n, &sampled);
        Comparison first_sibling = comparison_new(), last_sibling = comparison_new();
        compare_requests(&first_sibling, &forked[0], &alone[0], model->config.vocab_size);
        compare_requests(&last_sibling, &forked[1], &alone[1], model->config.vocab_size);
        if (copy_on_write)
            EXPECT(first_sibling.bitwise && last_sibling.bitwise, "with copy-on-write both are intact");
        else
            EXPECT(!first_sibling.bitwise && first_sibling.max_rel_error > 1e-3,
                   "written in place: the first sibling reads the second's keys (error %.2e)",
                   first_sibling.max_rel_error);
        EXPECT(block_pool_unused(&cache.pool), "every block back (copy-on-write %d)", copy_on_write);
        paged_cache_free(&cache);
        for (int i = 0; i < n; i++) {
            request_free(&forked[i]);
            request_free(&alone[i]);
        }
    }
    requests_free(first, 1);
}

static void running_out_gives_every_block_back(const Model *model)
{
    const Sampler sampled = {.temperature = 0.8, .top_k = 40};
    const int n = 4, prompt_len = 40, n_new = 30;
    Rng rng;
    rng_seed(&rng, 10);
    Request *first = requests_random(&model->config, &rng, 1, prompt_len, prompt_len, n_new, n_new);
    Request *forked = ALLOC_ARRAY(n, Request);
    for (int i = 0; i < n; i++)
        forked[i] = request_create(&model->config, first->tokens, prompt_len, n_new, i);
    /* 3 prompt blocks and one copy for each of 4 samples need 6; growth needs more. */
    PagedCache cache = paged_cache_create(&model->config, n, 7, 16, false);
    EXPECT(!sample_parallel(model, &cache, forked, n, &sampled), "7 blocks are too few");
    EXPECT(block_pool_unused(&cache.pool), "after running out, every block is back");
    paged_cache_free(&cache);
    requests_free(forked, n);
    requests_free(first, 1);
}

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    const int block_sizes[] = {16, 5, 37};
    for (int i = 0; i < 3; i++) {
        parallel_sampling(&model, block_sizes[i]);
        beam_search_beams_equal_alone(&model, block_sizes[i]);
    }
    beams_are_distinct_and_best_first(&model);
    writing_in_place_corrupts_a_sibling(&model);
    running_out_gives_every_block_back(&model);
    model_free(&model);
    return test_finish();
}
