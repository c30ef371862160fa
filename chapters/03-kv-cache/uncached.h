/* Generation without a cache: every step runs the model over the whole
 * sequence so far, recomputing the keys and values of every earlier position.
 * The reference the cached versions are checked against. */
#ifndef KV_CACHE_UNCACHED_H
#define KV_CACHE_UNCACHED_H

#include "model.h"
#include "sampling.h"
#include "scheduler.h"

/* Generate request->max_new tokens after its prompt, filling its tokens and logits. */
void generate_uncached(const Model *model, Request *request, const Sampler *sampler);

#endif
