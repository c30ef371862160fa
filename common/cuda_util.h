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

/* One line describing device 0, e.g.
 * "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB, CUDA runtime 13.0, driver 13.0". */
void cuda_device_describe(char *buf, size_t size);

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
 * in seconds. launch queues GPU work on the default stream. */
BenchStats cuda_bench_run(void (*launch)(void *ctx), void *ctx, int warmup, int runs);

/* Measured device-to-device copy bandwidth in GB/s (median of several
 * cudaMemcpyAsync of `bytes`), counting bytes read plus bytes written: the
 * limit every memory-bound kernel is compared against in the same run. */
double cuda_copy_bandwidth_gbs(size_t bytes);

COMMON_END_C

#endif
