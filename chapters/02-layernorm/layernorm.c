#include "chapters/02-layernorm/layernorm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "chapters/02-layernorm/row_loops.h"
#include "chapters/02-layernorm/storage.h"
#include "common/alloc.h"
#include "kernels/layernorm_row.h"

/* sum(x - center) and sum(((x - center) - shift)^2) in one pass over a row
 * that the first pass brought into cache. The shift is 0 (and the compiler
 * drops it: x - 0 is x, signed zeros included) except where a row is
 * centred again (ln_first_mean_is_far). */
ROW_INLINE void deviation_sums(float *sum_dev, float *sum_dev_sq, const float *x, size_t n, float center, float shift)
{
    float acc[LANES] = {0}, acc_sq[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        for (int k = 0; k < LANES; k++) {
            float dev = x[i + k] - center, shifted = dev - shift;
            acc[k] += dev;
            acc_sq[k] += shifted * shifted;
        }
    }
    for (int k = 0; i < n; i++, k++) {
        float dev = x[i] - center, shifted = dev - shift;
        acc[k] += dev;
        acc_sq[k] += shifted * shifted;
    }
    *sum_dev = add_lanes(acc);
    *sum_dev_sq = add_lanes(acc_sq);
}

// ANCHOR: normalize_a_span
static void normalize_span(float *restrict out, const float *restrict x, const float *restrict gamma,
                           const float *restrict beta, size_t count, LnRowStats stats)
{
    for (size_t j = 0; j < count; j++)
        out[j] = ln_affine(ln_normalize(x[j], stats.mean, stats.residual, stats.rstd), gamma[j], beta[j]);
}

/* normalize_span for the `count` (< BLOCK) elements of a row from `first`
 * on, stored in y's type: the ends of the row, outside the streamed blocks. */
ROW_INLINE void normalize_stored(void *y, const float *x, const float *gamma, const float *beta, size_t first,
                                 size_t count, LnRowStats stats, LnStorage storage)
{
    float y_chunk[BLOCK];
    float *out = result_chunk(y_chunk, y, first, storage);
    normalize_span(out, x + first, gamma + first, beta + first, count, stats);
    narrow_chunk(y, first, out, count, storage);
}
// ANCHOR_END: normalize_a_span

// ANCHOR: centre_a_row_again_on_the_cpu
/* The moments of a row whose first mean was far from its mean, about m1. */
static LnRowMoments recentred_row_moments(const float *x, size_t d, float m1)
{
    float sum_dev, sum_dev_sq;
    deviation_sums(&sum_dev, &sum_dev_sq, x, d, m1, 0.0f); /* for c1 only */
    float c1 = sum_dev / (float)d;
    deviation_sums(&sum_dev, &sum_dev_sq, x, d, m1, c1);
    return ln_moments_about_the_mean(m1, sum_dev, sum_dev_sq, (float)d);
}

/* The corrected two-pass moments of a row whose sum the first pass took. */
static LnRowMoments row_moments(const float *x, size_t d, float sum)
{
    float first_mean = sum / (float)d;
    float sum_dev, sum_dev_sq;
    deviation_sums(&sum_dev, &sum_dev_sq, x, d, first_mean, 0.0f);
    LnRowMoments moments = ln_moments_from_deviations(first_mean, sum_dev, sum_dev_sq, (float)d);
    return ln_first_mean_is_far(sum_dev, sum_dev_sq, (float)d) ? recentred_row_moments(x, d, moments.mean) : moments;
}
// ANCHOR_END: centre_a_row_again_on_the_cpu

// ANCHOR: take_the_row_statistics

/* The statistics of a row whose sums overflowed or came out too small:
 * those of the row scaled by a power of two, scaled back. For a row
 * holding a NaN or an inf (NaN), or of zeros, `plain` stands. The scaled
 * row's sums neither overflow nor lose digits. */
static LnRowStats rescaled_row_stats(const float *x, size_t d, float eps, LnRowStats plain)
{
    int k;
    float *scaled = rescaled_row_f32(x, d, &k);
    if (scaled == NULL)
        return plain;
    LnRowStats stats = ln_unscaled_stats(row_moments(scaled, d, sum_in_lanes(scaled, d, SUM_VALUES)), k, eps);
    array_free(scaled);
    return stats;
}

/* The row's statistics, rescaled where its sums need it. A call per row,
 * not inlined: inlined into forward_row, it led GCC 12 to leave the float32
 * normalisation of a block scalar, at a third of the speed. */
__attribute__((noinline)) static LnRowStats row_stats(const float *x, size_t d, float eps, float sum)
{
    LnRowStats stats = ln_row_stats(row_moments(x, d, sum), eps);
    return ln_may_need_rescaling(stats.rstd) ? rescaled_row_stats(x, d, eps, stats) : stats;
}
// ANCHOR_END: take_the_row_statistics

