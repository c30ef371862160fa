/* The one macro that marks a function as callable from both CPU and GPU code.
 *
 * Logic that the CUDA kernels share with the CPU reference (merging partial
 * Welford or softmax states, top-K inserts, int4 packing, block-table address
 * arithmetic) is written once, as a `HOST_DEVICE static inline` function in a
 * header. gcc compiles it as plain C and the tests exercise it on any machine;
 * nvcc compiles the very same text into the kernels. */
#ifndef COMMON_HOSTDEVICE_H
#define COMMON_HOSTDEVICE_H

#ifdef __CUDACC__
#define HOST_DEVICE __host__ __device__
#else
#define HOST_DEVICE
#endif

/* Headers of common/ are included from C and from CUDA (C++) files alike. */
#ifdef __cplusplus
#define COMMON_BEGIN_C extern "C" {
#define COMMON_END_C }
#define COMMON_NORETURN [[noreturn]]
#else
#define COMMON_BEGIN_C
#define COMMON_END_C
#define COMMON_NORETURN _Noreturn
#endif

#endif
