/* Layer norm and RMSNorm on the GPU: numbered kernel versions, naive
 * first, and the C-callable launchers the chapter program and the tests
 * use. RMSNorm's versions are layer norm's, the same kernels (templates on
 * the norm) with one row sum where layer norm has two or three, no mean
 * and no beta:
 *
 *   forward 1   one thread per row, three passes over the row in memory
 *   forward 2   one warp per row: Welford states merged by shuffles
 *   forward 3   one block per row, the row held in registers (16-byte
 *               loads where alignment allows): an exact two-pass variance
 *               from one read of memory
 *   backward 1  one thread per row for dx, one thread per column for
 *               dgamma and dbeta
 *   backward 2  fused: one pass over x and dy for dx, with each block
 *               summing its rows into a partial dgamma and dbeta, then a
 *               finalize kernel that adds the partials in a fixed order
 *               (deterministic: no floating-point atomics)
 *   backward 3  backward 2 in a grid sized from the occupancy of its
 *               instance, with the next row's x and dy loaded while the
 *               block reduces the current one, and a finalize of a block
 *               per 8 columns, still in a fixed order
 *
 * All pointers are device memory; x, dy, y, dx are n x d row-major, in the
 * storage type `storage` (float32, fp16 or bf16: kernels/layernorm_storage.h),
 * gamma, beta, dgamma, dbeta have d floats, mean and rstd n: the launchers
 * only queue the work. RMSNorm's cache is rstd alone. Every kernel widens
 * a 16-bit value to float as it loads it and rounds y and dx once as it
 * stores them; the statistics, the sums and the parameter gradients are
 * float32 in every storage type, as on the CPU.
 *
 * The launchers' convention, the same for every operation (README.md, "The
 * kernels' launchers"): versions are numbered 1 .. OP_GPU_VERSIONS, naive
 * first. A launcher or constructor that can refuse its arguments returns
 * NULL when it did the work, otherwise a one-line reason (gpu_refusal), and
 * then nothing was launched or allocated. A *_launch or *_device call only
 * queues work on the default stream, so that callers time it with
 * cuda_bench_run (common/cuda_util.h) and get its spread. CUDA errors end
 * the program. */
#ifndef KERNELS_LAYERNORM_H
#define KERNELS_LAYERNORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/layernorm_storage.h"

COMMON_BEGIN_C

#define LAYERNORM_FORWARD_GPU_VERSIONS 3
#define LAYERNORM_BACKWARD_GPU_VERSIONS 3

/* The threads per block of the versions that take no row plan: forward 1
 * and backward 1 (a thread per row, and per column for dgamma and dbeta),
 * forward 2 (a warp per row) and the finalize kernels of backward 2 (a
 * thread per column) and 3 (LN_FINALIZE_COLUMNS columns per block, each
 * summed by LN_FINALIZE_SLICES threads). */
enum { LN_THREAD_PER_ROW_THREADS = 128, LN_WARP_PER_ROW_THREADS = 256, LN_FINALIZE_THREADS = 256 };
enum { LN_FINALIZE_COLUMNS = 8, LN_FINALIZE_SLICES = LN_FINALIZE_THREADS / LN_FINALIZE_COLUMNS };

/* One line describing a version, e.g. "one warp per row, Welford shuffles". */
const char *layernorm_forward_gpu_version_name(int version);
const char *layernorm_backward_gpu_version_name(int version);

const char *layernorm_forward_gpu(int version, LnStorage storage, void *y, float *mean, float *rstd, const void *x,
                                  const float *gamma, const float *beta, size_t n, size_t d, float eps);

/* Device floats of scratch space backward `version` needs (0: none). */
size_t layernorm_backward_gpu_scratch_floats(int version, size_t n, size_t d);

const char *layernorm_backward_gpu(int version, LnStorage storage, void *dx, float *dgamma, float *dbeta,
                                   float *scratch, const void *dy, const void *x, const float *mean, const float *rstd,
                                   const float *gamma, size_t n, size_t d);

// ANCHOR: rmsnorm_gpu_api
/* RMSNorm, y = gamma * x * rstd: versions 1 .. 3 forward and 1 .. 3
 * backward, each layer norm's version of the same number. */
#define RMSNORM_FORWARD_GPU_VERSIONS LAYERNORM_FORWARD_GPU_VERSIONS
#define RMSNORM_BACKWARD_GPU_VERSIONS LAYERNORM_BACKWARD_GPU_VERSIONS

const char *rmsnorm_forward_gpu_version_name(int version);
const char *rmsnorm_backward_gpu_version_name(int version);

const char *rmsnorm_forward_gpu(int version, LnStorage storage, void *y, float *rstd, const void *x, const float *gamma,
                                size_t n, size_t d, float eps);

