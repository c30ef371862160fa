/* The CUDA emulator: the runtime calls of include/cuda_runtime.h, and the
 * execution of a grid on the CPU.
 *
 * Blocks run one after another. The threads of a block are fibers: each
 * runs until it reaches a barrier or a warp collective, or ends; when none
 * can run, the collectives whose lanes have all arrived are carried out,
 * and the barrier opens once every thread that has not ended is at it.
 * What real hardware would not do (a collective missing a lane, lanes at
 * different collectives, a barrier some thread can never reach) stops the
 * program with one line naming the kernel, the block, the warp and the
 * lanes. A warp runs as far as it can before the next one starts. Even
 * blocks run their warps and lanes in index order, odd ones in reverse (the
 * parity flips with every launch), and shared memory starts as NaN bytes: a
 * read of another thread's write with no barrier between sees a stale or a
 * too new value in one of the two orders. */
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "tests/emulator/fiber.h"

namespace emu
{

namespace
{

constexpr int kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockZ = 64;
constexpr unsigned kMaxGridX = 0x7fffffffu;
constexpr unsigned kMaxGridYZ = 65535;
constexpr size_t kDefaultSharedBytes = 48 * 1024;
/* An H100's or H200's opt-in limit, 227 KiB. */
constexpr int kOptInSharedBytes = 227 * 1024;
/* Few multiprocessors: kernels that size their grids by them then loop
 * over several rows per block, which is what tests need. */
constexpr int kMultiprocessors = 3;
/* Small, so that a timing loop's L2 flush stays cheap here. */
constexpr int kL2CacheBytes = 1 << 20;
/* Every byte of fresh device memory and of shared memory before each
 * block: as floats and doubles, NaN. */
constexpr unsigned char kPoison = 0xff;

/* ---- Errors ----------------------------------------------------------- */

cudaError_t last_error = cudaSuccess;

cudaError_t record(cudaError_t error)
{
    if (error != cudaSuccess) {
        last_error = error;
    }
    return error;
}

/* ---- Device memory: host allocations, known by address ------------------ */

std::map<const char *, size_t> allocations;

/* Are [pointer, pointer + bytes) inside one device allocation? */
bool on_device(const void *pointer, size_t bytes)
{
    const char *p = static_cast<const char *>(pointer);
    auto after = allocations.upper_bound(p);
    if (after == allocations.begin()) {
        return false;
    }
    auto block = std::prev(after);
    size_t offset = static_cast<size_t>(p - block->first);
    return offset < block->second && bytes <= block->second - offset;
}

bool touches_device(const void *pointer)
{
    return on_device(pointer, 1);
}

/* ---- Threads, warps and blocks ------------------------------------------ */

enum class State : unsigned char { runnable, at_barrier, at_collective, exited };

struct Thread {
    Fiber fiber;
    uint3 index;
    unsigned linear;
    State state;
    /* At a collective: which, with what, and (after it) the result. */
    Collective kind;
    const char *name;
    unsigned mask;
    int source;
    uint64_t value, result;
};

struct Grid {
    const char *kernel_name;
    void (*thread_body)(void *);
    void *context;
    dim3 grid, block;
    unsigned threads_per_block;
    unsigned char *dynamic_shared;
    size_t dynamic_shared_bytes;
};

Grid grid;
uint3 current_block;
std::vector<Thread> threads;
Thread *current;
/* The block's progress: threads ended, threads at the barrier, and for
 * each warp the lanes waiting at a collective. */
unsigned exited_threads, threads_at_barrier;
std::vector<unsigned> lanes_waiting;
unsigned long long launches;
std::vector<std::pair<void *, size_t>> static_shared;
std::map<const void *, int> max_dynamic_shared;

/* "0-15, 17" */
std::string lane_list(unsigned lanes)
{
    std::string text;
    for (int lane = 0; lane < kWarpSize;) {
        if (!(lanes >> lane & 1u)) {
            lane++;
            continue;
        }
        int last = lane;
        while (last + 1 < kWarpSize && (lanes >> (last + 1) & 1u)) {
            last++;
        }
        text += text.empty() ? "" : ", ";
        text += std::to_string(lane) + (last > lane ? "-" + std::to_string(last) : "");
        lane = last + 1;
    }
    return text;
}

/* Stop at a kernel bug: one line naming the kernel, the block and what
 * went wrong, exit status 1 (the test fails). Nothing can continue from
 * inside a half-run block, so exit at once, after what the test printed. */
[[noreturn]] __attribute__((format(printf, 1, 2))) void kernel_bug(const char *fmt, ...)
{
    fflush(stdout);
    fprintf(stderr, "cuda emulator: kernel %s, block (%u, %u, %u): ", grid.kernel_name, current_block.x,
            current_block.y, current_block.z);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    _exit(1);
}

Thread &lane_thread(unsigned warp, int lane)
{
    return threads[warp * kWarpSize + static_cast<unsigned>(lane)];
}

unsigned lanes_in_warp(unsigned warp)
{
    return std::min<unsigned>(kWarpSize, grid.threads_per_block - warp * kWarpSize);
}

/* The lanes of `warp` waiting at the collective `kind`/`name` with `mask`. */
unsigned lanes_at(unsigned warp, const Thread &like)
{
    unsigned lanes = 0;
    for (unsigned lane = 0; lane < lanes_in_warp(warp); lane++) {
        const Thread &t = lane_thread(warp, static_cast<int>(lane));
        if (t.state == State::at_collective && t.kind == like.kind && t.mask == like.mask &&
            (t.name == like.name || std::strcmp(t.name, like.name) == 0)) {
            lanes |= 1u << lane;
        }
    }
    return lanes;
}

/* Every lane named in the mask of the waiting lane `first_lane` must wait
 * at the same collective with the same mask; otherwise real hardware would
 * hang or return garbage. Returns only if they do. */
void check_collective(unsigned warp, int first_lane)
{
    const Thread &first = lane_thread(warp, first_lane);
    unsigned arrived = lanes_at(warp, first);
    if (!(first.mask >> first_lane & 1u)) {
        kernel_bug("warp %u: lane %d calls %s with mask 0x%08x, which leaves the lane itself out", warp, first_lane,
                   first.name, first.mask);
    }
    for (int lane = 0; lane < kWarpSize; lane++) {
        if (!(first.mask >> lane & 1u) || (arrived >> lane & 1u)) {
            continue;
        }
        std::string lanes = lane_list(arrived);
        if (static_cast<unsigned>(lane) >= lanes_in_warp(warp)) {
            kernel_bug("warp %u: lanes %s wait at %s (mask 0x%08x), but lane %d is not in the block (%u threads)", warp,
                       lanes.c_str(), first.name, first.mask, lane, grid.threads_per_block);
        }
        const Thread &other = lane_thread(warp, lane);
        char why[128];
        if (other.state == State::exited) {
            snprintf(why, sizeof why, "has exited");
        } else if (other.state == State::at_barrier) {
            snprintf(why, sizeof why, "waits at __syncthreads: they can never meet");
        } else if (other.mask != first.mask) {
            snprintf(why, sizeof why, "is at %s with mask 0x%08x", other.name, other.mask);
        } else {
            snprintf(why, sizeof why, "is at %s", other.name);
        }
        kernel_bug("warp %u: lanes %s wait at %s (mask 0x%08x), but lane %d %s", warp, lanes.c_str(), first.name,
                   first.mask, lane, why);
    }
}

/* Carry out the collective of the lanes in `mask` (all waiting at it). */
void complete_collective(unsigned warp, unsigned mask)
{
    lanes_waiting[warp] &= ~mask;
    const Thread &first = lane_thread(warp, __builtin_ctz(mask));
    uint64_t combined = first.kind == Collective::all ? 1 : 0;
    for (int lane = 0; lane < kWarpSize; lane++) {
        if (!(mask >> lane & 1u)) {
            continue;
        }
        uint64_t value = lane_thread(warp, lane).value;
        switch (first.kind) {
        case Collective::ballot:
            combined |= static_cast<uint64_t>(value != 0) << lane;
            break;
        case Collective::any:
            combined |= value != 0;
            break;
        case Collective::all:
            combined &= value != 0;
            break;
        case Collective::reduce_max:
            combined = std::max(combined, value);
            break;
        case Collective::syncwarp:
        case Collective::shuffle:
            break;
        }
    }
    for (int lane = 0; lane < kWarpSize; lane++) {
        if (!(mask >> lane & 1u)) {
            continue;
        }
        Thread &t = lane_thread(warp, lane);
        if (t.kind != Collective::shuffle) {
            t.result = combined;
        } else if (t.source < 0) {
            t.result = t.value;
        } else if (mask >> t.source & 1u) {
            t.result = lane_thread(warp, t.source).value;
        } else {
            /* A lane outside the mask: undefined on the GPU, NaN bytes here. */
            std::memset(&t.result, kPoison, sizeof t.result);
        }
        t.state = State::runnable;
    }
}

/* All the lanes of `mask` wait at collectives, not all at the same one.
 * Name the mismatch from the lowest lane's point of view when all the lanes
 * it names wait too (a stable message whatever the order of arrival). */
[[noreturn]] void report_mismatch(unsigned warp, unsigned mask)
{
    int first = __builtin_ctz(mask);
    if ((lanes_waiting[warp] & lane_thread(warp, first).mask) == lane_thread(warp, first).mask) {
        check_collective(warp, first);
    }
    for (int lane = first; lane < kWarpSize; lane++) {
        if ((mask >> lane & 1u) && lane_thread(warp, lane).mask == mask) {
            check_collective(warp, lane);
        }
    }
    kernel_bug("warp %u: lanes %s wait at collectives that do not match (an emulator bug: it cannot say how)", warp,
               lane_list(mask).c_str());
}

/* No thread can run and some have not ended: a collective waits for a lane
 * that will never come. Name it. */
[[noreturn]] void report_deadlock()
{
    for (unsigned warp = 0; warp < lanes_waiting.size(); warp++) {
        if (lanes_waiting[warp] != 0) {
            check_collective(warp, __builtin_ctz(lanes_waiting[warp]));
        }
    }
    kernel_bug("no thread can go on, yet the emulator sees no collective missing a lane (an emulator bug)");
}

/* Once every thread that has not ended is at the barrier, it opens. */
void open_barrier_if_complete()
{
    if (threads_at_barrier == 0 || threads_at_barrier + exited_threads < grid.threads_per_block) {
        return;
    }
    for (unsigned i = 0; i < grid.threads_per_block; i++) {
        if (threads[i].state == State::at_barrier) {
            threads[i].state = State::runnable;
        }
    }
    threads_at_barrier = 0;
}

void thread_entry()
{
    fiber_started();
    grid.thread_body(grid.context);
    current->state = State::exited;
    exited_threads++;
    /* An ended thread counts as arrived at the barrier. */
    open_barrier_if_complete();
    fiber_exit(current->fiber);
}

void poison_shared()
{
    for (const auto &variable : static_shared) {
        std::memset(variable.first, kPoison, variable.second);
    }
    std::memset(grid.dynamic_shared, kPoison, grid.dynamic_shared_bytes);
}

/* Run the lanes of `warp` until none can go on: each runs until it waits
 * (at a collective, which the last lane to arrive completes, or at the
 * barrier) or ends. A warp runs as far as it can before the next one
 * starts: on a GPU warps drift apart between barriers, and a read of
 * another warp's shared memory without a barrier between then sees it
 * written too early or too late. True if any lane ran. */
bool run_warp(unsigned warp, bool reverse)
{
    unsigned lanes = lanes_in_warp(warp);
    bool ran = false, progress = true;
    while (progress) {
        progress = false;
        for (unsigned k = 0; k < lanes; k++) {
            Thread &t = lane_thread(warp, static_cast<int>(reverse ? lanes - 1 - k : k));
            if (t.state == State::runnable) {
                current = &t;
                fiber_resume(t.fiber);
                progress = ran = true;
            }
        }
    }
    return ran;
}

void run_block(uint3 block, bool reverse)
{
    current_block = block;
    poison_shared();
    unsigned count = grid.threads_per_block;
    for (unsigned i = 0; i < count; i++) {
        Thread &t = threads[i];
        t.linear = i;
        t.index = uint3{i % grid.block.x, i / grid.block.x % grid.block.y, i / (grid.block.x * grid.block.y)};
        t.state = State::runnable;
        fiber_prepare(t.fiber, thread_entry);
    }
    exited_threads = 0;
    threads_at_barrier = 0;
    lanes_waiting.assign((count + kWarpSize - 1) / kWarpSize, 0);
    unsigned warps = static_cast<unsigned>(lanes_waiting.size());
    while (exited_threads < count) {
        bool progress = false;
        for (unsigned k = 0; k < warps; k++) {
            progress |= run_warp(reverse ? warps - 1 - k : k, reverse);
        }
        if (!progress) {
            report_deadlock();
        }
    }
}

cudaError_t check_launch(const void *kernel, dim3 g, dim3 b, size_t shared_bytes)
{
    unsigned long long threads_per_block = 1ull * b.x * b.y * b.z;
    if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > kMaxThreadsPerBlock || b.y > kMaxThreadsPerBlock ||
        b.z > kMaxBlockZ || threads_per_block > kMaxThreadsPerBlock) {
        return cudaErrorInvalidConfiguration;
    }
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > kMaxGridX || g.y > kMaxGridYZ || g.z > kMaxGridYZ) {
        return cudaErrorInvalidConfiguration;
    }
    auto raised = max_dynamic_shared.find(kernel);
    size_t limit = raised == max_dynamic_shared.end() ? kDefaultSharedBytes : static_cast<size_t>(raised->second);
    return shared_bytes > limit ? cudaErrorInvalidValue : cudaSuccess;
}

} // namespace

