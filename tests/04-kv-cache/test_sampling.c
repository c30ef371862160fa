/* Choosing tokens with the softmax chapter's sampler: greedy takes the
 * largest logit and the lowest index on a tie; top-k sampling never leaves
 * the k largest; the draws follow softmax(logits / temperature); and a
 * generation repeats for its seed and changes with another seed. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chapters/04-kv-cache/sampling.h"
#include "chapters/04-kv-cache/scheduler.h"
#include "chapters/04-kv-cache/uncached.h"
#include "common/testing.h"

enum { V = 7, DRAWS = 200000 };

static void greedy_and_top_k(void)
{
    const float logits[V] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY, 1.5f};
    EXPECT(sample_greedy(logits, V) == 1, "greedy: the largest logit, the lower index of a tie");
    const Sampler greedy = {0};
    EXPECT(sample_token(&greedy, logits, V, 1, 0) == 1 && sample_token(&greedy, logits, V, 2, 5) == 1,
           "temperature 0 is greedy, whatever the seed and draw");

    int top[3];
    const double values[V] = {0.5, 2.0, -1.0, 2.0, 1.0, -INFINITY, 1.5};
    top_k_indices(values, V, 3, top);
    EXPECT(top[0] == 1 && top[1] == 3 && top[2] == 6, "top 3: indices 1, 3 (tie, lower first), 6");

    /* Temperature 0.7 over the top 4: the frequencies of 200,000 draws must
     * match the softmax within 5 standard errors (sqrt(p(1-p)/n) < 0.0012). */
    const Sampler sampled = {.temperature = 0.7, .top_k = 4};
    const int allowed[4] = {1, 3, 6, 4};
    double expected[V] = {0}, total = 0;
    for (int i = 0; i < 4; i++)
        total += expected[allowed[i]] = exp(logits[allowed[i]] / 0.7);
    int counts[V] = {0};
    for (int n = 0; n < DRAWS; n++)
        counts[sample_token(&sampled, logits, V, 2, (uint32_t)n)]++;
    for (int i = 0; i < V; i++) {
        double p = expected[i] / total, frequency = (double)counts[i] / DRAWS;
        double tolerance = 5 * sqrt(p * (1 - p) / DRAWS);
        EXPECT(fabs(frequency - p) <= tolerance, "token %d: drawn %.4f of the time, softmax says %.4f", i, frequency,
               p);
    }
}

/* The tokens a generation of 40 new tokens draws with this seed. */
static void generate(const Model *model, const Sampler *sampler, uint64_t seed, int32_t *tokens)
{
    enum { PROMPT = 6, NEW = 40 };
    const int32_t prompt[PROMPT] = {3, 141, 59, 26, 53, 58};
    Request r = request_create(&model->config, prompt, PROMPT, NEW, seed);
    generate_uncached(model, &r, sampler);
    for (int i = 0; i < NEW; i++)
        tokens[i] = r.tokens[PROMPT + i];
    request_free(&r);
}

/* At temperature 1.5 over the whole vocabulary the model's next-token
 * distributions are far from peaked: two seeds drawing the same 40 tokens
 * would be a sampler that ignores its seed, not luck. */
static void generation_repeats_for_its_seed(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    const Sampler sampled = {.temperature = 1.5, .top_k = 0};
    int32_t first[40], again[40], other[40];
    generate(&model, &sampled, 7, first);
    generate(&model, &sampled, 7, again);
    generate(&model, &sampled, 8, other);
    int same_again = 0, same_other = 0;
    for (int i = 0; i < 40; i++) {
        same_again += first[i] == again[i];
        same_other += first[i] == other[i];
    }
    printf("seed 7 twice: %d of 40 tokens equal; seeds 7 and 8: %d of 40\n", same_again, same_other);
    EXPECT(same_again == 40, "seed 7 twice: only %d of 40 tokens equal", same_again);
    EXPECT(same_other < 20, "seeds 7 and 8: %d of 40 tokens equal", same_other);
    model_free(&model);
}

/* A request for no new tokens is a program error (the first token is drawn
 * from the prefill's logits, which such a request has no room for): one
 * line and status 1, not a write past its arrays. */
static void create_a_request_for_nothing(void *ctx)
{
    (void)ctx;
    ModelConfig config = model_default_config();
    const int32_t prompt[1] = {3};
    Request r = request_create(&config, prompt, 1, 0, 1);
    request_free(&r);
}

static void a_request_must_generate(void)
{
    ChildResult child = test_run_child(create_a_request_for_nothing, NULL);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, "at least 1") != NULL,
           "a request for 0 new tokens: status %d (expected 1), stderr: %s", child.exit_status, child.err);
}

int main(void)
{
    /* First, before OpenMP starts threads: a child forked after them, built
     * with the sanitizers, has LeakSanitizer warn on its stderr that it
     * cannot suspend them. */
    a_request_must_generate();
    greedy_and_top_k();
    generation_repeats_for_its_seed();
    return test_finish();
}
