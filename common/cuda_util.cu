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

// ANCHOR: measure_the_sm_clock
/* The SM clock as the GPU runs it now. The driver's clock attribute is the
 * peak; a kernel limited by instructions runs at the clock the GPU holds
 * under its load and power, which can be lower. One thread counts its SM's
 * cycles (clock64) against the GPU's nanosecond timer (%globaltimer, which
 * on some GPUs moves in steps of a microsecond) over CLOCK_PROBE_NS: cycles
 * per nanosecond is the clock in GHz. Outside a GPU (the CUDA emulator of
 * the tests) there is no such timer, and it reports 0 nanoseconds. */
enum { CLOCK_PROBE_NS = 10 * 1000 * 1000 };

__global__ void clock_probe_kernel(long long *cycles, long long *nanoseconds)
{
#ifdef __CUDA_ARCH__
    unsigned long long start_ns, now_ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start_ns));
    long long start_cycles = clock64();
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now_ns));
    } while (now_ns - start_ns < CLOCK_PROBE_NS);
    *cycles = clock64() - start_cycles;
    *nanoseconds = static_cast<long long>(now_ns - start_ns);
#else
    *cycles = 0;
    *nanoseconds = 0;
#endif
}

int cuda_sm_clock_mhz(void)
{
    long long *counts = static_cast<long long *>(cuda_device_alloc(2 * sizeof(long long)));
    clock_probe_kernel<<<1, 1>>>(counts, counts + 1);
    CUDA_CHECK(cudaGetLastError());
    long long host[2];
    CUDA_CHECK(cudaMemcpy(host, counts, sizeof host, cudaMemcpyDeviceToHost));
    cuda_device_free(counts);
    return host[1] > 0 ? static_cast<int>(1e3 * static_cast<double>(host[0]) / static_cast<double>(host[1]) + 0.5) : 0;
}
// ANCHOR_END: measure_the_sm_clock

