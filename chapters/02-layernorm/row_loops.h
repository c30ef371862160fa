/* The loops that the chapter's row kernels (layernorm.c, rmsnorm.c) share:
 * rows read and written in their storage type, sums that vectorise without
 * reordering, and parameter gradients summed over rows in a fixed number of
 * chunks. */
#ifndef CHAPTERS_02_LAYERNORM_ROW_LOOPS_H
#define CHAPTERS_02_LAYERNORM_ROW_LOOPS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "chapters/02-layernorm/storage.h"
#include "common/alloc.h"
#include "kernels/bf16.h"
#include "kernels/fp16.h"
#include "kernels/layernorm_row.h"
#include "kernels/layernorm_storage.h"

/* Called with a constant storage type, a function marked so is inlined and
 * its switch on the type disappears: one source, a loop per type. */
#define ROW_INLINE static inline __attribute__((always_inline))

/* `call` once for each storage type, with `fixed_storage` a constant in
 * each case: a ROW_INLINE function called so is inlined three times, each
 * copy with its switches on the type gone. */
#define CALL_FOR_STORAGE(storage, call)                      \
    do {                                                     \
        switch (storage) {                                   \
        case STORAGE_FP16: {                                 \
            const LnStorage fixed_storage = STORAGE_FP16;    \
            call;                                            \
            break;                                           \
        }                                                    \
        case STORAGE_BF16: {                                 \
            const LnStorage fixed_storage = STORAGE_BF16;    \
            call;                                            \
            break;                                           \
        }                                                    \
        case STORAGE_FLOAT32:                                \
        default: {                                           \
            const LnStorage fixed_storage = STORAGE_FLOAT32; \
            call;                                            \
        }                                                    \
        }                                                    \
    } while (0)

// ANCHOR: widen_a_chunk_of_a_row
/* x and dy are read, and y and dx written, in their storage type: a 16-bit
 * row moves half the bytes of a float32 one. The arithmetic is float32.
 * Converting a chunk is a loop of independent values: bf16's shift the
 * compiler turns into vector instructions, fp16's takes 8 values per F16C
 * instruction where the machine has them (halves_to_floats,
 * kernels/fp16.h). For float32 the "chunk" is the row itself, in place: no
 * copy. Widening is exact, so every sum and every element is the bits the
 * float32 kernel gives on the widened row, and y and dx are rounded once,
 * to nearest even. */
ROW_INLINE const float *widen_chunk(float *chunk, const void *row, size_t first, size_t count, LnStorage storage)
{
    const uint16_t *bits = (const uint16_t *)row + first;
    switch (storage) {
    case STORAGE_FP16:
        halves_to_floats(chunk, bits, count);
        return chunk;
    case STORAGE_BF16:
        for (size_t k = 0; k < count; k++)
            chunk[k] = bf16_to_float(bits[k]);
        return chunk;
    case STORAGE_FLOAT32:
    default:
        return (const float *)row + first;
    }
}
// ANCHOR_END: widen_a_chunk_of_a_row

// ANCHOR: narrow_a_chunk_into_its_row
/* Where to compute `count` results that go to row[first ...]: the row
 * itself for float32, else `chunk`, for narrow_chunk to store. */
ROW_INLINE float *result_chunk(float *chunk, void *row, size_t first, LnStorage storage)
{
    return storage == STORAGE_FLOAT32 ? (float *)row + first : chunk;
}

ROW_INLINE void narrow_chunk(void *row, size_t first, const float *chunk, size_t count, LnStorage storage)
{
    uint16_t *bits = (uint16_t *)row + first;
    switch (storage) {
    case STORAGE_FP16:
        halves_from_floats(bits, chunk, count);
        return;
    case STORAGE_BF16:
        for (size_t k = 0; k < count; k++)
            bits[k] = bf16_from_float(chunk[k]);
        return;
    case STORAGE_FLOAT32:
    default:
        return; /* result_chunk put them in place */
    }
}

/* Element `index` of a row in its storage type, as bytes from its start
 * (for prefetches and row pointers). */
ROW_INLINE const char *stored_at(const void *row, size_t index, LnStorage storage)
{
    return (const char *)row + index * ln_storage_bytes(storage);
}
// ANCHOR_END: narrow_a_chunk_into_its_row

// ANCHOR: sum_in_lanes
/* A float sum the compiler can vectorise without -ffast-math: LANES
 * independent running sums, one per vector lane, added pairwise at the end.
 * Vectorising `s += x[i]` would reorder the additions, which C forbids;
 * these are separate chains, so no reordering is needed, and the result
 * is the same bits whatever the vector width. */
enum { LANES = 32 };

static inline float add_lanes(float *acc)
{
    for (int width = LANES / 2; width > 0; width /= 2)
        for (int k = 0; k < width; k++)
            acc[k] += acc[k + width];
    return acc[0];
}

/* What a row's first pass sums: layer norm's mean needs the values,
 * RMSNorm's rms their squares. */
typedef enum { SUM_VALUES, SUM_SQUARES } LaneSum;

