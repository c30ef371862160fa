/* The row statistics launchers refuse bad arguments with one line, before
 * touching the device: this runs in every CUDA build, with or without a GPU. */
#include <stdio.h>
#include <string.h>

#include "common/testing.h"
#include "kernels/welford_gpu.h"

/* Both launchers refuse, with the same line, which contains `words`. */
static bool refused(size_t rows, size_t cols, int threads, const char *words)
{
    float x[1] = {0}, mean[1], variance[1];
    const char *host = welford_rows_gpu(x, rows, cols, threads, mean, variance);
    if (host == NULL || strstr(host, words) == NULL || strchr(host, '\n') != NULL) {
        printf("refused with \"%s\", expected \"%s\"\n", host != NULL ? host : "(nothing)", words);
        return false;
    }
    const char *device = welford_rows_gpu_device(x, rows, cols, threads, mean, variance);
    return device != NULL && strcmp(device, host) == 0;
}

int main(void)
{
    EXPECT(refused(0, 10, 32, "0 rows of 10 columns"), "no rows");
    EXPECT(refused(3, 0, 32, "3 rows of 0 columns"), "no columns");
    EXPECT(refused((size_t)1 << 31, 1, 32, "2^31 - 1 rows"), "more rows than a grid has blocks");
    EXPECT(refused(3, 10, 0, "0 threads per block: need 1 .. 1024"), "no threads");
    EXPECT(refused(3, 10, 1025, "1025 threads per block"), "a block larger than CUDA allows");
    return test_finish();
}
