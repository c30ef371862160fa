/* cuda_util on a real device: runs only where configure found a GPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/testing.h"

enum { CUDA_ERROR_INVALID_VALUE = 1 }; /* cudaErrorInvalidValue, without the CUDA headers in C */

static void check_a_failed_call(void *ctx)
{
    (void)ctx;
    cuda_check_result(CUDA_ERROR_INVALID_VALUE, "cudaMalloc(&p, n)", "kernel.cu", 12);
}

int main(int argc, char **argv)
{
    (void)argc;
    cli_set_program_name(argv[0]);
    /* First, before any CUDA call, so that the forked child inherits no
     * CUDA state; it needs no device either. */
    ChildResult child = test_run_child(check_a_failed_call, NULL);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 &&
               strstr(child.err, "kernel.cu:12: CUDA error: cudaMalloc(&p, n): ") == child.err &&
               strstr(child.err, "cudaErrorInvalidValue") != NULL,
           "a failed call exits 1 with file:line, the call and the CUDA message: status %d:\n%s", child.exit_status,
           child.err);
    cuda_check_result(0, "cudaDeviceSynchronize()", __FILE__, __LINE__); /* success returns */
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }

    char description[256];
    cuda_device_describe(description, sizeof description);
    printf("%s\n", description);
    EXPECT(strstr(description, ", sm_") != NULL && strstr(description, "CUDA runtime") != NULL &&
               strstr(description, "SM clock up to ") != NULL,
           "the description names the architecture, the SM clock and the runtime: %s", description);

    /* The clock measured against the GPU's timer: on a GPU (whose driver
     * reports a peak), running and not above that peak; on the CUDA
     * emulator, which has neither, 0. The timer's steps of up to a
     * microsecond are 0.01% of the 10 ms measured; the 5% is room for a
     * driver whose peak figure is nominal, as the bandwidth checks below
     * allow the same. */
    int clock_mhz = cuda_sm_clock_mhz(), peak_mhz = cuda_peak_sm_clock_mhz();
    printf("SM clock %d MHz, peak %d MHz\n", clock_mhz, peak_mhz);
    EXPECT(peak_mhz > 0 ? clock_mhz > 0 && clock_mhz <= 1.05 * peak_mhz : clock_mhz == 0,
           "the measured SM clock is within the peak: %d MHz, peak %d MHz", clock_mhz, peak_mhz);

    double peak = cuda_theoretical_bandwidth_gbs();
    /* 64 MiB per buffer: twice that moves through DRAM, beyond an H200's 50 MB L2. */
    size_t bytes = (size_t)64 << 20;
    double limits[] = {cuda_copy_bandwidth_gbs(bytes), cuda_copy_kernel_bandwidth_gbs(bytes),
                       cuda_read_bandwidth_gbs(bytes)};
    const char *names[] = {"device-to-device copy", "copy kernel", "read-only kernel"};
    EXPECT(isfinite(peak) && peak >= 0, "the theoretical bandwidth is a number (0 if unknown): %g", peak);
    for (int i = 0; i < 3; i++) {
        printf("%s %.0f GB/s, theoretical %.0f GB/s\n", names[i], limits[i], peak);
        EXPECT(isfinite(limits[i]) && limits[i] > 0, "the %s bandwidth is positive: %g GB/s", names[i], limits[i]);
        /* Nothing beats the memory's peak; 5% slack for clock reporting. */
        EXPECT(peak == 0 || limits[i] <= 1.05 * peak, "%s %.0f GB/s within the %.0f GB/s peak", names[i], limits[i],
               peak);
    }
    return test_finish();
}
