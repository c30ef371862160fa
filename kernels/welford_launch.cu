/* The launchers of the row statistics kernel (kernels/welford.cu): argument
 * checks, one block per row, and for the host-memory one the copies to and
 * from the GPU. */
#include <climits>

#include "common/cuda_util.h"
#include "kernels/welford_gpu.h"
#include "kernels/welford_kernels.cuh"

static const char *check_arguments(size_t rows, size_t cols, int threads)
{
    if (rows < 1 || rows > INT_MAX || cols < 1) {
        return gpu_refusal("%zu rows of %zu columns: need 1 .. 2^31 - 1 rows and at least one column", rows, cols);
    }
    if (threads < 1 || threads > WELFORD_GPU_MAX_THREADS) {
        return gpu_refusal("%d threads per block: need 1 .. %d", threads, WELFORD_GPU_MAX_THREADS);
    }
    return nullptr;
}

extern "C" const char *welford_rows_gpu_device(const float *x, size_t rows, size_t cols, int threads, float *mean,
                                               float *variance)
{
    const char *why = check_arguments(rows, cols, threads);
    if (why != nullptr) {
        return why;
    }
    welford_rows_kernel<<<(unsigned)rows, (unsigned)threads>>>(x, cols, mean, variance);
    CUDA_CHECK(cudaGetLastError());
    return nullptr;
}

extern "C" const char *welford_rows_gpu(const float *x, size_t rows, size_t cols, int threads, float *mean,
                                        float *variance)
{
    /* Checked before the allocations, so that a refusal allocates nothing. */
    const char *why = check_arguments(rows, cols, threads);
    if (why != nullptr) {
        return why;
    }
    float *device_x, *device_mean, *device_variance;
    CUDA_CHECK(cudaMalloc(&device_x, rows * cols * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&device_mean, rows * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&device_variance, rows * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(device_x, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice));

    welford_rows_gpu_device(device_x, rows, cols, threads, device_mean, device_variance);

    CUDA_CHECK(cudaMemcpy(mean, device_mean, rows * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(variance, device_variance, rows * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(device_x));
    CUDA_CHECK(cudaFree(device_mean));
    CUDA_CHECK(cudaFree(device_variance));
    return nullptr;
}
