/* The emulator itself: barriers and warp collectives give what CUDA
 * specifies, a missing barrier changes the result, a collective that a lane
 * cannot reach stops the program with a message naming kernel, block, warp
 * and lanes, and launches that a GPU refuses set the error that
 * cudaGetLastError returns. Built only for the emulator (g++). */
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/testing.h"

namespace
{

constexpr unsigned kFullMask = 0xffffffffu;

/* Device memory of n ints, filled with `fill`; freed by the destructor. */
struct DeviceInts {
    int *data = nullptr;
    size_t n;
    DeviceInts(size_t count, int fill) : n(count)
    {
        cudaMalloc(&data, n * sizeof(int));
        std::vector<int> host(n, fill);
        cudaMemcpy(data, host.data(), n * sizeof(int), cudaMemcpyHostToDevice);
    }
    ~DeviceInts()
    {
        cudaFree(data);
    }
    std::vector<int> host() const
    {
        std::vector<int> values(n);
        cudaMemcpy(values.data(), data, n * sizeof(int), cudaMemcpyDeviceToHost);
        return values;
    }
};

/* ---- Barriers ----------------------------------------------------------- */

constexpr int kRingThreads = 96;

/* Each thread writes its slot and reads its neighbour's: correct only with
 * the barrier between. */
template <bool kBarrier> __global__ void read_neighbour(int *out)
{
    __shared__ int ring[kRingThreads];
    int t = threadIdx.x;
    ring[t] = 1000 * blockIdx.x + t;
    if (kBarrier) {
        __syncthreads();
    }
    out[blockIdx.x * kRingThreads + t] = ring[(t + 1) % kRingThreads];
}

/* Wrong values in the output of read_neighbour over `blocks` blocks. */
int neighbour_errors(bool barrier, int blocks)
{
    DeviceInts out(static_cast<size_t>(blocks) * kRingThreads, 0);
    if (barrier) {
        read_neighbour<true><<<blocks, kRingThreads>>>(out.data);
    } else {
        read_neighbour<false><<<blocks, kRingThreads>>>(out.data);
    }
    std::vector<int> got = out.host();
    int errors = 0;
    for (int b = 0; b < blocks; b++) {
        for (int t = 0; t < kRingThreads; t++) {
            errors += got[b * kRingThreads + t] != 1000 * b + (t + 1) % kRingThreads;
        }
    }
    return errors;
}

void test_barriers()
{
    EXPECT(cudaGetLastError() == cudaSuccess, "no error before the launches");
    EXPECT(neighbour_errors(true, 2) == 0, "with __syncthreads every thread reads its neighbour's write");
    /* Even blocks run in index order, so thread t reads slot t + 1 before
     * thread t + 1 writes it; odd blocks the other way round. */
    EXPECT(neighbour_errors(false, 1) > 0, "without the barrier, one block reads stale values");
    EXPECT(neighbour_errors(false, 2) > 0, "without the barrier, two blocks read stale values");
}

/* Shared memory reused in a second round: each warp's lane 0 publishes a
 * value, every thread reads the next warp's. Without the barrier that
 * closes the first round, a warp that runs ahead overwrites its slot before
 * the previous warp has read it, as warps do on a GPU. */
constexpr int kRoundWarps = 4;

template <bool kClosingBarrier> __global__ void publish_twice(int *out)
{
    __shared__ int slot[kRoundWarps];
    int warp = threadIdx.x / 32;
    for (int round = 0; round < 2; round++) {
        if (threadIdx.x % 32 == 0) {
            slot[warp] = 100 * round + warp;
        }
        __syncthreads();
        out[round * blockDim.x + threadIdx.x] = slot[(warp + 1) % kRoundWarps];
        if (kClosingBarrier) {
            __syncthreads();
        }
    }
}

int publish_errors(bool closing_barrier)
{
    const int threads = 32 * kRoundWarps;
    DeviceInts out(2 * threads, -1);
    if (closing_barrier) {
        publish_twice<true><<<1, threads>>>(out.data);
    } else {
        publish_twice<false><<<1, threads>>>(out.data);
    }
    std::vector<int> got = out.host();
    int errors = 0;
    for (int round = 0; round < 2; round++) {
        for (int t = 0; t < threads; t++) {
            errors += got[round * threads + t] != 100 * round + (t / 32 + 1) % kRoundWarps;
        }
    }
    return errors;
}

void test_warps_drift_apart()
{
    EXPECT(publish_errors(true) == 0, "with the closing barrier every round reads its own values");
    EXPECT(publish_errors(false) > 0, "without it, a warp that runs ahead overwrites a slot still to be read");
}

/* Threads that exit early count as arrived at later barriers. */
__global__ void barrier_after_exits(int *out)
{
    __shared__ int total[1];
    if (threadIdx.x == 0) {
        total[0] = 0;
    }
    __syncthreads();
    if (threadIdx.x % 3 == 0) {
        return;
    }
    for (int t = 0; t < static_cast<int>(blockDim.x); t++) {
        if (static_cast<int>(threadIdx.x) == t) {
            total[0] += 1;
        }
        __syncthreads();
    }
    if (threadIdx.x == 1) {
        out[0] = total[0];
    }
}

void test_exited_threads_count_as_arrived()
{
    DeviceInts out(1, -1);
    barrier_after_exits<<<1, 50>>>(out.data);
    EXPECT(out.host()[0] == 50 - 17, "the 33 threads left pass the barriers: %d", out.host()[0]);
}

/* ---- Warp collectives ----------------------------------------------------- */

enum { XOR, DOWN, UP, INDEX, XOR_WIDTH_8, DOWN_WIDTH_8, BALLOT, ANY, ALL, REDUCE_MAX, RESULTS };

__global__ void collectives(int *out)
{
    int lane = threadIdx.x % 32;
    int *mine = out + threadIdx.x * RESULTS;
    int value = 100 + static_cast<int>(threadIdx.x);
    mine[XOR] = __shfl_xor_sync(kFullMask, value, 5);
    mine[DOWN] = __shfl_down_sync(kFullMask, value, 3);
    mine[UP] = __shfl_up_sync(kFullMask, value, 2);
    mine[INDEX] = __shfl_sync(kFullMask, value, 7);
    mine[XOR_WIDTH_8] = __shfl_xor_sync(kFullMask, value, 9, 8);
    mine[DOWN_WIDTH_8] = __shfl_down_sync(kFullMask, value, 3, 8);
    mine[BALLOT] = static_cast<int>(__ballot_sync(kFullMask, lane % 3 == 0));
    mine[ANY] = __any_sync(kFullMask, lane == 17 && threadIdx.x >= 32);
    mine[ALL] = __all_sync(kFullMask, lane < 31 || threadIdx.x < 32);
    mine[REDUCE_MAX] = static_cast<int>(__reduce_max_sync(kFullMask, (lane * 7) % 32 + threadIdx.x / 32));
}

/* What CUDA's documentation says each lane gets, for two warps. */
int expected_collective(int thread, int what)
{
    int lane = thread % 32, warp_base = thread - lane, group8 = lane / 8 * 8;
    auto value = [&](int l) { return 100 + warp_base + l; };
    switch (what) {
    case XOR:
        return value(lane ^ 5);
    case DOWN:
        return value(lane + 3 < 32 ? lane + 3 : lane);
    case UP:
        return value(lane >= 2 ? lane - 2 : lane);
    case INDEX:
        return value(7);
    case XOR_WIDTH_8: {
        /* lane ^ 9 leaves the group of 8: a later group gives the lane's own
         * value, an earlier one is read. */
        int source = lane ^ 9;
        return value(source >= group8 + 8 ? lane : source);
    }
    case DOWN_WIDTH_8:
        return value(lane % 8 + 3 < 8 ? lane + 3 : lane);
    case BALLOT:
        return static_cast<int>(0x49249249u);
    case ANY:
        return thread >= 32;
    case ALL:
        return thread < 32;
    default:
        return 31 + warp_base / 32;
    }
}

void test_collectives()
{
    DeviceInts out(64 * RESULTS, -1);
    collectives<<<1, 64>>>(out.data);
    std::vector<int> got = out.host();
    const char *names[] = {"xor",          "down",   "up",  "index", "xor width 8",
                           "down width 8", "ballot", "any", "all",   "reduce_max"};
    for (int what = 0; what < RESULTS; what++) {
        int wrong = 0, first = -1;
        for (int t = 0; t < 64; t++) {
            if (got[t * RESULTS + what] != expected_collective(t, what)) {
                wrong++;
                first = first < 0 ? t : first;
            }
        }
        EXPECT(wrong == 0, "%s: %d lanes wrong, first thread %d got %d, not %d", names[what], wrong, first,
               first < 0 ? 0 : got[first * RESULTS + what], first < 0 ? 0 : expected_collective(first, what));
    }
}

/* A warp of 8 lanes (a block of 40): a shuffle over those 8 lanes works,
 * and reading a lane outside the mask gives NaN bytes, never a value. */
__global__ void partial_warp(float *out)
{
    unsigned lanes = threadIdx.x < 32 ? kFullMask : 0xffu;
    float value = static_cast<float>(threadIdx.x);
    float inside = __shfl_xor_sync(lanes, value, 1);
    float outside = __shfl_down_sync(lanes, value, 4);
    out[2 * threadIdx.x] = inside;
    out[2 * threadIdx.x + 1] = outside;
}

void test_partial_warp()
{
    float *out;
    cudaMalloc(&out, 80 * sizeof(float));
    partial_warp<<<1, 40>>>(out);
    float got[80];
    cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost);
    cudaFree(out);
    EXPECT(got[2 * 33] == 32.0f && got[2 * 39] == 38.0f, "xor within the 8 lanes: %g %g", got[2 * 33], got[2 * 39]);
    EXPECT(got[2 * 32 + 1] == 36.0f, "down from a lane in the mask: %g", got[2 * 32 + 1]);
    EXPECT(got[2 * 36 + 1] != got[2 * 36 + 1], "down from lane 8, outside the mask, is NaN: %g", got[2 * 36 + 1]);
}

