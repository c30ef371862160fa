/* The launcher of the row statistics kernel (kernels/welford.cu): argument
 * checks, the copies to and from the GPU, one block per row. */
#include <climits>

#include "common/cuda_util.h"
#include "kernels/welford_gpu.h"
#include "kernels/welford_kernels.cuh"

extern "C" int welford_rows_gpu(const float *x, size_t rows, size_t cols, int threads, float *mean, float *variance)
{
    if (rows < 1 || rows > INT_MAX || cols < 1 || threads < 1 || threads > WELFORD_GPU_MAX_THREADS) {
        return -1;
    }
    float *device_x, *device_mean, *device_variance;
    CUDA_CHECK(cudaMalloc(&device_x, rows * cols * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&device_mean, rows * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&device_variance, rows * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(device_x, x, rows * cols * sizeof(float), cudaMemcpyHostToDevice));

    welford_rows_kernel<<<(unsigned)rows, (unsigned)threads>>>(device_x, cols, device_mean, device_variance);
    CUDA_CHECK(cudaGetLastError());

    CUDA_CHECK(cudaMemcpy(mean, device_mean, rows * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(variance, device_variance, rows * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(device_x));
    CUDA_CHECK(cudaFree(device_mean));
    CUDA_CHECK(cudaFree(device_variance));
    return 0;
}
