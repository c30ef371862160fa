/* The GPU subcommands of softmax_topk. In a build without CUDA each says so
 * in one line (exit 2); so does each on a machine without a GPU. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_GPU_H
#define CHAPTERS_03_SOFTMAX_TOPK_GPU_H

#include "common/cli.h"
#include "common/resource_table.h"

#ifdef HAVE_CUDA
/* `softmax_topk gpu-check`: every kernel that takes the K, on the hard
 * inputs and on random rows with ties, each with as many blocks as the rows
 * need and with 3 blocks looping over them, against the CPU reference
 * computed in double. 0 if all match, 1 if one differs. */
CliCommandFunction gpu_check_command;

/* `softmax_topk gpu-bench [--quick] [--results FILE] [--commit C]`: every
 * kernel at V in {32000, 50257, 128256, 151936} (quick: 128256) and K in
 * {1, 8, 64, 256, 1024}, 4096 rows, each validated against the double
 * reference before it is timed; GB/s and shares of the device-to-device
 * copy bandwidth measured in the same run, with their spread; then one row
 * (a decode step). --results also writes the tables there, stamped with the
 * device, the CUDA version, the date and the commit. */
CliCommandFunction gpu_bench_command;

/* `softmax_topk gpu-run`, `gpu-apply` and `gpu-sample`: run, apply and
 * sample (commands.h) on GPU kernel --version; gpu-sample draws by the
 * inverse CDF, the same files as sample's for the same seed. */
CliCommandFunction gpu_run_command, gpu_apply_command, gpu_sample_command;

/* softmax_topk gpu-resources [--record FILE] [--markdown]: ptxas's registers, spills,
 * stack and shared memory of every kernel a launcher selects, with its
 * threads per block and the occupancy they allow (common/resource_table.h),
 * from softmax_topk.resources, the build's copy of kernels/softmax_topk.resources. */
CliCommandFunction gpu_resources_command;

/* softmax_topk gpu-latency [--markdown]: the model of decode_step_model.h
 * for one row of V = 128256, versions 4 and 8, K in {1, 8, 64}, with the
 * slices and buffers their launcher chooses on an H100. Needs no GPU. */
CliCommandFunction gpu_latency_command;

/* softmax_topk gpu-slow-paths [--markdown]: version 6's instruction budget
 * with its slow paths (slow_paths.h), counted on gpu-bench's rows at
 * V = 128256 and K in {1, 8, 64}, costed from the machine code, and the
 * share of the copy bandwidth it predicts for 4096 and 1024 rows. Needs no
 * GPU. */
CliCommandFunction gpu_slow_paths_command;
#else
/* Built without CUDA: each GPU subcommand says so in one line and exits 2. */
#define gpu_check_command cli_without_cuda
#define gpu_bench_command cli_without_cuda
#define gpu_run_command cli_without_cuda
#define gpu_apply_command cli_without_cuda
#define gpu_sample_command cli_without_cuda
/* The resource table needs no GPU, but the record of a CUDA build: without
 * one it says there is none, exit 0. */
#define gpu_resources_command resource_table_without_cuda_command
/* The model takes its slices and buffers from the launcher: without CUDA
 * there is none, and it says so, exit 0. */
CliCommandFunction gpu_latency_without_cuda_command;
#define gpu_latency_command gpu_latency_without_cuda_command
/* Its costs come from the machine code of a CUDA build: without one it
 * says so, exit 0. */
CliCommandFunction gpu_slow_paths_without_cuda_command;
#define gpu_slow_paths_command gpu_slow_paths_without_cuda_command
#endif

#endif