// ANCHOR: normalize_rows
/* What stream_whole_blocks needs of a row (row_loops.h): its floats, the
 * parameters, its statistics, and the row after next to ask for. */
typedef struct {
    const float *row, *gamma, *beta;
    LnRowStats stats;
    const char *after_next;
    LnStorage storage;
} NormalizedRow;

/* y of `count` elements from `first` on, asking for the row after next,
 * one line of it per line of y written. */
ROW_INLINE void normalize_from(float *out, size_t first, size_t count, const void *pass)
{
    const NormalizedRow *r = pass;
    __builtin_prefetch(stored_at(r->after_next, first, r->storage), 0, 2);
    normalize_span(out, r->row + first, r->gamma + first, r->beta + first, count, r->stats);
}

/* One row, read from memory once: the first pass takes its sum and brings
 * it into the L1 cache (a row of 4096 floats is 16 KiB; a 16-bit row is
 * widened to floats there), and the other two read it there. */
ROW_INLINE void forward_row(void *y, float *mean, float *rstd, const void *x, RowsAhead ahead, const float *gamma,
                            const float *beta, size_t d, float eps, float *widened, LnStorage storage)
{
    float sum;
    const float *row = read_row_once(widened, &sum, x, d, ahead.next, SUM_VALUES, storage);
    NormalizedRow r = {row, gamma, beta, row_stats(row, d, eps, sum), ahead.after_next, storage};
    size_t j = unaligned_head(y, d, storage);
    normalize_stored(y, row, gamma, beta, 0, j, r.stats, storage);
    j = stream_whole_blocks(y, j, d, normalize_from, &r, storage);
    normalize_stored(y, row, gamma, beta, j, d - j, r.stats, storage);
    *mean = r.stats.mean;
    *rstd = r.stats.rstd;
}
// ANCHOR_END: normalize_rows

// ANCHOR: read_a_16_bit_row_once
/* The first pass over a 16-bit row: sum(x - shift) and sum((x - shift)^2)
 * in double, lane by lane, about its first element, as chunks of it are
 * widened in registers, while the row after next is asked for, into L2.
 * A double holds each difference of two floats (exactly, unless their
 * exponents lie 29 apart) and the square of any float, so nothing
 * overflows, and the first element is never so far from the mean that the
 * variance loses more than log2(d) of double's 53 bits: (x0 - mean)^2 <=
 * d var. One pass, where float32 takes two. The widened chunks are not
 * kept: the second pass widens the row again from L1, one instruction per
 * 16 fp16 values, not a 64-byte store here and a 64-byte load there. */
typedef struct {
    double shift, sum_dev, sum_dev_sq;
} ShiftedSums;

ROW_INLINE void add_deviations_in_double(double *acc, double *acc_sq, const float *x, size_t count, double shift)
{
    for (size_t k = 0; k < count; k++) {
        double dev = (double)x[k] - shift;
        acc[k] += dev;
        acc_sq[k] = fma(dev, dev, acc_sq[k]);
    }
}

// ANCHOR_END: read_a_16_bit_row_once

// ANCHOR: sum_the_deviations_eight_lanes_a_register
/* The same for the LANES elements from `first` on, with AVX-512: eight
 * lanes a register, each eight widened straight to double
 * (widen_eight_to_double). The same sums, so the same bits. */
#if defined(__AVX512F__)
ROW_INLINE void add_lanes_of_deviations(double *acc, double *acc_sq, const void *x, size_t first, double shift,
                                        LnStorage storage)
{
    for (size_t k = 0; k < LANES; k += 8) {
        __m512d dev = subtract_on_fma_pipes(widen_eight_to_double(x, first + k, storage), _mm512_set1_pd(shift));
        _mm512_storeu_pd(acc + k, _mm512_add_pd(_mm512_loadu_pd(acc + k), dev));
        _mm512_storeu_pd(acc_sq + k, _mm512_fmadd_pd(dev, dev, _mm512_loadu_pd(acc_sq + k)));
    }
}
#endif
// ANCHOR_END: sum_the_deviations_eight_lanes_a_register