/* ---- Bugs the emulator stops at -------------------------------------------- */

__global__ void shuffle_after_an_exit(int *out)
{
    if (blockIdx.x == 1 && threadIdx.x == 37) {
        return;
    }
    out[threadIdx.x] = __shfl_xor_sync(kFullMask, static_cast<int>(threadIdx.x), 1);
}

__global__ void different_collectives(int *out)
{
    int lane = threadIdx.x % 32;
    out[threadIdx.x] = lane < 16 ? __shfl_xor_sync(kFullMask, lane, 1) : static_cast<int>(__ballot_sync(kFullMask, 1));
}

__global__ void collective_against_barrier(int *out)
{
    if (threadIdx.x < 16) {
        out[threadIdx.x] = __shfl_xor_sync(kFullMask, 1, 1);
    }
    __syncthreads();
}

__global__ void mask_without_the_lane(int *out)
{
    out[threadIdx.x] = __shfl_xor_sync(threadIdx.x == 0 ? 0x2u : kFullMask, 1, 1);
}

__global__ void full_mask_in_a_short_warp(int *out)
{
    out[threadIdx.x] = __shfl_xor_sync(kFullMask, 1, 1);
}

/* A launch of one of the kernels above on 64 ints, which must stop the
 * program. Each is written out in a lambda, the kernel by its name: the
 * emulator names a kernel by what stands before <<<, so a kernel launched
 * through a pointer would be reported under the pointer's name. */
