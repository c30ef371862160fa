/* Attention for one query, online: the positions arrive one at a time (or
 * in parts computed apart), and nothing but a running state is kept:
 *
 *   - the softmax state of the scores seen so far, (max m, sum of e^(s - m)),
 *     exactly Chapter 3's SoftmaxState with its update and merge;
 *   - the output accumulator, sum over positions of e^(s - m) * value,
 *     not yet divided by the sum.
 *
 * When the maximum grows, everything summed against the old one shrinks by
 * e^(m_old - m_new): the accumulator with the sum. Two partial states (two
 * halves of the context) merge the same way. The CUDA decode kernels and the
 * CPU tests call these functions; the rescaling itself is softmax_weight from
 * kernels/online_softmax.h, the one Chapter 3's merge uses. */
#ifndef KERNELS_ONLINE_ATTENTION_H
#define KERNELS_ONLINE_ATTENTION_H

#include "common/hostdevice.h"
#include "kernels/online_softmax.h"

// ANCHOR: push_one_score_and_rescale
/* Take one position's score into the state. The caller then multiplies its
 * accumulator by *rescale and adds *weight times the position's value. */
HOST_DEVICE static inline SoftmaxState attention_push(SoftmaxState state, float score, float *rescale, float *weight)
{
    SoftmaxState next = softmax_state_push(state, score);
    *rescale = softmax_weight(state.max, next.max);
    *weight = softmax_weight(score, next.max);
    return next;
}
// ANCHOR_END: push_one_score_and_rescale

// ANCHOR: merge_partial_attention_states
/* Merge partial state b (with accumulator acc_b[0..n)) into a (acc_a):
 * both accumulators are brought to the larger maximum, then added. */
HOST_DEVICE static inline SoftmaxState attention_merge(SoftmaxState a, float *acc_a, SoftmaxState b, const float *acc_b,
                                                       int n)
{
    SoftmaxState merged = softmax_state_merge(a, b);
    float weight_a = softmax_weight(a.max, merged.max), weight_b = softmax_weight(b.max, merged.max);
    for (int i = 0; i < n; i++) {
        acc_a[i] = acc_a[i] * weight_a + acc_b[i] * weight_b;
    }
    return merged;
}
// ANCHOR_END: merge_partial_attention_states

#endif
