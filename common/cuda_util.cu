#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/cuda_util.h"

void cuda_check_result(int error, const char *call, const char *file, int line)
{
    if (error == cudaSuccess) {
        return;
    }
    cudaError_t code = static_cast<cudaError_t>(error);
    fprintf(stderr, "%s:%d: CUDA error: %s: %s (%s)\n", file, line, call, cudaGetErrorString(code),
            cudaGetErrorName(code));
    exit(1);
}

const char *gpu_refusal(const char *fmt, ...)
{
    /* Per thread, so that launchers called from several threads do not
     * overwrite each other's reasons. */
    static thread_local char reason[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(reason, sizeof reason, fmt, args);
    va_end(args);
    return reason;
}

bool cuda_device_available(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        /* No driver, or no device: clear the error so that it does not show
         * up in a later cudaGetLastError(). */
        cudaGetLastError();
        return false;
    }
    return count > 0;
}

void cuda_require_device(void)
{
    if (!cuda_device_available()) {
        cli_fail("no CUDA device found");
    }
}

/* A CUDA version number such as 13000 as "13.0". */
static void format_version(char *text, size_t size, int version)
{
    snprintf(text, size, "%d.%d", version / 1000, version % 1000 / 10);
}

void cuda_device_describe(char *buf, size_t size)
{
    cudaDeviceProp prop;
    cudaError_t error = cudaGetDeviceProperties(&prop, 0);
    if (error != cudaSuccess) {
        snprintf(buf, size, "no CUDA device (%s)", cudaGetErrorString(error));
        cudaGetLastError();
        return;
    }
    int runtime_version = 0, driver_version = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version));
    CUDA_CHECK(cudaDriverGetVersion(&driver_version));
    char runtime[16], driver[16];
    format_version(runtime, sizeof runtime, runtime_version);
    format_version(driver, sizeof driver, driver_version);
    snprintf(buf, size, "%s, sm_%d%d, %d SMs, %.1f GiB, CUDA runtime %s, driver %s", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, (double)prop.totalGlobalMem / (1u << 30), runtime, driver);
}

double cuda_theoretical_bandwidth_gbs(void)
{
    /* CUDA 13 removed cudaDeviceProp::memoryClockRate; the attribute remains. */
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0.0;
    }
    /* Double data rate: two transfers per clock, bus_bits / 8 bytes each. */
    return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) * 1e-9;
}

void *cuda_device_alloc(size_t bytes)
{
    void *device = nullptr;
    CUDA_CHECK(cudaMalloc(&device, bytes));
    return device;
}

void *cuda_device_copy_of(const void *host, size_t bytes)
{
    void *device = cuda_device_alloc(bytes);
    CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
    return device;
}

void cuda_device_free(void *device)
{
    if (device != nullptr) {
        CUDA_CHECK(cudaFree(device));
    }
}

BenchStats cuda_bench_run(void (*launch)(void *ctx), void *ctx, int warmup, int runs)
{
    for (int i = 0; i < warmup; i++) {
        launch(ctx);
    }
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    double *seconds = static_cast<double *>(array_alloc(static_cast<size_t>(runs), sizeof(double)));
    for (int i = 0; i < runs; i++) {
        CUDA_CHECK(cudaEventRecord(start));
        launch(ctx);
        CUDA_CHECK(cudaEventRecord(stop));
        CUDA_CHECK(cudaEventSynchronize(stop));
        float milliseconds = 0;
        CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));
        seconds[i] = 1e-3 * milliseconds;
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    BenchStats stats = bench_stats_from_times(seconds, runs);
    array_free(seconds);
    return stats;
}

namespace
{

struct Copy {
    void *source, *destination;
    size_t bytes;
};

void copy_once(void *ctx)
{
    const Copy *copy = static_cast<const Copy *>(ctx);
    CUDA_CHECK(cudaMemcpyAsync(copy->destination, copy->source, copy->bytes, cudaMemcpyDeviceToDevice));
}

} // namespace

double cuda_copy_bandwidth_gbs(size_t bytes)
{
    enum { WARMUP_RUNS = 2, TIMED_RUNS = 9 };
    Copy copy = {nullptr, nullptr, bytes};
    CUDA_CHECK(cudaMalloc(&copy.source, bytes));
    CUDA_CHECK(cudaMalloc(&copy.destination, bytes));
    CUDA_CHECK(cudaMemset(copy.source, 1, bytes));
    double seconds = cuda_bench_run(copy_once, &copy, WARMUP_RUNS, TIMED_RUNS).median;
    CUDA_CHECK(cudaFree(copy.source));
    CUDA_CHECK(cudaFree(copy.destination));
    /* Each copy reads `bytes` and writes `bytes`. */
    return gb_per_s(2.0 * (double)bytes, seconds);
}