// ANCHOR: sum_a_16_bit_row_a_piece_at_a_time
ROW_INLINE ShiftedSums read_16_bit_row_once(const void *x, size_t d, const void *row_after_next, LnStorage storage)
{
    double acc[LANES] = {0}, acc_sq[LANES] = {0};
    float chunk[LANES];
    ShiftedSums sums = {*widen_chunk(chunk, x, 0, 1, storage), 0.0, 0.0};
    size_t i = 0;
    for (; i + LANES <= d; i += LANES) {
        prefetch_lanes(row_after_next, i, true, storage);
#if defined(__AVX512F__)
        add_lanes_of_deviations(acc, acc_sq, x, i, sums.shift, storage);
#else
        add_deviations_in_double(acc, acc_sq, widen_chunk(chunk, x, i, LANES, storage), LANES, sums.shift);
#endif
    }
    add_deviations_in_double(acc, acc_sq, widen_chunk(chunk, x, i, d - i, storage), d - i, sums.shift);
    for (int k = 0; k < LANES; k++) {
        sums.sum_dev += acc[k];
        sums.sum_dev_sq += acc_sq[k];
    }
    return sums;
}
// ANCHOR_END: sum_a_16_bit_row_a_piece_at_a_time

// ANCHOR: normalize_a_16_bit_row
/* y of `count` elements of a 16-bit row, widened, into `out`, and whether
 * any element fails the guard (kernels/layernorm_row.h). */
ROW_INLINE bool normalize_guarded(float *restrict out, const float *restrict x, const float *restrict gamma,
                                  const float *restrict beta, const float *restrict guard_weights, size_t count,
                                  LnRowStats stats, float factor)
{
    int outside = 0;
    for (size_t j = 0; j < count; j++) {
        float y = ln_affine(ln_normalize(x[j], stats.mean, stats.residual, stats.rstd), gamma[j], beta[j]);
        outside |= !ln_within_guard(y, guard_weights[j], factor);
        out[j] = y;
    }
    return outside;
}

/* The same for a whole BLOCK. With AVX-512 the guard's 16 tests are one
 * mask register, and "any outside" one test of it: the loop above, left
 * to the compiler, folds its 16 flags into one with a chain of extracts,
 * shifts and ORs, about as long as the block's arithmetic; and
 * any_flag_set (row_loops.h), which the backward passes use, still turns
 * the mask into 16 ints and back. The same operations in the same order,
 * so the same bits. */
ROW_INLINE bool normalize_block_guarded(float *restrict out, const float *restrict x, const float *restrict gamma,
                                        const float *restrict beta, const float *restrict guard_weights,
                                        LnRowStats stats, float factor)
{
#if defined(__AVX512F__)
    __m512 centred =
        _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x), _mm512_set1_ps(stats.mean)), _mm512_set1_ps(stats.residual));
    __m512 xhat = _mm512_mul_ps(centred, _mm512_set1_ps(stats.rstd));
    __m512 y = _mm512_fmadd_ps(_mm512_loadu_ps(gamma), xhat, _mm512_loadu_ps(beta));
    __m512 least = _mm512_mul_ps(_mm512_set1_ps(factor), _mm512_loadu_ps(guard_weights));
    _mm512_storeu_ps(out, y);
    return _mm512_cmp_ps_mask(_mm512_abs_ps(y), least, _CMP_GE_OQ) != 0xFFFF; /* a NaN y compares false */
#else
    return normalize_guarded(out, x, gamma, beta, guard_weights, BLOCK, stats, factor);
#endif
}
// ANCHOR_END: normalize_a_16_bit_row

// ANCHOR: resolve_the_elements_near_cancellation
/* The elements of `out` (elements first .. first + count - 1 of the row)
 * that the guard cannot vouch for, computed again in double from x as
 * stored and rounded once into the storage type (held as a float: a
 * 16-bit value is one, and narrowing leaves it as it is). */
static void resolve_cancellations(float *out, const void *x, const float *gamma, const float *beta,
                                  const float *guard_weights, size_t first, size_t count, LnExactStats exact,
                                  float factor, LnStorage storage)
{
    for (size_t k = 0; k < count; k++) {
        size_t j = first + k;
        if (ln_within_guard(out[k], guard_weights[j], factor))
            continue;
        float stored_x;
        CALL_FOR_STORAGE(storage, widen_chunk(&stored_x, x, j, 1, fixed_storage));
        out[k] = (float)ln_storage_round_exact(storage, ln_y_in_double(stored_x, gamma[j], beta[j], exact));
    }
}

/* What a 16-bit row's y needs: the row as stored, the parameters, the
 * statistics, float and exact, the guard, and the thread's d floats where
 * blocks that fail the guard wait to be resolved. */
typedef struct {
    const void *x;
    const float *gamma, *beta, *guard_weights;
    LnRowStats stats;
    LnExactStats exact;
    float factor;
    float *set_aside;
} GuardedRow;
// ANCHOR_END: resolve_the_elements_near_cancellation

// ANCHOR: set_aside_the_blocks_that_fail
/* The whole blocks from `first` on, up to GROUP_BLOCKS of them, streamed
 * out (this pass only writes to memory: the first pass asked for the row
 * after next); a block that fails the guard is set aside and resolved
 * after the group. Then the loop over the blocks calls no function, and
 * keeps its constants in registers: a call in it clobbers every vector
 * register, and the loop would load them all again after each. Returns
 * the element after the group. */
