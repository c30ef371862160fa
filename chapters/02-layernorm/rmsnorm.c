#include "chapters/02-layernorm/rmsnorm.h"

#include <math.h>
#include <string.h>

#include "chapters/02-layernorm/row_loops.h"
#include "common/alloc.h"
#include "kernels/rmsnorm_row.h"

const char norm_kind_names[] = "layer, rms";

const char *norm_kind_name(NormKind norm)
{
    return norm == NORM_RMS ? "rms" : "layer";
}

bool norm_kind_parse(const char *name, NormKind *norm)
{
    if (strcmp(name, "layer") != 0 && strcmp(name, "rms") != 0)
        return false;
    *norm = strcmp(name, "rms") == 0 ? NORM_RMS : NORM_LAYER;
    return true;
}

// ANCHOR: normalize_rows_by_their_rms
/* sum(x^2) in lanes: no cancellation to guard against, so one pass. */
static float sum_squares_f32(const float *x, size_t n)
{
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += x[i + k] * x[i + k];
    for (int k = 0; i < n; i++, k++)
        acc[k] += x[i] * x[i];
    return add_lanes(acc);
}

/* rstd of a row; where its sum of squares overflows, that of the row
 * scaled by a power of two, scaled back (as layer norm's row_stats_f32). */
static float rms_row_rstd_f32(const float *x, size_t d, float eps)
{
    float rstd = rms_rstd(sum_squares_f32(x, d), (float)d, eps);
    int k;
    float *scaled = ln_may_need_rescaling(rstd) ? rescaled_row_f32(x, d, &k) : NULL;
    if (scaled == NULL)
        return rstd;
    rstd = ln_unscaled_rstd(rms_row_rstd_f32(scaled, d, ln_scaled_eps(eps, k)), k);
    array_free(scaled);
    return rstd;
}

static void rms_forward_row_f32(float *restrict y, float *restrict rstd, const float *restrict x,
                                const float *restrict gamma, size_t d, float eps)
{
    float r = rms_row_rstd_f32(x, d, eps);
    for (size_t j = 0; j < d; j++)
        y[j] = gamma[j] * (x[j] * r);
    *rstd = r;
}

void rmsnorm_forward_f32(float *y, float *rstd, const float *x, const float *gamma, size_t n, size_t d, float eps)
{
#pragma omp parallel for schedule(static)
    for (size_t row = 0; row < n; row++)
        rms_forward_row_f32(y + row * d, rstd + row, x + row * d, gamma, d, eps);
}
// ANCHOR_END: normalize_rows_by_their_rms

// ANCHOR: differentiate_an_rms_row
/* sum(g * xhat), g = gamma * dy, xhat = x * rstd recomputed from x. */
static float sum_g_xhat_f32(const float *dy, const float *x, const float *gamma, size_t d, float rstd)
{
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= d; i += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += gamma[i + k] * dy[i + k] * (x[i + k] * rstd);
    for (int k = 0; i < d; i++, k++)
        acc[k] += gamma[i] * dy[i] * (x[i] * rstd);
    return add_lanes(acc);
}

static void rms_backward_row_f32(float *restrict dx, float *restrict dgamma_part, const float *restrict dy,
                                 const float *restrict x, const float *restrict gamma, size_t d, float rstd)
{
    float mean_g_xhat = sum_g_xhat_f32(dy, x, gamma, d, rstd) / (float)d;
    for (size_t j = 0; j < d; j++) {
        float xhat = x[j] * rstd;
        dx[j] = rms_dx(gamma[j] * dy[j], xhat, mean_g_xhat, rstd);
        dgamma_part[j] += dy[j] * xhat;
    }
}
// ANCHOR_END: differentiate_an_rms_row

size_t rmsnorm_backward_f32_scratch_floats(size_t n, size_t d)
{
    return backward_chunks(n) * d;
}

/* dgamma in chunks of rows, one partial row each, added in chunk order:
 * the same bits for any number of threads (layernorm_backward_f32). */
void rmsnorm_backward_f32(float *dx, float *dgamma, float *scratch, const float *dy, const float *x, const float *rstd,
                          const float *gamma, size_t n, size_t d)
{
    size_t chunks = backward_chunks(n);
#pragma omp parallel for schedule(static)
    for (size_t chunk = 0; chunk < chunks; chunk++) {
        float *dgamma_part = scratch + chunk * d;
        memset(dgamma_part, 0, d * sizeof *dgamma_part);
        for (size_t row = chunk * n / chunks; row < (chunk + 1) * n / chunks; row++)
            rms_backward_row_f32(dx + row * d, dgamma_part, dy + row * d, x + row * d, gamma, d, rstd[row]);
    }
    float *const sums[] = {dgamma};
    add_chunk_partials(sums, 1, scratch, chunks, d);
}

// ANCHOR: compute_the_rms_reference
void rmsnorm_forward_f64(double *y, double *rstd, const double *x, const double *gamma, size_t n, size_t d, double eps)
{
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d;
        double sum_sq = 0.0;
        for (size_t j = 0; j < d; j++)
            sum_sq += xr[j] * xr[j];
        double r = 1.0 / sqrt(sum_sq / (double)d + eps);
        for (size_t j = 0; j < d; j++)
            y[row * d + j] = gamma[j] * (xr[j] * r);
        rstd[row] = r;
    }
}

void rmsnorm_backward_f64(double *dx, double *dgamma, const double *dy, const double *x, const double *rstd,
                          const double *gamma, size_t n, size_t d)
{
    for (size_t j = 0; j < d; j++)
        dgamma[j] = 0.0;
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d, *dyr = dy + row * d;
        double sum_g_xhat = 0.0;
        for (size_t j = 0; j < d; j++)
            sum_g_xhat += gamma[j] * dyr[j] * (xr[j] * rstd[row]);
        double mean_g_xhat = sum_g_xhat / (double)d;
        for (size_t j = 0; j < d; j++) {
            double xhat = xr[j] * rstd[row];
            dx[row * d + j] = rstd[row] * (gamma[j] * dyr[j] - xhat * mean_g_xhat);
            dgamma[j] += dyr[j] * xhat;
        }
    }
}
// ANCHOR_END: compute_the_rms_reference

// ANCHOR: differentiate_rmsnorm_node_by_node
void rmsnorm_backward_unfused_f64(double *dx, double *dgamma, const double *dy, const double *x, const double *gamma,
                                  size_t n, size_t d, double eps)
{
    for (size_t j = 0; j < d; j++)
        dgamma[j] = 0.0;
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d, *dyr = dy + row * d;
        double *dxr = dx + row * d;
        /* Forward, keeping every node: the mean square m, rstd. */
        double m = 0.0;
        for (size_t j = 0; j < d; j++)
            m += xr[j] * xr[j];
        m /= (double)d;
        double rstd = pow(m + eps, -0.5);
        /* Backward, one node at a time, in reverse. */
        double d_rstd = 0.0;
        for (size_t j = 0; j < d; j++) {
            dgamma[j] += dyr[j] * xr[j] * rstd; /* y = gamma * xhat */
            double d_xhat = dyr[j] * gamma[j];
            dxr[j] = d_xhat * rstd; /* xhat = x * rstd, through x */
            d_rstd += d_xhat * xr[j];
        }
        double d_m = d_rstd * -0.5 * pow(m + eps, -1.5); /* rstd = (m + eps)^(-1/2) */
        for (size_t j = 0; j < d; j++)
            dxr[j] += d_m * 2.0 * xr[j] / (double)d; /* m = mean(x^2) */
    }
}
// ANCHOR_END: differentiate_rmsnorm_node_by_node
