#include "chapters/02-layernorm/analysis.h"

#include <stddef.h>
#include <string.h>

/* One step of an implementation: per element of x, how many floats it
 * reads from and writes to memory, and how many floating-point operations
 * it does. Per-row work (a division, a square root) is left out: it is
 * 1/d of the rest. */
typedef struct {
    const char *what;
    double reads, writes, flops;
} Step;

typedef struct {
    const char *pass, *implementation;
    const char *cache; /* what it keeps for the backward pass, or uses from it */
    const Step *steps;
    size_t step_count;
} Implementation;

#define STEPS(array) array, sizeof array / sizeof array[0]

// ANCHOR: count_the_unfused_forward
/* Every node its own kernel, as an eager framework runs the formula:
 * each reads its inputs from memory and writes its output there. */
static const Step forward_unfused[] = {
    {"mean = sum(x) / d", 1, 0, 1},
    {"xc = x - mean",     1, 1, 1},
    {"sq = xc * xc",      1, 1, 1},
    {"var = sum(sq) / d", 1, 0, 1},
    {"xhat = xc * rstd",  1, 1, 1},
    {"t = gamma * xhat",  1, 1, 1},
    {"y = t + beta",      1, 1, 1},
};
// ANCHOR_END: count_the_unfused_forward

/* One pass over memory: x is read once; the three passes over the row
 * (sum; deviations and their squares; normalise and scale) run in cache. */
static const Step forward_fused_xhat[] = {
    {"sum x",                          1, 0, 1},
    {"sum (x - m0), (x - m0)^2",       0, 0, 4},
    {"xhat = (x - mean) rstd, stored", 0, 1, 2},
    {"y = gamma xhat + beta",          0, 1, 2},
};
static const Step forward_fused[] = {
    {"sum x",                            1, 0, 1},
    {"sum (x - m0), (x - m0)^2",         0, 0, 4},
    {"y = gamma (x - mean) rstd + beta", 0, 1, 4},
};

/* The reverse of forward_unfused, node by node (autograd). */
static const Step backward_unfused[] = {
    {"dbeta = sum over rows of dy", 1, 0, 1},
    {"p = dy * xhat",               2, 1, 1},
    {"dgamma = sum over rows of p", 1, 0, 1},
    {"dxhat = dy * gamma",          1, 1, 1},
    {"dxc = dxhat * rstd",          1, 1, 1},
    {"q = dxhat * xc",              2, 1, 1},
    {"drstd = sum(q)",              1, 0, 1},
    {"dxc += xc * (2 dvar / d)",    2, 1, 2},
    {"dmean = -sum(dxc)",           1, 0, 1},
    {"dx = dxc + dmean / d",        1, 1, 1},
};

/* The compact formula in two passes over the row, the second in cache.
 * g = gamma dy is formed in both passes. */
static const Step backward_fused_xhat[] = {
    {"sum g, sum g xhat (xhat read)",              2, 0, 4},
    {"dx = rstd (g - mean g - xhat mean(g xhat))", 0, 1, 5},
    {"dgamma += dy xhat, dbeta += dy",             0, 0, 3},
};
// ANCHOR: count_the_fused_backward
/* As above, with xhat = (x - mean) rstd recomputed in each pass: x is read
 * instead of xhat (the same bytes) for 2 more operations per pass. */
static const Step backward_fused[] = {
    {"sum g, sum g xhat (xhat from x)",            2, 0, 6},
    {"dx = rstd (g - mean g - xhat mean(g xhat))", 0, 1, 7},
    {"dgamma += dy xhat, dbeta += dy",             0, 0, 3},
};
// ANCHOR_END: count_the_fused_backward

static const Implementation implementations[] = {
    {"forward",  "unfused, one kernel per node", "xc, xhat, rstd", STEPS(forward_unfused)    },
    {"forward",  "fused, caching xhat",          "xhat, rstd",     STEPS(forward_fused_xhat) },
    {"forward",  "fused, caching mean and rstd", "mean, rstd",     STEPS(forward_fused)      },
    {"backward", "unfused, one kernel per node", "xc, xhat, rstd", STEPS(backward_unfused)   },
    {"backward", "fused, from cached xhat",      "xhat, rstd",     STEPS(backward_fused_xhat)},
    {"backward", "fused, from x, mean, rstd",    "mean, rstd",     STEPS(backward_fused)     },
};