/* ---- What kernels call --------------------------------------------------- */

uint3 thread_index()
{
    return current->index;
}

uint3 block_index()
{
    return current_block;
}

dim3 block_dim()
{
    return grid.block;
}

dim3 grid_dim()
{
    return grid.grid;
}

int lane_id()
{
    return static_cast<int>(current->linear % kWarpSize);
}

int shuffle_source(const char *name, int lane, int source, int width, bool earlier_groups)
{
    if (width < 1 || width > kWarpSize || (width & (width - 1)) != 0) {
        kernel_bug("warp %u: lane %d calls %s with width %d, not a power of two up to 32", current->linear / kWarpSize,
                   lane, name, width);
    }
    int group = lane / width * width;
    bool outside = source >= group + width || (source < group && !earlier_groups);
    return outside || source < 0 ? -1 : source;
}

/* The lane that completes a collective carries it out and goes on; the
 * others wait (the scheduler resumes them once it is done). */
uint64_t warp_collective(const char *name, Collective kind, unsigned mask, uint64_t value, int source)
{
    Thread &self = *current;
    self.state = State::at_collective;
    self.kind = kind;
    self.name = name;
    self.mask = mask;
    self.value = value;
    self.source = source;
    unsigned warp = self.linear / kWarpSize;
    int lane = static_cast<int>(self.linear % kWarpSize);
    lanes_waiting[warp] |= 1u << lane;
    if (!(mask >> lane & 1u)) {
        check_collective(warp, lane); /* reports the mask that leaves the lane out */
    }
    if ((lanes_waiting[warp] & mask) == mask) {
        /* Every lane named has arrived: at this collective, or a bug. */
        if ((lanes_at(warp, self) & mask) != mask) {
            report_mismatch(warp, mask);
        }
        complete_collective(warp, mask);
        return self.result;
    }
    fiber_yield(self.fiber);
    return self.result;
}

