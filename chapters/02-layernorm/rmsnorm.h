/* RMSNorm over the last dimension of an n x d row-major matrix:
 *
 *     y = gamma * xhat,  xhat = x * rstd,  rstd = 1 / sqrt(mean(x^2) + eps)
 *
 * layer norm without the centring and without beta (Llama, Mistral, Qwen).
 * The forward pass keeps only rstd per row (1 float per row): with the
 * input x, the whole cache the backward pass needs.
 *
 * All functions take n >= 1 and d >= 1; outputs come first in the
 * argument list, as in layernorm.h. */
#ifndef CHAPTERS_02_LAYERNORM_RMSNORM_H
#define CHAPTERS_02_LAYERNORM_RMSNORM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hostdevice.h"
#include "kernels/layernorm_storage.h"

COMMON_BEGIN_C

/* Which of the chapter's two norms a problem or a check is about. */
typedef enum { NORM_LAYER, NORM_RMS } NormKind;

/* "layer" or "rms"; norm_kind_parse is false for any other name. */
const char *norm_kind_name(NormKind norm);
bool norm_kind_parse(const char *name, NormKind *norm);
extern const char norm_kind_names[]; /* "layer, rms", for messages */

/* Float, fused per row, the CPU kernels; rows spread over the OpenMP
 * threads, results independent of their number. */
void rmsnorm_forward_f32(float *y, float *rstd, const float *x, const float *gamma, size_t n, size_t d, float eps);
/* dgamma is summed over rows in chunks, as layernorm_backward_f32 does, in
 * rmsnorm_backward_f32_scratch_floats(n, d) floats of scratch. */
size_t rmsnorm_backward_f32_scratch_floats(size_t n, size_t d);
void rmsnorm_backward_f32(float *dx, float *dgamma, float *scratch, const float *dy, const float *x, const float *rstd,
                          const float *gamma, size_t n, size_t d);

/* The same on rows stored in `storage`, as layernorm_forward_stored: the
 * forward pass the bits of the float32 kernel on x widened, y rounded; the
 * backward pass, with eps, guarded as layer norm's: every dx within one
 * ulp of the storage type of the exact result. */
void rmsnorm_forward_stored(void *y, float *rstd, const void *x, const float *gamma, size_t n, size_t d, float eps,
                            LnStorage storage);
void rmsnorm_backward_stored(void *dx, float *dgamma, float *scratch, const void *dy, const void *x, const float *rstd,
                             const float *gamma, size_t n, size_t d, float eps, LnStorage storage);
/* The backward pass on 16-bit rows without the guard, as
 * layernorm_backward_float_then_round: for the benchmark. */
void rmsnorm_backward_float_then_round(void *dx, float *dgamma, float *scratch, const void *dy, const void *x,
                                       const float *rstd, const float *gamma, size_t n, size_t d, LnStorage storage);
/* Either backward pass with its rows in one chunk (scratch: d floats), as
 * layernorm_backward_in_one_chunk: for the benchmark only. */
void rmsnorm_backward_in_one_chunk(void *dx, float *dgamma, float *scratch, const void *dy, const void *x,
                                   const float *rstd, const float *gamma, size_t n, size_t d, float eps,
                                   LnStorage storage, bool guarded);

/* The reference: double, one thread. */
void rmsnorm_forward_f64(double *y, double *rstd, const double *x, const double *gamma, size_t n, size_t d, double eps);
void rmsnorm_backward_f64(double *dx, double *dgamma, const double *dy, const double *x, const double *rstd,
                          const double *gamma, size_t n, size_t d);
/* The same gradients node by node (mean of squares, rstd, xhat, y): the
 * independent cross-check of the compact formula. */
void rmsnorm_backward_unfused_f64(double *dx, double *dgamma, const double *dy, const double *x, const double *gamma,
                                  size_t n, size_t d, double eps);

COMMON_END_C

#endif
