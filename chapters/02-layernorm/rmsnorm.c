#include "chapters/02-layernorm/rmsnorm.h"

#include <math.h>
#include <stdint.h>
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

// ANCHOR: take_the_rms_of_a_row_that_may_overflow
/* The rstd of a row whose sum of squares overflowed or came out too small:
 * that of the row scaled by a power of two, scaled back (as layer norm's
 * rescaled_row_stats). For a row holding a NaN or an inf (NaN), or of
 * zeros, `plain` stands. */
static float rescaled_rms_rstd(const float *x, size_t d, float eps, float plain)
{
    int k;
    float *scaled = rescaled_row_f32(x, d, &k);
    if (scaled == NULL)
        return plain;
    float rstd = ln_rescaled_rstd(rms_moments(sum_in_lanes(scaled, d, SUM_SQUARES), (float)d).var, k, eps);
    array_free(scaled);
    return rstd;
}

/* rstd of a row as stored, whose sum of squares is known. A call per row,
 * not inlined, as layer norm's row_stats: inlined into rms_forward_row, it
 * led GCC 12 to scale a float32 block one element at a time (16 vmulss
 * gathered into a vector), at two thirds of the speed on rows in cache. A
 * 16-bit row that needs rescaling is widened for it, as rarely as that. */
__attribute__((noinline)) static float rms_row_rstd(const void *x, size_t d, float eps, float sum_squares,
                                                    LnStorage storage)
{
    float rstd = rms_rstd(sum_squares, (float)d, eps);
    if (!ln_may_need_rescaling(rstd))
        return rstd;
    if (storage == STORAGE_FLOAT32)
        return rescaled_rms_rstd(x, d, eps, rstd);
    float *widened = ALLOC_ARRAY(d, float);
    ln_storage_widen_bits(storage, widened, x, d);
    rstd = rescaled_rms_rstd(widened, d, eps, rstd);
    array_free(widened);
    return rstd;
}
// ANCHOR_END: take_the_rms_of_a_row_that_may_overflow

// ANCHOR: scale_a_span_of_an_rms_row
static void rms_scale_span(float *restrict out, const float *restrict x, const float *restrict gamma, size_t count,
                           float rstd)
{
    for (size_t j = 0; j < count; j++)
        out[j] = gamma[j] * (x[j] * rstd);
}

/* rms_scale_span for the `count` (< BLOCK) elements from `first` on of a
 * row as stored, y stored in its type: the ends of the row, outside the
 * streamed blocks. */
ROW_INLINE void rms_scale_stored(void *y, const void *x, const float *gamma, size_t first, size_t count, float rstd,
                                 LnStorage storage)
{
    float y_chunk[BLOCK], x_chunk[BLOCK];
    float *out = result_chunk(y_chunk, y, first, storage);
    rms_scale_span(out, widen_chunk(x_chunk, x, first, count, storage), gamma + first, count, rstd);
    narrow_chunk(y, first, out, count, storage);
}
// ANCHOR_END: scale_a_span_of_an_rms_row

// ANCHOR: take_the_next_sum_in_pieces
/* The next row's sum is taken NEXT_SUM_PIECE elements at a time: its lane
 * sums stay in registers through a piece, but go back to memory (RowSum)
 * between pieces, and each piece's first addition waits for them there.
 * Taken a block at a time, that wait set the pace of the whole sweep,
 * on rows in cache as on rows from memory. */
enum { NEXT_SUM_PIECE = 8 * LANES };
// ANCHOR_END: take_the_next_sum_in_pieces

// ANCHOR: scale_a_row_and_stream_it_out
/* What stream_whole_blocks needs of a row (row_loops.h): the row as
 * stored, gamma and rstd, and the next row's sum of squares, taken along
 * the way (NULL for a thread's last row). */
typedef struct {
    const void *x;
    const float *gamma;
    float rstd;
    RowSum *next;
    LnStorage storage;
} RmsRow;

/* A block or a line of y, and, every NEXT_SUM_PIECE elements, as far again
 * of the next row's sum: the next row is in L2 (asked for during the row
 * before this one) and its pieces ask for the same span of the row after
 * it. */
ROW_INLINE void rms_scale_from(float *out, size_t first, size_t count, const void *pass)
{
    const RmsRow *row = pass;
    float x_chunk[2 * BLOCK];
    rms_scale_span(out, widen_chunk(x_chunk, row->x, first, count, row->storage), row->gamma + first, count, row->rstd);
    if (row->next != NULL && first + count - row->next->done >= NEXT_SUM_PIECE)
        row_sum_up_to(row->next, first + count, row->storage);
}

