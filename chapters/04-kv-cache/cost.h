/* What a generation costs with and without a cache: floating-point
 * operations and memory traffic from a formula, and time measured. */
#ifndef CHAPTERS_04_KV_CACHE_COST_H
#define CHAPTERS_04_KV_CACHE_COST_H

#include <stdbool.h>
#include <stdio.h>

#include "chapters/04-kv-cache/model.h"
#include "common/table.h"

typedef struct {
    double forward_passes;
    double tokens_processed; /* rows of all forward passes */
    double flops;
    double bytes; /* weights, and keys and values read and written, once per pass */
} GenerationCost;

/* Predicted cost of prompt_len prompt tokens then n_new generated tokens. */
GenerationCost cost_cached(const ModelConfig *config, int prompt_len, int n_new);
GenerationCost cost_uncached(const ModelConfig *config, int prompt_len, int n_new);

/* Generate both ways, timing each, and print prediction and measurement;
 * then the predicted ratios at other lengths. True when both ways gave the
 * same tokens. */
bool cost_report(const Model *model, int prompt_len, int n_new, FILE *out, TableFormat format);

#endif