ROW_INLINE void add_into_lanes(float *acc, const float *x, size_t count, LaneSum what)
{
    for (size_t k = 0; k < count; k++)
        acc[k] += what == SUM_SQUARES ? x[k] * x[k] : x[k];
}

ROW_INLINE float sum_in_lanes(const float *x, size_t n, LaneSum what)
{
    float acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        add_into_lanes(acc, x + i, LANES, what);
    add_into_lanes(acc, x + i, n - i, what);
    return add_lanes(acc);
}
// ANCHOR_END: sum_in_lanes

// ANCHOR: widen_eight_values_to_double
#if defined(__AVX512F__)
/* Eight values of a 16-bit row, from `first` on, in double: widened to
 * float in a 256-bit register (F16C's conversion for fp16, a shift for
 * bf16), then to double, with no shuffle between. */
ROW_INLINE __m512d widen_eight_to_double(const void *row, size_t first, LnStorage storage)
{
    __m128i bits = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + first));
    __m256 wide = storage == STORAGE_FP16 ? _mm256_cvtph_ps(bits) : floats8_from_bf16s(bits);
    return _mm512_cvtps_pd(wide);
}

/* x - c as the fused multiply-add x * 1 - c: the exact difference rounded
 * once, the same bits as the subtraction, but on other pipes. AMD's Zen 4
 * has four vector pipes, two that multiply and multiply-add and two that
 * add; a row's double sums fill the adding pair (the conversions, timed
 * on a Zen 4, compete with additions, not with multiplies) while the
 * multiplying pair idles between squares. Moved there, the subtraction
 * made the sums faster on rows in L1 with nothing else changed (the
 * commit that made it gives the cycles). */
ROW_INLINE __m512d subtract_on_fma_pipes(__m512d x, __m512d c)
{
    return _mm512_fmsub_pd(x, _mm512_set1_pd(1.0), c);
}
#endif
// ANCHOR_END: widen_eight_values_to_double

// ANCHOR: prefetch_the_rows_ahead
/* Prefetch: while a row is worked on in cache, nothing is loading from
 * memory; asking for the rows ahead during that work keeps memory busy.
 * One prefetch per 64-byte cache line. The next row is asked for during
 * the first pass (read_row_once), where the first pass of that row will
 * read it.
 * The row after it is asked for during the third pass, one line for each
 * line of y written: otherwise memory would see a phase of reads only (the
 * first pass) and then one of writes only (the third), and with rows of
 * 16 KiB each phase is long enough to leave the other direction idle. That
 * row goes to L2: it is needed only after the next one, and L1 is full
 * with this row, gamma and beta. */
typedef struct {
    const char *next, *after_next;
} RowsAhead;

/* The rows after `row`; the last rows prefetch themselves (a prefetch
 * address must stay inside the tensor to be valid C). */
static inline RowsAhead rows_ahead(const void *x, size_t row, size_t n, size_t d, LnStorage storage)
{
    RowsAhead ahead = {stored_at(x, (row + 1 < n ? row + 1 : row) * d, storage),
                       stored_at(x, (row + 2 < n ? row + 2 : row) * d, storage)};
    return ahead;
}

/* One prefetch per 64-byte line of the LANES elements from i on, into L1,
 * or into L2 only (a row wanted after the next one). */
ROW_INLINE void prefetch_lanes(const void *row, size_t i, bool into_l2, LnStorage storage)
{
    for (size_t byte = 0; byte < LANES * ln_storage_bytes(storage); byte += 64)
        if (into_l2)
            __builtin_prefetch(stored_at(row, i, storage) + byte, 0, 2);
        else
            __builtin_prefetch(stored_at(row, i, storage) + byte);
}
// ANCHOR_END: prefetch_the_rows_ahead

// ANCHOR: take_a_row_sum_a_piece_at_a_time
/* A row's sum (of the values or of their squares) in lanes, the same bits
 * as sum_in_lanes, taken LANES elements at a time, in order, as far as the
 * caller asks: at once, or a piece at a time while other work goes on
 * (rms_forward_row_then_sum). Each piece asks for the same span of
 * `ahead`, into L1 or into L2 only. A 16-bit row is widened a piece at a
 * time, into `kept` where the caller keeps the floats, or else into a
 * chunk that is dropped. */
typedef struct {
    const void *x, *ahead;
    float *kept;
    bool into_l2;
    LaneSum what;
    size_t done; /* elements summed so far */
    float acc[LANES];
} RowSum;

static inline RowSum row_sum_begin(const void *x, const void *ahead, bool into_l2, float *kept, LaneSum what)
{
    RowSum sum = {x, ahead, kept, into_l2, what, 0, {0}};
    return sum;
}

