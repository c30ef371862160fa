#include "chapters/03-softmax-topk/sampling.h"

#include <math.h>

#include "chapters/03-softmax-topk/rejection.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/rng.h"

SamplingParams sampling_params_top_k(int top_k)
{
    SamplingParams params = {1.0, top_k, 1.0, 0.0};
    return params;
}

// ANCHOR: draw_by_gumbel_max
int sample_gumbel_max(const float *probs, int count, uint64_t seed, uint64_t row, uint32_t draw)
{
    int chosen = -1;
    double best = -INFINITY;
    for (int j = 0; j < count; j++) {
        double u = philox_uniform(seed, row, draw, 1u + (uint32_t)j);
        double score = log((double)probs[j]) - log(-log(u));
        if (score > best) {
            best = score;
            chosen = j;
        }
    }
    return chosen;
}
// ANCHOR_END: draw_by_gumbel_max

static int draw_place(DrawMethod method, const float *probs, int count, uint64_t seed, uint64_t row, uint32_t draw)
{
    if (method == DRAW_GUMBEL_MAX) {
        return sample_gumbel_max(probs, count, seed, row, draw);
    }
    return sample_inverse_cdf(probs, count, philox_uniform(seed, row, draw, 0));
}

/* Draws by rejection over the K candidates, all of them, as they lie:
 * the survivors are never computed for them (only for the file), so the
 * draws check sampling_survivors' cut. The place drawn always survives. */
static void draw_by_rejection(const float *candidate_logits, SamplingParams params, uint64_t seed, uint64_t row,
                              uint32_t first_draw, int samples, const int64_t *indices, int64_t *tokens)
{
    double *weights = ALLOC_ARRAY((size_t)params.top_k, double);
    RejectionCandidates c = {candidate_logits, params.top_k, weights, 0.0};
    bool drawable = rejection_weights(&c, params);
    for (int d = 0; d < samples; d++) {
        int place = drawable ? sample_by_rejection(&c, params, seed, row, first_draw + (uint32_t)d).place : -1;
        tokens[d] = place < 0 ? -1 : indices[place];
    }
    array_free(weights);
}

void sample_candidates(const float *candidate_logits, SamplingParams params, DrawMethod method, uint64_t seed,
                       uint64_t row_number, uint32_t first_draw, int samples, int64_t *tokens, float *probs,
                       int64_t *indices)
{
    /* Room to compute each weight once: on the stack for the K of a
     * decoder (an allocation would cost the step more than it saves at
     * small K), allocated beyond. */
    enum { WEIGHTS_ON_STACK = 256 };
    double stack_weights[WEIGHTS_ON_STACK];
    double *weights = params.top_k <= WEIGHTS_ON_STACK ? stack_weights : ALLOC_ARRAY((size_t)params.top_k, double);
    int count = sampling_survivors(candidate_logits, params, weights, probs);
    if (weights != stack_weights) {
        array_free(weights);
    }
    for (int j = count; j < params.top_k; j++) {
        indices[j] = -1;
    }
    if (method == DRAW_REJECTION) {
        draw_by_rejection(candidate_logits, params, seed, row_number, first_draw, samples, indices, tokens);
        return;
    }
    for (int d = 0; d < samples; d++) {
        int place = draw_place(method, probs, count, seed, row_number, first_draw + (uint32_t)d);
        tokens[d] = place < 0 ? -1 : indices[place];
    }
}

typedef struct {
    SamplingParams params;
    DrawMethod method;
    uint64_t seed;
    int samples;
    int64_t *tokens;
} RowSampler;

static void sample_found_row(void *ctx, size_t row_number, const float *candidate_logits, float *probs,
                             int64_t *indices)
{
    const RowSampler *s = ctx;
    sample_candidates(candidate_logits, s->params, s->method, s->seed, row_number, 0, s->samples,
                      s->tokens + row_number * (size_t)s->samples, probs, indices);
}

void sample_rows(StoredLogits logits, size_t rows, size_t vocab, SamplingParams params, DrawMethod method,
                 uint64_t seed, int samples, int threads, int64_t *tokens, float *probs, int64_t *indices)
{
    /* The one read of the logits: the top K of each row, at temperature 1,
     * whose order is that of every temperature; each row's draws follow
     * its top K on the same thread, from the K logits the pass holds. */
    RowSampler sampler = {params, method, seed, samples, tokens};
    softmax_topk_stored_rows_then(logits, rows, vocab, params.top_k, threads, probs, indices,
                                  (TopkRowConsumer){sample_found_row, &sampler});
}

int64_t sample_one_token(const float *logits, size_t vocab, SamplingParams params, DrawMethod method, uint64_t seed,
                         uint64_t row, uint32_t draw)
{
    size_t k = (size_t)params.top_k;
    float *probs = ALLOC_ARRAY(k, float), *candidate_logits = ALLOC_ARRAY(k, float);
    int64_t *indices = ALLOC_ARRAY(k, int64_t), token;
    RowScratch scratch = row_scratch_new(CPU_FUSED, vocab, params.top_k);
    softmax_topk_row(CPU_FUSED, logits, vocab, params.top_k, &scratch, probs, indices);
    for (size_t j = 0; j < k; j++) {
        candidate_logits[j] = logits[indices[j]];
    }
    sample_candidates(candidate_logits, params, method, seed, row, draw, 1, &token, probs, indices);
    row_scratch_free(&scratch);
    array_free(probs);
    array_free(candidate_logits);
    array_free(indices);
    return token;
}
