/* Softmax + top-K on the CPU, in the three versions the chapter builds:
 *
 *   1 naive:  pass 1 max, pass 2 sum of exp, pass 3 write every probability
 *             (a V-sized array) and select the top K;
 *   2 online: pass 1 the online (max, sum) recurrence, pass 2 select;
 *   3 fused:  one pass, keeping the (max, sum) state and the top K at once,
 *             chunk by chunk with vector instructions.
 *
 * Output for each row: the K largest probabilities, best first, in the
 * order of the logits (equal logits: lower index first; NaN first), and
 * their indices. Conventions for NaN and infinities: kernels/softmax_topk.h.
 * Indices are int32 inside (vocab < 2^31), int64 in the output as in
 * PyTorch. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_SOFTMAX_TOPK_H
#define CHAPTERS_03_SOFTMAX_TOPK_SOFTMAX_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "chapters/03-softmax-topk/topk_collect.h"

typedef enum { CPU_NAIVE = 1, CPU_ONLINE = 2, CPU_FUSED = 3 } CpuVersion;
#define CPU_VERSION_COUNT 3

/* "naive", "online", "fused". */
const char *cpu_version_name(CpuVersion version);

/* The largest vocabulary the row functions take (indices are int32). */
#define SOFTMAX_TOPK_MAX_VOCAB ((size_t)1 << 30)

/* Working memory for one row at a time: the naive version's probability
 * array, the top-K collector's storage and the fused version's maxima and
 * marks. One per thread. */
typedef struct {
    float *probabilities;
    TopkEntry *candidates;
    float *chunk_maxima;    /* the fused version's: the largest logit of each chunk, */
    float *step_maxima;     /* the MAXIMA_LANES largest of each step of LANES logits, */
    uint32_t *marked_steps; /* the numbers of the steps that may hold a candidate, */
    uint64_t *marks;        /* a bit for each logit of those that may be one, */
    uint32_t *marked_words; /* and the numbers of the words of marks that hold one */
} RowScratch;

RowScratch row_scratch_new(CpuVersion version, size_t vocab, int k);
void row_scratch_free(RowScratch *scratch);

/* How logits are stored: float32, or 16 bits (IEEE half, or bfloat16),
 * which servers often hold. The fused version reads 16-bit logits as they
 * are, half the bytes of float32, and widens them a chunk at a time (the
 * widening is exact, so the results are those of the widened logits). */
typedef enum { LOGITS_FLOAT32, LOGITS_FLOAT16, LOGITS_BFLOAT16 } LogitsType;

typedef struct {
    const void *data; /* [rows, vocab], row-major */
    LogitsType type;
} StoredLogits;

/* A view of float32 logits. */
StoredLogits float32_logits(const float *logits);

/* Bytes per logit: 4 or 2. */
size_t logits_type_size(LogitsType type);

/* The n logits from `first` on, as floats, into out (exact). */
void widen_logits(StoredLogits logits, size_t first, size_t n, float *out);

/* The fused version on stored logits of any type: logits [rows, vocab] ->
 * probs and indices [rows, k], as softmax_topk_rows(CPU_FUSED, ...) on the
 * widened logits, to the bit. */
void softmax_topk_stored_rows(StoredLogits logits, size_t rows, size_t vocab, int k, int threads, float *probs,
                              int64_t *indices);

/* What a caller does with each row's top K as soon as the fused pass has
 * found it, on the thread that found it, inside the pass's one parallel
 * region: the row's number, the K candidates' logits, as floats, in rank
 * order, and their probabilities and indices (which it may overwrite).
 * The sampler draws its tokens here: no second read of the logits, and no
 * second parallel region. */
typedef struct {
    void (*take)(void *ctx, size_t row_number, const float *candidate_logits, float *probs, int64_t *indices);
    void *ctx;
} TopkRowConsumer;

/* softmax_topk_stored_rows, then `then` on each row. */
void softmax_topk_stored_rows_then(StoredLogits logits, size_t rows, size_t vocab, int k, int threads, float *probs,
                                   int64_t *indices, TopkRowConsumer then);

/* The fused version's pass without its top K: each row's online softmax
 * state (max and sum of exp(x - max)) into states[rows], with the same
 * chunks, lanes and prefetching, rows split across `threads` as the fused
 * version splits them. The benchmark sets the fused version against it:
 * the time between the two is the top K's. */
