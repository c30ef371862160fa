#include "chapters/04-kv-cache/sampling.h"

#include <math.h>

#include "common/alloc.h"

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

int sample_token(const Sampler *sampler, const float *logits, int vocab_size, Rng *rng)
{
    if (sampler->temperature == 0.0)
        return sample_greedy(logits, vocab_size);
    int k = sampler->top_k > 0 && sampler->top_k < vocab_size ? sampler->top_k : vocab_size;
    double *weight = ALLOC_ARRAY(double, vocab_size);
    int *top = ALLOC_ARRAY(int, k);
    for (int i = 0; i < vocab_size; i++)
        weight[i] = logits[i] / sampler->temperature;
    top_k_indices(weight, vocab_size, k, top);
    double largest = weight[top[0]], total = 0.0;
    for (int i = 0; i < k; i++)
        total += exp(weight[top[i]] - largest);
    double u = rng_uniform(rng) * total;
    int chosen = top[k - 1];
    for (int i = 0; i < k; i++) {
        double w = exp(weight[top[i]] - largest);
        if (u < w) {
            chosen = top[i];
            break;
        }
        u -= w;
    }
    array_free(top);
    array_free(weight);
    return chosen;
}