/* The row's whole pieces of LANES elements up to element `end`. */
ROW_INLINE void row_sum_up_to(RowSum *sum, size_t end, LnStorage storage)
{
    float chunk[LANES];
    for (; sum->done + LANES <= end; sum->done += LANES) {
        prefetch_lanes(sum->ahead, sum->done, sum->into_l2, storage);
        float *widened = sum->kept != NULL ? sum->kept + sum->done : chunk;
        add_into_lanes(sum->acc, widen_chunk(widened, sum->x, sum->done, LANES, storage), LANES, sum->what);
    }
}
// ANCHOR_END: take_a_row_sum_a_piece_at_a_time

// ANCHOR: finish_a_row_sum
/* The rest of a row of d elements, and its sum. */
ROW_INLINE float row_sum_finish(RowSum *sum, size_t d, LnStorage storage)
{
    row_sum_up_to(sum, d, storage);
    float chunk[LANES];
    size_t i = sum->done;
    float *widened = sum->kept != NULL ? sum->kept + i : chunk;
    add_into_lanes(sum->acc, widen_chunk(widened, sum->x, i, d - i, storage), d - i, sum->what);
    sum->done = d;
    return add_lanes(sum->acc);
}
// ANCHOR_END: finish_a_row_sum

// ANCHOR: read_a_row_once
/* The first pass over a layer norm row, the only one that reads it from
 * memory: it takes the row's sum at once while it asks for the next row,
 * into L1 (the third pass asks for the row after). A 16-bit row is widened
 * on the way into `widened`, d floats of the thread's own (16 KiB at
 * d = 4096, which stays in L1 or L2), and the passes after this one read
 * floats there: widening a chunk at a time in each pass would convert
 * every element three times, and leave the 16-bit passes limited by those
 * instructions, not by memory. A float32 row is used where it lies. */
ROW_INLINE const float *read_row_once(float *widened, float *sum, const void *x, size_t d, const void *next_row,
                                      LaneSum what, LnStorage storage)
{
    RowSum row = row_sum_begin(x, next_row, false, widened, what);
    *sum = row_sum_finish(&row, d, storage);
    return storage == STORAGE_FLOAT32 ? (const float *)x : widened;
}
// ANCHOR_END: read_a_row_once

// ANCHOR: stream_a_block_of_results
/* Streaming stores: an ordinary store first reads the cache line it
 * writes into (to own it), so writing y costs a read of y as well. A
 * non-temporal store writes a whole line straight to memory instead, as
 * memcpy does for large copies. It wants a 64-byte-aligned address (an
 * AVX-512 vector; two AVX vectors otherwise). Without AVX it is a plain
 * copy. */
enum { BLOCK = 16, FLOAT_BLOCK_BYTES = 64 };

// ANCHOR: stream_a_16_bit_block
/* BLOCK results rounded to fp16 or bf16 and streamed to dst: 32 bytes. */
ROW_INLINE void store_16_bit_block_streaming(uint16_t *dst, const float *block, LnStorage storage)
{
#if defined(FP16_AVX512) && defined(BF16_AVX512)
    /* With AVX-512 the 16 results are rounded in one register and streamed
     * from it, 32 bytes, without a trip through memory. */
    __m512 values = _mm512_loadu_ps(block);
    _mm256_stream_si256((__m256i *)dst,
                        storage == STORAGE_FP16 ? halves16_from_floats(values) : bf16s16_from_floats(values));
#else
    uint16_t bits[BLOCK];
    if (storage == STORAGE_FP16)
        halves_from_floats(bits, block, BLOCK);
    else
        bf16s_from_floats(bits, block, BLOCK);
#if defined(__AVX__)
    /* Two 16-byte halves, as the conversions stored them, 8 at a time: a
     * 32-byte load of two 16-byte stores cannot take its data from them
     * in flight, and waits for them to reach the cache, on every block. */
    _mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)bits));
    _mm_stream_si128((__m128i *)dst + 1, _mm_loadu_si128((const __m128i *)(bits + 8)));
#else
    memcpy(dst, bits, sizeof bits);
#endif
#endif
}
// ANCHOR_END: stream_a_16_bit_block

/* BLOCK results, rounded to the storage type, streamed to row[first ...]:
 * 64 bytes in float32, 32 in 16 bits. */
ROW_INLINE void store_block_streaming(void *row, size_t first, const float *block, LnStorage storage)
{
    if (storage != STORAGE_FLOAT32) {
        store_16_bit_block_streaming((uint16_t *)row + first, block, storage);
        return;
    }
    float *dst = (float *)row + first;
#if defined(__AVX512F__)
    _mm512_stream_ps(dst, _mm512_loadu_ps(block));
#elif defined(__AVX__)
    _mm256_stream_ps(dst, _mm256_loadu_ps(block));
    _mm256_stream_ps(dst + 8, _mm256_loadu_ps(block + 8));
#else
    memcpy(dst, block, BLOCK * sizeof *block);
#endif
}
// ANCHOR_END: stream_a_block_of_results

// ANCHOR: begin_and_end_the_streamed_blocks
/* Streaming stores are not ordered with other stores: each thread ends its
 * share of the rows with a fence, so that everything it wrote is in place
 * before the parallel loop ends (a fence per row would wait for each row's
 * stores to drain). */
