#include "chapters/04-kv-cache/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/rmsnorm.h"
#include "common/alloc.h"
#include "common/rng.h"

#define ROPE_THETA 10000.0
#define NORM_EPSILON 1e-5f

ModelConfig model_default_config(void)
{
    return (ModelConfig){
        .vocab_size = 300,
        .dim = 72,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = 2,
        .head_dim = 16,
        .hidden_dim = 184,
        .max_seq_len = 2048,
        .seed = 1,
    };
}

bool model_config_check(const ModelConfig *c, char *err, size_t err_size)
{
    if (c->n_heads % c->n_kv_heads != 0)
        snprintf(err, err_size, "--heads (%d) must be a multiple of --kv-heads (%d)", c->n_heads, c->n_kv_heads);
    else if (c->head_dim % 2 != 0)
        snprintf(err, err_size, "--head-dim must be even for rotary embeddings, got %d", c->head_dim);
    else
        return true;
    return false;
}

static float *normal_weights(Rng *rng, size_t count, double stddev)
{
    float *w = ALLOC_ARRAY(count, float);
    rng_fill_normal_f32(rng, w, count, 0.0, stddev);
    return w;
}

/* A matrix [fan_in][fan_out] scaled so that outputs have about the variance of inputs. */
static float *projection(Rng *rng, int fan_in, int fan_out)
{
    return normal_weights(rng, (size_t)fan_in * fan_out, 1.0 / sqrt(fan_in));
}

static float *norm_gain(Rng *rng, int dim)
{
    float *g = ALLOC_ARRAY(dim, float);
    rng_fill_normal_f32(rng, g, dim, 1.0, 0.1);
    return g;
}

/* cos and sin of position * theta^(-2i/head_dim) for every position and pair i,
 * computed in double once, so every forward pass rotates by the same floats. */
static void make_rope_tables(Model *m)
{
    int pairs = m->config.head_dim / 2, positions = m->config.max_seq_len;
    m->rope_cos = ALLOC_ARRAY((size_t)positions * pairs, float);
    m->rope_sin = ALLOC_ARRAY((size_t)positions * pairs, float);
    for (int p = 0; p < positions; p++)
        for (int i = 0; i < pairs; i++) {
            double angle = p * pow(ROPE_THETA, -2.0 * i / m->config.head_dim);
            m->rope_cos[(size_t)p * pairs + i] = (float)cos(angle);
            m->rope_sin[(size_t)p * pairs + i] = (float)sin(angle);
        }
}

Model model_create(const ModelConfig *config)
{
    const ModelConfig c = *config;
    Model m = {.config = c};
    Rng rng;
    rng_seed(&rng, c.seed);
    int q_width = c.n_heads * c.head_dim, kv_width = c.n_kv_heads * c.head_dim;
    m.token_embedding = normal_weights(&rng, (size_t)c.vocab_size * c.dim, 1.0);
    m.layers = ALLOC_ARRAY(c.n_layers, LayerWeights);
    for (int l = 0; l < c.n_layers; l++) {
        LayerWeights *w = &m.layers[l];
        w->attn_norm = norm_gain(&rng, c.dim);
        w->wq = projection(&rng, c.dim, q_width);
        w->wk = projection(&rng, c.dim, kv_width);
        w->wv = projection(&rng, c.dim, kv_width);
        w->wo = projection(&rng, q_width, c.dim);
        w->mlp_norm = norm_gain(&rng, c.dim);
        w->w_gate = projection(&rng, c.dim, c.hidden_dim);
        w->w_up = projection(&rng, c.dim, c.hidden_dim);
        w->w_down = projection(&rng, c.hidden_dim, c.dim);
    }
    m.final_norm = norm_gain(&rng, c.dim);
    m.w_logits = projection(&rng, c.dim, c.vocab_size);
    make_rope_tables(&m);
    return m;
}

void model_free(Model *m)
{
    for (int l = 0; l < m->config.n_layers; l++) {
        LayerWeights *w = &m->layers[l];
        float *arrays[] = {w->attn_norm, w->wq, w->wk, w->wv, w->wo, w->mlp_norm, w->w_gate, w->w_up, w->w_down};
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
            array_free(arrays[i]);
    }
    array_free(m->layers);
    array_free(m->token_embedding);
    array_free(m->final_norm);
    array_free(m->w_logits);
    array_free(m->rope_cos);
    array_free(m->rope_sin);
    *m = (Model){0};
}

// ANCHOR: give_keys_outlier_channels
void model_add_key_outliers(Model *m, int pairs, float gain)
{
    const ModelConfig *c = &m->config;
    int kv_width = c->n_kv_heads * c->head_dim;
    for (int l = 0; l < c->n_layers; l++)
        for (int input = 0; input < c->dim; input++)
            for (int h = 0; h < c->n_kv_heads; h++)
                for (int channel = c->head_dim - 2 * pairs; channel < c->head_dim; channel++)
                    m->layers[l].wk[(size_t)input * kv_width + h * c->head_dim + channel] *= gain;
}
// ANCHOR_END: give_keys_outlier_channels