void softmax_state_stored_rows(StoredLogits logits, size_t rows, size_t vocab, int threads, SoftmaxState *states);

/* One row of `vocab` logits -> k probabilities and indices (1 <= k <= vocab). */
void softmax_topk_row(CpuVersion version, const float *logits, size_t vocab, int k, RowScratch *scratch, float *probs,
                      int64_t *indices);

/* The fused version on one row stored as any type (scratch from
 * row_scratch_new(CPU_FUSED, ...)). */
void softmax_topk_stored_row(StoredLogits row, size_t vocab, int k, RowScratch *scratch, float *probs,
                             int64_t *indices);

/* Many rows: logits [rows, vocab] -> probs and indices [rows, k], rows split
 * across `threads` OpenMP threads (the results do not depend on it). */
void softmax_topk_rows(CpuVersion version, const float *logits, size_t rows, size_t vocab, int k, int threads,
                       float *probs, int64_t *indices);

/* The reference: the same contract computed in double, by sorting the whole
 * row, with nothing from the fast versions but the order of logits. */
void softmax_topk_reference(const float *logits, size_t vocab, int k, double *probs, int64_t *indices);

/* The online state of a row read chunk by chunk with vector instructions,
 * as the fused version reads it: the running maximum, and the sum of
 * exp(x - max) kept in LANES partial sums, one per vector lane (64: four
 * AVX-512 or eight AVX2 registers, enough independent additions to hide
 * their latency). A chunk sums its few terms a lane in float, and adds them
 * to `recent`, which every CHUNKS_IN_FLOAT chunks is moved into `sums`, in
 * double: so no lane adds more than CHUNKS_IN_FLOAT * FUSED_CHUNK / LANES
 * terms (32) one after another in float. A float row sum would take one
 * addition per chunk, hundreds one after another, and a confident row (one
 * weight near 1 and a long tail below an ulp of it) would lose its tail:
 * 1e-5 of the sum at V = 50257, beyond the fused version's tolerance; a
 * double one, added to every chunk, cost a tenth of the pass. The
 * largest logits seen are kept in MAXIMA_LANES lanes (16, one AVX-512
 * register: lane l holds the largest of the logits l, l + 16, l + 32, ...
 * of each step of LANES logits), apart for FLOOR_GROUPS groups of chunks
 * (chunk c in group c % FLOOR_GROUPS): MAXIMA_LANES * FLOOR_GROUPS
 * different logits of the row, from which lane_sums_topk_floor bounds the
 * k-th best. */
#define LANES 64
#define MAXIMA_LANES 16
#define FLOOR_GROUPS 16
#define CHUNKS_IN_FLOAT 4

typedef struct {
    _Alignas(64) double sums[LANES];
    float recent[LANES]; /* the sums of the chunks since the last move into `sums` */
    float maxima[FLOOR_GROUPS][MAXIMA_LANES];
    float max;
    size_t chunks; /* chunks added so far */
} LaneSums;

/* The state of no logits: max -inf, sums 0, lane maxima -inf. */
LaneSums lane_sums_empty(void);

/* Add a chunk of n logits, n a multiple of LANES; returns the chunk's
 * largest logit (NaN ignored). A NaN, or a +inf (inf - inf is NaN), makes
 * the sums NaN: the caller must then start again with the scalar
 * recurrence, softmax_state_push, which handles both. */
float lane_sums_add_chunk(LaneSums *row, const float *chunk, int n);

/* The (max, sum) state of everything added, the lanes summed in a tree. */
SoftmaxState lane_sums_state(const LaneSums *row);

/* A floor under the k-th best logit: the k-th largest of the lane maxima
 * of the first lane_sums_floor_groups(k) groups, each of those merged with
 * the groups that follow it by that many (-inf when k > LANES). k different
 * logits are at least this large, so no logit below it is among the k best
 * of the row. NaN, which the maxima ignore, must be dealt with apart. */
float lane_sums_topk_floor(const LaneSums *row, int k);

/* How many groups of lane maxima lane_sums_topk_floor counts for k. */
int lane_sums_floor_groups(int k);

#endif
