/* Stage 1's proof: at every step of a 64-token generation, the logits with a
 * cache equal the logits of recomputing the whole prefix, and the tokens are
 * the same, for grouped-query, multi-query and multi-head attention. */
#include <stdio.h>

#include "chapters/04-kv-cache/verify.h"
#include "common/testing.h"

/* The bound. The cache changes when keys and values are computed,
 * not how, so the error is expected to be 0; the bound would still admit a
 * different (e.g. blocked) summation order in one of the two paths. */
#define CACHED_RTOL 1e-5

static void check_model(const char *name, ModelConfig config, const Sampler *sampler)
{
    Model model = model_create(&config);
    Comparison c = verify_cached_vs_uncached(&model, 20, 64, sampler);
    printf("%s: %d steps, max relative error %.2e\n", name, c.logit_vectors, c.max_rel_error);
    EXPECT(c.logit_vectors == 64, "%s: every one of 64 steps compared", name);
    EXPECT(c.max_rel_error <= CACHED_RTOL, "%s: cached logits within 1e-5 of uncached (%.2e)", name, c.max_rel_error);
    EXPECT(c.tokens_equal, "%s: the same tokens with and without a cache", name);
    model_free(&model);
}

int main(void)
{
    const Sampler greedy = {0}, sampled = {.temperature = 1.0, .top_k = 50};
    ModelConfig config = model_default_config();
    check_model("GQA, greedy", config, &greedy);
    check_model("GQA, sampled", config, &sampled);
    ModelConfig mqa = config;
    mqa.n_kv_heads = 1;
    check_model("MQA", mqa, &greedy);
    ModelConfig mha = config;
    mha.n_heads = mha.n_kv_heads = 3;
    mha.head_dim = 12;
    mha.vocab_size = 257;
    check_model("MHA, head_dim 12, vocabulary 257", mha, &sampled);
    return test_finish();
}