double model_matmul_flops_per_token(const ModelConfig *c)
{
    double q_width = (double)c->n_heads * c->head_dim, kv_width = (double)c->n_kv_heads * c->head_dim;
    double per_layer = c->dim * q_width + 2 * c->dim * kv_width + q_width * c->dim + 3.0 * c->dim * c->hidden_dim;
    return 2.0 * c->n_layers * per_layer;
}

double model_logits_flops(const ModelConfig *c)
{
    return 2.0 * c->dim * c->vocab_size;
}

double model_kv_bytes_per_token(const ModelConfig *c)
{
    return 2.0 * c->n_layers * c->n_kv_heads * c->head_dim * sizeof(float);
}

double model_weight_bytes(const ModelConfig *c)
{
    double matrices = model_matmul_flops_per_token(c) / 2 + model_logits_flops(c) / 2;
    double vectors = (2.0 * c->n_layers + 1) * c->dim;
    return (matrices + vectors + (double)c->vocab_size * c->dim) * sizeof(float);
}

/* y[r] = x[r] W for each of `rows` rows; W is [in][out]. Each output is summed
 * over the inputs in order, the same order for one row or for a thousand, so a
 * token's result does not depend on what else is in the batch. */
static void matmul(const float *x, const float *w, float *y, int rows, int in, int out)
{
    for (int r = 0; r < rows; r++) {
        float *y_row = y + (size_t)r * out;
        const float *x_row = x + (size_t)r * in;
        memset(y_row, 0, sizeof(float) * out);
        for (int i = 0; i < in; i++) {
            float xi = x_row[i];
            const float *w_row = w + (size_t)i * out;
            for (int o = 0; o < out; o++)
                y_row[o] += xi * w_row[o];
        }
    }
}

/* RMSNorm is chapter 2's: the same function that chapter derives, checks
 * against its double reference and measures (rmsnorm_forward_f32). The
 * decoder needs y only; rstd, what a backward pass would keep, goes to
 * scratch. */
static void rmsnorm_rows(const float *x, const float *gain, float *y, float *rstd, int rows, int dim)
{
    rmsnorm_forward_f32(y, rstd, x, gain, (size_t)rows, (size_t)dim, NORM_EPSILON);
}

/* Rotate each pair (v[2i], v[2i+1]) of every head by its position's angle. */
static void rope_rows(const Model *m, float *v, const int *positions, int rows, int heads)
{
    int head_dim = m->config.head_dim, pairs = head_dim / 2;
    for (int r = 0; r < rows; r++) {
        const float *cos_p = m->rope_cos + (size_t)positions[r] * pairs;
        const float *sin_p = m->rope_sin + (size_t)positions[r] * pairs;
        for (int h = 0; h < heads; h++) {
            float *x = v + ((size_t)r * heads + h) * head_dim;
            for (int i = 0; i < pairs; i++) {
                float x0 = x[2 * i], x1 = x[2 * i + 1];
                x[2 * i] = x0 * cos_p[i] - x1 * sin_p[i];
                x[2 * i + 1] = x0 * sin_p[i] + x1 * cos_p[i];
            }
        }
    }
}

static void add_rows(float *x, const float *delta, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] += delta[i];
}

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* Where each row of the forward pass comes from. */
typedef struct {
    int rows;
    int *seq;      /* [rows] the row's sequence slot */
    int *position; /* [rows] the row's position in its sequence */
} RowMap;

static RowMap map_rows(const SeqChunk *chunks, int n_chunks)
{
    RowMap map = {0};
    for (int c = 0; c < n_chunks; c++)
        map.rows += chunks[c].count;
    map.seq = ALLOC_ARRAY(map.rows, int);
    map.position = ALLOC_ARRAY(map.rows, int);
    int r = 0;
    for (int c = 0; c < n_chunks; c++)
        for (int i = 0; i < chunks[c].count; i++, r++) {
            map.seq[r] = chunks[c].seq;
            map.position[r] = chunks[c].start + i;
        }
    return map;
}

// ANCHOR: store_then_attend_row_by_row
/* Row r sits at position p of its sequence: it stores its keys and values,
 * then attends to positions 0..p, which are in the cache by now. That bound
 * is the causal mask. Going row by row, each row reads the cache as it was
 * when its position was the newest, which matters for formats whose scales
 * span positions: there, storing a later key may change how an earlier one
 * reads back. */