static inline void streaming_stores_done(void)
{
#if defined(__AVX__)
    _mm_sfence();
#endif
}

/* Elements before the first block boundary in dst (at most d): they are
 * stored the ordinary way, and so is what is left after the last block. */
static inline size_t unaligned_head(const void *dst, size_t d, LnStorage storage)
{
    size_t size = ln_storage_bytes(storage), block_bytes = BLOCK * size;
    size_t misaligned = (uintptr_t)dst % block_bytes / size;
    size_t head = misaligned == 0 ? 0 : BLOCK - misaligned;
    return head < d ? head : d;
}
// ANCHOR_END: begin_and_end_the_streamed_blocks

// ANCHOR: stream_16_bit_results_a_line_at_a_time
/* Two blocks of 16-bit results, one 64-byte line, in one streaming store
 * where AVX-512 rounds them in registers (else as two blocks). Two 32-byte
 * streaming stores to one line leave it in halves unless the processor
 * joins them in its write-combining buffer first, and between them lies
 * the arithmetic of a block; one store sends the whole line at once. */
ROW_INLINE void store_16_bit_line_streaming(void *row, size_t first, const float *line, LnStorage storage)
{
#if defined(FP16_AVX512) && defined(BF16_AVX512)
    __m512 low = _mm512_loadu_ps(line), high = _mm512_loadu_ps(line + BLOCK);
    __m512i bits = storage == STORAGE_FP16 ? _mm512_inserti64x4(_mm512_castsi256_si512(halves16_from_floats(low)),
                                                                halves16_from_floats(high), 1)
                                           : bf16s32_from_floats(low, high);
    _mm512_stream_si512((__m512i *)((uint16_t *)row + first), bits);
#else
    store_16_bit_block_streaming((uint16_t *)row + first, line, storage);
    store_16_bit_block_streaming((uint16_t *)row + first + BLOCK, line + BLOCK, storage);
#endif
}
// ANCHOR_END: stream_16_bit_results_a_line_at_a_time

// ANCHOR: stream_the_whole_blocks
/* A forward pass's results for `count` elements of its row from `first`
 * on, into `out`; `pass` holds the row and its statistics. */
typedef void ResultSpanFn(float *out, size_t first, size_t count, const void *pass);

/* The whole blocks of a row from `first` (a block boundary) on, computed by
 * `results` and streamed out: a float32 block is a line; 16-bit blocks go
 * in pairs, a line each, from the first line boundary on. Returns the
 * element after the last block. */
ROW_INLINE size_t stream_whole_blocks(void *y, size_t first, size_t d, ResultSpanFn *results, const void *pass,
                                      LnStorage storage)
{
    float line[2 * BLOCK];
    size_t j = first;
    bool in_pairs = storage != STORAGE_FLOAT32;
    if (in_pairs && (uintptr_t)stored_at(y, j, storage) % 64 != 0 && j + BLOCK <= d) {
        results(line, j, BLOCK, pass);
        store_block_streaming(y, j, line, storage);
        j += BLOCK;
    }
    for (; in_pairs && j + 2 * BLOCK <= d; j += 2 * BLOCK) {
        results(line, j, 2 * BLOCK, pass);
        store_16_bit_line_streaming(y, j, line, storage);
    }
    for (; j + BLOCK <= d; j += BLOCK) {
        results(line, j, BLOCK, pass);
        store_block_streaming(y, j, line, storage);
    }
    return j;
}
// ANCHOR_END: stream_the_whole_blocks

// ANCHOR: test_a_block_of_flags
/* Whether any of `count` (at most BLOCK) flags is set: the guard's verdicts
 * on a span's elements, one int each. Folding 16 flags into one the way
 * the compiler does (extracts, shifts and ORs, then a move to a general
 * register) costs about as many instructions as a block's arithmetic;
 * with AVX-512 a whole block is one test that leaves a mask. */
ROW_INLINE bool any_flag_set(const int *flags, size_t count)
{
#if defined(__AVX512F__)
    if (count == BLOCK) {
        __m512i all = _mm512_loadu_si512(flags);
        return _mm512_test_epi32_mask(all, all) != 0;
    }
#endif
    int any = 0;
    for (size_t k = 0; k < count; k++)
        any |= flags[k];
    return any;
}
// ANCHOR_END: test_a_block_of_flags

// ANCHOR: rescale_a_row_on_the_cpu
/* A copy of the row times 2^-k, k = ln_scaling_exponent of its largest
 * magnitude (exact: kernels/layernorm_row.h), for a row whose statistics
 * came out 0, NaN or too small; NULL where the row holds a NaN or an inf,
 * whose statistics stay NaN, or is all zeros. Rare, so it allocates; the
 * caller frees. */
static inline float *rescaled_row_f32(const float *x, size_t d, int *k)
{
    float max_magnitude = 0.0f;
    for (size_t j = 0; j < d; j++)
        max_magnitude = fmaxf(max_magnitude, ln_magnitude(x[j]));
    if (!ln_can_rescale(max_magnitude))
        return NULL;
    *k = ln_scaling_exponent(max_magnitude);
    float *scaled = ALLOC_ARRAY(d, float);
    for (size_t j = 0; j < d; j++)
        scaled[j] = ldexpf(x[j], -*k);
    return scaled;
}
// ANCHOR_END: rescale_a_row_on_the_cpu

