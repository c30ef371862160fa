#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/kernel_resources.h"
#include "common/testing.h"

/* Real reports, as kernels/record-resources.sh keeps them (nvcc 13.0,
 * sm_90, names demangled by c++filt). */

/* kernels/welford.resources, whole. */
static const char WELFORD_REPORT[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'welford_rows_kernel(float const*, unsigned long, float*, float*)' "
    "for 'sm_90'\n"
    "ptxas info    : Function properties for welford_rows_kernel(float const*, unsigned long, float*, float*)\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 1 barriers, 768 bytes smem\n"
    "ptxas info    : Compile time = 44.428 ms\n";

/* From kernels/layernorm.resources before layernorm_backward_v2<4, 8> was
 * fixed: that kernel, which spilled, and one with no shared memory, which
 * ptxas then does not mention. Between them, lines to skip: a warning
 * (what nvcc -Xptxas -warn-spills adds) and an empty line. */
static const char LAYERNORM_EXCERPT[] =
    "ptxas info    : Compiling entry function 'void layernorm_backward_v2<4, 8>(float*, float*, float const*, "
    "float const*, float const*, float const*, float const*, int, int)' for 'sm_90'\n"
    "ptxas info    : Function properties for void layernorm_backward_v2<4, 8>(float*, float*, float const*, "
    "float const*, float const*, float const*, float const*, int, int)\n"
    "    624 bytes stack frame, 1464 bytes spill stores, 1248 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 1 barriers, 624 bytes cumulative stack size, 256 bytes smem\n"
    "ptxas info    : Compile time = 58.683 ms\n"
    "ptxas warning : Registers are spilled to local memory in function '__cuda_sm3x_div_rn_noftz_f32_slowpath', "
    "8 bytes spill stores, 12 bytes spill loads\n"
    "\n"
    "ptxas info    : Compiling entry function 'layernorm_forward_v2(float*, float*, float*, float const*, "
    "float const*, float const*, int, int, float)' for 'sm_90'\n"
    "ptxas info    : Function properties for layernorm_forward_v2(float*, float*, float*, float const*, "
    "float const*, float const*, int, int, float)\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 38 registers, used 0 barriers";

/* Device functions that ptxas did not inline (__noinline__, and recursion),
 * captured from a small file written to show them: their properties come
 * without a "Used" line, and after their callers'. The recursive fact()
 * spills although its kernel r reports nothing of it. */
static const char DEVICE_FUNCTION_REPORT[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'r(float*, int)' for 'sm_90'\n"
    "ptxas info    : Function properties for r(float*, int)\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 24 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 19.047 ms\n"
    "ptxas info    : Function properties for fact(int)\n"
    "    16 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'k(float*, float const*, int)' for 'sm_90'\n"
    "ptxas info    : Function properties for k(float*, float const*, int)\n"
    "    160 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 0 barriers, 160 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 20.118 ms\n"
    "ptxas info    : Function properties for helper(float const*, int)\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";

static bool same_resources(const KernelResources *got, const KernelResources *expected)
{
    return strcmp(got->name, expected->name) == 0 && got->is_kernel == expected->is_kernel &&
           got->registers == expected->registers && got->spill_store_bytes == expected->spill_store_bytes &&
           got->spill_load_bytes == expected->spill_load_bytes && got->stack_bytes == expected->stack_bytes &&
           got->shared_bytes == expected->shared_bytes;
}

static void expect_kernels(const char *report, const KernelResources *expected, int count, const char *what)
{
    KernelResourceList list;
    char err[256] = "";
    int status = kernel_resources_parse(report, &list, err, sizeof err);
    EXPECT(status == 0, "%s: parsed (%s)", what, err);
    EXPECT(list.count == count, "%s: %d kernels, expected %d", what, list.count, count);
    for (int i = 0; i < count && i < list.count; i++) {
        const KernelResources *k = &list.kernels[i];
        EXPECT(same_resources(k, &expected[i]),
               "%s, kernel %d: %s: %d registers, %ld/%ld bytes of spill stores/loads, %ld of stack, %ld of shared",
               what, i, k->name, k->registers, k->spill_store_bytes, k->spill_load_bytes, k->stack_bytes,
               k->shared_bytes);
    }
    kernel_resources_free(&list);
}

static void test_reads_real_reports(void)
{
    const KernelResources welford[] = {
        {"welford_rows_kernel(float const*, unsigned long, float*, float*)", true, 40, 0, 0, 0, 768},
    };
    expect_kernels(WELFORD_REPORT, welford, 1, "welford");
    const KernelResources layernorm[] = {
        {"void layernorm_backward_v2<4, 8>(float*, float*, float const*, float const*, float const*, float const*, "
         "float const*, int, int)",                                                                        true, 32, 1464, 1248, 624, 256},
        {"layernorm_forward_v2(float*, float*, float*, float const*, float const*, float const*, int, int, float)",
         true,                                                                                                            38, 0,    0,    0,   0  },
    };
    expect_kernels(LAYERNORM_EXCERPT, layernorm, 2, "layernorm, lines to skip between the kernels");
    const KernelResources device_functions[] = {
        {"r(float*, int)",               true,  24, 0,  0,  0,   0},
        {"fact(int)",                    false, 0,  16, 16, 16,  0},
        {"k(float*, float const*, int)", true,  40, 0,  0,  160, 0},
        {"helper(float const*, int)",    false, 0,  0,  0,  0,   0},
    };
    expect_kernels(DEVICE_FUNCTION_REPORT, device_functions, 4, "device functions between kernels");
    expect_kernels("", NULL, 0, "an empty report (a launcher's file has no kernels)");
}

/* A report with one line changed must be refused with one line that says
 * which line and why, and leave no kernels behind. */
static void expect_refused(const char *report, const char *expected_start, const char *what)
{
    KernelResourceList list = {NULL, -1}; /* the parser must reset it */
    char err[256] = "";
    int status = kernel_resources_parse(report, &list, err, sizeof err);
    EXPECT(status == -1 && list.count == 0 && list.kernels == NULL, "%s: refused, nothing kept", what);
    EXPECT(strncmp(err, expected_start, strlen(expected_start)) == 0 && strchr(err, '\n') == NULL,
           "%s: one line starting \"%s\", got \"%s\"", what, expected_start, err);
}

static void test_refuses_malformed_lines(void)
{
    expect_refused("ptxas info    : Function properties for k(float*)\n"
                   "    624 bytes stack frame, 1464 bytes spill stores\n",
                   "line 2: not a stack frame line as ptxas writes it", "a stack frame line cut short");
    expect_refused("ptxas info    : Function properties for k(float*)\n"
                   "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads, 8 bytes of something new\n",
                   "line 2: not a stack frame line as ptxas writes it", "a stack frame line with more than it should");
    expect_refused("ptxas info    : Function properties for k(float*)\n"
                   "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                   "ptxas info    : Used many registers, used 1 barriers\n",
                   "line 3: not a usage line as ptxas writes it", "registers that are not a number");
    expect_refused("ptxas info    : Function properties for k(float*)\n"
                   "ptxas info    : Used 32 registers\n",
                   "line 2: \"Function properties for k(float*)\" is not followed by its stack frame line",
                   "properties without their stack frame");
    expect_refused("    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
                   "line 1: a stack frame line with no \"Function properties for\" line before it",
                   "a stack frame line on its own");
    expect_refused("ptxas info    : Used 32 registers, used 1 barriers\n",
                   "line 1: a \"Used ... registers\" line with no \"Function properties for\"", "usage of no function");
    expect_refused("ptxas info    : Function properties for k(float*)\n",
                   "line 1: the report ends before the stack frame line of \"k(float*)\"", "a report cut short");
    expect_refused("ptxas info    : Function properties for k(float*)\n"
                   "    99999999999999999999 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
                   "line 2: not a stack frame line", "a count too large for a long");
}

static void test_reads_files(void)
{
    KernelResourceList list;
    char err[256] = "";
    EXPECT(kernel_resources_read("tests/common/no-such.resources", &list, err, sizeof err) == -1 &&
               strcmp(err, "tests/common/no-such.resources: cannot open: No such file or directory") == 0,
           "a missing file is named: %s", err);
    char path[] = "/tmp/test_kernel_resources.XXXXXX";
    int descriptor = mkstemp(path);
    if (descriptor < 0) {
        perror("mkstemp");
        exit(1);
    }
    FILE *file = fdopen(descriptor, "w");
    fputs(WELFORD_REPORT, file);
    fputs("ptxas info    : Used 32 registers\n", file);
    fclose(file);
    int status = kernel_resources_read(path, &list, err, sizeof err);
    char expected[128];
    snprintf(expected, sizeof expected, "%s: line 7: a \"Used ... registers\" line", path);
    EXPECT(status == -1 && strncmp(err, expected, strlen(expected)) == 0, "a file's error names it: %s", err);
    unlink(path);
}

int main(void)
{
    test_reads_real_reports();
    test_refuses_malformed_lines();
    test_reads_files();
    return test_finish();
}
