#include "chapters/03-softmax-topk/rejection_table.h"

#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/bench_cpu.h"
#include "chapters/03-softmax-topk/rejection.h"
#include "chapters/03-softmax-topk/sampling.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"
#include "common/bench.h"

enum { VOCAB = 128256, TOP_K = 64, ROWS = 4, TIMED_RUNS = 5 };

/* One case: ROWS rows of logits, top-p over their top K (K = VOCAB: the
 * whole row), one draw per row. */
typedef struct {
    const float *logits; /* [ROWS, VOCAB] */
    SamplingParams params;
    int64_t *tokens, *indices;
    float *probs;
    double *weights; /* VOCAB */
    long rounds;     /* the rejection sampler's, summed over its draws */
    uint32_t draw;   /* a new draw each time the case runs */
} RejectionCase;

/* Sort-based: the fused pass (for K = V it sorts the row), the survivors,
 * then one draw by inverse CDF. */
static void run_sorted(void *ctx)
{
    RejectionCase *c = ctx;
    sample_rows(float32_logits(c->logits), ROWS, VOCAB, c->params, DRAW_INVERSE_CDF, c->draw++, 1, 1, c->tokens,
                c->probs, c->indices);
}

/* Rejection over the candidates the fused pass collects: the pass, then
 * the rounds over the K candidates as they lie. */
static void run_rejection_on_top_k(void *ctx)
{
    RejectionCase *c = ctx;
    sample_rows(float32_logits(c->logits), ROWS, VOCAB, c->params, DRAW_REJECTION, c->draw++, 1, 1, c->tokens, c->probs,
                c->indices);
}

/* Rejection over the whole row, which it never sorts: the weights, then
 * the rounds, two passes over the row each. */
static void run_rejection_on_row(void *ctx)
{
    RejectionCase *c = ctx;
    for (size_t row = 0; row < ROWS; row++) {
        RejectionCandidates candidates = {c->logits + row * VOCAB, VOCAB, c->weights, 0.0};
        rejection_weights(&candidates, c->params);
        RejectionDraw d = sample_by_rejection(&candidates, c->params, c->draw, row, 0);
        c->tokens[row] = d.place;
        c->rounds += d.rounds;
    }
    c->draw++;
}

/* The expected rounds of the first row: its top K's weights in rank
 * order, from the double reference (temperature 1), and its survivors. */
static double expected_rounds(const float *row, SamplingParams params)
{
    int k = params.top_k;
    double *probs = ALLOC_ARRAY((size_t)k, double);
    int64_t *indices = ALLOC_ARRAY((size_t)k, int64_t);
    float *ranked = ALLOC_ARRAY((size_t)k, float), *survivor_probs = ALLOC_ARRAY((size_t)k, float);
    softmax_topk_reference(row, VOCAB, k, probs, indices);
    for (int j = 0; j < k; j++) {
        ranked[j] = row[indices[j]];
    }
    double expected = rejection_expected_rounds(probs, k, sampling_survivors(ranked, params, NULL, survivor_probs));
    array_free(probs);
    array_free(indices);
    array_free(ranked);
    array_free(survivor_probs);
    return expected;
}

/* Rounds per draw of the rejection sampler on the first row, over `draws`
 * draws. */
static double measured_rounds(const float *row, SamplingParams params, double *weights, int draws)
{
    float *candidate_logits = ALLOC_ARRAY((size_t)params.top_k, float),
          *probs = ALLOC_ARRAY((size_t)params.top_k, float);
    int64_t *indices = ALLOC_ARRAY((size_t)params.top_k, int64_t);
    RowScratch scratch = row_scratch_new(CPU_FUSED, VOCAB, params.top_k);
    softmax_topk_row(CPU_FUSED, row, VOCAB, params.top_k, &scratch, probs, indices);
    for (int j = 0; j < params.top_k; j++) {
        candidate_logits[j] = row[indices[j]];
    }
    /* The top K in rank order; the whole row as it lies. */
    RejectionCandidates c = {params.top_k == VOCAB ? row : candidate_logits, params.top_k, weights, 0.0};
    rejection_weights(&c, params);
    long rounds = 0;
    for (int d = 0; d < draws; d++) {
        rounds += sample_by_rejection(&c, params, 3, 0, (uint32_t)d).rounds;
    }
    row_scratch_free(&scratch);
    array_free(candidate_logits);
    array_free(probs);
    array_free(indices);
    return (double)rounds / draws;
}

static double microseconds_per_draw(void (*run)(void *), RejectionCase *c)
{
    return bench_run(run, c, 1, TIMED_RUNS).median / ROWS * 1e6;
}

static void add_row(Table *table, const float *logits, int k, double top_p, RejectionCase *c)
{
    c->params = sampling_params_top_k(k);
    c->params.top_p = top_p;
    bool whole_row = k == VOCAB;
    double predicted = expected_rounds(logits, c->params);
    double measured = measured_rounds(logits, c->params, c->weights, whole_row ? 2000 : 100000);
    table_cell(table, whole_row ? "the whole row" : "the top %d", k);
    table_cell(table, "%.2f", top_p);
    table_cell(table, "%.4f", predicted);
    table_cell(table, "%.4f", measured);
    table_cell(table, "%.4f", 1.0 - log(top_p));
    table_cell(table, "%.1f", microseconds_per_draw(run_sorted, c));
    table_cell(table, "%.1f", microseconds_per_draw(whole_row ? run_rejection_on_row : run_rejection_on_top_k, c));
}

void print_rejection_table(TableFormat format)
{
    float *logits = bench_logits_new((size_t)ROWS * VOCAB, 1);
    RejectionCase c = {logits,
                       sampling_params_top_k(TOP_K),
                       ALLOC_ARRAY(ROWS, int64_t),
                       ALLOC_ARRAY((size_t)ROWS * VOCAB, int64_t),
                       ALLOC_ARRAY((size_t)ROWS * VOCAB, float),
                       ALLOC_ARRAY(VOCAB, double),
                       0,
                       0};
    const char *headers[] = {"candidates",
                             "top-p",
                             "rounds per draw, predicted",
                             "measured",
                             "bound 1 + ln(1/p)",
                             "sort-based, µs per draw",
                             "rejection, µs per draw"};
    Table *table = TABLE_NEW(headers, "lrrrrrr");
    const double top_ps[] = {0.5, 0.9, 0.99};
    const int ks[] = {TOP_K, VOCAB};
    for (int t = 0; t < 2; t++) {
        for (int p = 0; p < 3; p++) {
            add_row(table, logits, ks[t], top_ps[p], &c);
        }
    }
    printf("V = %d, logits normal(0, 3), temperature 1, %d rows, one draw per row, on 1 thread. Sort-based: the "
           "fused pass (which, for the whole row, K = V, sorts it), the survivors, a draw; rejection over the top %d: "
           "the same pass, then the rounds; over the whole row: the weights (an exponential per logit), then the "
           "rounds.\n\n",
           VOCAB, ROWS, TOP_K);
    table_print(table, stdout, format);
    table_free(table);
    array_free(c.tokens);
    array_free(c.indices);
    array_free(c.probs);
    array_free(c.weights);
    array_free(logits);
}
