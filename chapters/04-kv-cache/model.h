/* A small decoder-only transformer with deterministic, seeded weights:
 * token embedding, pre-norm blocks (RMSNorm, attention with rotary position
 * embeddings and grouped-query attention, SwiGLU MLP, residuals), a final
 * norm and the logits. No downloads: the weights come from the seed.
 *
 * The forward pass takes new tokens of any number of sequences at once, each
 * continuing from the positions already in the cache. Prefill (many new
 * tokens), decode (one new token) and chunked prefill are the same call. */
#ifndef CHAPTERS_04_KV_CACHE_MODEL_H
#define CHAPTERS_04_KV_CACHE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chapters/04-kv-cache/cache.h"

// ANCHOR: define_model_shape
typedef struct {
    int vocab_size;
    int dim; /* width of the residual stream */
    int n_layers;
    int n_heads;     /* query heads */
    int n_kv_heads;  /* key/value heads: divides n_heads; 1 is multi-query attention */
    int head_dim;    /* even: rotary embeddings turn pairs of values */
    int hidden_dim;  /* width of the SwiGLU MLP */
    int max_seq_len; /* longest sequence (prompt and generated tokens) */
    uint64_t seed;   /* of the weights */
} ModelConfig;
// ANCHOR_END: define_model_shape

typedef struct {
    float *attn_norm;     /* [dim] */
    float *wq;            /* [dim][n_heads * head_dim]: y = x wq, rows are inputs */
    float *wk, *wv;       /* [dim][n_kv_heads * head_dim] */
    float *wo;            /* [n_heads * head_dim][dim] */
    float *mlp_norm;      /* [dim] */
    float *w_gate, *w_up; /* [dim][hidden_dim] */
    float *w_down;        /* [hidden_dim][dim] */
} LayerWeights;

typedef struct {
    ModelConfig config;
    float *token_embedding;     /* [vocab_size][dim] */
    LayerWeights *layers;       /* [n_layers] */
    float *final_norm;          /* [dim] */
    float *w_logits;            /* [dim][vocab_size] */
    float *rope_cos, *rope_sin; /* [max_seq_len][head_dim / 2] */
} Model;

/* The small model every demonstration and test uses unless told otherwise. */
ModelConfig model_default_config(void);

/* Is the shape usable? On false, one line saying why goes into err. */
bool model_config_check(const ModelConfig *config, char *err, size_t err_size);

/* Weights drawn from config->seed (config must pass model_config_check). */
Model model_create(const ModelConfig *config);
void model_free(Model *model);

/* Give the keys outlier channels, as trained models have: multiply the
 * columns of every layer's wk that make the last `pairs` rotary pairs of each
 * kv head (the slowest-turning ones) by `gain`. */
void model_add_key_outliers(Model *model, int pairs, float gain);

/* FLOPs (two per multiply-add) of the weight matrices for one token (the
 * logits excluded), and of the logits of one token. */
double model_matmul_flops_per_token(const ModelConfig *config);
double model_logits_flops(const ModelConfig *config);
/* Bytes of one position's keys and values, all layers, in float32. */
double model_kv_bytes_per_token(const ModelConfig *config);
/* Bytes of all weights in float32. */
double model_weight_bytes(const ModelConfig *config);

// ANCHOR: define_sequence_chunk
/* New tokens of one sequence in a forward pass. */
typedef struct {
    int seq;               /* the sequence's slot in the cache */
    int start;             /* position of the first new token = positions already cached */
    int count;             /* new tokens (at least 1) */
    const int32_t *tokens; /* [count] */
} SeqChunk;
// ANCHOR_END: define_sequence_chunk

/* Run the model over the new tokens of n_chunks sequences (each sequence at
 * most once), writing their keys and values into the cache, and the logits of
 * each chunk's last token into logits[chunk][vocab_size]. The caller has
 * reserved room: cache->reserve(seq, start + count) succeeded. */
void model_forward(const Model *model, KvCache *cache, const SeqChunk *chunks, int n_chunks, float *logits);

#endif
