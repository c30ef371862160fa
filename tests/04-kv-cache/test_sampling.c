/* Choosing tokens: greedy takes the largest logit and the lowest index on a
 * tie; top-k sampling never leaves the k largest; with a seed, a draw repeats;
 * and the draws follow softmax(logits / temperature). */
#include <math.h>
#include <stdbool.h>

#include "chapters/04-kv-cache/sampling.h"
#include "common/testing.h"

enum { V = 7, DRAWS = 200000 };

int main(void)
{
    const float logits[V] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY, 1.5f};
    EXPECT(sample_greedy(logits, V) == 1, "greedy: the largest logit, the lower index of a tie");
    const Sampler greedy = {0};
    Rng rng;
    rng_seed(&rng, 1);
    EXPECT(sample_token(&greedy, logits, V, &rng) == 1, "temperature 0 is greedy");

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
    rng_seed(&rng, 2);
    for (int n = 0; n < DRAWS; n++)
        counts[sample_token(&sampled, logits, V, &rng)]++;
    for (int i = 0; i < V; i++) {
        double p = expected[i] / total, frequency = (double)counts[i] / DRAWS;
        double tolerance = 5 * sqrt(p * (1 - p) / DRAWS);
        EXPECT(fabs(frequency - p) <= tolerance, "token %d: drawn %.4f of the time, softmax says %.4f", i, frequency,
               p);
    }

    Rng a, b;
    rng_seed(&a, 99);
    rng_seed(&b, 99);
    bool same = true;
    for (int n = 0; n < 1000; n++)
        same = same && sample_token(&sampled, logits, V, &a) == sample_token(&sampled, logits, V, &b);
    EXPECT(same, "the same seed draws the same tokens");
    return test_finish();
}