void syncthreads()
{
    current->state = State::at_barrier;
    threads_at_barrier++;
    open_barrier_if_complete();
    if (current->state == State::at_barrier) {
        fiber_yield(current->fiber);
    }
}

SharedRegistration::SharedRegistration(void *address, size_t bytes)
{
    /* The first thread to pass the declaration registers it, before any
     * thread can have used it. */
    std::memset(address, kPoison, bytes);
    static_shared.emplace_back(address, bytes);
}

void *dynamic_shared()
{
    return grid.dynamic_shared;
}

void launch(const char *name, const void *kernel, dim3 g, dim3 b, size_t shared_bytes,
            void (*thread_body)(void *context), void *context)
{
    if (record(check_launch(kernel, g, b, shared_bytes)) != cudaSuccess) {
        return;
    }
    launches++;
    grid = Grid{name, thread_body, context, g, b, b.x * b.y * b.z, nullptr, shared_bytes};
    if (threads.size() < grid.threads_per_block) {
        threads.resize(grid.threads_per_block);
    }
    /* Exactly the size asked for, so that AddressSanitizer sees a read past it. */
    void *shared = nullptr;
    if (posix_memalign(&shared, 16, std::max<size_t>(shared_bytes, 1)) != 0) {
        kernel_bug("no memory for %zu bytes of shared memory", shared_bytes);
    }
    grid.dynamic_shared = static_cast<unsigned char *>(shared);
    unsigned long long block_number = 0;
    for (unsigned z = 0; z < g.z; z++) {
        for (unsigned y = 0; y < g.y; y++) {
            for (unsigned x = 0; x < g.x; x++, block_number++) {
                run_block(uint3{x, y, z}, (block_number + launches) % 2 == 1);
            }
        }
    }
    free(shared);
    current = nullptr;
}

