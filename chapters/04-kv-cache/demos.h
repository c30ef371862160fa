/* The chapter's demonstrations: each runs the real code paths on a small,
 * seeded workload and prints what happened. Those that print claims with a
 * yes/NO verdict return true when every one holds. */
#ifndef CHAPTERS_04_KV_CACHE_DEMOS_H
#define CHAPTERS_04_KV_CACHE_DEMOS_H

#include <stdbool.h>
#include <stdio.h>

#include "chapters/04-kv-cache/model.h"
#include "chapters/04-kv-cache/sampling.h"
#include "common/table.h"

/* The longest sequence --verify and the demonstrations run, at this block size. */
int demo_positions_needed(int block_size);

/* One prompt, generated with a contiguous and with a paged cache. */
bool demo_generate(const Model *model, int prompt_len, int n_new, int block_size, const Sampler *sampler, FILE *out);

/* The equalities of verify.h, as one table. */
bool demo_verify(const Model *model, int block_size, FILE *out, TableFormat format);

/* Two continuations forked from one prompt whose last block is partly full:
 * alone, forked with copy-on-write, and forked writing the shared block in
 * place. The claim is copy-on-write's (each continuation as alone); the
 * rows written in place are what it shows, and a line says which part from
 * their runs alone. */
bool demo_copy_on_write(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format);

/* A trace whose prompts start with one of a few system prompts, served with
 * and without prefix caching from a pool small enough to evict. */
bool demo_prefix_caching(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format);

/* More requests than the pool holds at once, and one that never fits. */
/* Its prompts are at least 10 tokens and at most 3 blocks: the least
 * --block-size that allows both. */
int demo_preemption_least_block_size(void);
bool demo_preemption(const Model *model, int block_size, const Sampler *sampler, FILE *out, TableFormat format);

#endif
