/* The reader of machine-code records (common/sass.h) and the instruction
 * budget computed from them (common/instruction_budget.h), on small
 * listings written to have one known answer each, in the form
 * kernels/record-sass.sh keeps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/instruction_budget.h"
#include "common/sass.h"
#include "common/testing.h"

/* A loop (0x20 to 0x90) that loads two float4s, waits once, sometimes
 * takes a two-instruction detour, and stores one float; a prologue and an
 * epilogue around it, and the padding cuobjdump prints after a kernel. */
static const char LOOP_KERNEL[] = "Function : void stream<4>(float*, float const*)\n"
                                  "/*0000*/ S2R R0, SR_TID.X ;\n"
                                  "/*0010*/ @P0 EXIT ;\n"
                                  "/*0020*/ LDG.E.128 R4, desc[UR4][R2.64] ;\n"
                                  "/*0030*/ LDG.E.128 R8, desc[UR4][R2.64+0x10] ;\n"
                                  "/*0040*/ FADD R12, R4, R11 ;\n"
                                  "/*0050*/ @P1 BRA 0x80 ;\n"
                                  "/*0060*/ FMUL R13, R12, R12 ;\n"
                                  "/*0070*/ FMUL R12, R13, R13 ;\n"
                                  "/*0080*/ STG.E desc[UR4][R14.64], R12 ;\n"
                                  "/*0090*/ @P2 BRA 0x20 ;\n"
                                  "/*00a0*/ EXIT ;\n"
                                  "/*00b0*/ BRA 0xb0 ;\n"
                                  "/*00c0*/ NOP ;\n";

/* No loop: a store, a pointer load and a byte load through it (a wait),
 * then a guarded float4 load ("@!P1", skipped with "@P1 BRA" when the
 * thread has nothing to read) and its use (a second wait). The branch that
 * skips the float4 moves fewer bytes: it must not look like a cheaper way
 * through. */
static const char STRAIGHT_KERNEL[] = "Function : whole(float*)\n"
                                      "/*0000*/ ISETP.GE.AND P1, PT, R0, R1, PT ;\n"
                                      "/*0010*/ STG.E desc[UR4][R6.64], R0 ;\n"
                                      "/*0020*/ LDG.E.64 R8, desc[UR4][R2.64] ;\n"
                                      "/*0030*/ LDG.E.U8 R10, desc[UR4][R8.64] ;\n"
                                      "/*0040*/ @!P1 LDG.E.128 R4, desc[UR4][R2.64+0x10] ;\n"
                                      "/*0050*/ @P1 BRA 0x80 ;\n"
                                      "/*0060*/ FADD R11, R4, R10 ;\n"
                                      "/*0070*/ STS [R12], R11 ;\n"
                                      "/*0080*/ EXIT ;\n"
                                      "/*0090*/ BRA 0x90 ;\n";

/* A loop whose guarded 16-bit load ("@!P1") is widened by an instruction
 * under the same guard, and which a branch can skip ("@P2 BRA", the last
 * row, say). "@!P1 IMAD.U32" runs where the load ran and is not a branch:
 * it skips nothing, so the way through the load moves 2 bytes more than
 * the branch's, and is the fast path. */
static const char GUARDED_USE_KERNEL[] = "Function : guarded(short*)\n"
                                         "/*0000*/ ISETP.GE.AND P1, PT, R0, R1, PT ;\n"
                                         "/*0010*/ @P2 BRA 0x40 ;\n"
                                         "/*0020*/ @!P1 LDG.E.U16 R4, desc[UR4][R2.64] ;\n"
                                         "/*0030*/ @!P1 IMAD.U32 R5, R4, 0x10000, RZ ;\n"
                                         "/*0040*/ FADD R6, R6, R5 ;\n"
                                         "/*0050*/ STG.E desc[UR4][R8.64], R6 ;\n"
                                         "/*0060*/ @P0 BRA 0x0 ;\n"
                                         "/*0070*/ EXIT ;\n";

