/* The memory of real models' KV caches, from their published shapes: bytes
 * per token in fp16, FP8, INT8 and INT4, one sequence at the longest context,
 * how many tokens fit beside the weights on common cards, the largest batch
 * at a given context on an H200, and the
 * arithmetic intensity of decode attention against an H200's ridge point. */
#ifndef CHAPTERS_04_KV_CACHE_MEMORY_H
#define CHAPTERS_04_KV_CACHE_MEMORY_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"
#include "kernels/kv_quant.h"

typedef struct {
    const char *name;
    int layers, n_heads, n_kv_heads, head_dim;
    int max_context;   /* tokens */
    double parameters; /* all of them, as published */
} ModelSpec;

extern const ModelSpec REAL_MODELS[];
extern const int REAL_MODEL_COUNT;

/* Bytes of one token's keys and values in every layer, scales included
 * (INT8 one fp16 scale per kv head, INT4 one per 32 channels). */
double kv_bytes_per_token(const ModelSpec *model, KvFormat format);

/* Tokens of cache that fit beside the fp16 weights on a card of `card_gib`
 * GiB of which `utilisation` may be used; 0 when the weights alone do not fit. */
double tokens_that_fit(const ModelSpec *model, KvFormat format, double card_gib, double utilisation);

/* Sequences of `context` tokens that fit together in the room of
 * tokens_that_fit, each holding whole blocks of 16 positions. */
double largest_batch(const ModelSpec *model, KvFormat format, double card_gib, double utilisation, int context);

/* FLOPs of decode attention per byte of cache it reads. */
double decode_attention_intensity(const ModelSpec *model, KvFormat format);

/* The H200 figures the ridge point comes from (NVIDIA's specification, SXM). */
#define H200_BF16_DENSE_FLOPS 989e12
#define H200_HBM_BYTES_PER_S 4.8e12
#define MEMORY_UTILISATION 0.9
/* The card of the batch table: an H200's 141 GB, taken as GiB as the others. */
#define H200_GIB 141.0
/* The context of the batch table unless `kv_cache memory --context` says otherwise. */
#define MEMORY_DEFAULT_CONTEXT 8192

/* The card the prose measures one long sequence against. */
#define LONG_CONTEXT_CARD_GIB 40.0

/* The pair the prose compares for grouped-query attention: within a family
 * (the name up to its last '-'), the larger model with the smaller cache per
 * token, the pair with the largest ratio of cache; -1, -1 if there is none. */
typedef struct {
    int larger, smaller; /* indices into REAL_MODELS */
} GqaPair;
GqaPair memory_gqa_pair(void);

/* Does one sequence at the model's longest context, in fp16, hold at least
 * as much cache as a card of LONG_CONTEXT_CARD_GIB has memory? */
bool memory_sequence_fills_a_card(const ModelSpec *model);

/* The book's tables: the models the prose discusses and the columns it uses,
 * the cells its claims are about in bold (Markdown); `all`: every model and
 * every column, and the tokens that fit on each card in every format. */
void memory_report(FILE *out, TableFormat format, int context, bool all);

/* The tokens that fit beside the weights on the figure's cards, in fp16, FP8
 * and INT4, as gnuplot data: one block per card, NaN where the weights alone
 * do not fit. */
void memory_tokens_figure_data(FILE *out);

#endif