using BadLaunch = void (*)(int *out);

void run_bad_launch(void *ctx)
{
    DeviceInts out(64, 0);
    (*static_cast<BadLaunch *>(ctx))(out.data);
}

void expect_stop(BadLaunch launch, const char *words)
{
    ChildResult child = test_run_child(run_bad_launch, &launch);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && std::strstr(child.err, words) != nullptr,
           "stops with status 1 and one line saying '%s': status %d, %d lines:\n%s", words, child.exit_status,
           child.err_lines, child.err);
}

void test_bugs_are_reported()
{
    expect_stop([](int *out) { shuffle_after_an_exit<<<2, 64>>>(out); },
                "cuda emulator: kernel shuffle_after_an_exit, block (1, 0, 0): warp 1: lanes 0-4, 6-31 wait at "
                "__shfl_xor_sync (mask 0xffffffff), but lane 5 has exited");
    expect_stop([](int *out) { different_collectives<<<1, 32>>>(out); },
                "kernel different_collectives, block (0, 0, 0): warp 0: lanes 0-15 wait at __shfl_xor_sync "
                "(mask 0xffffffff), but lane 16 is at __ballot_sync");
    expect_stop([](int *out) { collective_against_barrier<<<1, 32>>>(out); },
                "warp 0: lanes 0-15 wait at __shfl_xor_sync (mask 0xffffffff), but lane 16 waits at __syncthreads");
    expect_stop([](int *out) { mask_without_the_lane<<<1, 32>>>(out); },
                "warp 0: lane 0 calls __shfl_xor_sync with mask 0x00000002, which leaves the lane itself out");
    expect_stop([](int *out) { full_mask_in_a_short_warp<<<1, 40>>>(out); },
                "warp 1: lanes 0-7 wait at __shfl_xor_sync (mask 0xffffffff), but lane 8 is not in the block "
                "(40 threads)");
}

/* ---- Launch configurations -------------------------------------------------- */

__global__ void write_one(int *out)
{
    out[0] = 1;
}

__global__ void read_dynamic_shared(float *out)
{
    extern __shared__ float scratch[];
    out[blockIdx.x] = scratch[threadIdx.x];
    scratch[threadIdx.x] = 1.0f;
}