/* An outer loop (0x00 to 0x50) around an inner loop (0x10 to 0x30) that
 * loads; then a loop that only stores results (0x60 to 0x70), and moves
 * more bytes per pass. The inner loading loop is the steady state. */
static const char NESTED_KERNEL[] = "Function : nested(float*)\n"
                                    "/*0000*/ MOV R1, RZ ;\n"
                                    "/*0010*/ LDG.E R4, desc[UR4][R2.64] ;\n"
                                    "/*0020*/ FADD R1, R1, R4 ;\n"
                                    "/*0030*/ @P0 BRA 0x10 ;\n"
                                    "/*0040*/ STG.E desc[UR4][R6.64], R1 ;\n"
                                    "/*0050*/ @P1 BRA 0x0 ;\n"
                                    "/*0060*/ STG.E.128 desc[UR4][R6.64], R8 ;\n"
                                    "/*0070*/ @P2 BRA 0x60 ;\n"
                                    "/*0080*/ EXIT ;\n";

/* No loop either: a shuffle that a diverged warp redoes in the block at
 * 0x60 (BRA.DIV's target), which branches back to 0x30, before the store.
 * That backward branch is not a loop. */
static const char DIVERGENT_KERNEL[] = "Function : shuffled(float*)\n"
                                       "/*0000*/ LDG.E.128 R4, desc[UR4][R2.64] ;\n"
                                       "/*0010*/ BRA.DIV UR4, 0x60 ;\n"
                                       "/*0020*/ SHFL.BFLY PT, R8, R4, 0x1, 0x1f ;\n"
                                       "/*0030*/ FADD R4, R4, R8 ;\n"
                                       "/*0040*/ STG.E.128 desc[UR4][R6.64], R4 ;\n"
                                       "/*0050*/ EXIT ;\n"
                                       "/*0060*/ WARPSYNC.ALL ;\n"
                                       "/*0070*/ SHFL.BFLY PT, R8, R4, 0x1, 0x1f ;\n"
                                       "/*0080*/ BRA 0x30 ;\n"
                                       "/*0090*/ BRA 0x90 ;\n";

static const SassKernel *only_kernel(const char *text, SassRecord *record)
{
    char err[256] = "";
    int status = sass_record_parse(text, record, err, sizeof err);
    EXPECT(status == 0 && record->count == 1, "parsed one kernel (%s)", err);
    return status == 0 && record->count == 1 ? &record->kernels[0] : NULL;
}

static void test_loop(void)
{
    SassRecord record;
    const SassKernel *k = only_kernel(LOOP_KERNEL, &record);
    if (k == NULL)
        return;
    const SassSteadyState *s = &k->steady;
    EXPECT(strcmp(k->name, "void stream<4>(float*, float const*)") == 0, "name \"%s\"", k->name);
    EXPECT(k->instructions == 13, "all %d instructions kept", k->instructions);
    EXPECT(s->is_loop && s->first_address == 0x20 && s->last_address == 0x90, "the loop 0x%lx to 0x%lx",
           s->first_address, s->last_address);
    EXPECT(s->instructions_on_all_paths == 8, "8 instructions in the body, got %d", s->instructions_on_all_paths);
    EXPECT(s->instructions == 6, "the fast path skips the detour: 6 instructions, got %d", s->instructions);
    EXPECT(s->global_loads == 2 && s->wide_global_loads == 2, "two loads, both 128-bit: %d, %d", s->global_loads,
           s->wide_global_loads);
    EXPECT(s->global_load_bytes == 32 && s->global_store_bytes == 4, "32 bytes in, 4 out: %ld, %ld",
           s->global_load_bytes, s->global_store_bytes);
    EXPECT(s->memory_waits == 1, "one wait (FADD reads R4 and R11), got %d", s->memory_waits);
    sass_record_free(&record);
}

