/* The GPU row statistics (kernels/welford.cu) against the CPU reference, at
 * every launch configuration of chapters/01-cancellation/gpu.c. */
#include <stdio.h>

#include "chapters/01-cancellation/gpu.h"
#include "common/cuda_util.h"
#include "common/testing.h"

int main(void)
{
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }
    char device[256];
    cuda_device_describe(device, sizeof device);
    printf("%s\n", device);
    for (int s = 0; s < gpu_check_shape_count; s++) {
        const GpuCheckShape *shape = &gpu_check_shapes[s];
        EXPECT(check_gpu_rows(shape, 1, stdout), "%zu x %zu with %d threads (%s)", shape->rows, shape->cols,
               shape->threads, shape->why);
    }
    return test_finish();
}
