#include "chapters/02-layernorm/gpu_device.h"
#include "common/cuda_util.h"
#include "kernels/layernorm.h"

struct DeviceProblem {
    size_t n, d;
    float *base[11]; /* what cudaMalloc returned */
    float *x, *gamma, *beta, *dy, *y, *mean, *rstd, *dx, *dgamma, *dbeta, *scratch;
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

extern "C" DeviceProblem *device_problem_new(size_t n, size_t d, int misalign)
{
    DeviceProblem *g = new DeviceProblem();
    g->n = n;
    g->d = d;
    size_t counts[11] = {n * d, d, d, n * d, n * d, n, n, n * d, d, d, backward_scratch_floats(n, d)};
    float **arrays[11] = {&g->x,    &g->gamma, &g->beta,   &g->dy,    &g->y,      &g->mean,
                          &g->rstd, &g->dx,    &g->dgamma, &g->dbeta, &g->scratch};
    for (int i = 0; i < 11; i++) {
        g->base[i] = NULL;
        if (counts[i] > 0)
            CUDA_CHECK(cudaMalloc(&g->base[i], (counts[i] + (size_t)misalign) * sizeof(float)));
        *arrays[i] = g->base[i] == NULL ? NULL : g->base[i] + misalign;
    }
    return g;
}

extern "C" void device_problem_free(DeviceProblem *g)
{
    for (int i = 0; i < 11; i++)
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

extern "C" void device_problem_upload(DeviceProblem *g, const LnProblem *p)
{
    upload(g->x, p->x, g->n * g->d);
    upload(g->dy, p->dy, g->n * g->d);
    upload(g->gamma, p->gamma, g->d);
    upload(g->beta, p->beta, g->d);
}

/* RMSNorm's kernels leave mean and dbeta alone: p keeps its own. */
extern "C" void device_problem_download(const DeviceProblem *g, LnProblem *p)
{
    bool layer = p->norm == NORM_LAYER;
    download(p->y, g->y, g->n * g->d);
    if (layer)
        download(p->mean, g->mean, g->n);
    download(p->rstd, g->rstd, g->n);
    download(p->dx, g->dx, g->n * g->d);
    download(p->dgamma, g->dgamma, g->d);
    if (layer)
        download(p->dbeta, g->dbeta, g->d);
}

__global__ static void fill_pattern(float *values, size_t count, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < count)
        values[i] = scale * ((float)((i * 2654435761u) % 1024u) / 512.0f - 1.0f);
}

extern "C" void device_problem_fill_pattern(DeviceProblem *g)
{
    float *inputs[4] = {g->x, g->dy, g->gamma, g->beta};
    size_t counts[4] = {g->n * g->d, g->n * g->d, g->d, g->d};
    float scales[4] = {1.0f, 0.5f, 1.0f, 0.1f};
    for (int i = 0; i < 4; i++)
        fill_pattern<<<(unsigned)((counts[i] + 255) / 256), 256>>>(inputs[i], counts[i], scales[i]);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
}

extern "C" const char *device_problem_forward(DeviceProblem *g, NormKind norm, int version, float eps)
{
    if (norm == NORM_RMS)
        return rmsnorm_forward_gpu(version, g->y, g->rstd, g->x, g->gamma, g->n, g->d, eps);
    return layernorm_forward_gpu(version, g->y, g->mean, g->rstd, g->x, g->gamma, g->beta, g->n, g->d, eps);
}

extern "C" const char *device_problem_backward(DeviceProblem *g, NormKind norm, int version)
{
    if (norm == NORM_RMS)
        return rmsnorm_backward_gpu(version, g->dx, g->dgamma, g->scratch, g->dy, g->x, g->rstd, g->gamma, g->n, g->d);
    return layernorm_backward_gpu(version, g->dx, g->dgamma, g->dbeta, g->scratch, g->dy, g->x, g->mean, g->rstd,
                                  g->gamma, g->n, g->d);
}
