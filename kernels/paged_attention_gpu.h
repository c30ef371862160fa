/* Paged decode attention on a CUDA GPU: one new query per head and
 * sequence attends over the sequence's keys and values, found through its
 * block table in a pool of blocks in any format of kernels/kv_quant.h
 * (float32, fp16, INT8, INT4, INT4 with keys per channel, FP8 E4M3 and E5M2
 * with a scale per tensor or per kv head), dequantized in registers as they are read. Four versions:
 *
 *   1  one thread block per (sequence, query head) walks the whole context,
 *      with an online softmax; a query head reads the kv head of its group;
 *   2  split-K (flash-decoding): the context is cut into partitions of
 *      `partition_tokens` positions, one thread block each, every one
 *      writing its partial output, max and sum; a second kernel merges the
 *      partitions with Chapter 3's (max, sum) rescaling;
 *   3  split-K with a thread block per (kv head, partition) carrying up to
 *      four query heads of the kv head's group: each key and value is read
 *      and unpacked once for them all; version 2's merge finishes;
 *   4  version 3 with one softmax rescale per group of four positions,
 *      loads without branches, and INT4 and INT8 unpacked through the
 *      exponent of a float (no shifts, no int-to-float conversions).
 *
 * Inside a thread block, a few lanes share one position (16 bytes of its
 * key row each), the lanes of a warp take several positions at once, and
 * the warps' partial states are merged at the end with the same merge
 * (kernels/online_attention.h). Supported: head_dim 64, 128 or 256; INT4
 * groups of 32 or 64 channels; any block size. C-callable.
 *
 * The launchers' convention, the same for every operation (README.md, "The
 * kernels' launchers"): versions are numbered 1 .. OP_GPU_VERSIONS, naive
 * first. A launcher or constructor that can refuse its arguments returns
 * NULL when it did the work, otherwise a one-line reason (gpu_refusal), and
 * then nothing was launched or allocated. A *_launch or *_device call only
 * queues work on the default stream, so that callers time it with
 * cuda_bench_run (common/cuda_util.h) and get its spread. CUDA errors end
 * the program. */
#ifndef KERNELS_PAGED_ATTENTION_GPU_H
#define KERNELS_PAGED_ATTENTION_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "kernels/kv_quant.h"

COMMON_BEGIN_C

#define PAGED_ATTENTION_GPU_VERSIONS 4
/* One line describing a version, e.g. "split-K: partitions, then a merge". */
const char *paged_attention_gpu_version_name(int version);

/* The threads per block of the attention kernels of both versions. Version
 * 2's merge takes a thread per channel: head_dim threads. */
int paged_attention_gpu_threads_per_block(void);

/* Version 2's partition when none is given: a multiple of the block size. */
#define PAGED_ATTENTION_DEFAULT_PARTITION 512

/* A decode step's inputs, in host memory. */
typedef struct {
    int batch, n_heads;
    PagedKvShape shape; /* block_size, n_kv_heads, head_dim */
    KvFormat format;
    int int4_group;
    float key_scale, value_scale; /* FP8: the per-tensor scales (kv_quant.h); others ignore them */
    /* FP8 with scales per kv head: [n_kv_heads] each, in place of key_scale
     * and value_scale; NULL for per tensor. */
    const float *key_head_scales, *value_head_scales;
    const float *queries;                 /* [batch][n_heads][head_dim] */
    const uint8_t *key_pool, *value_pool; /* num_blocks blocks of kv_layout(format, ...) each */
    int num_blocks;
    const int32_t *block_tables; /* [batch][max_blocks] */
    int max_blocks;
    const int32_t *lengths; /* [batch], each in [1, max_blocks * block_size] */
} PagedAttentionProblem;

/* The problem copied to the device once, with the outputs and workspace. */
typedef struct PagedAttentionGpuRun PagedAttentionGpuRun;

/* Check the problem (a head_dim or INT4 group the kernels do not take, a
 * length or block number outside the tables or the pool), then copy it to
 * the device and set *run; refused, *run is NULL. */
const char *paged_attention_gpu_run_new(PagedAttentionGpuRun **run, const PagedAttentionProblem *problem);
void paged_attention_gpu_run_free(PagedAttentionGpuRun *run);

/* Partitions of version 2: partition_tokens 0 means the default, rounded up
 * to a multiple of the block size; otherwise it must be such a multiple.
 * Sets *used to the partition actually used. */
const char *paged_attention_gpu_partition(const PagedAttentionGpuRun *run, int partition_tokens, int *used);

/* Queue one decode step of `version` (both kernels for version 2), the
 * output left on the device: what cuda_bench_run times. Refused for a bad
 * version or partition. Version 2's workspace is allocated on its first
 * step with as many partitions, so launch once (or run_once) before timing. */
const char *paged_attention_gpu_run_launch(PagedAttentionGpuRun *run, int version, int partition_tokens);

/* One step, then the output copied to out[batch][n_heads][head_dim]. */
const char *paged_attention_gpu_run_once(PagedAttentionGpuRun *run, int version, int partition_tokens, float *out);

COMMON_END_C

#endif
