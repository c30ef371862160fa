#include "chapters/02-layernorm/gpu_device.h"
#include "common/alloc.h"
#include "common/cuda_util.h"
#include "kernels/layernorm.h"
#include "kernels/layernorm_kernels.cuh"

enum { ARRAYS = 11 };

struct DeviceProblem {
    size_t n, d;
    LnStorage storage;  /* of x, dy, y and dx */
    void *base[ARRAYS]; /* what cudaMalloc returned */
    void *x, *dy, *y, *dx;
    float *gamma, *beta, *mean, *rstd, *dgamma, *dbeta, *scratch;
};

/* Enough scratch for any backward version of either norm. */
static size_t backward_scratch_floats(size_t n, size_t d)
{
    size_t most = 0;
    for (int version = 1; version <= LAYERNORM_BACKWARD_GPU_VERSIONS; version++) {
        size_t floats[2] = {layernorm_backward_gpu_scratch_floats(version, n, d),
                            rmsnorm_backward_gpu_scratch_floats(version, n, d)};
        for (int norm = 0; norm < 2; norm++)
            most = floats[norm] > most ? floats[norm] : most;
    }
    return most;
}

extern "C" DeviceProblem *device_problem_new(size_t n, size_t d, int misalign, LnStorage storage)
{
    DeviceProblem *g = new DeviceProblem();
    g->n = n;
    g->d = d;
    g->storage = storage;
    size_t stored = ln_storage_bytes(storage);
    size_t counts[ARRAYS] = {n * d, n * d, n * d, n * d, d, d, n, n, d, d, backward_scratch_floats(n, d)};
    size_t sizes[ARRAYS] = {stored, stored, stored, stored, 4, 4, 4, 4, 4, 4, 4};
    void **arrays[ARRAYS] = {&g->x,
                             &g->dy,
                             &g->y,
                             &g->dx,
                             (void **)&g->gamma,
                             (void **)&g->beta,
                             (void **)&g->mean,
                             (void **)&g->rstd,
                             (void **)&g->dgamma,
                             (void **)&g->dbeta,
                             (void **)&g->scratch};
    for (int i = 0; i < ARRAYS; i++) {
        g->base[i] = NULL;
        if (counts[i] > 0)
            CUDA_CHECK(cudaMalloc(&g->base[i], (counts[i] + (size_t)misalign) * sizes[i]));
        *arrays[i] = g->base[i] == NULL ? NULL : (char *)g->base[i] + (size_t)misalign * sizes[i];
    }
    return g;
}

extern "C" void device_problem_free(DeviceProblem *g)
{
    for (int i = 0; i < ARRAYS; i++)
        if (g->base[i] != NULL)
            CUDA_CHECK(cudaFree(g->base[i]));
    delete g;
}

static void upload(float *device, const float *host, size_t count)
{
    CUDA_CHECK(cudaMemcpy(device, host, count * sizeof(float), cudaMemcpyHostToDevice));
}

static void download(float *host, const float *device, size_t count)
{
    CUDA_CHECK(cudaMemcpy(host, device, count * sizeof(float), cudaMemcpyDeviceToHost));
}

/* A row tensor in the storage type: 16-bit values go to the GPU as their
 * 16 bits (exact: p holds values already rounded to the storage type). */
static void upload_stored(void *device, const float *host, size_t count, LnStorage storage)
{
    if (storage == STORAGE_FLOAT32) {
        upload((float *)device, host, count);
        return;
    }
    uint16_t *bits = ALLOC_ARRAY(count, uint16_t);
    ln_storage_bits(storage, bits, host, count);
    CUDA_CHECK(cudaMemcpy(device, bits, count * sizeof *bits, cudaMemcpyHostToDevice));
    array_free(bits);
}

static void download_stored(float *host, const void *device, size_t count, LnStorage storage)
{
    if (storage == STORAGE_FLOAT32) {
        download(host, (const float *)device, count);
        return;
    }
    uint16_t *bits = ALLOC_ARRAY(count, uint16_t);
    CUDA_CHECK(cudaMemcpy(bits, device, count * sizeof *bits, cudaMemcpyDeviceToHost));
    ln_storage_widen_bits(storage, host, bits, count);
    array_free(bits);
}

extern "C" void device_problem_upload(DeviceProblem *g, const LnProblem *p)
{
    upload_stored(g->x, p->x, g->n * g->d, g->storage);
    upload_stored(g->dy, p->dy, g->n * g->d, g->storage);
    upload(g->gamma, p->gamma, g->d);
    upload(g->beta, p->beta, g->d);
}

/* RMSNorm's kernels leave mean and dbeta alone: p keeps its own. */
extern "C" void device_problem_download(const DeviceProblem *g, LnProblem *p)
{
    bool layer = p->norm == NORM_LAYER;
    download_stored(p->y, g->y, g->n * g->d, g->storage);
    if (layer)
        download(p->mean, g->mean, g->n);
    download(p->rstd, g->rstd, g->n);
    download_stored(p->dx, g->dx, g->n * g->d, g->storage);
    download(p->dgamma, g->dgamma, g->d);
    if (layer)
        download(p->dbeta, g->dbeta, g->d);
}

template <LnStorage S> __global__ static void fill_pattern(Stored<S> *values, size_t count, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < count)
        values[i] = Storage<S>::narrow(scale * ((float)((i * 2654435761u) % 1024u) / 512.0f - 1.0f));
}

static void fill_stored(LnStorage storage, void *values, size_t count, float scale)
{
    with_storage(storage, [&](auto tag) {
        constexpr LnStorage S = decltype(tag)::value;
        fill_pattern<S><<<(unsigned)((count + 255) / 256), 256>>>(static_cast<Stored<S> *>(values), count, scale);
    });
}

extern "C" void device_problem_fill_pattern(DeviceProblem *g)
{
    fill_stored(g->storage, g->x, g->n * g->d, 1.0f);
    fill_stored(g->storage, g->dy, g->n * g->d, 0.5f);
    fill_stored(STORAGE_FLOAT32, g->gamma, g->d, 1.0f);
    fill_stored(STORAGE_FLOAT32, g->beta, g->d, 0.1f);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
}

extern "C" const char *device_problem_forward(DeviceProblem *g, NormKind norm, int version, float eps)
{
    if (norm == NORM_RMS)
        return rmsnorm_forward_gpu(version, g->storage, g->y, g->rstd, g->x, g->gamma, g->n, g->d, eps);
    return layernorm_forward_gpu(version, g->storage, g->y, g->mean, g->rstd, g->x, g->gamma, g->beta, g->n, g->d, eps);
}

extern "C" const char *device_problem_backward(DeviceProblem *g, NormKind norm, int version)
{
    if (norm == NORM_RMS)
        return rmsnorm_backward_gpu(version, g->storage, g->dx, g->dgamma, g->scratch, g->dy, g->x, g->rstd, g->gamma,
                                    g->n, g->d);
    return layernorm_backward_gpu(version, g->storage, g->dx, g->dgamma, g->dbeta, g->scratch, g->dy, g->x, g->mean,
                                  g->rstd, g->gamma, g->n, g->d);
}