/* The number of chunks of rows that the backward passes sum dgamma (and
 * dbeta) in: LN_BACKWARD_CHUNKS, or one per row when there are fewer. */
static inline size_t backward_chunks(size_t n)
{
    return n < LN_BACKWARD_CHUNKS ? n : LN_BACKWARD_CHUNKS;
}

// ANCHOR: differentiate_rows_in_pairs
/* Each row of a chunk adds its shares of the parameter gradients into the
 * chunk's partial rows, and at d = 4096 those (16 KiB a parameter) do not
 * fit in L1 beside the rows of x and dy: a row that updates them on its
 * own loads and stores every partial element from L2. Two rows of a chunk
 * differentiated in one sweep load and store each partial element once for
 * both, adding the first row's share and then the second's: the additions
 * of one row after the other, as one row at a time makes them, so the same
 * bits. */
enum { ROWS_AT_ONCE = 2 };

typedef struct {
    size_t count; /* ROWS_AT_ONCE, or 1 (below) */
    void *dx[ROWS_AT_ONCE];
    const void *dy[ROWS_AT_ONCE], *x[ROWS_AT_ONCE];
    const char *next_x[ROWS_AT_ONCE], *next_dy[ROWS_AT_ONCE]; /* the rows after them, prefetched */
} BackwardRows;

/* The rows of a chunk (up to `end`) that one sweep takes from `row` on:
 * two, or one where one is left, or where the two dx rows lie differently
 * about a block boundary (rows that are not a whole number of blocks, as
 * at odd d): their streamed blocks would not line up. The rows after them are
 * prefetched; the last rows prefetch themselves (an address must stay
 * inside the tensor to be valid C). */
static inline BackwardRows backward_rows_from(void *dx, const void *dy, const void *x, size_t row, size_t end, size_t n,
                                              size_t d, LnStorage storage)
{
    BackwardRows rows = {.count = 1};
    for (size_t r = 0; r < ROWS_AT_ONCE && row + r < end; r++) {
        size_t next = row + r + ROWS_AT_ONCE < n ? row + r + ROWS_AT_ONCE : row + r;
        rows.dx[r] = (char *)dx + (row + r) * d * ln_storage_bytes(storage);
        rows.dy[r] = stored_at(dy, (row + r) * d, storage);
        rows.x[r] = stored_at(x, (row + r) * d, storage);
        rows.next_dy[r] = stored_at(dy, next * d, storage);
        rows.next_x[r] = stored_at(x, next * d, storage);
    }
    if (row + 1 < end && unaligned_head(rows.dx[0], d, storage) == unaligned_head(rows.dx[1], d, storage))
        rows.count = 2;
    return rows;
}

// ANCHOR_END: differentiate_rows_in_pairs

// ANCHOR: widen_a_span_of_the_rows
/* A span of those rows in floats: dy and x widened, dx to be computed. */
typedef struct {
    size_t count;
    float *dx[ROWS_AT_ONCE];
    const float *dy[ROWS_AT_ONCE], *x[ROWS_AT_ONCE];
} BackwardSpan;

/* A norm's work on the elements first .. first + count - 1 of a span: dx
 * of each row, and the rows' shares added to the chunk's partials (which,
 * with gamma and the rows' statistics, `norm` holds). */
typedef void BackwardSpanFn(const BackwardSpan *span, size_t first, size_t count, const void *norm);

/* One span of `row_count` rows, widened from their storage type; dx
 * streamed out for a whole block, rounded into its row at the ends. The
 * loops over the rows are unrolled by request: GCC kept the one over two
 * bf16 rows as a loop, which picks each row's pointers and statistics
 * from memory at run time instead of holding both rows' in registers. */
ROW_INLINE void backward_span_stored(const BackwardRows *rows, size_t row_count, size_t first, size_t count,
                                     bool streamed, BackwardSpanFn *differentiate, const void *norm, LnStorage storage)
{
    float dy_chunk[ROWS_AT_ONCE][BLOCK], x_chunk[ROWS_AT_ONCE][BLOCK], dx_chunk[ROWS_AT_ONCE][BLOCK];
    BackwardSpan span = {.count = row_count};
#pragma GCC unroll 2
    for (size_t r = 0; r < row_count; r++) {
        span.dy[r] = widen_chunk(dy_chunk[r], rows->dy[r], first, count, storage);
        span.x[r] = widen_chunk(x_chunk[r], rows->x[r], first, count, storage);
        span.dx[r] = streamed ? dx_chunk[r] : result_chunk(dx_chunk[r], rows->dx[r], first, storage);
    }
    differentiate(&span, first, count, norm);
#pragma GCC unroll 2
    for (size_t r = 0; r < row_count; r++)
        if (streamed)
            store_block_streaming(rows->dx[r], first, span.dx[r], storage);
        else
            narrow_chunk(rows->dx[r], first, span.dx[r], count, storage);
}
// ANCHOR_END: widen_a_span_of_the_rows

