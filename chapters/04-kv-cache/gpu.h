/* The program's GPU side, the same in every chapter: `kv_cache gpu-check`
 * checks the paged decode-attention kernels against the CPU reference
 * computed in double, `kv_cache gpu-bench` checks, then times them and
 * writes a stamped results file. In a build without CUDA, or on a machine
 * without a GPU, each says so in one line and exits 2. */
#ifndef CHAPTERS_04_KV_CACHE_GPU_H
#define CHAPTERS_04_KV_CACHE_GPU_H

#include "common/cli.h"
#include "common/resource_table.h"

#ifdef HAVE_CUDA
#include <stdio.h>

/* `kv_cache gpu-check`: every case of gpu_check; 0 if all pass, else 1. */
CliCommandFunction gpu_check_command;

/* `kv_cache gpu-bench [--quick] [--results FILE] [--commit C]`: decode
 * attention at long context in every format and both versions, each
 * validated before it is timed, against the device-to-device copy bandwidth
 * of the same run; then version 1 against version 2 over context lengths
 * and batch sizes. With --results, also writes the tables there, stamped
 * with the device, the CUDA version, the date and the commit. */
CliCommandFunction gpu_bench_command;

/* Both kernel versions (version 2 with two partition sizes) on every cache
 * format, head_dim 64, 128 and 256, GQA groups of 1, 4 and 8, batches of 1
 * to 8 sequences of irregular lengths, blocks of 16 and of 7, against the
 * double-precision reference: one line per case. Returns the failures.
 * The widest case has `widest_heads` query heads in groups of 4:
 * gpu-check runs GPU_CHECK_WIDEST_HEADS, Llama-3-8B's 32 over 8; a test may
 * ask for fewer (the CUDA emulator runs every GPU thread on the CPU). */
#define GPU_CHECK_WIDEST_HEADS 32
int gpu_check(FILE *out, int widest_heads);

/* kv_cache gpu-resources [--record FILE] [--markdown]: ptxas's registers, spills,
 * stack and shared memory of every kernel a launcher selects, with its
 * threads per block and the occupancy they allow (common/resource_table.h),
 * from paged_attention.resources, the build's copy of kernels/paged_attention.resources. */
CliCommandFunction gpu_resources_command;
#else
/* Built without CUDA: each GPU subcommand says so in one line and exits 2. */
#define gpu_check_command cli_without_cuda
#define gpu_bench_command cli_without_cuda
/* The resource table needs no GPU, but the record of a CUDA build: without
 * one it says there is none, exit 0. */
#define gpu_resources_command resource_table_without_cuda_command
#endif

#endif
