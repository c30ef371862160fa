/* Prefilling in chunks of C tokens, for C that do and do not divide the
 * prompt, leaves the same keys and values in the cache and gives the same
 * logits as prefilling at once, and so does a generation served that way. */
#include <stdio.h>

#include "chapters/04-kv-cache/verify.h"
#include "common/testing.h"

/* The bound. Every token's row is computed by the same operations in
 * either case, so the error is expected to be 0. */
#define CHUNKED_RTOL 1e-6

int main(void)
{
    ModelConfig config = model_default_config();
    Model model = model_create(&config);
    const int prompt_len = 100, chunks[] = {1, 3, 7, 13, 48, 99, 100, 150};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        Comparison c = verify_chunked_prefill(&model, prompt_len, chunks[i]);
        printf("chunks of %d: max relative error %.2e over %d vectors\n", chunks[i], c.max_rel_error, c.logit_vectors);
        /* Keys, values and last logits after prefill, then 8 generated tokens. */
        EXPECT(c.logit_vectors == 3 + 8, "chunks of %d: cache, logits and 8 steps compared", chunks[i]);
        EXPECT(c.max_rel_error <= CHUNKED_RTOL, "chunks of %d: within 1e-6 of one-shot prefill", chunks[i]);
        EXPECT(c.tokens_equal, "chunks of %d: same tokens", chunks[i]);
    }
    model_free(&model);
    return test_finish();
}