// ANCHOR: stream_16_bit_lines_of_dx
/* Two blocks of 16-bit rows, a 64-byte line of each dx row, streamed out
 * in one store a row (store_16_bit_line_streaming says why): stored a
 * block at a time, the two halves of a row's line would have the other
 * row's block and a block of arithmetic between them. The halves are a
 * loop of two, not two calls: GCC, given two copies of layer norm's
 * guarded span code in one sweep, compiled them one element at a time. */
ROW_INLINE void backward_line_stored(const BackwardRows *rows, size_t row_count, size_t first,
                                     BackwardSpanFn *differentiate, const void *norm, LnStorage storage)
{
    float dy_line[ROWS_AT_ONCE][2 * BLOCK], x_line[ROWS_AT_ONCE][2 * BLOCK], dx_line[ROWS_AT_ONCE][2 * BLOCK];
#pragma GCC unroll 2
    for (size_t r = 0; r < row_count; r++) {
        widen_chunk(dy_line[r], rows->dy[r], first, 2 * BLOCK, storage);
        widen_chunk(x_line[r], rows->x[r], first, 2 * BLOCK, storage);
    }
#pragma GCC unroll 1
    for (size_t half = 0; half < 2 * BLOCK; half += BLOCK) {
        BackwardSpan span = {.count = row_count};
#pragma GCC unroll 2
        for (size_t r = 0; r < row_count; r++) {
            span.dy[r] = dy_line[r] + half;
            span.x[r] = x_line[r] + half;
            span.dx[r] = dx_line[r] + half;
        }
        differentiate(&span, first + half, BLOCK, norm);
    }
#pragma GCC unroll 2
    for (size_t r = 0; r < row_count; r++)
        store_16_bit_line_streaming(rows->dx[r], first, dx_line[r], storage);
}

/* Whether the dx rows lie alike about a line boundary, so that a line of
 * one is a line of the other: two rows paired for their blocks may not (a
 * 16-bit row of 784 elements is 24.5 lines); those go a block at a time. */
static inline bool lines_line_up(const BackwardRows *rows, size_t row_count)
{
    return row_count == 1 || (uintptr_t)rows->dx[0] % 64 == (uintptr_t)rows->dx[1] % 64;
}
// ANCHOR_END: stream_16_bit_lines_of_dx

// ANCHOR: ask_for_the_next_rows
/* One line of the rows after these asked for, at element j: their dy,
 * and their x too where the rows' sums are in float and quick (a guarded
 * row's double sums ask for it). Into L2, not L1: two rows' dy and x are
 * 64 KiB at d = 4096, more than L1 holds, and L1 is busy with these rows
 * and the partial rows of dgamma and dbeta. Asked into L1, they pushed
 * out what the sweep was still using. */
ROW_INLINE void prefetch_next_rows(const BackwardRows *rows, size_t row_count, size_t j, bool float_sums,
                                   LnStorage storage)
{
    for (size_t r = 0; r < row_count; r++) {
        if (float_sums)
            __builtin_prefetch(stored_at(rows->next_x[r], j, storage), 0, 2);
        __builtin_prefetch(stored_at(rows->next_dy[r], j, storage), 0, 2);
    }
}
// ANCHOR_END: ask_for_the_next_rows

// ANCHOR: sweep_the_rows
/* The sweep over `row_count` rows, in the forward pass's shape
 * (stream_whole_blocks): a head up to a block boundary, the whole blocks
 * (16-bit ones in pairs, a line each, from the first line boundary on),
 * streamed out while the rows after these are prefetched, a line for each
 * line, and the tail. */
ROW_INLINE void backward_rows_of(BackwardRows rows, size_t row_count, size_t d, BackwardSpanFn *differentiate,
                                 const void *norm, LnStorage storage, bool float_sums)
{
    size_t j = unaligned_head(rows.dx[0], d, storage);
    backward_span_stored(&rows, row_count, 0, j, false, differentiate, norm, storage);
    bool in_lines = storage != STORAGE_FLOAT32 && lines_line_up(&rows, row_count);
    if (in_lines && (uintptr_t)stored_at(rows.dx[0], j, storage) % 64 != 0 && j + BLOCK <= d) {
        prefetch_next_rows(&rows, row_count, j, float_sums, storage);
        backward_span_stored(&rows, row_count, j, BLOCK, true, differentiate, norm, storage);
        j += BLOCK;
    }
    for (; in_lines && j + 2 * BLOCK <= d; j += 2 * BLOCK) {
        prefetch_next_rows(&rows, row_count, j, float_sums, storage);
        backward_line_stored(&rows, row_count, j, differentiate, norm, storage);
    }
    for (; j + BLOCK <= d; j += BLOCK) {
        prefetch_next_rows(&rows, row_count, j, float_sums, storage);
        backward_span_stored(&rows, row_count, j, BLOCK, true, differentiate, norm, storage);
    }
    backward_span_stored(&rows, row_count, j, d - j, false, differentiate, norm, storage);
}