enum { GROUP_BLOCKS = 64 };

ROW_INLINE size_t normalize_16_bit_blocks(void *y, const GuardedRow *r, size_t first, size_t d, LnStorage storage)
{
    uint64_t failed = 0;
    size_t j = first;
    for (int b = 0; b < GROUP_BLOCKS && j + BLOCK <= d; b++, j += BLOCK) {
        float block[BLOCK], x_block[BLOCK];
        if (normalize_block_guarded(block, widen_chunk(x_block, r->x, j, BLOCK, storage), r->gamma + j, r->beta + j,
                                    r->guard_weights + j, r->stats, r->factor)) {
            memcpy(r->set_aside + j, block, sizeof block);
            failed |= UINT64_C(1) << b;
        } else {
            store_block_streaming(y, j, block, storage);
        }
    }
    for (; failed != 0; failed &= failed - 1) {
        size_t block_first = first + (size_t)__builtin_ctzll(failed) * BLOCK;
        float *block = r->set_aside + block_first;
        resolve_cancellations(block, r->x, r->gamma, r->beta, r->guard_weights, block_first, BLOCK, r->exact, r->factor,
                              storage);
        narrow_chunk(y, block_first, block, BLOCK, storage);
    }
    return j;
}
// ANCHOR_END: set_aside_the_blocks_that_fail

// ANCHOR: finish_a_16_bit_row
/* y of the `count` (< BLOCK) elements from `first` on, stored in y's
 * type: the ends of the row, outside the streamed blocks. */
ROW_INLINE void normalize_16_bit_ends(void *y, const GuardedRow *r, size_t first, size_t count, LnStorage storage)
{
    float out[BLOCK], x_chunk[BLOCK];
    if (normalize_guarded(out, widen_chunk(x_chunk, r->x, first, count, storage), r->gamma + first, r->beta + first,
                          r->guard_weights + first, count, r->stats, r->factor))
        resolve_cancellations(out, r->x, r->gamma, r->beta, r->guard_weights, first, count, r->exact, r->factor,
                              storage);
    narrow_chunk(y, first, out, count, storage);
}

/* One 16-bit row: its statistics in double, saved and used rounded to
 * float; y in float a block at a time, guarded, the rare elements near
 * cancellation in double, then rounded to 16 bits and streamed out as the
 * float32 pass stores them. Memory reads during the first pass, the
 * longer one, which asks for the row after next (this row, asked for two
 * rows ago, is in L2), and writes during the second. */
ROW_INLINE void forward_16_bit_row(void *y, float *mean, float *rstd, const void *x, RowsAhead ahead,
                                   const float *gamma, const float *beta, const float *guard_weights, size_t d,
                                   float eps, float *set_aside, LnStorage storage)
{
    ShiftedSums sums = read_16_bit_row_once(x, d, ahead.after_next, storage);
    LnExactStats exact = ln_exact_stats(sums.shift, sums.sum_dev, sums.sum_dev_sq, (double)d, eps);
    LnRowStats stats = ln_rounded_stats(exact);
    float factor = ln_forward_guard_factor(exact, stats, ln_storage_significant_bits(storage));
    GuardedRow r = {x, gamma, beta, guard_weights, stats, exact, factor, set_aside};
    size_t j = unaligned_head(y, d, storage);
    normalize_16_bit_ends(y, &r, 0, j, storage);
    while (j + BLOCK <= d)
        j = normalize_16_bit_blocks(y, &r, j, d, storage);
    normalize_16_bit_ends(y, &r, j, d - j, storage);
    *mean = stats.mean;
    *rstd = stats.rstd;
}
// ANCHOR_END: finish_a_16_bit_row

// ANCHOR: share_the_rows_among_the_threads
/* A float32 row, or a 16-bit one compiled once for each type: guarded, or
 * (guard_weights NULL) the float32 kernel on the widened row. */
static void forward_row_stored(void *y, float *mean, float *rstd, const void *x, RowsAhead ahead, const float *gamma,
                               const float *beta, const float *guard_weights, size_t d, float eps, float *scratch,
                               LnStorage storage)
{
    if (guard_weights == NULL) {
        CALL_FOR_STORAGE(storage, forward_row(y, mean, rstd, x, ahead, gamma, beta, d, eps, scratch, fixed_storage));
        return;
    }
    if (storage == STORAGE_FP16)
        forward_16_bit_row(y, mean, rstd, x, ahead, gamma, beta, guard_weights, d, eps, scratch, STORAGE_FP16);
    else
        forward_16_bit_row(y, mean, rstd, x, ahead, gamma, beta, guard_weights, d, eps, scratch, STORAGE_BF16);
}

