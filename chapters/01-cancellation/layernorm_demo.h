/* What the variance algorithm does to layer normalisation in float:
 * y = (x - mean) / sqrt(variance + eps), one row at a time, with the row's
 * variance from the naive formula or from the two-pass algorithm. */
#ifndef CHAPTERS_01_CANCELLATION_LAYERNORM_DEMO_H
#define CHAPTERS_01_CANCELLATION_LAYERNORM_DEMO_H

#include <stddef.h>
#include <stdint.h>

#define LAYERNORM_EPS 1e-5f

typedef float (*VarianceFunctionF32)(const float *x, size_t n);

/* Normalise one row of n >= 1 values (no scale or shift: gamma 1, beta 0). */
void layernorm_row_f32(const float *x, float *y, size_t n, VarianceFunctionF32 variance);

typedef struct {
    float variance;       /* what the variance function returned */
    size_t nonfinite;     /* outputs that are inf or NaN */
    double max_abs_error; /* over the finite outputs, against the exact normalisation */
} LayerNormOutcome;

typedef struct {
    double offset, kappa;
    LayerNormOutcome naive, two_pass;
    double two_pass_bound; /* first-order bound on two_pass.max_abs_error */
} LayerNormTrial;

/* One row of n values offset + N(0, 1) in float, normalised both ways. */
LayerNormTrial run_layernorm_trial(double offset, size_t n, uint64_t seed);

#endif
