/* The program's GPU side: the paged decode-attention kernels checked against
 * the CPU reference, their benchmark with its stamped results file, and
 * showing such a file. In a build without CUDA, or on a machine without a
 * GPU, every GPU request ends with one clear line and exit status 2. */
#ifndef CHAPTERS_04_KV_CACHE_GPU_H
#define CHAPTERS_04_KV_CACHE_GPU_H

#include <stdbool.h>
#include <stdio.h>

#include "common/table.h"

/* Both kernel versions (version 2 with two partition sizes) on every cache
 * format, head_dim 64, 128 and 256, GQA groups of 1, 4 and 8, batches of 1
 * to 8 sequences of irregular lengths, blocks of 16 and of 7, against the
 * double-precision reference: one line per case. Returns the failures.
 * The widest case has `widest_heads` query heads in groups of 4:
 * GPU_CHECK_WIDEST_HEADS, Llama-3-8B's 32 over 8, unless a test asks for
 * fewer (the CUDA emulator runs every GPU thread on the CPU). */
#define GPU_CHECK_WIDEST_HEADS 32
int gpu_check(FILE *out, int widest_heads);

/* Decode attention at long context in every format and both versions, each
 * validated before it is timed, against the device-to-device copy bandwidth
 * of the same run; then version 1 against version 2 over context lengths and
 * batch sizes. With results_path, also writes the tables there, stamped with
 * the device, the CUDA version, the date and the commit. */
void gpu_bench(bool quick, const char *results_path, const char *commit, TableFormat format);

#endif
