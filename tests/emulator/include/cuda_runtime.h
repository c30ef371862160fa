/* The CUDA runtime as the emulator provides it: the part of the API, the
 * built-in variables and the warp intrinsics that the project's kernels
 * use, for them to be compiled by g++ and run on the CPU (the README's
 * section "GPU kernels without a GPU").
 *
 * Like nvcc, the build includes this header ahead of every .cu file
 * (g++ -include cuda_runtime.h) and defines __CUDACC__; it does not define
 * __CUDA_ARCH__, so HOST_DEVICE helpers that have a device branch
 * (softmax_exp, the fp16 conversions) take their host branch here. */
#ifndef TESTS_EMULATOR_INCLUDE_CUDA_RUNTIME_H
#define TESTS_EMULATOR_INCLUDE_CUDA_RUNTIME_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- Qualifiers ---------------------------------------------------------- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* Blocks run one after another, so a function's static variable is the
 * block's shared memory. tests/emulator/cuda-to-cpp.sh registers each one
 * (EMU_POISON_SHARED) so that it is poisoned before every block. */
#define __shared__ static
#define EMU_POISON_SHARED(name) static ::emu::SharedRegistration name##_emu_poison(&(name), sizeof(name))

/* ---- Vector types and dimensions ------------------------------------------ */

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_)
    {
    }
};

struct __align__(8) uint2
{
    unsigned x, y;
};
struct __align__(16) uint4
{
    unsigned x, y, z, w;
};
struct __align__(16) float4
{
    float x, y, z, w;
};

inline float4 make_float4(float x, float y, float z, float w)
{
    return float4{x, y, z, w};
}

/* The built-in variables of the thread that runs now. To the kernel they
 * are constants, as on a GPU (a thread lives in one block of one launch),
 * and `const` tells the compiler so: it need not read them again after a
 * barrier, and it sees that a condition on threadIdx holds on both sides of
 * one (no false "may be used uninitialized" warnings). */
namespace emu
{
__attribute__((const)) uint3 thread_index();
__attribute__((const)) uint3 block_index();
__attribute__((const)) dim3 block_dim();
__attribute__((const)) dim3 grid_dim();
} // namespace emu
#define threadIdx (::emu::thread_index())
#define blockIdx (::emu::block_index())
#define blockDim (::emu::block_dim())
#define gridDim (::emu::grid_dim())
constexpr int warpSize = 32;

/* ---- Errors, devices, memory, events --------------------------------------- */

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorStreamCaptureUnsupported = 900,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
    cudaDevAttrClockRate = 13,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrL2CacheSize = 38,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major, minor;
    int multiProcessorCount;
};

typedef struct EmuEvent *cudaEvent_t;
typedef struct EmuStream *cudaStream_t;

/* CUDA graphs: declared so that the timing code compiles; the emulator runs
 * each launch when it is queued, so it has nothing to capture, and
 * cudaStreamBeginCapture says so (cudaErrorStreamCaptureUnsupported). */
typedef struct EmuGraph *cudaGraph_t;
typedef struct EmuGraphExec *cudaGraphExec_t;
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
#define cudaStreamNonBlocking 0x01

extern "C" {
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t error);
const char *cudaGetErrorName(cudaError_t error);

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void *pointer, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *milliseconds, cudaEvent_t start, cudaEvent_t stop);
}

template <class T> cudaError_t cudaMalloc(T **pointer, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(pointer), bytes);
}

/* ---- Inside a kernel ------------------------------------------------------- */

