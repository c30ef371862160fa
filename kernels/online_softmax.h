/* The online softmax state: a running (max, sum of exp(x - max)) pair that
 * takes one logit at a time (push) or the state of another set of logits
 * (merge), so a softmax needs one read of its inputs and partial results of
 * several threads combine exactly. Softmax + top-K (chapter 3) and the
 * attention of the KV cache (chapter 4, kernels/online_attention.h) both
 * build on it.
 *
 * Everything here is a HOST_DEVICE static inline function: gcc compiles it
 * into the chapter programs and their tests, nvcc into the CUDA kernels.
 *
 * Hard inputs: a NaN never becomes the maximum but makes the sum NaN, so
 * every probability of its set is NaN (as torch.softmax does); +inf inputs
 * weigh 1 each against a +inf maximum and the rest weigh 0; a set of only
 * -inf has a sum of 0, and its probabilities are 0/0 = NaN. */
#ifndef KERNELS_ONLINE_SOFTMAX_H
#define KERNELS_ONLINE_SOFTMAX_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/float_bits.h"

/* ln(2^-150): below it, exp(x) is less than half the smallest subnormal
 * float, 2^-149, and rounds to 0. */
#define SOFTMAX_EXP_UNDERFLOW (-103.972077f)

/* ln(2^-126), rounded up: from it on, x log2(e) rounds to n >= -126, whose
 * 2^n is a normal float. */
#define SOFTMAX_EXP_LEAST_NORMAL (-87.3365402f)

/* x = n ln2 + r with n an integer and |r| <= ln2/2, so exp(x) = 2^n e^r:
 * n (modulo 2^32) and e^r - 1, as exp_split computes them for the host (the
 * GPU uses its own exponentials). */
typedef struct {
    uint32_t n_mod_2_32;
    float expm1_r;
} ExpSplit;

// ANCHOR: compute_exp_in_plain_arithmetic
static inline ExpSplit exp_split(float x)
{
    /* Adding 1.5 * 2^23 rounds x log2(e) to the integer n and leaves n in the
     * low bits of t: no float-to-int conversion, which is undefined for NaN. */
    const float shifter = 12582912.0f;
    float t = fmaf(x, 1.44269504f, shifter);
    float n = t - shifter;
    /* ln2 in two parts (Cody and Waite): n times the first is exact. */
    float r = fmaf(n, -0.693359375f, x);
    r = fmaf(n, 2.12194440e-4f, r);
    // ANCHOR: approximate_e_to_the_r
    /* e^r - 1 = r + r^2 P(r), P of degree 4 interpolating (e^r - 1 - r)/r^2
     * at the 5 Chebyshev nodes of [-ln2/2, ln2/2]: close to the best
     * polynomial of its degree, and below float rounding there. */
    float p = 1.392621347e-3f;
    p = fmaf(p, r, 8.363202972e-3f);
    p = fmaf(p, r, 4.166655444e-2f);
    p = fmaf(p, r, 1.666657685e-1f);
    p = fmaf(p, r, 0.5f);
    float expm1_r = fmaf(p, r * r, r);
    // ANCHOR_END: approximate_e_to_the_r
    ExpSplit split;
    split.n_mod_2_32 = float_bits(t) - float_bits(shifter);
    split.expm1_r = expm1_r;
    return split;
}

/* exp(x) for x <= 0 (softmax only ever needs exp(x - max)), within about
 * 2 ulp; exp(-inf) = 0, exp(NaN) = NaN. On the CPU, libm's expf is a
 * function call that a loop cannot vectorise; this is plain arithmetic on
 * floats and their bits, so a loop calling it vectorises. Like expf (and
 * PyTorch), it keeps results down to the smallest subnormal float, 2^-149,
 * within one step of 2^-149 there. On the GPU, CUDA's own
 * expf is already a few instructions (it uses the special function unit)
 * and as accurate, so it is used. */
HOST_DEVICE static inline float softmax_exp(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    ExpSplit split = exp_split(x);
    // ANCHOR: build_two_to_the_n
    /* 2^n is built in the exponent field, which holds only normal floats,
     * 2^-126 and up; n goes down to -150 for a subnormal result. So build
     * 2^(n + 64) instead and multiply by 2^-64 last: exact for a normal
     * result, and one more rounding, to the subnormal grid, otherwise. */
    float two_to_n_plus_64 = float_from_bits((split.n_mod_2_32 + 127u + 64u) << 23);
    /* 2^n e^r = 2^n + 2^n (e^r - 1), in one rounding. */
    float scaled = fmaf(split.expm1_r, two_to_n_plus_64, two_to_n_plus_64);
    return x < SOFTMAX_EXP_UNDERFLOW ? 0.0f : scaled * 0x1p-64f;
    // ANCHOR_END: build_two_to_the_n
#endif
}
// ANCHOR_END: compute_exp_in_plain_arithmetic

/* The online softmax state of a set of logits: their maximum (NaN never
 * becomes the maximum) and the sum of exp(x - max) over the set. */
typedef struct {
    float max;
    float sum;
} SoftmaxState;

HOST_DEVICE static inline SoftmaxState softmax_state_empty(void)
{
    SoftmaxState empty = {-INFINITY, 0.0f};
    return empty;
}

