#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/testing.h"

/* Under AddressSanitizer an impossible allocation aborts the program unless
 * the allocator may return NULL; array_alloc must see the NULL to report it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static bool all_zero(const unsigned char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bytes[i] != 0) {
            return false;
        }
    }
    return true;
}

static void test_alignment_and_zeros(void)
{
    const size_t counts[] = {0, 1, 3, 63, 64, 65, 1000, 1823 * 781};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        float *x = ALLOC_ARRAY(counts[i], float);
        EXPECT(x != NULL, "ALLOC_ARRAY(%zu, float) returns an array", counts[i]);
        EXPECT((uintptr_t)x % ARRAY_ALIGNMENT == 0, "%zu floats are 64-byte aligned (address %p)", counts[i],
               (void *)x);
        EXPECT(all_zero((const unsigned char *)x, counts[i] * sizeof *x), "%zu floats are zero-filled", counts[i]);
        array_free(x);
    }
    unsigned char *raw = array_alloc_uninitialized(100, 3);
    EXPECT((uintptr_t)raw % ARRAY_ALIGNMENT == 0, "array_alloc_uninitialized is 64-byte aligned");
    memset(raw, 0xAB, 300); /* all 300 bytes are writable (AddressSanitizer would say otherwise) */
    array_free(raw);
    array_free(NULL);
}

static void test_resize(void)
{
    int *x = ALLOC_ARRAY(5, int);
    for (int i = 0; i < 5; i++) {
        x[i] = i + 1;
    }
    x = array_resize(x, 5, 9, sizeof *x);
    const int grown[9] = {1, 2, 3, 4, 5, 0, 0, 0, 0};
    EXPECT(memcmp(x, grown, sizeof grown) == 0, "growing keeps the elements and zero-fills the rest");
    x = array_resize(x, 9, 2, sizeof *x);
    EXPECT(x[0] == 1 && x[1] == 2, "shrinking keeps the first elements");
    array_free(x);
    int *fresh = array_resize(NULL, 0, 4, sizeof(int));
    EXPECT(all_zero((const unsigned char *)fresh, 4 * sizeof(int)), "resizing NULL allocates zeros");
    array_free(fresh);
}

static void allocate_overflowing_count(void *ctx)
{
    (void)ctx;
    array_alloc(SIZE_MAX / 4 + 1, 8);
}

static void allocate_too_much(void *ctx)
{
    (void)ctx;
    array_alloc((size_t)1 << 62, 1);
}

/* A failed allocation ends the program with status 1 and one line that
 * names what was asked for. */
static void expect_allocation_failure(void (*body)(void *), const char *expected_text)
{
    ChildResult child = test_run_child(body, NULL);
    const char *line = child.err;
    int lines = child.err_lines;
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer announces the allocation it refused ("==PID==WARNING:
     * AddressSanitizer failed to allocate ...") before our line: not ours. */
    if (strncmp(line, "==", 2) == 0 && strchr(line, '\n') != NULL) {
        line = strchr(line, '\n') + 1;
        lines--;
    }
#endif
    EXPECT(child.exit_status == 1, "exit status is 1, got %d (signal %d)", child.exit_status, child.signal);
    EXPECT(lines == 1, "one line on stderr, got %d: %s", lines, child.err);
    EXPECT(strstr(line, "test_alloc: error: out of memory") == line, "the line starts with the error: %s", line);
    EXPECT(strstr(line, expected_text) != NULL, "the line says '%s': %s", expected_text, line);
}

int main(int argc, char **argv)
{
    (void)argc;
    cli_set_program_name(argv[0]);
    test_alignment_and_zeros();
    test_resize();
    expect_allocation_failure(allocate_overflowing_count, "4611686018427387904 elements of 8 bytes overflow");
    expect_allocation_failure(allocate_too_much, "cannot allocate 4611686018427387904 bytes");
    return test_finish();
}