/* The sweep compiled for two rows and for one: in each the number of rows
 * is a constant, and the loops over the rows disappear. */
ROW_INLINE void backward_rows(const BackwardRows *rows, size_t d, BackwardSpanFn *differentiate, const void *norm,
                              LnStorage storage, bool float_sums)
{
    if (rows->count == ROWS_AT_ONCE)
        backward_rows_of(*rows, ROWS_AT_ONCE, d, differentiate, norm, storage, float_sums);
    else
        backward_rows_of(*rows, 1, d, differentiate, norm, storage, float_sums);
}
// ANCHOR_END: sweep_the_rows

// ANCHOR: keep_a_rows_terms_for_its_sweep
/* A row's statistics for its sweep: the saved ones (RMSNorm's mean is 0),
 * and the terms its sums gave. A float32 row fills only terms.means; a
 * 16-bit one the guard and the exact terms too. */
typedef struct {
    float mean, rstd;
    LnGuardedBackward terms;
} BackwardRow;
// ANCHOR_END: keep_a_rows_terms_for_its_sweep

// ANCHOR: sum_the_backward_terms_in_double
/* The sums of LnBackwardSums over a 16-bit row in double, lane by lane,
 * as chunks of dy and x are widened: `centred` for layer norm (about its
 * saved mean), not for RMSNorm (about 0: x itself, without sum(g) and
 * sum(dev), whose additions the compiler then drops). */
typedef struct {
    double g[LANES], g_sq[LANES], g_dev[LANES], dev[LANES], dev_sq[LANES];
} BackwardLanes;

ROW_INLINE void add_backward_terms(BackwardLanes *acc, const float *dy, const float *x, const double *gamma,
                                   size_t count, double centre, bool centred)
{
    for (size_t k = 0; k < count; k++) {
        double g = gamma[k] * dy[k], dev = centred ? (double)x[k] - centre : x[k];
        acc->g_sq[k] = fma(g, g, acc->g_sq[k]);
        acc->g_dev[k] = fma(g, dev, acc->g_dev[k]);
        acc->dev_sq[k] = fma(dev, dev, acc->dev_sq[k]);
        if (centred) {
            acc->g[k] += g;
            acc->dev[k] += dev;
        }
    }
}

// ANCHOR_END: sum_the_backward_terms_in_double

// ANCHOR: sum_the_backward_terms_eight_lanes_a_register
/* The same for the LANES elements from `first` on, with AVX-512: eight
 * lanes a register, each eight widened straight to double
 * (widen_eight_to_double). The same sums, so the same bits. */
#if defined(__AVX512F__)
ROW_INLINE void add_lanes_of_backward_terms(BackwardLanes *acc, const void *dy, const void *x, const double *gamma,
                                            size_t first, double centre, bool centred, LnStorage storage)
{
    for (size_t k = 0; k < LANES; k += 8) {
        __m512d g = _mm512_mul_pd(_mm512_loadu_pd(gamma + first + k), widen_eight_to_double(dy, first + k, storage));
        __m512d wide_x = widen_eight_to_double(x, first + k, storage);
        __m512d dev = centred ? subtract_on_fma_pipes(wide_x, _mm512_set1_pd(centre)) : wide_x;
        _mm512_storeu_pd(acc->g_sq + k, _mm512_fmadd_pd(g, g, _mm512_loadu_pd(acc->g_sq + k)));
        _mm512_storeu_pd(acc->g_dev + k, _mm512_fmadd_pd(g, dev, _mm512_loadu_pd(acc->g_dev + k)));
        _mm512_storeu_pd(acc->dev_sq + k, _mm512_fmadd_pd(dev, dev, _mm512_loadu_pd(acc->dev_sq + k)));
        if (centred) {
            _mm512_storeu_pd(acc->g + k, _mm512_add_pd(_mm512_loadu_pd(acc->g + k), g));
            _mm512_storeu_pd(acc->dev + k, _mm512_add_pd(_mm512_loadu_pd(acc->dev + k), dev));
        }
    }
}
#endif
// ANCHOR_END: sum_the_backward_terms_eight_lanes_a_register

// ANCHOR: convert_gamma_to_double_once
/* gamma in double for a 16-bit backward pass's sums (exact), converted
 * once a call instead of once a row; NULL for float32 rows. The caller
 * frees it. */
static inline double *gamma_for_double_sums(const float *gamma, size_t d, LnStorage storage)
{
    if (storage == STORAGE_FLOAT32)
        return NULL;
    double *wide = ALLOC_ARRAY(d, double);
    for (size_t j = 0; j < d; j++)
        wide[j] = gamma[j];
    return wide;
}
// ANCHOR_END: convert_gamma_to_double_once

