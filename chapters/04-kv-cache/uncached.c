#include "chapters/04-kv-cache/uncached.h"

#include "chapters/04-kv-cache/contiguous_cache.h"
#include "common/alloc.h"

// ANCHOR: recompute_everything_every_step
void generate_uncached(const Model *model, Request *r, const Sampler *sampler)
{
    int vocab = model->config.vocab_size;
    float *logits = ALLOC_ARRAY(vocab, float);
    while (r->n_generated < r->max_new) {
        int known = r->prompt_len + r->n_generated;
        /* Attention needs every position's keys and values within one pass;
         * they live in this scratch space and are thrown away after it. */
        ModelConfig this_step = model->config;
        this_step.max_seq_len = known;
        ContiguousCache scratch = contiguous_cache_create(&this_step, 1);
        SeqChunk everything = {.seq = 0, .start = 0, .count = known, .tokens = r->tokens};
        model_forward(model, &scratch.base, &everything, 1, logits);
        contiguous_cache_free(&scratch);
        draw_token(r, logits, vocab, sampler);
    }
    array_free(logits);
    r->state = REQUEST_FINISHED;
}
// ANCHOR_END: recompute_everything_every_step