/* Device floats of scratch space backward `version` needs (0: none, and
 * scratch may be NULL). */
size_t rmsnorm_backward_gpu_scratch_floats(int version, size_t n, size_t d);

const char *rmsnorm_backward_gpu(int version, LnStorage storage, void *dx, float *dgamma, float *scratch,
                                 const void *dy, const void *x, const float *rstd, const float *gamma, size_t n,
                                 size_t d);
// ANCHOR_END: rmsnorm_gpu_api

// ANCHOR: lay_a_row_over_a_block
/* How forward 3 and backward 2 lay one row over the registers of a block:
 * thread t holds the vectors t, t + threads, ..., t + (items - 1) threads
 * of the row, each vector `width` values. A vector is 16 bytes where the
 * row allows it (d a multiple of the values in 16 bytes, 16-byte-aligned
 * rows): 4 floats, or 8 values of a 16-bit storage type; otherwise single
 * values. Blocks of up to 512 threads holding up to 4 vectors each are
 * preferred (enough registers per thread); 8 vectors and 1024 threads are
 * the limit, beyond which the row does not fit (threads = 0). A thread
 * holds its values widened to float, so a vector of 8 16-bit values takes
 * the registers of two float4: for them the limit is 4 vectors. */
typedef struct {
    int width, items, threads;
} LnRowPlan;

enum { LN_PLAN_MAX_ITEMS = 8, LN_PLAN_MAX_THREADS = 1024, LN_PLAN_PREFERRED_THREADS = 512 };

/* The values in a 16-byte vector (16 / ln_storage_bytes), and the most such vectors a thread holds
 * (a macro: the kernels use it as a template argument). */
#define LN_VECTOR_VALUES(storage) ((storage) == STORAGE_FLOAT32 ? 4 : 8)
#define LN_PLAN_MOST_ITEMS(width) ((width) > 4 ? LN_PLAN_MAX_ITEMS / 2 : LN_PLAN_MAX_ITEMS)
// ANCHOR_END: lay_a_row_over_a_block

// ANCHOR: plan_a_row_in_registers
/* The fewest vectors per thread whose block has at most the preferred
 * number of threads (more threads, fewer registers each); at the most
 * vectors a thread may hold, up to the limit; else threads = 0. */
static inline LnRowPlan ln_row_plan(size_t d, bool rows_16_byte_aligned, LnStorage storage)
{
    int vector = LN_VECTOR_VALUES(storage);
    LnRowPlan plan = {rows_16_byte_aligned && d % (size_t)vector == 0 ? vector : 1, 0, 0};
    size_t vectors = d / (size_t)plan.width;
    for (int items = 1; items <= LN_PLAN_MOST_ITEMS(plan.width); items *= 2) {
        size_t threads = (vectors + (size_t)items - 1) / (size_t)items;
        threads = (threads + 31) / 32 * 32;
        size_t limit = items < LN_PLAN_MOST_ITEMS(plan.width) ? LN_PLAN_PREFERRED_THREADS : LN_PLAN_MAX_THREADS;
        if (threads <= limit) {
            plan.items = items;
            plan.threads = (int)threads;
            return plan;
        }
    }
    return plan;
}
// ANCHOR_END: plan_a_row_in_registers

// ANCHOR: plan_the_backward_row
/* Backward 2 keeps more per thread than forward 3: with 8 float4 per thread,
 * 64 floats of dgamma and dbeta across rows (kernels/layernorm.cu). A block
 * of 1024 threads leaves a thread 64 registers, too few; one of 640 leaves
 * 96, enough. So its blocks of the most vectors per thread stop at 640
 * threads, and a row that needs more is refused (threads = 0): beyond
 * 20,480 values as 16-byte vectors, 5,120 single values. Its plans of fewer
 * vectors are forward 3's. */
enum { LN_BACKWARD_PLAN_MAX_THREADS = 640 };

static inline LnRowPlan ln_backward_row_plan(size_t d, bool rows_16_byte_aligned, LnStorage storage)
{
    LnRowPlan plan = ln_row_plan(d, rows_16_byte_aligned, storage);
    if (plan.threads > LN_BACKWARD_PLAN_MAX_THREADS)
        plan.threads = 0;
    return plan;
}
// ANCHOR_END: plan_the_backward_row

/* Are all these pointers 16-byte aligned? (NULL-terminated list.) */
static inline bool ln_all_16_byte_aligned(const void *const *pointers)
{
    for (; *pointers != NULL; pointers++)
        if ((uintptr_t)*pointers % 16 != 0)
            return false;
    return true;
}

COMMON_END_C

#endif
