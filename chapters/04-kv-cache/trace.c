#include "chapters/04-kv-cache/trace.h"

#include <math.h>

#include "common/alloc.h"

int lognormal_length(Rng *rng, double median, double sigma, int lo, int hi)
{
    double length = round(median * exp(sigma * rng_normal(rng)));
    return length < lo ? lo : length > hi ? hi : (int)length;
}

static int uniform_int(Rng *rng, int lo, int hi)
{
    return lo + (int)rng_below(rng, (uint64_t)(hi - lo + 1));
}

static void random_tokens(Rng *rng, int32_t *tokens, int n, int vocab_size)
{
    for (int i = 0; i < n; i++)
        tokens[i] = (int32_t)rng_below(rng, (uint64_t)vocab_size);
}

Request *requests_random(const ModelConfig *config, Rng *rng, int n, int prompt_min, int prompt_max, int new_min,
                         int new_max)
{
    Request *requests = ALLOC_ARRAY(n, Request);
    int32_t *prompt = ALLOC_ARRAY(prompt_max, int32_t);
    for (int i = 0; i < n; i++) {
        int length = uniform_int(rng, prompt_min, prompt_max);
        random_tokens(rng, prompt, length, config->vocab_size);
        requests[i] = request_create(config, prompt, length, uniform_int(rng, new_min, new_max), rng_next_u64(rng));
    }
    array_free(prompt);
    return requests;
}

Request *requests_shared_prefixes(const ModelConfig *config, Rng *rng, int n, int n_system, int system_len,
                                  int question_median, int new_min, int new_max)
{
    int question_max = QUESTION_MAX_FACTOR * question_median;
    int32_t *system = ALLOC_ARRAY((size_t)n_system * system_len, int32_t);
    int32_t *prompt = ALLOC_ARRAY(system_len + question_max, int32_t);
    random_tokens(rng, system, n_system * system_len, config->vocab_size);
    Request *requests = ALLOC_ARRAY(n, Request);
    for (int i = 0; i < n; i++) {
        const int32_t *chosen = system + rng_below(rng, (uint64_t)n_system) * system_len;
        int question = lognormal_length(rng, question_median, 0.8, 1, question_max);
        for (int t = 0; t < system_len; t++)
            prompt[t] = chosen[t];
        random_tokens(rng, prompt + system_len, question, config->vocab_size);
        requests[i] = request_create(config, prompt, system_len + question, uniform_int(rng, new_min, new_max),
                                     rng_next_u64(rng));
    }
    array_free(prompt);
    array_free(system);
    return requests;
}

Request *requests_copy(const ModelConfig *config, const Request *requests, int n)
{
    Request *copies = ALLOC_ARRAY(n, Request);
    for (int i = 0; i < n; i++)
        copies[i] = request_create(config, requests[i].tokens, requests[i].prompt_len, requests[i].max_new,
                                   requests[i].sample_seed);
    return copies;
}

void requests_free(Request *requests, int n)
{
    for (int i = 0; i < n; i++)
        request_free(&requests[i]);
    array_free(requests);
}