/* exp(x - max) for x <= max (or x NaN), with the two limits that plain
 * arithmetic gets wrong: x == max == +inf weighs 1, not exp(inf - inf) = NaN,
 * and when the max is -inf every x is -inf and weighs nothing. */
HOST_DEVICE static inline float softmax_weight(float x, float max)
{
    if (x == max) {
        return max == -INFINITY ? 0.0f : 1.0f;
    }
    return softmax_exp(x - max);
}

// ANCHOR: update_running_max_and_sum
HOST_DEVICE static inline SoftmaxState softmax_state_push(SoftmaxState state, float x)
{
    if (x > state.max) {
        /* A new maximum: what was summed against the old one shrinks. */
        state.sum = state.sum * softmax_weight(state.max, x) + 1.0f;
        state.max = x;
    } else {
        /* x <= max, or x is NaN and so becomes the sum. */
        state.sum += softmax_weight(x, state.max);
    }
    return state;
}
// ANCHOR_END: update_running_max_and_sum

// ANCHOR: exp_that_only_adds_to_a_sum
/* exp(x) for x <= 0 where it only adds to a sum of weights, never where it
 * is a probability itself. Such a sum is at least 1 (the maximum's weight),
 * so weights below 2^-126 cannot move it: flushed to 0, they change it by
 * less than V 2^-126, far below its last bit. On the GPU, 2^(x log2 e) on
 * the special function unit, flushing subnormal results to 0 (.ftz): an
 * FMUL and a MUFU.EX2, where expf takes about eight instructions and __expf
 * five (it rescales to keep subnormals). The error is about 2 + 1.2 |x|
 * ulp, growing with |x| as the weight falls faster: a sum of weights is off
 * by less than about 4 2^-24. On the CPU, softmax_exp's arithmetic with
 * 2^n built directly, as only normal results are kept: one multiplication
 * fewer, of the eleven that share the processor's multiply-add units, and
 * exactly softmax_exp's result wherever that is 2^-126 or more. */
HOST_DEVICE static inline float softmax_exp_in_sum(float x)
{
#ifdef __CUDA_ARCH__
    float power;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(power) : "f"(x * 1.44269504f));
    return power;
#else
    ExpSplit split = exp_split(x);
    float two_to_n = float_from_bits((split.n_mod_2_32 + 127u) << 23);
    float scaled = fmaf(split.expm1_r, two_to_n, two_to_n);
    return x < SOFTMAX_EXP_LEAST_NORMAL ? 0.0f : scaled;
#endif
}
// ANCHOR_END: exp_that_only_adds_to_a_sum

/* exp(x - reference) without a branch, for x <= reference or NaN. x equals
 * the reference only as the maximum itself, whose weight is exactly 1 =
 * exp(0): so +inf against +inf weighs 1, where +inf - +inf would be NaN. */
HOST_DEVICE static inline float softmax_weight_in_sum(float x, float reference)
{
    float difference = x == reference ? 0.0f : x - reference;
    return softmax_exp_in_sum(difference);
}

// ANCHOR: push_four_logits_without_a_branch
/* Push four logits at once, with no branch: the new maximum first (fmaxf
 * ignores NaN, so a NaN never becomes it), one rescale of the running sum,
 * then the four weights. softmax_state_push branches on every logit, and
 * on a GPU the lanes of a warp that go different ways take both. The
 * weights are measured from the maximum raised to -FLT_MAX: when every
 * logit so far is -inf, -inf - (-FLT_MAX) = -inf weighs 0 (and the sum
 * stays 0), where -inf - (-inf) would be NaN. A NaN makes its weight, and
 * so the sum, NaN. It pays one exponential more per four logits, the
 * rescale, whether the maximum moved or not. */
HOST_DEVICE static inline SoftmaxState softmax_state_push4(SoftmaxState state, float x0, float x1, float x2, float x3)
{
    float max = fmaxf(fmaxf(state.max, fmaxf(x0, x1)), fmaxf(x2, x3));
    float reference = fmaxf(max, -FLT_MAX);
    SoftmaxState pushed;
    pushed.max = max;
    pushed.sum = state.sum * softmax_weight_in_sum(state.max, reference);
    pushed.sum += softmax_weight_in_sum(x0, reference);
    pushed.sum += softmax_weight_in_sum(x1, reference);
    pushed.sum += softmax_weight_in_sum(x2, reference);
    pushed.sum += softmax_weight_in_sum(x3, reference);
    return pushed;
}
// ANCHOR_END: push_four_logits_without_a_branch

// ANCHOR: merge_running_max_and_sum
HOST_DEVICE static inline SoftmaxState softmax_state_merge(SoftmaxState a, SoftmaxState b)
{
    SoftmaxState merged;
    merged.max = a.max > b.max ? a.max : b.max;
    merged.sum = a.sum * softmax_weight(a.max, merged.max) + b.sum * softmax_weight(b.max, merged.max);
    return merged;
}
// ANCHOR_END: merge_running_max_and_sum

/* The softmax probability of logit x in the set the state describes. */
HOST_DEVICE static inline float softmax_probability(SoftmaxState state, float x)
{
    return softmax_weight(x, state.max) / state.sum;
}

#endif
