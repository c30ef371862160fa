/* madvise and MADV_HUGEPAGE are Linux extensions beyond POSIX. */
#define _DEFAULT_SOURCE
#include "common/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/cli.h"

static size_t checked_bytes(size_t count, size_t elem_size)
{
    if (elem_size != 0 && count > SIZE_MAX / elem_size) {
        cli_fail_status(1, "out of memory: %zu elements of %zu bytes overflow size_t", count, elem_size);
    }
    return count * elem_size;
}

/* Arrays this large are what benchmarks stream through: they are aligned to a
 * 2 MiB huge page and the kernel is asked to back them with huge pages, which
 * makes first touch ~500x fewer page faults and keeps the TLB from limiting
 * bandwidth. The advice may be ignored (then nothing changes but speed). */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
#define HUGE_ARRAY_BYTES (4 * HUGE_PAGE_BYTES)

void *array_alloc_uninitialized(size_t count, size_t elem_size)
{
    size_t bytes = checked_bytes(count, elem_size);
    size_t alignment = bytes >= HUGE_ARRAY_BYTES ? HUGE_PAGE_BYTES : ARRAY_ALIGNMENT;
    void *array = NULL;
    /* Zero bytes still get a real, freeable block, so that callers never
     * have to tell an empty array from a failed allocation. */
    if (posix_memalign(&array, alignment, bytes > 0 ? bytes : 1) != 0) {
        cli_fail_status(1, "out of memory: cannot allocate %zu bytes (%zu elements of %zu bytes)", bytes, count,
                        elem_size);
    }
#ifdef MADV_HUGEPAGE
    if (alignment == HUGE_PAGE_BYTES) {
        (void)madvise(array, bytes - bytes % HUGE_PAGE_BYTES, MADV_HUGEPAGE);
    }
#endif
    return array;
}

void *array_alloc(size_t count, size_t elem_size)
{
    void *array = array_alloc_uninitialized(count, elem_size);
    memset(array, 0, count * elem_size);
    return array;
}

void *array_resize(void *array, size_t old_count, size_t new_count, size_t elem_size)
{
    void *resized = array_alloc(new_count, elem_size);
    if (array != NULL) {
        size_t kept = old_count < new_count ? old_count : new_count;
        memcpy(resized, array, kept * elem_size);
        array_free(array);
    }
    return resized;
}

void array_free(void *array)
{
    free(array);
}