namespace emu
{

/* What a warp collective does with the values its lanes bring. */
enum class Collective : unsigned char { syncwarp, shuffle, ballot, any, all, reduce_max };

/* Wait until every lane named in `mask` is at the same collective, then
 * return this lane's result: for a shuffle the value of lane `source` (this
 * lane's own when source is -1), for the others the combination of all the
 * lanes' values. `name` is the intrinsic's, for messages. */
uint64_t warp_collective(const char *name, Collective kind, unsigned mask, uint64_t value, int source);
void syncthreads();
/* This thread's lane: its linear index in the block, modulo 32. */
int lane_id();

template <class T> uint64_t to_bits(T value)
{
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= sizeof(uint64_t),
                  "a warp collective moves values of up to 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof value);
    return bits;
}

template <class T> T from_bits(uint64_t bits)
{
    T value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

/* The source lane of a shuffle within its group of `width` lanes (a power of
 * two): -1, this lane's own value, when the source lies in a later group, or
 * in an earlier one unless `earlier_groups` (only __shfl_xor_sync reaches
 * back, as CUDA documents). */
int shuffle_source(const char *name, int lane, int source, int width, bool earlier_groups = false);

/* A block's static __shared__ variable, poisoned before every block. */
struct SharedRegistration {
    SharedRegistration(void *address, size_t bytes);
};

/* The pointer behind `extern __shared__ T name[]` (the launch's dynamic
 * shared memory). */
void *dynamic_shared();

} // namespace emu

inline void __syncthreads()
{
    emu::syncthreads();
}

inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    emu::warp_collective("__syncwarp", emu::Collective::syncwarp, mask, 0, -1);
}

template <class T> T __shfl_sync(unsigned mask, T value, int source_lane, int width = warpSize)
{
    int lane = emu::lane_id();
    int source = emu::shuffle_source("__shfl_sync", lane, lane / width * width + source_lane % width, width);
    return emu::from_bits<T>(
        emu::warp_collective("__shfl_sync", emu::Collective::shuffle, mask, emu::to_bits(value), source));
}

template <class T> T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize)
{
    int lane = emu::lane_id();
    int source = emu::shuffle_source("__shfl_xor_sync", lane, lane ^ lane_mask, width, true);
    return emu::from_bits<T>(
        emu::warp_collective("__shfl_xor_sync", emu::Collective::shuffle, mask, emu::to_bits(value), source));
}

template <class T> T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize)
{
    int lane = emu::lane_id();
    int source = emu::shuffle_source("__shfl_down_sync", lane, lane + static_cast<int>(delta), width);
    return emu::from_bits<T>(
        emu::warp_collective("__shfl_down_sync", emu::Collective::shuffle, mask, emu::to_bits(value), source));
}

template <class T> T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize)
{
    int lane = emu::lane_id();
    int source = emu::shuffle_source("__shfl_up_sync", lane, lane - static_cast<int>(delta), width);
    return emu::from_bits<T>(
        emu::warp_collective("__shfl_up_sync", emu::Collective::shuffle, mask, emu::to_bits(value), source));
}

inline unsigned __ballot_sync(unsigned mask, int predicate)
{
    return static_cast<unsigned>(
        emu::warp_collective("__ballot_sync", emu::Collective::ballot, mask, predicate != 0, -1));
}

inline int __any_sync(unsigned mask, int predicate)
{
    return static_cast<int>(emu::warp_collective("__any_sync", emu::Collective::any, mask, predicate != 0, -1));
}

inline int __all_sync(unsigned mask, int predicate)
{
    return static_cast<int>(emu::warp_collective("__all_sync", emu::Collective::all, mask, predicate != 0, -1));
}

inline unsigned __reduce_max_sync(unsigned mask, unsigned value)
{
    return static_cast<unsigned>(
        emu::warp_collective("__reduce_max_sync", emu::Collective::reduce_max, mask, value, -1));
}

/* ---- Device functions: plain C++ on the CPU -------------------------------- */

inline int __popc(unsigned x)
{
    return __builtin_popcount(x);
}

inline int __ffs(int x)
{
    return __builtin_ffs(x);
}

/* Threads switch only at barriers and warp collectives, so a plain
 * read-modify-write is atomic here. */
inline unsigned atomicAdd(unsigned *address, unsigned value)
{
    unsigned old = *address;
    *address = old + value;
    return old;
}

inline int atomicAdd(int *address, int value)
{
    int old = *address;
    *address = old + value;
    return old;
}

/* CUDA's wrapping increment: old >= limit ? 0 : old + 1. */
inline unsigned atomicInc(unsigned *address, unsigned limit)
{
    unsigned old = *address;
    *address = old >= limit ? 0u : old + 1u;
    return old;
}

/* Blocks run one after another, each to its end, and a block's threads
 * share one memory: every write is visible to every later read, so a fence
 * has nothing to order. */
