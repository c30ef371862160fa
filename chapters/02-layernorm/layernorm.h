/* Layer norm over the last dimension of an n x d row-major matrix:
 *
 *     y = gamma * xhat + beta,  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
 *
 * with the mean and the (biased) variance taken over each row of d values.
 * The forward pass keeps only mean and rstd per row (2 floats per row):
 * that and the input x is the whole cache the backward pass needs.
 *
 * All functions take n >= 1 and d >= 1; outputs come first in the
 * argument list. */
#ifndef CHAPTERS_02_LAYERNORM_LAYERNORM_H
#define CHAPTERS_02_LAYERNORM_LAYERNORM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hostdevice.h"
#include "kernels/layernorm_storage.h"

COMMON_BEGIN_C

/* Float, fused, the CPU kernels of the chapter. Rows are spread over the
 * OpenMP threads; the results do not depend on the number of threads. */
void layernorm_forward_f32(float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                           size_t n, size_t d, float eps);
/* The backward pass sums dgamma and dbeta over rows in chunks, one partial
 * row each, in `scratch`: layernorm_backward_f32_scratch_floats(n, d)
 * floats, which need not be initialised and can be reused across calls. */
size_t layernorm_backward_f32_scratch_floats(size_t n, size_t d);
void layernorm_backward_f32(float *dx, float *dgamma, float *dbeta, float *scratch, const float *dy, const float *x,
                            const float *mean, const float *rstd, const float *gamma, size_t n, size_t d);

/* The same kernels on rows stored in `storage`: x and dy read, y and dx
 * written, as float32 or as the 16 bits of fp16 or bf16 (kernels/fp16.h,
 * kernels/bf16.h); mean, rstd, the parameters and their gradients are
 * float32. A 16-bit row's sums are taken in double, and every y and dx is
 * within one ulp of the storage type of the exact result: the float path
 * where a guard vouches for it, double where it nearly cancels
 * (kernels/layernorm_row.h). The forward pass saves its statistics rounded
 * to float; the backward pass takes eps too, which the exact rstd of a
 * 16-bit row needs (a float32 row trusts the saved rstd and ignores it). */
void layernorm_forward_stored(void *y, float *mean, float *rstd, const void *x, const float *gamma, const float *beta,
                              size_t n, size_t d, float eps, LnStorage storage);
void layernorm_backward_stored(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy, const void *x,
                               const float *mean, const float *rstd, const float *gamma, size_t n, size_t d, float eps,
                               LnStorage storage);

// ANCHOR: take_the_guard_out
/* The same passes without the guard: the float32 kernels' arithmetic on
 * the widened rows (sums in float; backward, the saved statistics trusted
 * and eps unused), each result rounded once to the storage type, as a
 * library that computes in float and stores 16 bits does. Nothing tests
 * them against cancellation, and there a result can stray beyond one ulp
 * unnoticed. Not the chapter's
 * kernels: the benchmark runs them beside the guarded ones, to measure
 * what the guard and the double sums cost. For float32 rows they are the
 * float32 kernels. */
void layernorm_forward_float_then_round(void *y, float *mean, float *rstd, const void *x, const float *gamma,
                                        const float *beta, size_t n, size_t d, float eps, LnStorage storage);
void layernorm_backward_float_then_round(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy,
                                         const void *x, const float *mean, const float *rstd, const float *gamma,
                                         size_t n, size_t d, LnStorage storage);
// ANCHOR_END: take_the_guard_out

/* A backward pass, guarded or (guarded false) float then round, with all
 * its rows in one chunk: one partial row of dgamma and dbeta in `scratch`
 * (2 d floats), added at the end, where the passes above keep up to
 * LN_BACKWARD_CHUNKS. For the benchmark's timing of a pass's own work on a
 * few rows that stay in cache: there that many partial rows would cost
 * more than the rows. Not for many rows: one chunk sums them all in
 * float, the accuracy LN_BACKWARD_CHUNKS exists to bound. */
void layernorm_backward_in_one_chunk(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy,
                                     const void *x, const float *mean, const float *rstd, const float *gamma, size_t n,
                                     size_t d, float eps, LnStorage storage, bool guarded);

/* The reference: double, two-pass, one thread. */
void layernorm_forward_f64(double *y, double *mean, double *rstd, const double *x, const double *gamma,
                           const double *beta, size_t n, size_t d, double eps);
void layernorm_backward_f64(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,
                            const double *mean, const double *rstd, const double *gamma, size_t n, size_t d);

/* The same gradients, taken node by node through the forward graph
 * (mean, centred x, variance, rstd, xhat, y) without the algebra that
 * leads to the compact formula: an independent cross-check of it. */
void layernorm_backward_unfused_f64(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,
                                    const double *gamma, size_t n, size_t d, double eps);

/* out[i] = (double)in[i] */
void widen_f32(double *out, const float *in, size_t n);

COMMON_END_C

#endif