/* The error a launch leaves, and whether the kernel ran. */
cudaError_t launch_error(dim3 grid, dim3 block, size_t shared, bool *ran)
{
    DeviceInts out(1, 0);
    write_one<<<grid, block, shared>>>(out.data);
    cudaError_t error = cudaGetLastError();
    *ran = out.host()[0] == 1;
    return error;
}

void test_launch_checks()
{
    struct {
        dim3 grid, block;
        size_t shared;
        cudaError_t error;
        const char *what;
    } cases[] = {
        {1,                      1024,      0,cudaSuccess,"1024 threads"},
        {1,                      1025,      0,cudaErrorInvalidConfiguration,"1025 threads"},
        {1,                      0,         0,cudaErrorInvalidConfiguration,"no threads"},
        {1,                      dim3(32,   32,2),0, cudaErrorInvalidConfiguration, "32 x 32 x 2 threads"},
        {1, dim3(1,          1,65),0,cudaErrorInvalidConfiguration, "block z of 65"},
        {0,                     32, 0,cudaErrorInvalidConfiguration,"no blocks"                                         },
        {dim3(1,                     65535), 1,     0,                   cudaSuccess,"grid y of 65535"},
        {dim3(1,                     65536),                             1,0,cudaErrorInvalidConfiguration,"grid y of 65536"},
        {dim3(1,1,65536),1,   0,                                 cudaErrorInvalidConfiguration, "grid z of 65536"},
        {1,                 32,                              48 * 1024, cudaSuccess,                                   "48 KiB of shared memory"                                },
        {1,     32,              48 * 1024 + 1,cudaErrorInvalidValue,"48 KiB + 1 of shared memory"},
    };
    for (const auto &c : cases) {
        bool ran = false;
        cudaError_t error = launch_error(c.grid, c.block, c.shared, &ran);
        EXPECT(error == c.error && ran == (c.error == cudaSuccess), "%s: %s (%s), kernel %s", c.what,
               cudaGetErrorName(error), cudaGetErrorString(error), ran ? "ran" : "did not run");
    }
    bool ran = false;
    EXPECT(cudaGetLastError() == cudaSuccess, "cudaGetLastError resets the error");
    EXPECT(cudaFuncSetAttribute(write_one, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
                   cudaErrorInvalidValue &&
               cudaGetLastError() == cudaErrorInvalidValue,
           "no more than 227 KiB");
    EXPECT(cudaFuncSetAttribute(write_one, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024) == cudaSuccess,
           "raising the limit to 100 KiB");
    EXPECT(launch_error(1, 32, 100 * 1024, &ran) == cudaSuccess && ran, "100 KiB once raised");
    EXPECT(launch_error(1, 32, 100 * 1024 + 1, &ran) == cudaErrorInvalidValue && !ran, "not 1 byte more");
}

void test_shared_memory_is_poisoned()
{
    float *out;
    cudaMalloc(&out, 2 * sizeof(float));
    read_dynamic_shared<<<2, 32, 32 * sizeof(float)>>>(out);
    float got[2];
    cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost);
    cudaFree(out);
    EXPECT(got[0] != got[0] && got[1] != got[1], "dynamic shared memory is NaN before each block: %g %g", got[0],
           got[1]);
    /* read_neighbour: block 1 first reads its static array, which block 0 wrote. */
    EXPECT(neighbour_errors(false, 2) >= kRingThreads - 1, "static shared memory is poisoned again before block 1");
}

void test_memory_checks()
{
    int *device;
    int host[4] = {1, 2, 3, 4};
    cudaMalloc(&device, sizeof host);
    EXPECT(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess, "a copy that fits");
    EXPECT(cudaMemcpy(host, device, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "a copy in the wrong direction");
    EXPECT(cudaMemcpy(device + 1, host, sizeof host, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
           "a copy past the end of the allocation");
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "failed calls set the last error");
    EXPECT(cudaFree(host) == cudaErrorInvalidValue, "freeing host memory");
    cudaGetLastError();
    cudaFree(device);
}

void test_device()
{
    cudaDeviceProp prop;
    int count = 0;
    EXPECT(cudaGetDeviceCount(&count) == cudaSuccess && count == 1, "one device");
    EXPECT(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && std::strstr(prop.name, "emulator") != nullptr,
           "a device that says what it is: %s", prop.name);
}

} // namespace

int main()
{
    test_barriers();
    test_warps_drift_apart();
    test_exited_threads_count_as_arrived();
    test_collectives();
    test_partial_warp();
    test_bugs_are_reported();
    test_launch_checks();
    test_shared_memory_is_poisoned();
    test_memory_checks();
    test_device();
    return test_finish();
}