/* The rows spread over the threads; 16-bit rows guarded, or not
 * (layernorm_forward_float_then_round, for the benchmark). */
static void forward_rows(void *y, float *mean, float *rstd, const void *x, const float *gamma, const float *beta,
                         size_t n, size_t d, float eps, LnStorage storage, bool guarded)
{
    size_t row_bytes = d * ln_storage_bytes(storage);
    /* the 16-bit rows' guard, per column; float32 rows have none */
    float *guard_weights = guarded && storage != STORAGE_FLOAT32 ? ALLOC_ARRAY(d, float) : NULL;
    for (size_t j = 0; guard_weights != NULL && j < d; j++)
        guard_weights[j] = ln_guard_weight(beta[j], gamma[j]);
#pragma omp parallel
    {
        /* each thread's: where a guarded 16-bit row's blocks that fail the
         * guard wait, or a row computed in float is widened */
        float *scratch = ALLOC_ARRAY(d, float);
#pragma omp for schedule(static)
        for (size_t row = 0; row < n; row++)
            forward_row_stored((char *)y + row * row_bytes, mean + row, rstd + row, stored_at(x, row * d, storage),
                               rows_ahead(x, row, n, d, storage), gamma, beta, guard_weights, d, eps, scratch, storage);
        streaming_stores_done();
        array_free(scratch);
    }
    array_free(guard_weights);
}
// ANCHOR_END: share_the_rows_among_the_threads

void layernorm_forward_stored(void *y, float *mean, float *rstd, const void *x, const float *gamma, const float *beta,
                              size_t n, size_t d, float eps, LnStorage storage)
{
    forward_rows(y, mean, rstd, x, gamma, beta, n, d, eps, storage, true);
}

void layernorm_forward_float_then_round(void *y, float *mean, float *rstd, const void *x, const float *gamma,
                                        const float *beta, size_t n, size_t d, float eps, LnStorage storage)
{
    forward_rows(y, mean, rstd, x, gamma, beta, n, d, eps, storage, false);
}

void layernorm_forward_f32(float *y, float *mean, float *rstd, const float *x, const float *gamma, const float *beta,
                           size_t n, size_t d, float eps)
{
    layernorm_forward_stored(y, mean, rstd, x, gamma, beta, n, d, eps, STORAGE_FLOAT32);
}

/* sum(g), sum(g * (x - mean)) and sum(x - mean), g = gamma * dy: the
 * sums ln_backward_means turns into mean(g), mean(g * xhat) and the residual. */
ROW_INLINE LnBackwardMeans backward_sums(const void *dy, const void *x, const float *gamma, size_t d, float mean,
                                         float rstd, LnStorage storage)
{
    float acc_g[LANES] = {0}, acc_g_centered[LANES] = {0}, acc_centered[LANES] = {0};
    float dy_chunk[LANES], x_chunk[LANES];
    size_t i = 0;
    for (; i + LANES <= d; i += LANES) {
        const float *dyv = widen_chunk(dy_chunk, dy, i, LANES, storage),
                    *xv = widen_chunk(x_chunk, x, i, LANES, storage);
        for (int k = 0; k < LANES; k++) {
            float g = gamma[i + k] * dyv[k], centered = xv[k] - mean;
            acc_g[k] += g;
            acc_g_centered[k] += g * centered;
            acc_centered[k] += centered;
        }
    }
    const float *dyv = widen_chunk(dy_chunk, dy, i, d - i, storage), *xv = widen_chunk(x_chunk, x, i, d - i, storage);
    for (int k = 0; i < d; i++, k++) {
        float g = gamma[i] * dyv[k], centered = xv[k] - mean;
        acc_g[k] += g;
        acc_g_centered[k] += g * centered;
        acc_centered[k] += centered;
    }
    return ln_backward_means(add_lanes(acc_g), add_lanes(acc_g_centered), add_lanes(acc_centered), (float)d, rstd);
}

// ANCHOR: differentiate_an_element
/* One element of a row: its dx, and its shares of dgamma and dbeta added
 * to the partial sums. xhat is recomputed from x, the saved mean and rstd,
 * and the residual the row sums recovered: three operations per element
 * instead of a stored n x d tensor. A 16-bit row also asks whether the
 * guard vouches for dx (kernels/layernorm_row.h), and flags it if not. */
ROW_INLINE float backward_element(float *dgamma_part, float *dbeta_part, int *outside, float dy, float x, float gamma,
                                  const BackwardRow *r, bool guarded)
{
    const LnBackwardMeans *m = &r->terms.means;
    float xhat = ln_normalize(x, r->mean, m->residual, r->rstd), g = gamma * dy;
    *dgamma_part += dy * xhat;
    *dbeta_part += dy;
    if (guarded)
        *outside |= !ln_dx_within_guard(g, xhat, m->mean_g, m->mean_g_xhat, r->terms.guard);
    return ln_dx(g, xhat, m->mean_g, m->mean_g_xhat, r->rstd);
}