cudaError_t set_function_attribute(const void *kernel, cudaFuncAttribute attribute, int bytes)
{
    if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize || bytes < 0 || bytes > kOptInSharedBytes) {
        return record(cudaErrorInvalidValue);
    }
    max_dynamic_shared[kernel] = bytes;
    return cudaSuccess;
}

/* What CUDA calls an error, and how it describes it. */
struct ErrorText {
    const char *name;
    const char *description;
};

/* Every error the emulator returns. The codes are sparse (0, 1, 2, 9, 101, 900):
 * a list to search, not an array to index. */
const struct {
    cudaError_t error;
    ErrorText text;
} kErrorTexts[] = {
    {cudaSuccess,                       {"cudaSuccess", "no error"}                                        },
    {cudaErrorInvalidValue,             {"cudaErrorInvalidValue", "invalid argument"}                      },
    {cudaErrorMemoryAllocation,         {"cudaErrorMemoryAllocation", "out of memory"}                     },
    {cudaErrorInvalidConfiguration,     {"cudaErrorInvalidConfiguration", "invalid configuration argument"}},
    {cudaErrorInvalidDevice,            {"cudaErrorInvalidDevice", "invalid device ordinal"}               },
    {cudaErrorStreamCaptureUnsupported,
     {"cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"}             },
};