static void test_whole_kernel(void)
{
    SassRecord record;
    const SassKernel *k = only_kernel(STRAIGHT_KERNEL, &record);
    if (k == NULL)
        return;
    const SassSteadyState *s = &k->steady;
    EXPECT(!s->is_loop, "no loop: the whole kernel is the body");
    EXPECT(s->instructions == 9 && s->instructions_on_all_paths == 9,
           "the way that loads: all 9 instructions (self-branch left out), got %d of %d", s->instructions,
           s->instructions_on_all_paths);
    EXPECT(s->global_load_bytes == 25 && s->global_store_bytes == 4,
           "a pointer, a byte and a float4 in, a float out: %ld, %ld", s->global_load_bytes, s->global_store_bytes);
    EXPECT(s->memory_waits == 2, "the load through a loaded pointer waits, and the use of the float4: got %d",
           s->memory_waits);
    sass_record_free(&record);
}

static void test_a_guarded_instruction_is_not_a_branch(void)
{
    SassRecord record;
    const SassKernel *k = only_kernel(GUARDED_USE_KERNEL, &record);
    if (k == NULL)
        return;
    const SassSteadyState *s = &k->steady;
    EXPECT(s->is_loop && s->instructions == 7, "the loop, all 7 instructions: got %d", s->instructions);
    EXPECT(s->global_load_bytes == 2 && s->global_store_bytes == 4, "the guarded short in, a float out: %ld, %ld",
           s->global_load_bytes, s->global_store_bytes);
    sass_record_free(&record);
}

static void test_innermost_loading_loop(void)
{
    SassRecord record;
    const SassKernel *k = only_kernel(NESTED_KERNEL, &record);
    if (k == NULL)
        return;
    const SassSteadyState *s = &k->steady;
    EXPECT(s->is_loop && s->first_address == 0x10 && s->last_address == 0x30,
           "the inner loading loop, 0x10 to 0x30: got 0x%lx to 0x%lx", s->first_address, s->last_address);
    EXPECT(s->global_load_bytes == 4 && s->global_store_bytes == 0, "4 bytes in: %ld, %ld", s->global_load_bytes,
           s->global_store_bytes);
    sass_record_free(&record);
}

static void test_divergence_is_not_a_loop(void)
{
    SassRecord record;
    const SassKernel *k = only_kernel(DIVERGENT_KERNEL, &record);
    if (k == NULL)
        return;
    const SassSteadyState *s = &k->steady;
    EXPECT(!s->is_loop && s->global_load_bytes == 16 && s->global_store_bytes == 16,
           "the branch back from BRA.DIV's block is no loop: the whole kernel, 16 bytes in and out (loop %d, %ld, %ld)",
           s->is_loop, s->global_load_bytes, s->global_store_bytes);
    sass_record_free(&record);
}

static void expect_refused(const char *text, const char *expected_start, const char *what)
{
    SassRecord record;
    char err[256] = "";
    int status = sass_record_parse(text, &record, err, sizeof err);
    EXPECT(status == -1 && record.count == 0 && record.kernels == NULL, "%s: refused, nothing kept", what);
    EXPECT(strncmp(err, expected_start, strlen(expected_start)) == 0 && strchr(err, '\n') == NULL,
           "%s: one line starting \"%s\", got \"%s\"", what, expected_start, err);
}

static void test_refusals(void)
{
    expect_refused("/*0000*/ EXIT ;\n", "line 1: an instruction before", "instruction before any function");
    expect_refused("Function : k()\n/*0000*/ EXIT ;\nsomething else\n", "line 3: neither", "a line of another kind");
    expect_refused("Function : k()\n/*00zz EXIT ;\n", "line 2: an instruction line without its address", "no address");
    expect_refused("Function : k()\n/*0000*/ EXIT\n", "line 2: not an instruction", "no semicolon");
    expect_refused("Function : k()\nFunction : m()\n/*0000*/ EXIT ;\n", "line 2: kernel \"k()\" has no instructions",
                   "an empty kernel");
    SassRecord record;
    char err[64];
    EXPECT(sass_record_parse("", &record, err, sizeof err) == 0 && record.count == 0, "an empty record is empty");
}