// ANCHOR: take_a_16_bit_rows_backward_sums
/* The double sums are work of the sweep's order (five sums in double for
 * every element), so a 16-bit row asks for the next x during its sums and
 * leaves the next dy to the sweep: asked for both in the sweep, memory
 * would sit idle while the sums ran. */
ROW_INLINE LnBackwardSums backward_sums_in_double(const void *dy, const void *x, const double *gamma, size_t d,
                                                  float centre, bool centred, const void *next_x, LnStorage storage)
{
    BackwardLanes acc;
    memset(&acc, 0, sizeof acc);
    float dy_chunk[LANES], x_chunk[LANES];
    size_t i = 0;
    for (; i + LANES <= d; i += LANES) {
        prefetch_lanes(next_x, i, false, storage);
#if defined(__AVX512F__)
        add_lanes_of_backward_terms(&acc, dy, x, gamma, i, centre, centred, storage);
#else
        add_backward_terms(&acc, widen_chunk(dy_chunk, dy, i, LANES, storage),
                           widen_chunk(x_chunk, x, i, LANES, storage), gamma + i, LANES, centre, centred);
#endif
    }
    add_backward_terms(&acc, widen_chunk(dy_chunk, dy, i, d - i, storage), widen_chunk(x_chunk, x, i, d - i, storage),
                       gamma + i, d - i, centre, centred);
    LnBackwardSums s = {0.0, 0.0, 0.0, 0.0, 0.0};
    for (int k = 0; k < LANES; k++) {
        s.sum_g += acc.g[k];
        s.sum_g_sq += acc.g_sq[k];
        s.sum_g_dev += acc.g_dev[k];
        s.sum_dev += acc.dev[k];
        s.sum_dev_sq += acc.dev_sq[k];
    }
    return s;
}

// ANCHOR_END: take_a_16_bit_rows_backward_sums

// ANCHOR: guard_a_16_bit_row_from_its_sums
/* A 16-bit row's terms: its sums in double, its exact statistics from
 * them, and the guard of its float dx (kernels/layernorm_row.h). */
ROW_INLINE void guard_backward_row(BackwardRow *r, const void *dy, const void *x, const double *gamma, size_t d,
                                   float eps, bool centred, const void *next_x, LnStorage storage)
{
    LnBackwardSums s = backward_sums_in_double(dy, x, gamma, d, r->mean, centred, next_x, storage);
    LnExactStats exact = ln_exact_stats(r->mean, s.sum_dev, s.sum_dev_sq, (double)d, eps);
    r->terms = ln_guarded_backward(s, exact, r->rstd, (double)d, ln_storage_significant_bits(storage));
}

// ANCHOR_END: guard_a_16_bit_row_from_its_sums

// ANCHOR: resolve_the_cancellations_in_dx
/* The elements of a span whose float dx the guard does not vouch for (the
 * same test on the same floats gives the same answer), computed again in
 * double and rounded once into the storage type, held as a float. xhat is
 * layer norm's; with RMSNorm's mean and residual at 0 it is x * rstd, the
 * same bits. */
static inline void resolve_dx_cancellations(float *dx, const float *dy, const float *x, const float *gamma,
                                            size_t count, const BackwardRow *r, LnStorage storage)
{
    const LnBackwardMeans *m = &r->terms.means;
    for (size_t j = 0; j < count; j++) {
        float xhat = ln_normalize(x[j], r->mean, m->residual, r->rstd);
        if (!ln_dx_within_guard(gamma[j] * dy[j], xhat, m->mean_g, m->mean_g_xhat, r->terms.guard))
            dx[j] = (float)ln_storage_round_exact(storage, ln_dx_in_double(dy[j], x[j], gamma[j], r->terms.exact));
    }
}

/* A span where some element of its rows did not pass: each row's. One
 * flag for the rows of a span, where the kernels test it, costs them one
 * reduction of a vector of flags instead of one a row. */
static inline void resolve_span_cancellations(const BackwardSpan *s, size_t first, size_t count, const float *gamma,
                                              const BackwardRow *rows, LnStorage storage)
{
    for (size_t r = 0; r < s->count; r++)
        resolve_dx_cancellations(s->dx[r], s->dy[r], s->x[r], gamma + first, count, &rows[r], storage);
}
// ANCHOR_END: resolve_the_cancellations_in_dx

/* Each chunk left `count` partial rows of d floats in scratch, one after
 * the other; add them in chunk order, in double (chunks * d additions,
 * nothing next to the n * d of the rows), into outputs[0 .. count-1]. */
static inline void add_chunk_partials(float *const *outputs, size_t count, const float *scratch, size_t chunks,
                                      size_t d)
{
    size_t width = count * d;
    double *totals = ALLOC_ARRAY(width, double); /* zeroed */
    for (size_t chunk = 0; chunk < chunks; chunk++)
        for (size_t j = 0; j < width; j++)
            totals[j] += scratch[chunk * width + j];
    for (size_t k = 0; k < count; k++)
        for (size_t j = 0; j < d; j++)
            outputs[k][j] = (float)totals[k * d + j];
    array_free(totals);
}

#endif