// ANCHOR_END: differentiate_an_element

// ANCHOR: differentiate_a_span
/* `count` elements of one row, and of two: each partial element loaded
 * once, the first row's shares added before the second's. The pair's
 * terms are copied into locals first: read through r0 and r1, GCC 12 gave
 * up vectorising one copy of this loop (the guarded fp16 rows'), finding
 * the guard "more than one data ref", and that sweep ran three times
 * slower. */
ROW_INLINE void backward_span(float *restrict dx, float *restrict dgamma_part, float *restrict dbeta_part, int *outside,
                              const float *restrict dy, const float *restrict x, const float *restrict gamma,
                              size_t count, const BackwardRow *r, bool guarded)
{
    int flags[BLOCK] = {0};
    for (size_t j = 0; j < count; j++)
        dx[j] = backward_element(&dgamma_part[j], &dbeta_part[j], &flags[j], dy[j], x[j], gamma[j], r, guarded);
    *outside = any_flag_set(flags, count);
}

ROW_INLINE void backward_span_pair(float *restrict dx0, float *restrict dx1, float *restrict dgamma_part,
                                   float *restrict dbeta_part, int *outside, const float *restrict dy0,
                                   const float *restrict x0, const float *restrict dy1, const float *restrict x1,
                                   const float *restrict gamma, size_t count, const BackwardRow *r0,
                                   const BackwardRow *r1, bool guarded)
{
    int flags[BLOCK] = {0};
    BackwardRow row0 = *r0, row1 = *r1;
    for (size_t j = 0; j < count; j++) {
        float dgamma = dgamma_part[j], dbeta = dbeta_part[j];
        dx0[j] = backward_element(&dgamma, &dbeta, &flags[j], dy0[j], x0[j], gamma[j], &row0, guarded);
        dx1[j] = backward_element(&dgamma, &dbeta, &flags[j], dy1[j], x1[j], gamma[j], &row1, guarded);
        dgamma_part[j] = dgamma;
        dbeta_part[j] = dbeta;
    }
    *outside = any_flag_set(flags, count);
}

// ANCHOR_END: differentiate_a_span

// ANCHOR: differentiate_a_row
/* A chunk's partial rows, gamma, the statistics of the rows of a sweep
 * (row_loops.h: backward_rows), their storage type, and whether they are
 * guarded (16-bit rows, unless computed in float and rounded). */
typedef struct {
    float *dgamma_part, *dbeta_part;
    const float *gamma;
    const double *gamma_wide; /* guarded rows: gamma in double, for their sums */
    BackwardRow row[ROWS_AT_ONCE];
    LnStorage storage;
    bool guarded;
} LnBackwardRows;

/* A span of the rows, and for guarded rows the elements the guard sent to
 * double (row_loops.h: resolve_span_cancellations). The sweep sets the
 * storage type and the guard to constants, and the tests on them
 * disappear. */
ROW_INLINE void differentiate_span(const BackwardSpan *s, size_t first, size_t count, const void *norm)
{
    const LnBackwardRows *c = norm;
    bool guarded = c->guarded;
    float *dgamma_part = c->dgamma_part + first, *dbeta_part = c->dbeta_part + first;
    int outside = 0;
    if (s->count == 1)
        backward_span(s->dx[0], dgamma_part, dbeta_part, &outside, s->dy[0], s->x[0], c->gamma + first, count,
                      &c->row[0], guarded);
    else
        backward_span_pair(s->dx[0], s->dx[1], dgamma_part, dbeta_part, &outside, s->dy[0], s->x[0], s->dy[1], s->x[1],
                           c->gamma + first, count, &c->row[0], &c->row[1], guarded);
    if (guarded && outside)
        resolve_span_cancellations(s, first, count, c->gamma, c->row, c->storage);
}

// ANCHOR_END: differentiate_a_row

// ANCHOR: sum_then_sweep_the_rows
/* One or two rows: each row's sums, then one sweep over both. A guarded
 * row's sums are in double, and its sweep guarded. */
ROW_INLINE void backward_sweep(const BackwardRows *rows, LnBackwardRows c, size_t d, float eps, LnStorage storage,
                               bool guarded)
{
    c.storage = storage;
    c.guarded = guarded;
    for (size_t r = 0; r < rows->count; r++) {
        BackwardRow *row = &c.row[r];
        if (guarded)
            guard_backward_row(row, rows->dy[r], rows->x[r], c.gamma_wide, d, eps, true, rows->next_x[r], storage);
        else
            row->terms.means = backward_sums(rows->dy[r], rows->x[r], c.gamma, d, row->mean, row->rstd, storage);
    }
    backward_rows(rows, d, differentiate_span, &c, storage, !guarded);
}