int cuda_peak_sm_clock_mhz(void)
{
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return khz / 1000;
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
    snprintf(buf, size,
             "%s, sm_%d%d, %d SMs, SM clock up to %d MHz and %d MHz when stamped, %.1f GiB, CUDA runtime %s, driver %s",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount, cuda_peak_sm_clock_mhz(), cuda_sm_clock_mhz(),
             (double)prop.totalGlobalMem / (1u << 30), runtime, driver);
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

namespace
{

int device_attribute(cudaDeviceAttr attribute)
{
    int device = 0, value = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
    return value;
}

/* A buffer whose writing evicts from L2 whatever the last launch left
 * there: twice the L2's size, since its replacement policy is not plain LRU. */
struct L2Flush {
    void *buffer;
    size_t bytes;
};

L2Flush l2_flush_new()
{
    L2Flush flush = {nullptr, 2 * static_cast<size_t>(device_attribute(cudaDevAttrL2CacheSize))};
    if (flush.bytes > 0) {
        CUDA_CHECK(cudaMalloc(&flush.buffer, flush.bytes));
    }
    return flush;
}

void l2_flush_queue(const L2Flush *flush)
{
    if (flush->bytes > 0) {
        CUDA_CHECK(cudaMemsetAsync(flush->buffer, 0, flush->bytes));
    }
}

/* A start and a stop event for each of `runs` runs. */
struct RunEvents {
    cudaEvent_t *starts, *stops;
    int runs;
};

RunEvents run_events_new(int runs)
{
    cudaEvent_t *events = static_cast<cudaEvent_t *>(array_alloc(2 * static_cast<size_t>(runs), sizeof(cudaEvent_t)));
    for (int i = 0; i < 2 * runs; i++) {
        CUDA_CHECK(cudaEventCreate(&events[i]));
    }
    return RunEvents{events, events + runs, runs};
}

/* Wait for the last run, then the runs' times, each over launches_per_run
 * launches; the events are released. */
BenchStats run_events_finish(RunEvents *events, int launches_per_run)
{
    CUDA_CHECK(cudaEventSynchronize(events->stops[events->runs - 1]));
    double *seconds = static_cast<double *>(array_alloc(static_cast<size_t>(events->runs), sizeof(double)));
    for (int i = 0; i < events->runs; i++) {
        float milliseconds = 0;
        CUDA_CHECK(cudaEventElapsedTime(&milliseconds, events->starts[i], events->stops[i]));
        seconds[i] = 1e-3 * milliseconds / launches_per_run;
    }
    BenchStats stats = bench_stats_from_times(seconds, events->runs);
    array_free(seconds);
    for (int i = 0; i < 2 * events->runs; i++) {
        CUDA_CHECK(cudaEventDestroy(events->starts[i]));
    }
    array_free(events->starts);
    return stats;
}

/* The timing loop of both functions below: each run is an L2 flush (when
 * asked for), an event, `launches_per_run` launches, an event; everything is
 * queued before the host waits once, at the end, so the host's latency in
 * launching is never between two events. */
BenchStats time_queued_runs(void (*launch)(void *ctx), void *ctx, int warmup, int runs, int launches_per_run,
                            bool flush_l2)
{
    for (int i = 0; i < warmup; i++) {
        launch(ctx);
    }
    L2Flush flush = flush_l2 ? l2_flush_new() : L2Flush{nullptr, 0};
    RunEvents events = run_events_new(runs);
    for (int i = 0; i < runs; i++) {
        l2_flush_queue(&flush);
        CUDA_CHECK(cudaEventRecord(events.starts[i]));
        for (int j = 0; j < launches_per_run; j++) {
            launch(ctx);
        }
        CUDA_CHECK(cudaEventRecord(events.stops[i]));
    }
    BenchStats stats = run_events_finish(&events, launches_per_run);
    if (flush.buffer != nullptr) {
        CUDA_CHECK(cudaFree(flush.buffer));
    }
    return stats;
}

} // namespace

BenchStats cuda_bench_run(void (*launch)(void *ctx), void *ctx, int warmup, int runs)
{
    return time_queued_runs(launch, ctx, warmup, runs, 1, true);
}

BenchStats cuda_bench_run_back_to_back(void (*launch)(void *ctx), void *ctx, int warmup, int runs, int launches_per_run)
{
    return time_queued_runs(launch, ctx, warmup, runs, launches_per_run, false);
}

// ANCHOR: time_graph_replays
BenchStats cuda_bench_graph(void (*launch)(void *ctx, void *stream), void *ctx, int warmup, int runs,
                            int launches_per_graph)
{
    /* Capture needs a stream of its own: work on the legacy default stream
     * cannot be captured. */
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int j = 0; j < launches_per_graph; j++) {
        launch(ctx, stream);
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t replay;
    CUDA_CHECK(cudaGraphInstantiate(&replay, graph, 0));
    for (int i = 0; i < warmup; i++) {
        CUDA_CHECK(cudaGraphLaunch(replay, stream));
    }
    RunEvents events = run_events_new(runs);
    for (int i = 0; i < runs; i++) {
        CUDA_CHECK(cudaEventRecord(events.starts[i], stream));
        CUDA_CHECK(cudaGraphLaunch(replay, stream));
        CUDA_CHECK(cudaEventRecord(events.stops[i], stream));
    }
    BenchStats stats = run_events_finish(&events, launches_per_graph);
    CUDA_CHECK(cudaGraphExecDestroy(replay));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    return stats;
}
// ANCHOR_END: time_graph_replays

namespace
{

enum { PROBE_THREADS = 256, WARMUP_RUNS = 2, TIMED_RUNS = 9 };

/* Read-only probe: each thread adds up the 32-bit words of its 16-byte
 * loads (integer adds, which wrap, so the total is exact and cheap) and a
 * block writes one word, so that no load can be optimised away. */
__global__ void read_probe_kernel(const uint4 *words, size_t count, unsigned *block_sums)
{
    unsigned sum = 0;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        uint4 w = words[i];
        sum += w.x + w.y + w.z + w.w;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    __shared__ unsigned warp_sums[PROBE_THREADS / 32];
    if (threadIdx.x % 32 == 0) {
        warp_sums[threadIdx.x / 32] = sum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int w = 0; w < PROBE_THREADS / 32; w++) {
            total += warp_sums[w];
        }
        block_sums[blockIdx.x] = total;
    }
}

/* Copy probe: 16-byte loads and stores, as a kernel that reads and writes
 * its own arrays does them. */
__global__ void copy_probe_kernel(const uint4 *from, uint4 *to, size_t count)
{
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        to[i] = from[i];
    }
}

