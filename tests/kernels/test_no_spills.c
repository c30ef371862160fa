/* No kernel spills: every function ptxas compiled for kernels/ (each
 * template instance a launcher can select, and any device function it did
 * not inline) keeps its values in registers, with no spill stores or loads
 * and no stack frame. A spill turns register reads into local-memory
 * traffic, through the same L1 and L2 as the data, in kernels whose speed
 * the chapters measure against the memory bandwidth.
 *     test_no_spills RECORD...   (kernels/OP.resources, from the CUDA build) */
#include <stdbool.h>
#include <stdio.h>

#include "common/kernel_resources.h"
#include "common/testing.h"

static bool spills(const KernelResources *k)
{
    return k->spill_store_bytes != 0 || k->spill_load_bytes != 0 || k->stack_bytes != 0;
}

/* Check every function of one record; return how many it has. */
static int check_record(const char *path)
{
    KernelResourceList list;
    char err[512];
    if (!EXPECT(kernel_resources_read(path, &list, err, sizeof err) == 0, "%s", err))
        return 0;
    for (int i = 0; i < list.count; i++) {
        const KernelResources *k = &list.kernels[i];
        EXPECT(!spills(k), "%s %s: %ld bytes stack frame, %ld bytes spill stores, %ld bytes spill loads (%d registers)",
               k->is_kernel ? "kernel" : "device function", k->name, k->stack_bytes, k->spill_store_bytes,
               k->spill_load_bytes, k->registers);
    }
    int count = list.count;
    kernel_resources_free(&list);
    return count;
}

int main(int argc, char **argv)
{
    int functions = 0;
    for (int i = 1; i < argc; i++)
        functions += check_record(argv[i]);
    /* No records, or records with no kernels, would pass everything above. */
    EXPECT(functions > 0, "the %d records name no function", argc - 1);
    printf("%d functions in %d records of kernels/\n", functions, argc - 1);
    return test_finish();
}
