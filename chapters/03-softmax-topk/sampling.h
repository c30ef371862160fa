/* From the top K to a sampled token: temperature, top-K, top-p and min-p,
 * in that order, then one draw from the candidates that survive.
 *
 * The steps need nothing but the logits of the K candidates: temperature
 * keeps the order of the logits, so the top K at temperature T are the top
 * K at 1, and the renormalised probabilities of the K are ratios of their
 * own exponentials. So sampling follows the fused pass (one read of the
 * logits) and reads K logits more.
 *
 * Hard inputs: a row with a NaN (ranked first) or only -inf has no
 * survivors, NaN probabilities and the token -1; +inf logits share the
 * probability equally, as in the softmax. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_SAMPLING_H
#define CHAPTERS_03_SOFTMAX_TOPK_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "chapters/03-softmax-topk/softmax_topk.h"
#include "kernels/softmax_topk_sample.h"

/* SamplingParams, sampling_survivors and sample_inverse_cdf: the steps,
 * shared with the GPU (kernels/softmax_topk_sample.h). */

/* Temperature 1, top-p 1, min-p 0: the top K, renormalised. */
SamplingParams sampling_params_top_k(int top_k);

/* The place that Gumbel-max picks: the largest log(p) + Gumbel noise, the
 * noise of place j from philox_uniform(seed, row, draw, 1 + j). -1 when
 * count is 0. */
int sample_gumbel_max(const float *probs, int count, uint64_t seed, uint64_t row, uint32_t draw);

/* DRAW_REJECTION: rejection sampling with a rising pivot over the K
 * candidates, sorting nothing (rejection.h); round r of draw d uses
 * philox_uniform(seed, row, d, r). */
typedef enum { DRAW_INVERSE_CDF = 1, DRAW_GUMBEL_MAX = 2, DRAW_REJECTION = 3 } DrawMethod;

/* The sampler after the top K, on one row: its K candidates' logits in rank
 * order (as the fused pass returns them) and their indices -> the
 * survivors' probs and indices (the places cut: 0 and -1), and draws
 * first_draw .. first_draw + samples - 1 into tokens. */
void sample_candidates(const float *candidate_logits, SamplingParams params, DrawMethod method, uint64_t seed,
                       uint64_t row, uint32_t first_draw, int samples, int64_t *tokens, float *probs, int64_t *indices);

/* Rows of logits [rows, vocab], stored in any type (softmax_topk.h: the
 * fused pass reads 16-bit logits as they are) -> tokens [rows, samples] (-1 for a row
 * without survivors), and the survivors' probs and indices [rows, top_k]
 * (the places cut: probability 0, index -1). Draw d of row r uses the
 * uniform philox_uniform(seed, r, d, 0) (inverse CDF), so the tokens do not
 * depend on the number of threads. Each row's draws follow its top K in
 * the fused pass, on the same thread (softmax_topk_stored_rows_then). */
void sample_rows(StoredLogits logits, size_t rows, size_t vocab, SamplingParams params, DrawMethod method,
                 uint64_t seed, int samples, int threads, int64_t *tokens, float *probs, int64_t *indices);

/* One token from one row of logits [vocab], drawn as sample_rows draws
 * draw `draw` of row `row`: the same uniforms, so the same token. -1 for a
 * row without survivors. A decoder that draws one token at a time passes
 * the token's position as `draw`, so that its tokens depend on the seed and
 * on nothing else (not on batching, not on preemption). */
int64_t sample_one_token(const float *logits, size_t vocab, SamplingParams params, DrawMethod method, uint64_t seed,
                         uint64_t row, uint32_t draw);

#endif