inline void __threadfence()
{
}

/* The same for a fence among the threads of a block. */
inline void __threadfence_block()
{
}

inline unsigned long long atomicMax(unsigned long long *address, unsigned long long value)
{
    unsigned long long old = *address;
    *address = old > value ? old : value;
    return old;
}

inline float __uint_as_float(unsigned x)
{
    return emu::from_bits<float>(x);
}

/* Cache hints (read-only path, streaming) change nothing on the CPU. */
template <class T> T __ldg(const T *p)
{
    return *p;
}

template <class T> T __ldcs(const T *p)
{
    return *p;
}

template <class T> void __stcs(T *p, T value)
{
    *p = value;
}

/* CUDA's min and max for mixed integer types convert both to the common
 * type, as these do. */
template <class A, class B> typename std::common_type<A, B>::type min(A a, B b)
{
    typedef typename std::common_type<A, B>::type T;
    return static_cast<T>(b) < static_cast<T>(a) ? static_cast<T>(b) : static_cast<T>(a);
}

template <class A, class B> typename std::common_type<A, B>::type max(A a, B b)
{
    typedef typename std::common_type<A, B>::type T;
    return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(b) : static_cast<T>(a);
}

/* ---- Launches: kernel<<<grid, block, shared>>>(args) ----------------------- */

namespace emu
{

/* Run `thread_body(context)` as every thread of a grid, after the checks
 * the CUDA runtime makes (which set the error cudaGetLastError returns). */
void launch(const char *name, const void *kernel, dim3 grid, dim3 block, size_t shared_bytes,
            void (*thread_body)(void *context), void *context);

template <class... P> struct Launch {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shared_bytes;

    /* The arguments are converted to the parameter types once, as at a
     * launch; every thread gets its own copies of the parameters. */
    template <class... A> void operator()(A &&...args) const
    {
        struct Bound {
            void (*kernel)(P...);
            std::tuple<typename std::decay<P>::type...> parameters;
        } bound{kernel, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)};
        launch(
            name, reinterpret_cast<const void *>(kernel), grid, block, shared_bytes,
            [](void *context) {
                Bound *b = static_cast<Bound *>(context);
                std::apply(b->kernel, b->parameters);
            },
            &bound);
    }
};

template <class... P> struct Kernel {
    const char *name;
    void (*kernel)(P...);

    Launch<P...> operator()(dim3 grid, dim3 block, size_t shared_bytes = 0, cudaStream_t stream = nullptr) const
    {
        (void)stream; /* one stream: every launch runs to its end before the next call */
        return Launch<P...>{name, kernel, grid, block, shared_bytes};
    }
};

template <class... P> Kernel<P...> kernel(const char *name, void (*function)(P...))
{
    return Kernel<P...>{name, function};
}

/* cudaFuncSetAttribute: only the dynamic shared memory limit, up to 227 KiB. */
cudaError_t set_function_attribute(const void *kernel, cudaFuncAttribute attribute, int value);

} // namespace emu

/* cuda-to-cpp.sh turns `name<<<config>>>(args)` into
 * EMU_LAUNCH(name)(config)(args); a template kernel's name keeps its
 * arguments (kernel<4, 1>), hence the variadic macro. */
#define EMU_LAUNCH(...) ::emu::kernel(#__VA_ARGS__, __VA_ARGS__)

template <class... P> cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attribute, int value)
{
    return emu::set_function_attribute(reinterpret_cast<const void *>(kernel), attribute, value);
}

/* cudaOccupancyMaxActiveBlocksPerMultiprocessor: the emulator knows no
 * kernel's registers, so it answers the limits of an sm_90 SM that the
 * block size alone sets (64 warps, 32 blocks), as for a kernel of few
 * registers and no shared memory; dynamic shared memory is not counted. */
template <class... P>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void (*kernel)(P...), int threads,
                                                          size_t dynamic_shared_bytes)
{
    (void)kernel;
    (void)dynamic_shared_bytes;
    if (threads < 1 || threads > 1024)
        return cudaErrorInvalidValue;
    int warps = (threads + 31) / 32;
    *blocks = 64 / warps < 32 ? 64 / warps : 32;
    return cudaSuccess;
}

#endif