/* Any other code gets what CUDA says of an error it does not know. */
const ErrorText &error_text(cudaError_t error)
{
    static const ErrorText unknown = {"cudaErrorUnknown", "unknown error"};
    for (const auto &known : kErrorTexts) {
        if (known.error == error) {
            return known.text;
        }
    }
    return unknown;
}

} // namespace emu

/* ---- The runtime API --------------------------------------------------------- */

using emu::record;

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t error = emu::last_error;
    emu::last_error = cudaSuccess;
    return error;
}

const char *cudaGetErrorName(cudaError_t error)
{
    return emu::error_text(error).name;
}

const char *cudaGetErrorString(cudaError_t error)
{
    return emu::error_text(error).description;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (device != 0) {
        return record(cudaErrorInvalidDevice);
    }
    *prop = cudaDeviceProp{};
    snprintf(prop->name, sizeof prop->name, "CUDA emulator on the CPU");
    prop->totalGlobalMem = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    /* The semantics emulated are those of sm_90, which the kernels are built for. */
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = emu::kMultiprocessors;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0) {
        return record(cudaErrorInvalidDevice);
    }
    switch (attr) {
    case cudaDevAttrMultiProcessorCount:
        *value = emu::kMultiprocessors;
        break;
    case cudaDevAttrClockRate:
    case cudaDevAttrMemoryClockRate:
    case cudaDevAttrGlobalMemoryBusWidth:
        /* No SM clock, no device memory, no bus: 0, as for unknown. */
        *value = 0;
        break;
    case cudaDevAttrL2CacheSize:
        *value = emu::kL2CacheBytes;
        break;
    default:
        return record(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    /* The API the emulator follows. */
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    /* What the real runtime reports when no driver is installed. */
    *version = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess; /* every launch and copy has finished when it returns */
}

cudaError_t cudaMalloc(void **pointer, size_t bytes)
{
    *pointer = nullptr;
    if (bytes == 0) {
        return cudaSuccess;
    }
    char *memory = static_cast<char *>(malloc(bytes));
    if (memory == nullptr) {
        return record(cudaErrorMemoryAllocation);
    }
    /* Fresh device memory holds whatever was there: NaN bytes here. */
    std::memset(memory, emu::kPoison, bytes);
    emu::allocations[memory] = bytes;
    *pointer = memory;
    return cudaSuccess;
}

cudaError_t cudaFree(void *pointer)
{
    if (pointer == nullptr) {
        return cudaSuccess;
    }
    auto allocation = emu::allocations.find(static_cast<char *>(pointer));
    if (allocation == emu::allocations.end()) {
        return record(cudaErrorInvalidValue);
    }
    emu::allocations.erase(allocation);
    free(pointer);
    return cudaSuccess;
}

/* The direction must match where the pointers are, and a device range must
 * lie inside one allocation: a copy that would fail on a GPU fails here. */
cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind)
{
    bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) {
        to_device = emu::touches_device(to);
        from_device = emu::touches_device(from);
    }
    if (bytes == 0) {
        return cudaSuccess;
    }
    bool to_ok = to_device ? emu::on_device(to, bytes) : !emu::touches_device(to);
    bool from_ok = from_device ? emu::on_device(from, bytes) : !emu::touches_device(from);
    if (!to_ok || !from_ok) {
        return record(cudaErrorInvalidValue);
    }
    std::memmove(to, from, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    return cudaMemcpy(to, from, bytes, kind);
}