/* The budget, computed the other way round: per SM and per clock. */
static void test_budget(void)
{
    SassSteadyState s = {.instructions = 32, .global_load_bytes = 16, .global_store_bytes = 16, .memory_waits = 1};
    InstructionBudget b = instruction_budget(&H100_SXM, &s, 64);
    /* 4 schedulers issue 4 warp instructions a clock; 32 of them move a
     * warp's 32 x 32 bytes, so 128 bytes per clock per SM. */
    double issue_bytes_per_s = 128.0 * H100_SXM.sms * H100_SXM.clock_hz;
    EXPECT(fabs(b.issue_fraction - issue_bytes_per_s / H100_SXM.copy_bytes_per_s) < 1e-12 * b.issue_fraction,
           "issue allows %g of the copy bandwidth", b.issue_fraction);
    EXPECT(b.instructions_per_16_bytes == 16.0, "16 instructions per 16 bytes, got %g", b.instructions_per_16_bytes);
    /* 64 warps x 32 threads x 16 bytes loaded per wait. */
    EXPECT(b.bytes_in_flight_per_sm == 64.0 * 32 * 16, "32 KiB in flight, got %g", b.bytes_in_flight_per_sm);
    double needed = 0.9 * 3.35e12 * 600e-9 / 132;
    EXPECT(fabs(b.needed_in_flight_per_sm - needed) < 1e-9 * needed, "needed %g per SM", b.needed_in_flight_per_sm);
    EXPECT(b.limiter == LIMITED_BY_MEMORY && b.predicted_fraction == 1.0, "memory limits it: %s, %g",
           budget_limiter_name(b.limiter), b.predicted_fraction);

    InstructionBudget few = instruction_budget(&H100_SXM, &s, 8);
    EXPECT(few.limiter == LIMITED_BY_BYTES_IN_FLIGHT && fabs(few.predicted_fraction - 8.0 * 32 * 16 / needed) < 1e-12,
           "8 warps keep 4 KiB in flight: %s, %g", budget_limiter_name(few.limiter), few.predicted_fraction);

    s.instructions = 3200;
    InstructionBudget slow = instruction_budget(&H100_SXM, &s, 64);
    EXPECT(slow.limiter == LIMITED_BY_INSTRUCTIONS && slow.predicted_fraction == slow.issue_fraction &&
               slow.issue_fraction < 0.1,
           "3200 instructions per 32 bytes: %s, %g", budget_limiter_name(slow.limiter), slow.issue_fraction);

    /* Each byte also read by 3 other blocks (from L2): per byte from memory,
     * 4 times the instructions and a quarter of the bytes in flight. */
    InstructionBudget shared = instruction_budget_shared_reads(b, 4);
    EXPECT(shared.instructions_per_16_bytes == 64.0 && fabs(shared.issue_fraction - b.issue_fraction / 4) < 1e-15 &&
               shared.bytes_in_flight_per_sm == b.bytes_in_flight_per_sm / 4,
           "shared by 4: %g instructions per 16 bytes, issue %g, in flight %g", shared.instructions_per_16_bytes,
           shared.issue_fraction, shared.bytes_in_flight_per_sm);
    EXPECT(shared.predicted_fraction == fmin(1.0, fmin(shared.issue_fraction, shared.in_flight_fraction)) &&
               shared.predicted_fraction < b.predicted_fraction,
           "shared by 4: predicted %g (alone %g), limited by %s", shared.predicted_fraction, b.predicted_fraction,
           budget_limiter_name(shared.limiter));
    InstructionBudget alone = instruction_budget_shared_reads(b, 1);
    EXPECT(alone.predicted_fraction == b.predicted_fraction && alone.limiter == b.limiter,
           "read by one block: unchanged");

    SassSteadyState stores_only = {.instructions = 8, .global_store_bytes = 16};
    InstructionBudget st = instruction_budget(&H100_SXM, &stores_only, 1);
    EXPECT(st.in_flight_fraction == 1.0, "stores do not wait: in flight allows %g", st.in_flight_fraction);
}

int main(void)
{
    test_loop();
    test_whole_kernel();
    test_innermost_loading_loop();
    test_a_guarded_instruction_is_not_a_branch();
    test_divergence_is_not_a_loop();
    test_refusals();
    test_budget();
    return test_finish();
}
