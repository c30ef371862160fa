/* common/resource_table.c: kernel names read into signatures, and the table
 * printed from a small captured report, its occupancy computed here by hand
 * from the sm_90 rules rather than by common/occupancy.c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel_resources.h"
#include "common/resource_table.h"
#include "common/testing.h"

static void test_signatures(void)
{
    KernelSignature s;
    EXPECT(kernel_signature_parse("void paged_attention_kernels::partition_kernel<(KvFormat)6, 256>("
                                  "paged_attention_kernels::KernelParams)",
                                  &s),
           "an enum and an integer argument");
    EXPECT(kernel_signature_is(&s, "partition_kernel", 2) && s.arguments[0] == 6 && s.arguments[1] == 256,
           "got %s with %d arguments", s.function, s.argument_count);
    EXPECT(kernel_signature_parse("void softmax_topk_kernels::block_rows_kernel<false>(float const*, int)", &s) &&
               kernel_signature_is(&s, "block_rows_kernel", 1) && s.arguments[0] == 0,
           "false reads as 0");
    EXPECT(kernel_signature_parse("welford_rows_kernel(float const*, unsigned long, float*, float*)", &s) &&
               kernel_signature_is(&s, "welford_rows_kernel", 0),
           "a kernel that is no template");
    EXPECT(!kernel_signature_parse("void f<float>(float*)", &s), "a type argument is not a number");
    EXPECT(!kernel_signature_is(&s, "welford_rows", 0), "a prefix is not the name");
}

/* Two kernels and a device function, as ptxas reports them. */
static const char REPORT[] = "ptxas info    : Function properties for void row_kernel<4, 8>(float*, int)\n"
                             "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                             "ptxas info    : Used 96 registers, used 1 barriers, 256 bytes smem\n"
                             "ptxas info    : Function properties for helper(float)\n"
                             "    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                             "ptxas info    : Function properties for orphan_kernel(float*)\n"
                             "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
                             "ptxas info    : Used 20 registers, used 0 barriers\n";

/* row_kernel at two block sizes, in the wrong order, and once more with
 * dynamic shared memory; orphan_kernel: none. */
static void row_kernel_launches(const KernelSignature *kernel, ResourceTableRows *rows)
{
    if (kernel_signature_is(kernel, "row_kernel", 2)) {
        resource_table_add(rows, 640, "row %d x %d, 640 threads", kernel->arguments[0], kernel->arguments[1]);
        resource_table_add(rows, 64, "row %d x %d, 64 threads", kernel->arguments[0], kernel->arguments[1]);
        resource_table_add_with_shared(rows, 64, 40000, "row %d x %d, 64 threads and a buffer", kernel->arguments[0],
                                       kernel->arguments[1]);
    }
}

/* Squeeze each run of spaces to one: the columns are padded to their widest
 * cell. */
static void squeeze_spaces(char *text)
{
    size_t kept = 0;
    for (size_t i = 0; text[i] != '\0'; i++)
        if (!(text[i] == ' ' && kept > 0 && text[kept - 1] == ' '))
            text[kept++] = text[i];
    text[kept] = '\0';
}

/* Where `row` starts in text, or -1. */
static long position(const char *text, const char *row)
{
    const char *found = strstr(text, row);
    return found == NULL ? -1 : (long)(found - text);
}

static void test_table(void)
{
    KernelResourceList record;
    char err[256];
    if (!EXPECT(kernel_resources_parse(REPORT, &record, err, sizeof err) == 0, "%s", err))
        return;
    CapturedOutput captured;
    resource_table_print(&record, row_kernel_launches, capture_output(&captured), TABLE_MARKDOWN);
    char *text = captured_text(&captured);
    squeeze_spaces(text);
    /* 96 registers x 32 lanes = 3072 per warp (a multiple of 256); a
     * quarter of the register file, 16,384, holds 5 such warps, the SM 20.
     * 640 threads are 20 warps: 1 block, 20 of 64 warps, 31%. 64 threads
     * are 2 warps: 10 blocks, 20 warps, the same 31%; both by registers.
     * With 40,000 dynamic bytes a block takes 256 + 40,000 + the runtime's
     * 1,024 = 41,280, rounded up to the 128-byte unit 41,344; 228 KiB
     * (233,472) hold 5: 10 warps, 16%, by shared memory. */
    const char *at_64 = "| row 4 x 8, 64 threads | 64 | 96 | 0 / 0 | 0 | 256 + 0 | 10 | 20 | 31% | registers |";
    const char *at_64_buffer =
        "| row 4 x 8, 64 threads and a buffer | 64 | 96 | 0 / 0 | 0 | 256 + 40000 | 5 | 10 | 16% | shared memory |";
    const char *at_640 = "| row 4 x 8, 640 threads | 640 | 96 | 0 / 0 | 0 | 256 + 0 | 1 | 20 | 31% | registers |";
    long first = position(text, at_64), second = position(text, at_640);
    bool in_order = first >= 0 && second > first;
    EXPECT(in_order, "the rows, 64 before 640:\n%s", text);
    EXPECT(position(text, at_64_buffer) >= 0, "dynamic shared memory counts toward occupancy:\n%s", text);
    EXPECT(strstr(text, "selected by no launcher: orphan_kernel(float*).") != NULL,
           "the kernel no launcher selects is named:\n%s", text);
    EXPECT(strstr(text, "helper") == NULL, "a device function is no kernel:\n%s", text);
    free(text);
    kernel_resources_free(&record);
}

int main(void)
{
    test_signatures();
    test_table();
    return test_finish();
}
