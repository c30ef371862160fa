#include "chapters/03-softmax-topk/hard_inputs.h"

#include <math.h>

#include "common/rng.h"

static void fill_constant(float *row, size_t vocab, float value)
{
    for (size_t i = 0; i < vocab; i++) {
        row[i] = value;
    }
}

static void one_finite_rest_minus_inf(float *row, size_t vocab)
{
    fill_constant(row, vocab, -INFINITY);
    row[6] = 2.5f;
}

static void all_equal(float *row, size_t vocab)
{
    fill_constant(row, vocab, 0.25f);
}

static void random_logits(float *row, size_t vocab)
{
    Rng rng;
    rng_seed(&rng, vocab);
    rng_fill_normal_f32(&rng, row, vocab, 0.0, 3.0);
}

static void winner_in_the_last_place(float *row, size_t vocab)
{
    random_logits(row, vocab);
    row[vocab - 1] = 20.0f;
}

/* Every third logit is 1, the rest 0: the top K are all ties, across chunks. */
static void ties_across_the_row(float *row, size_t vocab)
{
    for (size_t i = 0; i < vocab; i++) {
        row[i] = i % 3 == 0 ? 1.0f : 0.0f;
    }
}

static void one_logit(float *row, size_t vocab)
{
    fill_constant(row, vocab, -3.0f);
}

/* Repeat a short pattern along the row. */
static void fill_pattern(float *row, size_t vocab, const float *pattern, size_t length)
{
    for (size_t i = 0; i < vocab; i++) {
        row[i] = pattern[i % length];
    }
}

static void huge_and_tiny(float *row, size_t vocab)
{
    const float values[] = {3e38f, -3e38f, 1e30f, -1e30f, 88.0f, -88.0f, 0.0f, 3e38f};
    fill_pattern(row, vocab, values, 8);
}

static void two_plus_inf(float *row, size_t vocab)
{
    const float values[] = {1.0f, INFINITY, 0.0f, INFINITY, -INFINITY, 5.0f};
    fill_pattern(row, vocab, values, 6);
}

static void nan_in_the_row(float *row, size_t vocab)
{
    const float values[] = {0.5f, NAN, 2.0f, NAN, 1.0f, -1.0f};
    fill_pattern(row, vocab, values, 6);
}

static void all_minus_inf(float *row, size_t vocab)
{
    fill_constant(row, vocab, -INFINITY);
}

/* exp(-100) is a subnormal float, kept as PyTorch keeps it; exp(-200) is 0
 * in float, yet the order is the logits'. */
static void underflow_is_no_tie(float *row, size_t vocab)
{
    const float values[] = {0.0f, -100.0f, -101.0f, -200.0f, -100.0f};
    fill_pattern(row, vocab, values, 5);
}

/* One confident logit and a long tail: GPT-2's V - 1 logits at -18, each
 * weighing 1.5e-8, below an ulp of the sum near 1, together 7.7e-4 of it;
 * a row sum that adds them one chunk after another in float loses them. */
static void confident_with_a_long_tail(float *row, size_t vocab)
{
    fill_constant(row, vocab, -18.0f);
    row[0] = 0.0f;
}

static void signed_zeros(float *row, size_t vocab)
{
    const float values[] = {0.0f, -0.0f, 0.0f, -1.0f};
    fill_pattern(row, vocab, values, 4);
}

const HardInput HARD_INPUTS[] = {
    {"one finite logit, the rest -inf",  10,    3, one_finite_rest_minus_inf },
    {"all logits equal",                 10,    4, all_equal                 },
    {"K = 1",                            1000,  1, random_logits             },
    {"K = V",                            7,     7, random_logits             },
    {"V = 1",                            1,     1, one_logit                 },
    {"V = 1823, winner last",            1823,  5, winner_in_the_last_place  },
    {"ties all along the row",           1000,  6, ties_across_the_row       },
    {"huge and tiny logits",             8,     4, huge_and_tiny             },
    {"two +inf",                         6,     3, two_plus_inf              },
    {"NaN in the row",                   6,     3, nan_in_the_row            },
    {"all -inf",                         5,     2, all_minus_inf             },
    {"probabilities that underflow",     5,     5, underflow_is_no_tie       },
    {"-0 and +0",                        4,     3, signed_zeros              },
    {"one confident logit, a long tail", 50257, 1, confident_with_a_long_tail},
};

const int HARD_INPUT_COUNT = (int)(sizeof HARD_INPUTS / sizeof HARD_INPUTS[0]);

void fill_tied_logits(float *logits, size_t count, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, logits, count, 0.0, 3.0);
    for (size_t i = 0; i < count; i++) {
        logits[i] = roundf(logits[i] * 16.0f) / 16.0f;
    }
}