/* y = gamma * (x * rstd) for a row whose sum of squares is known, streamed
 * out in one sweep that also sums the next row's squares. */
ROW_INLINE void rms_forward_row(void *y, float *rstd, const void *x, float sum_squares, RowSum *next,
                                const float *gamma, size_t d, float eps, LnStorage storage)
{
    RmsRow row = {x, gamma, rms_row_rstd(x, d, eps, sum_squares, storage), next, storage};
    size_t j = unaligned_head(y, d, storage);
    rms_scale_stored(y, x, gamma, 0, j, row.rstd, storage);
    j = stream_whole_blocks(y, j, d, rms_scale_from, &row, storage);
    rms_scale_stored(y, x, gamma, j, d - j, row.rstd, storage);
    *rstd = row.rstd;
}
// ANCHOR_END: scale_a_row_and_stream_it_out

// ANCHOR: sum_the_next_row_along_the_way
/* The sum of squares a thread took during its last row: that of row `row`
 * (none yet: SIZE_MAX). */
typedef struct {
    size_t row;
    float sum_squares;
} SumAhead;

/* One row, and the next row's sum of squares. A thread's rows follow one
 * another (schedule(static) gives each thread one run of rows), so only
 * its first row takes its sum in a pass of its own, asking for the next
 * row, into L2. The row after the next is asked for during the sweep. */
ROW_INLINE SumAhead rms_forward_row_then_sum(void *y, float *rstd, const void *x, const float *gamma, size_t row,
                                             size_t n, size_t d, float eps, SumAhead taken, LnStorage storage)
{
    const void *x_row = stored_at(x, row * d, storage);
    RowsAhead ahead = rows_ahead(x, row, n, d, storage);
    float sum_squares = taken.sum_squares;
    if (taken.row != row) {
        RowSum alone = row_sum_begin(x_row, ahead.next, true, NULL, SUM_SQUARES);
        sum_squares = row_sum_finish(&alone, d, storage);
    }
    void *y_row = (char *)y + row * d * ln_storage_bytes(storage);
    if (row + 1 == n) {
        rms_forward_row(y_row, rstd + row, x_row, sum_squares, NULL, gamma, d, eps, storage);
        return (SumAhead){SIZE_MAX, 0.0f};
    }
    RowSum next = row_sum_begin(ahead.next, ahead.after_next, true, NULL, SUM_SQUARES);
    rms_forward_row(y_row, rstd + row, x_row, sum_squares, &next, gamma, d, eps, storage);
    return (SumAhead){row + 1, row_sum_finish(&next, d, storage)};
}
// ANCHOR_END: sum_the_next_row_along_the_way

// ANCHOR: normalize_rows_by_their_rms
/* rms_forward_row_then_sum compiled once for each storage type. */
static SumAhead rms_forward_row_stored(void *y, float *rstd, const void *x, const float *gamma, size_t row, size_t n,
                                       size_t d, float eps, SumAhead taken, LnStorage storage)
{
    SumAhead next;
    CALL_FOR_STORAGE(storage, next = rms_forward_row_then_sum(y, rstd, x, gamma, row, n, d, eps, taken, fixed_storage));
    return next;
}

void rmsnorm_forward_stored(void *y, float *rstd, const void *x, const float *gamma, size_t n, size_t d, float eps,
                            LnStorage storage)
{
#pragma omp parallel
    {
        SumAhead taken = {SIZE_MAX, 0.0f};
#pragma omp for schedule(static)
        for (size_t row = 0; row < n; row++)
            taken = rms_forward_row_stored(y, rstd, x, gamma, row, n, d, eps, taken, storage);
        streaming_stores_done();
    }
}
// ANCHOR_END: normalize_rows_by_their_rms

void rmsnorm_forward_f32(float *y, float *rstd, const float *x, const float *gamma, size_t n, size_t d, float eps)
{
    rmsnorm_forward_stored(y, rstd, x, gamma, n, d, eps, STORAGE_FLOAT32);
}

// ANCHOR: sum_g_xhat_over_an_rms_row
/* sum(g * xhat), g = gamma * dy, xhat = x * rstd recomputed from x. */
ROW_INLINE float sum_g_xhat(const void *dy, const void *x, const float *gamma, size_t d, float rstd, LnStorage storage)
{
    float acc[LANES] = {0}, dy_chunk[LANES], x_chunk[LANES];
    size_t i = 0;
    for (; i + LANES <= d; i += LANES) {
        const float *dyv = widen_chunk(dy_chunk, dy, i, LANES, storage),
                    *xv = widen_chunk(x_chunk, x, i, LANES, storage);
        for (int k = 0; k < LANES; k++)
            acc[k] += gamma[i + k] * dyv[k] * (xv[k] * rstd);
    }
    const float *dyv = widen_chunk(dy_chunk, dy, i, d - i, storage), *xv = widen_chunk(x_chunk, x, i, d - i, storage);
    for (int k = 0; i < d; i++, k++)
        acc[k] += gamma[i] * dyv[k] * (xv[k] * rstd);
    return add_lanes(acc);
}
// ANCHOR_END: sum_g_xhat_over_an_rms_row