static void store_and_attend_rows(KvCache *cache, const ModelConfig *c, int layer, const RowMap *map, const float *q,
                                  const float *k, const float *v, float *out)
{
    int group = c->n_heads / c->n_kv_heads, max_length = 0;
    for (int r = 0; r < map->rows; r++)
        if (map->position[r] + 1 > max_length)
            max_length = map->position[r] + 1;
    float *scores = ALLOC_ARRAY((size_t)group * max_length, float);
    for (int r = 0; r < map->rows; r++) {
        for (int h = 0; h < c->n_kv_heads; h++) {
            size_t at = ((size_t)r * c->n_kv_heads + h) * c->head_dim;
            cache->store(cache, map->seq[r], layer, h, map->position[r], k + at, v + at);
        }
        for (int h = 0; h < c->n_kv_heads; h++) {
            size_t at = ((size_t)r * c->n_heads + (size_t)h * group) * c->head_dim;
            cache->attend(cache, map->seq[r], layer, h, map->position[r] + 1, q + at, group, scores, out + at);
        }
    }
    array_free(scores);
}
// ANCHOR_END: store_then_attend_row_by_row

typedef struct {
    float *x, *xn, *rstd, *q, *k, *v, *attn, *proj, *gate, *up;
} Activations;

static Activations activations_alloc(const ModelConfig *c, int rows)
{
    size_t r = (size_t)rows;
    return (Activations){
        .x = ALLOC_ARRAY(r * c->dim, float),
        .xn = ALLOC_ARRAY(r * c->dim, float),
        .rstd = ALLOC_ARRAY(r, float),
        .q = ALLOC_ARRAY(r * c->n_heads * c->head_dim, float),
        .k = ALLOC_ARRAY(r * c->n_kv_heads * c->head_dim, float),
        .v = ALLOC_ARRAY(r * c->n_kv_heads * c->head_dim, float),
        .attn = ALLOC_ARRAY(r * c->n_heads * c->head_dim, float),
        .proj = ALLOC_ARRAY(r * c->dim, float),
        .gate = ALLOC_ARRAY(r * c->hidden_dim, float),
        .up = ALLOC_ARRAY(r * c->hidden_dim, float),
    };
}

static void activations_free(Activations *a)
{
    float *arrays[] = {a->x, a->xn, a->rstd, a->q, a->k, a->v, a->attn, a->proj, a->gate, a->up};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        array_free(arrays[i]);
}

// ANCHOR: run_one_transformer_block
static void transformer_block(const Model *m, KvCache *cache, int layer, const RowMap *map, Activations *a)
{
    const ModelConfig *c = &m->config;
    const LayerWeights *w = &m->layers[layer];
    int rows = map->rows, q_width = c->n_heads * c->head_dim, kv_width = c->n_kv_heads * c->head_dim;

    rmsnorm_rows(a->x, w->attn_norm, a->xn, a->rstd, rows, c->dim);
    matmul(a->xn, w->wq, a->q, rows, c->dim, q_width);
    matmul(a->xn, w->wk, a->k, rows, c->dim, kv_width);
    matmul(a->xn, w->wv, a->v, rows, c->dim, kv_width);
    rope_rows(m, a->q, map->position, rows, c->n_heads);
    rope_rows(m, a->k, map->position, rows, c->n_kv_heads);
    store_and_attend_rows(cache, c, layer, map, a->q, a->k, a->v, a->attn);
    matmul(a->attn, w->wo, a->proj, rows, q_width, c->dim);
    add_rows(a->x, a->proj, (size_t)rows * c->dim);

    rmsnorm_rows(a->x, w->mlp_norm, a->xn, a->rstd, rows, c->dim);
    matmul(a->xn, w->w_gate, a->gate, rows, c->dim, c->hidden_dim);
    matmul(a->xn, w->w_up, a->up, rows, c->dim, c->hidden_dim);
    for (size_t i = 0; i < (size_t)rows * c->hidden_dim; i++)
        a->gate[i] = silu(a->gate[i]) * a->up[i];
    matmul(a->gate, w->w_down, a->proj, rows, c->hidden_dim, c->dim);
    add_rows(a->x, a->proj, (size_t)rows * c->dim);
}
// ANCHOR_END: run_one_transformer_block

void model_forward(const Model *m, KvCache *cache, const SeqChunk *chunks, int n_chunks, float *logits)
{
    const ModelConfig *c = &m->config;
    RowMap map = map_rows(chunks, n_chunks);
    Activations a = activations_alloc(c, map.rows);
    int r = 0;
    for (int ch = 0; ch < n_chunks; ch++)
        for (int i = 0; i < chunks[ch].count; i++, r++)
            memcpy(a.x + (size_t)r * c->dim, m->token_embedding + (size_t)chunks[ch].tokens[i] * c->dim,
                   sizeof(float) * c->dim);
    for (int layer = 0; layer < c->n_layers; layer++)
        transformer_block(m, cache, layer, &map, &a);
    /* Only each chunk's last token needs logits: the others' next tokens are known. */
    r = 0;
    for (int ch = 0; ch < n_chunks; ch++) {
        r += chunks[ch].count;
        rmsnorm_rows(a.x + (size_t)(r - 1) * c->dim, m->final_norm, a.xn, a.rstd, 1, c->dim);
        matmul(a.xn, m->w_logits, logits + (size_t)ch * c->vocab_size, 1, c->dim, c->vocab_size);
    }
    activations_free(&a);
    array_free(map.seq);
    array_free(map.position);
}