/* backward_sweep compiled once for each storage type, and for 16-bit
 * rows once more without the guard. */
static void backward_sweep_stored(const BackwardRows *rows, LnBackwardRows c, size_t d, float eps, LnStorage storage,
                                  bool guarded)
{
    if (guarded && storage != STORAGE_FLOAT32)
        CALL_FOR_STORAGE(storage, backward_sweep(rows, c, d, eps, fixed_storage, true));
    else
        CALL_FOR_STORAGE(storage, backward_sweep(rows, c, d, eps, fixed_storage, false));
}
// ANCHOR_END: sum_then_sweep_the_rows

// ANCHOR: sum_parameter_gradients_in_chunks
/* dgamma and dbeta are sums over all rows. Each of a fixed number of
 * chunks of rows sums into its own partial row, and the partials are then
 * added in chunk order, in double (256 * d additions, nothing next to the
 * n * d of the rows): no two threads write the same memory, and the result
 * is the same bits for any number of threads. A GPU does the same with one
 * partial row per thread block. */
size_t layernorm_backward_f32_scratch_floats(size_t n, size_t d)
{
    return backward_chunks(n) * 2 * d;
}
// ANCHOR_END: sum_parameter_gradients_in_chunks

// ANCHOR: differentiate_the_chunks_of_rows
static void backward_rows_in_chunks(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy,
                                    const void *x, const float *mean, const float *rstd, const float *gamma, size_t n,
                                    size_t d, float eps, LnStorage storage, bool guarded, size_t chunks)
{
    double *gamma_wide = guarded ? gamma_for_double_sums(gamma, d, storage) : NULL;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (size_t chunk = 0; chunk < chunks; chunk++) {
            float *dgamma_part = scratch + chunk * 2 * d, *dbeta_part = dgamma_part + d;
            memset(dgamma_part, 0, 2 * d * sizeof *dgamma_part);
            size_t end = (chunk + 1) * n / chunks;
            for (size_t row = chunk * n / chunks; row < end;) {
                BackwardRows rows = backward_rows_from(dx, dy, x, row, end, n, d, storage);
                LnBackwardRows c = {.dgamma_part = dgamma_part,
                                    .dbeta_part = dbeta_part,
                                    .gamma = gamma,
                                    .gamma_wide = gamma_wide,
                                    .storage = storage};
                for (size_t r = 0; r < rows.count; r++)
                    c.row[r] = (BackwardRow){.mean = mean[row + r], .rstd = rstd[row + r]};
                backward_sweep_stored(&rows, c, d, eps, storage, guarded);
                row += rows.count;
            }
        }
        streaming_stores_done();
    }
    array_free(gamma_wide);
    float *const sums[] = {dgamma, dbeta};
    add_chunk_partials(sums, 2, scratch, chunks, d);
}

void layernorm_backward_stored(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy, const void *x,
                               const float *mean, const float *rstd, const float *gamma, size_t n, size_t d, float eps,
                               LnStorage storage)
{
    backward_rows_in_chunks(dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d, eps, storage, true,
                            backward_chunks(n));
}
// ANCHOR_END: differentiate_the_chunks_of_rows

void layernorm_backward_in_one_chunk(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy,
                                     const void *x, const float *mean, const float *rstd, const float *gamma, size_t n,
                                     size_t d, float eps, LnStorage storage, bool guarded)
{
    backward_rows_in_chunks(dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d, eps, storage, guarded, 1);
}

void layernorm_backward_float_then_round(void *dx, float *dgamma, float *dbeta, float *scratch, const void *dy,
                                         const void *x, const float *mean, const float *rstd, const float *gamma,
                                         size_t n, size_t d, LnStorage storage)
{
    /* eps unused: the float path trusts the saved rstd */
    backward_rows_in_chunks(dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d, 0.0f, storage, false,
                            backward_chunks(n));
}

void layernorm_backward_f32(float *dx, float *dgamma, float *dbeta, float *scratch, const float *dy, const float *x,
                            const float *mean, const float *rstd, const float *gamma, size_t n, size_t d)
{
    /* float32 rows do not use eps: their float path trusts the saved rstd */
    layernorm_backward_stored(dx, dgamma, dbeta, scratch, dy, x, mean, rstd, gamma, n, d, 0.0f, STORAGE_FLOAT32);
}

// ANCHOR: compute_the_reference
/* The same corrected two-pass algorithm as the float kernel, in double:
 * a reference whose own error stays far below float's even for a row
 * whose mean is 1e8 times its standard deviation. */