/* As many blocks as the SMs hold at once, each looping over the buffer. */
int probe_blocks()
{
    return device_attribute(cudaDevAttrMultiProcessorCount) * (2048 / PROBE_THREADS);
}

struct Probe {
    uint4 *source, *destination;
    size_t count; /* 16-byte words */
    int blocks;
    unsigned *block_sums;
};

/* The source's bytes are all 0x01: every 32-bit word is 0x01010101. */
Probe probe_new(size_t bytes, bool with_destination)
{
    Probe probe = {nullptr, nullptr, bytes / sizeof(uint4), probe_blocks(), nullptr};
    CUDA_CHECK(cudaMalloc(&probe.source, probe.count * sizeof(uint4)));
    CUDA_CHECK(cudaMemset(probe.source, 1, probe.count * sizeof(uint4)));
    if (with_destination) {
        CUDA_CHECK(cudaMalloc(&probe.destination, probe.count * sizeof(uint4)));
    }
    CUDA_CHECK(cudaMalloc(&probe.block_sums, static_cast<size_t>(probe.blocks) * sizeof(unsigned)));
    return probe;
}

void probe_free(Probe *probe)
{
    CUDA_CHECK(cudaFree(probe->source));
    CUDA_CHECK(cudaFree(probe->destination));
    CUDA_CHECK(cudaFree(probe->block_sums));
}

void read_probe_once(void *ctx)
{
    const Probe *p = static_cast<const Probe *>(ctx);
    read_probe_kernel<<<p->blocks, PROBE_THREADS>>>(p->source, p->count, p->block_sums);
    CUDA_CHECK(cudaGetLastError());
}

void copy_probe_once(void *ctx)
{
    const Probe *p = static_cast<const Probe *>(ctx);
    copy_probe_kernel<<<p->blocks, PROBE_THREADS>>>(p->source, p->destination, p->count);
    CUDA_CHECK(cudaGetLastError());
}

/* A probe that read wrong data would time the wrong thing: the sum of the
 * blocks' sums must be 4 words of 0x01010101 per 16 bytes, modulo 2^32. */
void check_read_probe(const Probe *p)
{
    unsigned *sums = static_cast<unsigned *>(array_alloc(static_cast<size_t>(p->blocks), sizeof(unsigned)));
    CUDA_CHECK(
        cudaMemcpy(sums, p->block_sums, static_cast<size_t>(p->blocks) * sizeof(unsigned), cudaMemcpyDeviceToHost));
    unsigned total = 0, expected = static_cast<unsigned>(4 * p->count) * 0x01010101u;
    for (int b = 0; b < p->blocks; b++) {
        total += sums[b];
    }
    array_free(sums);
    if (total != expected) {
        fprintf(stderr, "cuda_read_bandwidth_gbs: the probe summed 0x%08x, not 0x%08x\n", total, expected);
        exit(1);
    }
}

/* The copy's last 16 bytes arrived (its first are checked by the same
 * loop's first iteration of every thread alike). */
void check_copy_probe(const Probe *p)
{
    uint4 last;
    CUDA_CHECK(cudaMemcpy(&last, p->destination + p->count - 1, sizeof last, cudaMemcpyDeviceToHost));
    if (last.x != 0x01010101u || last.w != 0x01010101u) {
        fprintf(stderr, "cuda_copy_kernel_bandwidth_gbs: the probe's copy is wrong\n");
        exit(1);
    }
}

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

double cuda_read_bandwidth_gbs(size_t bytes)
{
    Probe probe = probe_new(bytes, false);
    double seconds = cuda_bench_run(read_probe_once, &probe, WARMUP_RUNS, TIMED_RUNS).median;
    check_read_probe(&probe);
    probe_free(&probe);
    return gb_per_s(static_cast<double>(probe.count * sizeof(uint4)), seconds);
}

double cuda_copy_kernel_bandwidth_gbs(size_t bytes)
{
    Probe probe = probe_new(bytes, true);
    double seconds = cuda_bench_run(copy_probe_once, &probe, WARMUP_RUNS, TIMED_RUNS).median;
    check_copy_probe(&probe);
    probe_free(&probe);
    return gb_per_s(2.0 * static_cast<double>(probe.count * sizeof(uint4)), seconds);
}
