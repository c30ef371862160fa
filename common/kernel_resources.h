/* What the compiler says about each kernel, read back from the build.
 *
 * The CUDA build compiles every kernels/OP.cu with nvcc --resource-usage and
 * keeps ptxas's report in kernels/OP.resources, the C++ names demangled
 * (kernels/record-resources.sh). For each kernel ptxas writes
 *
 *     ptxas info    : Function properties for void layernorm_backward_v2<4, 8>(float*, ...)
 *         624 bytes stack frame, 1464 bytes spill stores, 1248 bytes spill loads
 *     ptxas info    : Used 32 registers, used 1 barriers, 624 bytes cumulative stack size, 256 bytes smem
 *
 * and this reads those three lines into one KernelResources. A device
 * function that ptxas did not inline gets the first two lines only, and
 * its own entry: its spills and stack are not counted in its callers'.
 * Every other line (gmem, compile times, a warning) is skipped; a
 * properties, stack frame or "Used" line that does not read as above is
 * refused with one line saying where. */
#ifndef COMMON_KERNEL_RESOURCES_H
#define COMMON_KERNEL_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

/* All counts are per thread, except shared memory, which is per block. */
typedef struct {
    char *name;             /* demangled, as ptxas prints it, parameters included */
    bool is_kernel;         /* false: a device function, whose registers and shared memory ptxas does not give */
    int registers;          /* 0: ptxas used none */
    long spill_store_bytes; /* registers stored to local memory for want of registers */
    long spill_load_bytes;
    long stack_bytes;  /* its own stack frame (local arrays, spills, calls) */
    long shared_bytes; /* static __shared__ memory; dynamic shared memory comes at launch */
} KernelResources;

typedef struct {
    KernelResources *kernels;
    int count;
} KernelResourceList;

/* Parse ptxas's report into *out (which kernel_resources_free releases).
 * Return 0; or -1 with one line in err, "line 5: ...", and nothing in *out. */
int kernel_resources_parse(const char *report, KernelResourceList *out, char *err, size_t err_size);

/* The same for a file; the error line starts with its path. */
int kernel_resources_read(const char *path, KernelResourceList *out, char *err, size_t err_size);

void kernel_resources_free(KernelResourceList *list);

COMMON_END_C

#endif
