/* The cost formulas: FLOPs and bytes of generation with and without a cache,
 * checked against a count made token by token from the model's shapes. */
#include <math.h>

#include "chapters/04-kv-cache/cost.h"
#include "common/testing.h"

typedef struct {
    double flops, bytes, tokens, passes;
} Count;

/* One forward pass, counted token by token: every token multiplies by every
 * weight matrix and attends to itself and everything before it. */
static void count_pass(const ModelConfig *c, int start, int count, Count *total)
{
    double q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    double weights_per_layer =
        c->dim * q + c->dim * kv + c->dim * kv + q * c->dim + c->dim * c->hidden_dim * 2.0 + c->hidden_dim * c->dim;
    double kv_bytes = 2.0 * c->n_layers * kv * 4;
    for (int t = start; t < start + count; t++) {
        total->flops += 2 * c->n_layers * weights_per_layer;
        for (int p = 0; p <= t; p++)
            total->flops += c->n_layers * c->n_heads * (2.0 * c->head_dim + 2.0 * c->head_dim);
    }
    total->flops += 2.0 * c->dim * c->vocab_size;
    double weights = c->n_layers * (weights_per_layer + 2.0 * c->dim) + c->dim + 2.0 * c->dim * c->vocab_size;
    total->bytes += 4 * weights + (start + count) * kv_bytes + count * kv_bytes;
    total->tokens += count;
    total->passes++;
}

static bool same(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fabs(b);
}

static void check(ModelConfig c, int prompt, int n_new)
{
    Count cached = {0}, uncached = {0};
    count_pass(&c, 0, prompt, &cached);
    for (int s = 1; s < n_new; s++)
        count_pass(&c, prompt + s - 1, 1, &cached);
    for (int s = 0; s < n_new; s++)
        count_pass(&c, 0, prompt + s, &uncached);
    GenerationCost with = cost_cached(&c, prompt, n_new), without = cost_uncached(&c, prompt, n_new);
    EXPECT(same(with.flops, cached.flops) && same(with.bytes, cached.bytes),
           "prompt %d + %d: cached FLOPs %.6g (count %.6g), bytes %.6g (count %.6g)", prompt, n_new, with.flops,
           cached.flops, with.bytes, cached.bytes);
    EXPECT(same(without.flops, uncached.flops) && same(without.bytes, uncached.bytes),
           "prompt %d + %d: uncached FLOPs %.6g (count %.6g)", prompt, n_new, without.flops, uncached.flops);
    EXPECT(with.tokens_processed == prompt + n_new - 1 && with.forward_passes == n_new,
           "with a cache, every token is run once");
    EXPECT(without.tokens_processed == (double)n_new * prompt + n_new * (n_new - 1.0) / 2,
           "without, step s runs prompt + s tokens");
}

int main(void)
{
    ModelConfig c = model_default_config();
    check(c, 1024, 100);
    check(c, 7, 1);
    c.n_kv_heads = 1;
    c.vocab_size = 1000;
    check(c, 33, 17);
    EXPECT(model_kv_bytes_per_token(&c) == 2.0 * c.n_layers * 1 * c.head_dim * 4,
           "bytes per position: keys and values of every layer and kv head");
    return test_finish();
}
