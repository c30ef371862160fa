/* The counts of a loop's vector instructions in objdump's listing
 * (loop_counts.h): first on a listing written for the test, where every
 * count is known, then on the build's own record of the benchmark's two
 * exponential loops, where the chapter's claim must hold: the table's
 * exponential issues fewer multiplies and fewer instructions per logit. */
#include <stdio.h>
#include <string.h>

#include "chapters/03-softmax-topk/exp16.h"
#include "chapters/03-softmax-topk/loop_counts.h"
#include "common/files.h"
#include "common/testing.h"

/* sum_exp: an outer loop (10d to 150) around an inner one (113 to 146).
 * The inner body has 7 vector instructions that are not moves (vmovaps
 * is one; kortestw works on mask registers), 3 of them multiplies
 * (vfmadd132ps, vmulps, vfmadd231ps), and reads one vector of data,
 * 0x40(%rdi), twice: 16 floats. -0x38(%rsp) is a stack slot and the
 * {1to16} operand a constant. The outer loop's own vaddps and vmovups do
 * not count. sum_exp16, after it, shares its name's beginning. */
static const char LISTING[] = "\n"
                              "bench_cpu.o:     file format elf64-x86-64\n"
                              "\n"
                              "\n"
                              "Disassembly of section .text:\n"
                              "\n"
                              "0000000000000100 <sum_exp>:\n"
                              "     100:\tvbroadcastss 0x0(%rip),%zmm1        # 108 <sum_exp+0x8>\n"
                              "     108:\tmov    $0x10,%eax\n"
                              "     10d:\tvmovups (%rdi),%zmm2\n"
                              "     113:\tvfmadd132ps 0x40(%rdi),%zmm1,%zmm2\n"
                              "     11a:\tvaddps -0x38(%rsp),%zmm2,%zmm3\n"
                              "     120:\tvmulps 0x0(%rip){1to16},%zmm3,%zmm4        # 127 <sum_exp+0x27>\n"
                              "     127:\tvpermi2ps %zmm5,%zmm6,%zmm4\n"
                              "     12d:\tvmovaps %zmm4,%zmm7\n"
                              "     133:\tvfmadd231ps 0x40(%rdi),%zmm7,%zmm3\n"
                              "     139:\tvcmpnlt_uqps %zmm0,%zmm3,%k1\n"
                              "     140:\tkortestw %k1,%k1\n"
                              "     144:\tdec    %ecx\n"
                              "     146:\tjne    113 <sum_exp+0x13>\n"
                              "     148:\tvaddps 0x80(%rdi),%zmm3,%zmm3\n"
                              "     14e:\tdec    %eax\n"
                              "     150:\tjne    10d <sum_exp+0xd>\n"
                              "     152:\tret\n"
                              "\n"
                              "0000000000000200 <sum_exp16>:\n"
                              "     200:\tvmulps (%rsi),%ymm1,%ymm2\n"
                              "     205:\tvmovups 0x20(%rsi),%ymm3\n"
                              "     20a:\tjmp    200 <sum_exp16>\n";

static void expect_counts(const char *text, const char *function, LoopCounts expected)
{
    LoopCountQuery q = {.function = function};
    char err[256] = "";
    int status = parse_text(text, count_function_loop, &q, err, sizeof err);
    EXPECT(status == 0, "%s: %s", function, err);
    EXPECT(status != 0 || memcmp(&q.counts, &expected, sizeof expected) == 0,
           "%s: %d vector instructions, %d multiplies, %d floats read; expected %d, %d, %d", function,
           q.counts.vector_instructions, q.counts.multiplies, q.counts.floats_read, expected.vector_instructions,
           expected.multiplies, expected.floats_read);
}

static void expect_refused(const char *text, const char *function, const char *why)
{
    LoopCountQuery q = {.function = function};
    char err[256] = "";
    int status = parse_text(text, count_function_loop, &q, err, sizeof err);
    EXPECT(status == -1 && strstr(err, why) != NULL, "%s: status %d, \"%s\"; expected \"%s\"", function, status, err,
           why);
}