// ANCHOR: differentiate_an_rms_element
/* One element of a row: its dx, and its share of dgamma added to the
 * partial sum; for a 16-bit row, whether the guard vouches for dx (layer
 * norm's, with mean(g) = 0). */
ROW_INLINE float rms_backward_element(float *dgamma_part, int *outside, float dy, float x, float gamma,
                                      const BackwardRow *r, bool guarded)
{
    float xhat = x * r->rstd, g = gamma * dy, mean_g_xhat = r->terms.means.mean_g_xhat;
    *dgamma_part += dy * xhat;
    if (guarded)
        *outside |= !ln_dx_within_guard(g, xhat, 0.0f, mean_g_xhat, r->terms.guard);
    return rms_dx(g, xhat, mean_g_xhat, r->rstd);
}
// ANCHOR_END: differentiate_an_rms_element

// ANCHOR: differentiate_a_span_of_an_rms_row
/* `count` elements of one row, and of two, as layer norm's backward_span
 * and backward_span_pair. */
ROW_INLINE void rms_backward_span(float *restrict dx, float *restrict dgamma_part, int *outside,
                                  const float *restrict dy, const float *restrict x, const float *restrict gamma,
                                  size_t count, const BackwardRow *r, bool guarded)
{
    int flags[BLOCK] = {0};
    for (size_t j = 0; j < count; j++)
        dx[j] = rms_backward_element(&dgamma_part[j], &flags[j], dy[j], x[j], gamma[j], r, guarded);
    *outside = any_flag_set(flags, count);
}

ROW_INLINE void rms_backward_span_pair(float *restrict dx0, float *restrict dx1, float *restrict dgamma_part,
                                       int *outside, const float *restrict dy0, const float *restrict x0,
                                       const float *restrict dy1, const float *restrict x1, const float *restrict gamma,
                                       size_t count, const BackwardRow *r0, const BackwardRow *r1, bool guarded)
{
    int flags[BLOCK] = {0};
    for (size_t j = 0; j < count; j++) {
        float dgamma = dgamma_part[j];
        dx0[j] = rms_backward_element(&dgamma, &flags[j], dy0[j], x0[j], gamma[j], r0, guarded);
        dx1[j] = rms_backward_element(&dgamma, &flags[j], dy1[j], x1[j], gamma[j], r1, guarded);
        dgamma_part[j] = dgamma;
    }
    *outside = any_flag_set(flags, count);
}

// ANCHOR_END: differentiate_a_span_of_an_rms_row

// ANCHOR: differentiate_an_rms_row
/* A chunk's partial row, gamma, the statistics of a sweep's rows, their
 * storage type, and whether they are guarded (as layer norm's). */
typedef struct {
    float *dgamma_part;
    const float *gamma;
    const double *gamma_wide; /* guarded rows: gamma in double, for their sums */
    BackwardRow row[ROWS_AT_ONCE];
    LnStorage storage;
    bool guarded;
} RmsBackwardRows;

/* A span of the rows, guarded as layer norm's differentiate_span. */
ROW_INLINE void rms_differentiate_span(const BackwardSpan *s, size_t first, size_t count, const void *norm)
{
    const RmsBackwardRows *c = norm;
    bool guarded = c->guarded;
    int outside = 0;
    if (s->count == 1)
        rms_backward_span(s->dx[0], c->dgamma_part + first, &outside, s->dy[0], s->x[0], c->gamma + first, count,
                          &c->row[0], guarded);
    else
        rms_backward_span_pair(s->dx[0], s->dx[1], c->dgamma_part + first, &outside, s->dy[0], s->x[0], s->dy[1],
                               s->x[1], c->gamma + first, count, &c->row[0], &c->row[1], guarded);
    if (guarded && outside)
        resolve_span_cancellations(s, first, count, c->gamma, c->row, c->storage);
}

// ANCHOR_END: differentiate_an_rms_row

// ANCHOR: sum_then_sweep_the_rms_rows
/* As layer norm's backward_sweep: each row's sum (in double and guarded
 * for a guarded row, about 0), then one sweep. */