void layernorm_forward_f64(double *y, double *mean, double *rstd, const double *x, const double *gamma,
                           const double *beta, size_t n, size_t d, double eps)
{
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d;
        double sum = 0.0, sum_dev = 0.0, sum_dev_sq = 0.0;
        for (size_t j = 0; j < d; j++)
            sum += xr[j];
        double first_mean = sum / (double)d;
        for (size_t j = 0; j < d; j++) {
            sum_dev += xr[j] - first_mean;
            sum_dev_sq += (xr[j] - first_mean) * (xr[j] - first_mean);
        }
        double correction = sum_dev / (double)d;
        double m = first_mean + correction;
        /* Rounding can leave the variance a hair below 0: clamped. A row
         * with an inf or a NaN has a NaN variance, which stays NaN, as in
         * the kernels (fmax would make it 0, and rstd 1/sqrt(eps)). */
        double variance = sum_dev_sq / (double)d - correction * correction;
        double r = 1.0 / sqrt((variance < 0.0 ? 0.0 : variance) + eps);
        for (size_t j = 0; j < d; j++)
            y[row * d + j] = gamma[j] * ((xr[j] - m) * r) + beta[j];
        mean[row] = m;
        rstd[row] = r;
    }
}
// ANCHOR_END: compute_the_reference

// ANCHOR: differentiate_the_reference
void layernorm_backward_f64(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,
                            const double *mean, const double *rstd, const double *gamma, size_t n, size_t d)
{
    for (size_t j = 0; j < d; j++)
        dgamma[j] = dbeta[j] = 0.0;
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d, *dyr = dy + row * d;
        double sum_g = 0.0, sum_g_xhat = 0.0;
        for (size_t j = 0; j < d; j++) {
            double g = gamma[j] * dyr[j];
            sum_g += g;
            sum_g_xhat += g * (xr[j] - mean[row]) * rstd[row];
        }
        double mean_g = sum_g / (double)d, mean_g_xhat = sum_g_xhat / (double)d;
        for (size_t j = 0; j < d; j++) {
            double xhat = (xr[j] - mean[row]) * rstd[row];
            dx[row * d + j] = rstd[row] * (gamma[j] * dyr[j] - mean_g - xhat * mean_g_xhat);
            dgamma[j] += dyr[j] * xhat;
            dbeta[j] += dyr[j];
        }
    }
}
// ANCHOR_END: differentiate_the_reference

// ANCHOR: differentiate_node_by_node
void layernorm_backward_unfused_f64(double *dx, double *dgamma, double *dbeta, const double *dy, const double *x,
                                    const double *gamma, size_t n, size_t d, double eps)
{
    double *centered = ALLOC_ARRAY(d, double), *d_centered = ALLOC_ARRAY(d, double);
    for (size_t j = 0; j < d; j++)
        dgamma[j] = dbeta[j] = 0.0;
    for (size_t row = 0; row < n; row++) {
        const double *xr = x + row * d, *dyr = dy + row * d;
        /* Forward, keeping every node: mu, centered, var, rstd. */
        double mu = 0.0, var = 0.0;
        for (size_t j = 0; j < d; j++)
            mu += xr[j];
        mu /= (double)d;
        for (size_t j = 0; j < d; j++) {
            centered[j] = xr[j] - mu;
            var += centered[j] * centered[j];
        }
        var /= (double)d;
        double rstd = pow(var + eps, -0.5);
        // ANCHOR: walk_the_nodes_backward
        /* Backward, one node at a time, in reverse. */
        double d_rstd = 0.0;
        for (size_t j = 0; j < d; j++) {
            double xhat = centered[j] * rstd;
            dbeta[j] += dyr[j]; /* y = gamma * xhat + beta */
            dgamma[j] += dyr[j] * xhat;
            double d_xhat = dyr[j] * gamma[j];
            d_centered[j] = d_xhat * rstd; /* xhat = centered * rstd */
            d_rstd += d_xhat * centered[j];
        }
        double d_var = d_rstd * -0.5 * pow(var + eps, -1.5); /* rstd = (var + eps)^(-1/2) */
        double d_mu = 0.0;
        for (size_t j = 0; j < d; j++) {
            d_centered[j] += d_var * 2.0 * centered[j] / (double)d; /* var = mean(centered^2) */
            d_mu -= d_centered[j];                                  /* centered = x - mu */
        }
        for (size_t j = 0; j < d; j++)
            dx[row * d + j] = d_centered[j] + d_mu / (double)d; /* mu = mean(x) */
        // ANCHOR_END: walk_the_nodes_backward
    }
    array_free(centered);
    array_free(d_centered);
}
// ANCHOR_END: differentiate_node_by_node

void widen_f32(double *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = in[i];
}