cudaError_t cudaMemset(void *pointer, int value, size_t bytes)
{
    if (bytes > 0 && !emu::on_device(pointer, bytes)) {
        return record(cudaErrorInvalidValue);
    }
    std::memset(pointer, value, bytes);
    return cudaSuccess;
}

/* Work on the one stream runs when it is queued, so async is sync here. */
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes, cudaStream_t stream)
{
    (void)stream;
    return cudaMemset(pointer, value, bytes);
}

} // extern "C"

/* Events read the host's clock: every launch has finished when it returns,
 * so the time between two events is the emulator's, which says nothing
 * about a GPU. Only the timing code's plumbing is tested with it. */
struct EmuEvent {
    std::chrono::steady_clock::time_point time;
    bool recorded;
};

extern "C" {

/* One stream, whose work runs when it is queued: a created stream is the
 * default one under another name (nullptr), and nothing can be captured. */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    (void)flags;
    *stream = nullptr;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    (void)stream;
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    (void)stream;
    (void)mode;
    return record(cudaErrorStreamCaptureUnsupported);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    (void)stream;
    *graph = nullptr;
    return record(cudaErrorStreamCaptureUnsupported);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags)
{
    (void)graph;
    (void)flags;
    *exec = nullptr;
    return record(cudaErrorStreamCaptureUnsupported);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    (void)exec;
    (void)stream;
    return record(cudaErrorStreamCaptureUnsupported);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    (void)exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    (void)graph;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    *event = new EmuEvent{{}, false};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)stream;
    event->time = std::chrono::steady_clock::now();
    event->recorded = true;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return event->recorded ? cudaSuccess : record(cudaErrorInvalidValue);
}

cudaError_t cudaEventElapsedTime(float *milliseconds, cudaEvent_t start, cudaEvent_t stop)
{
    if (!start->recorded || !stop->recorded) {
        return record(cudaErrorInvalidValue);
    }
    *milliseconds = std::chrono::duration<float, std::milli>(stop->time - start->time).count();
    return cudaSuccess;
}

} // extern "C"