static void test_written_listing(void)
{
    expect_counts(LISTING, "sum_exp", (LoopCounts){.vector_instructions = 7, .multiplies = 3, .floats_read = 16});
    /* ymm registers hold 8 floats; the load counts as data, not as work. */
    expect_counts(LISTING, "sum_exp16", (LoopCounts){.vector_instructions = 1, .multiplies = 1, .floats_read = 16});
    expect_refused(LISTING, "sum", "not in the listing");
    expect_refused("0000000000000100 <f>:\n     100:\tvaddps %zmm1,%zmm2,%zmm3\n     106:\tret\n", "f", "has no loop");
    expect_refused("0000000000000100 <f>:\n     100:\tvaddps %zmm1,%zmm2,%zmm3\n     106:\tjmp 100 <f>\n", "f",
                   "reads no vector of data");
    expect_refused("0000000000000100 <f>:\n     100 vaddps %zmm1,%zmm2,%zmm3\n", "f", "line 2: not an instruction");
    expect_refused("0000000000000100 <f>:\n\n0000000000000200 <f>:\n", "f", "listed twice");
    LoopCounts counts = {.vector_instructions = 7, .multiplies = 3, .floats_read = 32};
    EXPECT(per_floats(7, &counts, 16) == 3.5, "7 instructions per 32 floats: %g per 16", per_floats(7, &counts, 16));
}

/* A long unrolled body: every distinct vector it reads counts, however
 * many there are (here 80 loads and 80 additions, then the jump back). */
static void test_long_body(void)
{
    enum { LOADS = 80 };
    char text[LOADS * 2 * 64 + 128];
    int used = snprintf(text, sizeof text, "0000000000000000 <long>:\n");
    for (int i = 0; i < LOADS; i++)
        used += snprintf(text + used, sizeof text - (size_t)used,
                         "     %x:\tvmovups 0x%x(%%rdi),%%zmm1\n     %x:\tvaddps %%zmm1,%%zmm0,%%zmm0\n", 16 * i,
                         64 * i, 16 * i + 8);
    snprintf(text + used, sizeof text - (size_t)used, "     %x:\tjmp    0 <long>\n", 16 * LOADS);
    expect_counts(text, "long", (LoopCounts){.vector_instructions = LOADS, .multiplies = 0, .floats_read = 16 * LOADS});
}

/* The build's record: what the chapter says of the two loops it times. */
static void test_recorded_loops(void)
{
    static const char record[] = "../../chapters/03-softmax-topk/exp_loops.asm";
    LoopCountQuery plain = {.function = "sum_exp_in_sum"}, table = {.function = "sum_exp16"};
    char err[512] = "";
#if defined(EXP16_AVX512)
    EXPECT(parse_text_file(record, count_function_loop, &plain, err, sizeof err) == 0, "%s", err);
    EXPECT(parse_text_file(record, count_function_loop, &table, err, sizeof err) == 0, "%s", err);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer moves the loops' local arrays off the stack and
     * checks every access to them: the code counted is not the code the
     * chapter times, and its arrays read as data. Found is all that holds. */
    printf("the two exponential loops: found; their counts are checked in a build without sanitizers\n");
    return;
#endif
    const LoopCounts *p = &plain.counts, *t = &table.counts;
    double plain_multiplies = per_floats(p->multiplies, p, 16), table_multiplies = per_floats(t->multiplies, t, 16);
    double plain_vector = per_floats(p->vector_instructions, p, 16);
    double table_vector = per_floats(t->vector_instructions, t, 16);
    printf("per 16 logits: sum_exp_in_sum %g multiplies of %g vector instructions, sum_exp16 %g of %g "
           "(%d and %d floats read per pass)\n",
           plain_multiplies, plain_vector, table_multiplies, table_vector, p->floats_read, t->floats_read);
    EXPECT(p->floats_read % 16 == 0 && t->floats_read % 16 == 0, "floats read per pass: %d and %d", p->floats_read,
           t->floats_read);
    EXPECT(table_multiplies > 0 && table_multiplies < plain_multiplies, "multiplies: %g and %g", table_multiplies,
           plain_multiplies);
    EXPECT(table_vector < plain_vector, "vector instructions: %g and %g", table_vector, plain_vector);
#else
    /* Without AVX-512 neither loop is compiled: the record holds neither. */
    EXPECT(parse_text_file(record, count_function_loop, &table, err, sizeof err) == -1 &&
               strstr(err, "not in the listing") != NULL,
           "sum_exp16 without AVX-512: \"%s\"", err);
    (void)plain;
    printf("the two exponential loops: not built (no AVX-512)\n");
#endif
}

int main(void)
{
    test_written_listing();
    test_long_body();
    test_recorded_loops();
    return test_finish();
}