ROW_INLINE void rms_backward_sweep(const BackwardRows *rows, RmsBackwardRows c, size_t d, float eps, LnStorage storage,
                                   bool guarded)
{
    c.storage = storage;
    c.guarded = guarded;
    for (size_t r = 0; r < rows->count; r++) {
        BackwardRow *row = &c.row[r];
        if (guarded)
            guard_backward_row(row, rows->dy[r], rows->x[r], c.gamma_wide, d, eps, false, rows->next_x[r], storage);
        else
            row->terms.means.mean_g_xhat =
                sum_g_xhat(rows->dy[r], rows->x[r], c.gamma, d, row->rstd, storage) / (float)d;
    }
    backward_rows(rows, d, rms_differentiate_span, &c, storage, !guarded);
}

/* rms_backward_sweep compiled once for each storage type, and for 16-bit
 * rows once more without the guard. */
static void rms_backward_sweep_stored(const BackwardRows *rows, RmsBackwardRows c, size_t d, float eps,
                                      LnStorage storage, bool guarded)
{
    if (guarded && storage != STORAGE_FLOAT32)
        CALL_FOR_STORAGE(storage, rms_backward_sweep(rows, c, d, eps, fixed_storage, true));
    else
        CALL_FOR_STORAGE(storage, rms_backward_sweep(rows, c, d, eps, fixed_storage, false));
}
// ANCHOR_END: sum_then_sweep_the_rms_rows

size_t rmsnorm_backward_f32_scratch_floats(size_t n, size_t d)
{
    return backward_chunks(n) * d;
}

/* dgamma in chunks of rows, one partial row each, added in chunk order:
 * the same bits for any number of threads (layernorm_backward_stored). */
static void rms_backward_rows_in_chunks(void *dx, float *dgamma, float *scratch, const void *dy, const void *x,
                                        const float *rstd, const float *gamma, size_t n, size_t d, float eps,
                                        LnStorage storage, bool guarded, size_t chunks)
{
    double *gamma_wide = guarded ? gamma_for_double_sums(gamma, d, storage) : NULL;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (size_t chunk = 0; chunk < chunks; chunk++) {
            float *dgamma_part = scratch + chunk * d;
            memset(dgamma_part, 0, d * sizeof *dgamma_part);
            size_t end = (chunk + 1) * n / chunks;
            for (size_t row = chunk * n / chunks; row < end;) {
                BackwardRows rows = backward_rows_from(dx, dy, x, row, end, n, d, storage);
                RmsBackwardRows c = {
                    .dgamma_part = dgamma_part, .gamma = gamma, .gamma_wide = gamma_wide, .storage = storage};
                for (size_t r = 0; r < rows.count; r++)
                    c.row[r] = (BackwardRow){.mean = 0.0f, .rstd = rstd[row + r]};
                rms_backward_sweep_stored(&rows, c, d, eps, storage, guarded);
                row += rows.count;
            }
        }
        streaming_stores_done();
    }
    array_free(gamma_wide);
    float *const sums[] = {dgamma};
    add_chunk_partials(sums, 1, scratch, chunks, d);
}

void rmsnorm_backward_stored(void *dx, float *dgamma, float *scratch, const void *dy, const void *x, const float *rstd,
                             const float *gamma, size_t n, size_t d, float eps, LnStorage storage)
{
    rms_backward_rows_in_chunks(dx, dgamma, scratch, dy, x, rstd, gamma, n, d, eps, storage, true, backward_chunks(n));
}

void rmsnorm_backward_in_one_chunk(void *dx, float *dgamma, float *scratch, const void *dy, const void *x,
                                   const float *rstd, const float *gamma, size_t n, size_t d, float eps,
                                   LnStorage storage, bool guarded)
{
    rms_backward_rows_in_chunks(dx, dgamma, scratch, dy, x, rstd, gamma, n, d, eps, storage, guarded, 1);
}

void rmsnorm_backward_float_then_round(void *dx, float *dgamma, float *scratch, const void *dy, const void *x,
                                       const float *rstd, const float *gamma, size_t n, size_t d, LnStorage storage)
{
    /* eps unused: the float path trusts the saved rstd */
    rms_backward_rows_in_chunks(dx, dgamma, scratch, dy, x, rstd, gamma, n, d, 0.0f, storage, false,
                                backward_chunks(n));
}

void rmsnorm_backward_f32(float *dx, float *dgamma, float *scratch, const float *dy, const float *x, const float *rstd,
                          const float *gamma, size_t n, size_t d)
{
    rmsnorm_backward_stored(dx, dgamma, scratch, dy, x, rstd, gamma, n, d, 0.0f, STORAGE_FLOAT32); /* eps unused */
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
