/* CUDA helpers, built only when the CUDA toolkit is configured (CONFIG_CUDA).
 * C-callable, so the chapter programs (plain C) can use them. */
#ifndef COMMON_CUDA_UTIL_H
#define COMMON_CUDA_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/bench.h"
#include "common/hostdevice.h"

#ifdef __CUDACC__
#include <cuda_runtime.h>
/* Check a CUDA runtime call; on error print file:line and the CUDA message,
 * then exit 1. Kernel launches are checked with CUDA_CHECK(cudaGetLastError()). */
#define CUDA_CHECK(call) cuda_check_result((int)(call), #call, __FILE__, __LINE__)
#endif

COMMON_BEGIN_C

void cuda_check_result(int error, const char *call, const char *file, int line);

/* Is there at least one CUDA device this process can use? Never exits. */
bool cuda_device_available(void);

/* Stop with one line, "no CUDA device found", and exit 2 (waived) unless
 * there is a device: the first call of every GPU subcommand. */
void cuda_require_device(void);

/* One line describing device 0, e.g. "NVIDIA H200, sm_90, 132 SMs, SM
 * clock up to 1980 MHz and 1755 MHz when stamped, 139.8 GiB, CUDA runtime
 * 13.0, driver 13.0": the peak clock the driver reports, and the clock
 * cuda_sm_clock_mhz measures as the line is written (0 where it cannot). A
 * results file's stamp is written after its timed runs. */
void cuda_device_describe(char *buf, size_t size);

/* The SM clock now, in MHz, measured on the GPU; 0 where there is no GPU
 * timer to measure it against (the CUDA emulator). And the peak the
 * driver reports, which a kernel runs at or below (0 where unknown). */
int cuda_sm_clock_mhz(void);
int cuda_peak_sm_clock_mhz(void);

/* Theoretical DRAM bandwidth of device 0 in GB/s, from cudaDeviceGetAttribute
 * (memory clock and bus width), or 0 when the driver does not report them. */
double cuda_theoretical_bandwidth_gbs(void);

/* The reason a launcher of kernels/ refuses its arguments, formatted like
 * printf into a buffer of the calling thread: a launcher returns it without
 * allocating anything, and it stays valid until that thread's next refusal.
 * One line, cut at 255 characters. */
const char *gpu_refusal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Device memory for the plain-C chapter code, which cannot call the CUDA
 * runtime's templates: an allocation, one filled with a copy of `bytes` of
 * host memory, and its release (NULL is ignored). */
void *cuda_device_alloc(size_t bytes);
void *cuda_device_copy_of(const void *host, size_t bytes);
void cuda_device_free(void *device);

/* The GPU twin of bench_run, and the one place GPU time is measured:
 * `runs` (>= 1) calls of launch(ctx), each timed between two CUDA events on
 * the default stream, after `warmup` untimed calls; the median, min and max
 * in seconds. launch queues GPU work on the default stream.
 *
 * Each run starts from a cold L2: a write of twice the L2's size, queued
 * before the run's first event, evicts what the last run left there, so
 * inputs smaller than the L2 are read from memory as the first time. All
 * runs are queued before the host waits, once: the host's launch latency
 * is not timed, only the GPU's. */
BenchStats cuda_bench_run(void (*launch)(void *ctx), void *ctx, int warmup, int runs);

/* For kernels of a few microseconds, where one launch is mostly the gap
 * between two events: each run times `launches_per_run` launches back to
 * back and counts their mean. No flush: the inputs stay in L2 from one
 * launch to the next, as a decode step's logits do, just written by the
 * layer before. */
BenchStats cuda_bench_run_back_to_back(void (*launch)(void *ctx), void *ctx, int warmup, int runs,
                                       int launches_per_run);

/* For kernels of a few microseconds, timed as a decode step runs them:
 * `launches_per_graph` calls of launch(ctx, stream), which queue their work
 * on `stream` (a cudaStream_t), are captured once into a CUDA graph; each of
 * `runs` replays of it, after `warmup` untimed ones, is timed between two
 * events and counted as its mean per launch. The GPU starts a graph's
 * launches itself, one after another, so neither the host's launch latency
 * nor the gap between two events is in the time, only what a kernel costs
 * when it follows another. No flush: the inputs stay in L2, as
 * cuda_bench_run_back_to_back's. */
BenchStats cuda_bench_graph(void (*launch)(void *ctx, void *stream), void *ctx, int warmup, int runs,
                            int launches_per_graph);

/* Measured bandwidths in GB/s, the limits every memory-bound kernel is
 * compared against in the same run (the median of several runs over
 * `bytes`, a multiple of 16, from a cold L2):
 *   copy: cudaMemcpyAsync device to device, bytes read plus bytes written;
 *   copy kernel: a grid of 16-byte loads and stores, read plus written, the
 *     limit of a kernel that reads one array and writes another;
 *   read: a grid of 16-byte loads and nothing written back but a word per
 *     block, the limit of a kernel that only reads (top-K, decode), which a
 *     copy's figure would flatter: DRAM turns between reads and writes. */
double cuda_copy_bandwidth_gbs(size_t bytes);
double cuda_copy_kernel_bandwidth_gbs(size_t bytes);
double cuda_read_bandwidth_gbs(size_t bytes);

COMMON_END_C

#endif
