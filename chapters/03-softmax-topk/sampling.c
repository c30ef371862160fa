#include "chapters/03-softmax-topk/sampling.h"

#include <math.h>

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

/* Draws first_draw .. first_draw + samples - 1 of one row, stored in
 * `row`, whose top K indices (rank order) are in indices: probs and
 * indices become the survivors'. */
static void sample_row(StoredLogits row, SamplingParams params, DrawMethod method, uint64_t seed, uint64_t row_number,
                       uint32_t first_draw, int samples, float *candidate_logits, int64_t *tokens, float *probs,
                       int64_t *indices)
{
    int k = params.top_k;
    for (int j = 0; j < k; j++) {
        widen_logits(row, (size_t)indices[j], 1, &candidate_logits[j]);
    }
    int count = sampling_survivors(candidate_logits, params, probs);
    for (int j = count; j < k; j++) {
        indices[j] = -1;
    }
    for (int d = 0; d < samples; d++) {
        int place = draw_place(method, probs, count, seed, row_number, first_draw + (uint32_t)d);
        tokens[d] = place < 0 ? -1 : indices[place];
    }
}

void sample_rows(StoredLogits logits, size_t rows, size_t vocab, SamplingParams params, DrawMethod method,
                 uint64_t seed, int samples, int threads, int64_t *tokens, float *probs, int64_t *indices)
{
    size_t k = (size_t)params.top_k, row_bytes = vocab * logits_type_size(logits.type);
    /* The one read of the logits: the top K of each row, at temperature 1,
     * whose order is that of every temperature. */
    softmax_topk_stored_rows(logits, rows, vocab, params.top_k, threads, probs, indices);
#pragma omp parallel num_threads(threads)
    {
        float *candidate_logits = ALLOC_ARRAY(float, k);
#pragma omp for schedule(static)
        for (size_t row = 0; row < rows; row++) {
            StoredLogits this_row = {(const char *)logits.data + row * row_bytes, logits.type};
            sample_row(this_row, params, method, seed, row, 0, samples, candidate_logits,
                       tokens + row * (size_t)samples, probs + row * k, indices + row * k);
        }
        array_free(candidate_logits);
    }
}

int64_t sample_one_token(const float *logits, size_t vocab, SamplingParams params, DrawMethod method, uint64_t seed,
                         uint64_t row, uint32_t draw)
{
    size_t k = (size_t)params.top_k;
    float *probs = ALLOC_ARRAY(float, k), *candidate_logits = ALLOC_ARRAY(float, k);
    int64_t *indices = ALLOC_ARRAY(int64_t, k), token;
    RowScratch scratch = row_scratch_new(CPU_FUSED, vocab, params.top_k);
    softmax_topk_row(CPU_FUSED, logits, vocab, params.top_k, &scratch, probs, indices);
    sample_row(float32_logits(logits), params, method, seed, row, draw, 1, candidate_logits, &token, probs, indices);
    row_scratch_free(&scratch);
    array_free(probs);
    array_free(candidate_logits);
    array_free(indices);
    return token;
}