typedef struct {
    double bytes, flops;
} Cost;

static Cost cost_of(const Implementation *implementation)
{
    Cost cost = {0, 0};
    for (size_t s = 0; s < implementation->step_count; s++) {
        const Step *step = &implementation->steps[s];
        cost.bytes += 4 * (step->reads + step->writes);
        cost.flops += step->flops;
    }
    return cost;
}

enum { IMPLEMENTATION_COUNT = sizeof implementations / sizeof implementations[0] };

/* The fused implementation with the minimal cache: the last one of its pass. */
static Cost fused_cost(const char *pass)
{
    Cost cost = {0, 0};
    for (size_t i = 0; i < IMPLEMENTATION_COUNT; i++)
        if (strcmp(implementations[i].pass, pass) == 0)
            cost = cost_of(&implementations[i]);
    return cost;
}

void complexity_print(FILE *out, TableFormat format)
{
    const char *headers[] = {"pass", "implementation", "cache", "bytes / element", "FLOPs / element", "bytes vs fused"};
    Table *table = TABLE_NEW(headers, "lllrrr");
    for (size_t i = 0; i < IMPLEMENTATION_COUNT; i++) {
        Cost cost = cost_of(&implementations[i]);
        table_cell(table, "%s", implementations[i].pass);
        table_cell(table, "%s", implementations[i].implementation);
        table_cell(table, "%s", implementations[i].cache);
        table_cell(table, "%.0f", cost.bytes);
        table_cell(table, "%.0f", cost.flops);
        table_cell(table, "%.1fx", cost.bytes / fused_cost(implementations[i].pass).bytes);
    }
    table_print(table, out, format);
    table_free(table);
}

// ANCHOR: size_real_models
/* Layer norms in a model: two per block (before attention and before the
 * MLP) and one before the output. Sizes from the published configurations
 * (GPT-2 small: 12 layers, d = 768, 124M parameters; Llama 2 7B: 32 layers,
 * d = 4096, 6.7B parameters; Llama normalises with RMSNorm, whose cache
 * question is the same with rstd alone). */
typedef struct {
    const char *name;
    int layers, d;
    double parameters;
    int batch, sequence;
} ModelShape;

static const ModelShape models[] = {
    {"GPT-2 small",      12, 768,  124e6, 8, 1024},
    {"Llama-2-7B-sized", 32, 4096, 6.7e9, 8, 4096},
};
// ANCHOR_END: size_real_models

void cache_memory_print(FILE *out, TableFormat format)
{
    const char *headers[] = {
        "model", "d", "norms", "tokens (B x T)", "cache xhat", "cache mean, rstd", "xhat recompute FLOPs / step FLOPs"};
    Table *table = TABLE_NEW(headers, "lrrrrrr");
    const double mib = 1024.0 * 1024.0, gib = 1024.0 * mib;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const ModelShape *model = &models[m];
        double norms = 2.0 * model->layers + 1, tokens = (double)model->batch * model->sequence;
        double xhat_bytes = norms * tokens * model->d * sizeof(float);
        double stats_bytes = norms * tokens * 2 * sizeof(float);
        /* Recomputing xhat costs what the fused backward from x does more than
         * the one from xhat, against ~6 FLOPs per parameter per token of a
         * training step (forward and backward). */
        double extra_flops_per_element = cost_of(&implementations[IMPLEMENTATION_COUNT - 1]).flops -
                                         cost_of(&implementations[IMPLEMENTATION_COUNT - 2]).flops;
        double recompute_flops = extra_flops_per_element * norms * tokens * model->d;
        double step_flops = 6.0 * model->parameters * tokens;
        table_cell(table, "%s", model->name);
        table_cell(table, "%d", model->d);
        table_cell(table, "%.0f", norms);
        table_cell(table, "%d x %d", model->batch, model->sequence);
        table_cell(table, "%.2f GiB", xhat_bytes / gib);
        table_cell(table, "%.2f MiB", stats_bytes / mib);
        table_cell(table, "%.1e", recompute_flops / step_flops);
    }
    table_print(table, out, format);
    table_free(table);
}
