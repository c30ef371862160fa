#include "chapters/04-kv-cache/sampling.h"

#include <stdbool.h>

#include "chapters/03-softmax-topk/sampling.h"
#include "common/cli.h"

int sample_greedy(const float *logits, int vocab_size)
{
    int best = 0;
    for (int i = 1; i < vocab_size; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

void top_k_indices(const double *values, int n, int k, int *top)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        /* Insertion into the sorted list top[0..count), which keeps k entries. */
        int at = count < k ? count++ : k;
        while (at > 0 && values[i] > values[top[at - 1]]) {
            if (at < k)
                top[at] = top[at - 1];
            at--;
        }
        if (at < k)
            top[at] = i;
    }
}

// ANCHOR: draw_with_the_softmax_chapters_sampler
int sample_token(const Sampler *sampler, const float *logits, int vocab_size, uint64_t seed, uint32_t draw)
{
    /* Greedy is the top 1 of the fused pass: its one candidate has
     * probability 1, whatever the uniform. */
    bool greedy = sampler->temperature == 0.0;
    int k = sampler->top_k > 0 && sampler->top_k < vocab_size ? sampler->top_k : vocab_size;
    SamplingParams params = sampling_params_top_k(greedy ? 1 : k);
    params.temperature = greedy ? 1.0 : sampler->temperature;
    int64_t token = sample_one_token(logits, (size_t)vocab_size, params, DRAW_INVERSE_CDF, seed, 0, draw);
    if (token < 0)
        cli_fail_status(1, "the model's logits hold a NaN: there is no token to draw");
    return (int)token;
}
// ANCHOR_END: draw_with_the_softmax_chapters_sampler
