/* Generation without a cache: every step runs the model over the whole
 * sequence so far, recomputing the keys and values of every earlier position.
 * The reference the cached versions are checked against. */
#ifndef CHAPTERS_04_KV_CACHE_UNCACHED_H
#define CHAPTERS_04_KV_CACHE_UNCACHED_H

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/sampling.h"
#include "chapters/04-kv-cache/scheduler.h"

/* Generate request->max_new tokens after its prompt, filling its tokens and logits. */
void generate_uncached(const Model *model, Request *request, const Sampler *sampler);

#endif
