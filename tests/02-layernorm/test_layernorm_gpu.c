/* Every CUDA kernel version, layer norm's and RMSNorm's, in every storage
 * type, against the double reference on the shapes of
 * chapters/02-layernorm/gpu.c, and in fp16 and bf16 against the CPU's
 * results in the same storage type (gpu_meets_storage_goal); backward 2
 * and 3 deterministic in every storage type; a row too long for the register-resident versions
 * refused, not mangled; the offset, overflow and non-finite goals. */
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/gpu.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/layernorm.h"
#include "tests/02-layernorm/nonfinite_goal.h"
#include "tests/02-layernorm/offset_goal.h"
#include "tests/02-layernorm/overflow_goal.h"

/* The most rows of any shape: 4097, unless --max-rows asks for fewer. The
 * tests' CUDA emulator, which runs every GPU thread on the CPU, asks for 301:
 * every shape keeps its width and alignment, and 301 rows are still a
 * multiple of no block and more than backward 2 has blocks. */
static size_t max_rows = 4097;

static size_t rows_at_most(size_t n)
{
    return n < max_rows ? n : max_rows;
}

static void test_every_version_on_every_shape(NormKind norm, LnStorage storage)
{
    for (int s = 0; s < gpu_check_shape_count; s++) {
        GpuCheckShape shape = gpu_check_shapes[s];
        shape.n = rows_at_most(shape.n);
        for (int f = 1; f <= LAYERNORM_FORWARD_GPU_VERSIONS; f++)
            for (int b = 1; b <= LAYERNORM_BACKWARD_GPU_VERSIONS; b++)
                EXPECT(gpu_check_versions(&shape, norm, storage, f, b, 17, stdout),
                       "%s norm, %s, forward %d, backward %d, %zu x %zu (%s)", norm_kind_name(norm),
                       ln_storage_name(storage), f, b, shape.n, shape.d, shape.why);
    }
}

/* Backward 3 keeps two rows in flight: a block that takes three rows or
 * more reuses each buffer. The shapes above give no block of the emulator
 * (at most 301 rows, and at least 256 blocks) a third row, so these narrow
 * ones, cheap at any row count, give every block 3 or 4: a float4 per
 * thread (d = 8, float32) and single values (d = 6). */
static void test_blocks_take_many_rows(NormKind norm, LnStorage storage)
{
    const GpuCheckShape shapes[] = {
        {1000, 8, 0, "a float4 per thread (float32), 3 or 4 rows per block"},
        {1000, 6, 0, "single values, 3 or 4 rows per block"                },
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int b = 2; b <= LAYERNORM_BACKWARD_GPU_VERSIONS; b++)
            EXPECT(gpu_check_versions(&shapes[s], norm, storage, 3, b, 23, stdout),
                   "%s norm, %s, forward 3, backward %d, %zu x %zu (%s)", norm_kind_name(norm),
                   ln_storage_name(storage), b, shapes[s].n, shapes[s].d, shapes[s].why);
}

/* No floating-point atomics: two runs of backward `version` give the same
 * bits. Version 3's finalize splits the columns over its blocks and each
 * column's partial rows over the slices of a block; the order of its sums
 * must not depend on which of them runs first. */
static void test_backward_is_deterministic(NormKind norm, LnStorage storage, int version)
{
    size_t n = rows_at_most(4097);
    LnProblem a = ln_problem_new(n, 768, 1e-5f), b = ln_problem_new(n, 768, 1e-5f);
    a.norm = b.norm = norm;
    a.storage = b.storage = storage;
    ln_problem_fill_random(&a, 18, 0.0, 1.0);
    ln_problem_fill_random(&b, 18, 0.0, 1.0);
    ln_problem_narrow_inputs(&a);
    ln_problem_narrow_inputs(&b);
    const char *name = norm_kind_name(norm), *stored = ln_storage_name(storage);
    EXPECT(gpu_run_problem(&a, 3, version, 0) == NULL && gpu_run_problem(&b, 3, version, 0) == NULL,
           "%s norm, %s, backward %d: both runs launched", name, stored, version);
    EXPECT(memcmp(a.dgamma, b.dgamma, a.d * sizeof(float)) == 0 && memcmp(a.dbeta, b.dbeta, a.d * sizeof(float)) == 0,
           "%s norm, %s, backward %d: dgamma and dbeta identical across runs", name, stored, version);
    EXPECT(memcmp(a.dx, b.dx, a.n * a.d * sizeof(float)) == 0, "%s norm, %s, backward %d: dx identical across runs",
           name, stored, version);
    ln_problem_free(&a);
    ln_problem_free(&b);
}

typedef struct {
    int forward, backward;
} VersionPair;

static const char *run_versions(LnProblem *p, void *context)
{
    const VersionPair *pair = context;
    return gpu_run_problem(p, pair->forward, pair->backward, 0);
}

typedef void (*VersionCheck)(LnRunKernels run, void *context, const char *label);

static void check_version_pairs(const VersionPair *pairs, size_t count, VersionCheck check)
{
    for (size_t k = 0; k < count; k++) {
        char label[64];
        snprintf(label, sizeof label, "GPU forward %d, backward %d", pairs[k].forward, pairs[k].backward);
        check(run_versions, (void *)&pairs[k], label);
    }
}

/* Every forward version with backward 2, and backward 1 and 3 after
 * forward 3: each kernel centres its rows exactly. */
static void test_offset_costs_nothing(void)
{
    const VersionPair pairs[] = {
        {1, 2},
        {2, 2},
        {3, 2},
        {3, 1},
        {3, 3},
    };
    check_version_pairs(pairs, sizeof pairs / sizeof pairs[0], expect_offset_costs_nothing);
}

static void expect_overflow_costs_nothing(LnRunKernels run, void *context, const char *label)
{
    const NormKind norms[] = {NORM_LAYER, NORM_RMS};
    for (int k = 0; k < 2; k++) {
        expect_rows_far_from_unit_scale_normalise(run, context, norms[k], label);
        expect_rescaling_is_exact(run, context, norms[k], label);
        expect_constant_huge_rows_keep_eps(run, context, norms[k], label);
    }
    expect_y_fits_where_gamma_xhat_does_not(run, context, label);
}

/* Every forward version, with every backward one. */
static const VersionPair every_forward_and_backward[] = {
    {1, 2},
    {2, 1},
    {3, 2},
    {3, 3},
};

/* Each forward version rescales its own way: float sums in registers,
 * double sums, double Welford states (RMSNorm: double sums). */
static void test_overflow_costs_nothing(void)
{
    check_version_pairs(every_forward_and_backward,
                        sizeof every_forward_and_backward / sizeof every_forward_and_backward[0],
                        expect_overflow_costs_nothing);
}

/* Each version forms its own row sums, where a NaN must stay. */
static void test_nonfinite_rows_stay_in_their_rows(void)
{
    check_version_pairs(every_forward_and_backward,
                        sizeof every_forward_and_backward / sizeof every_forward_and_backward[0],
                        expect_nonfinite_rows_stay_in_their_rows);
}

static void test_rows_too_long_are_refused(NormKind norm)
{
    /* 8193 single floats (misaligned) need more than 1024 threads x 8. */
    const char *name = norm_kind_name(norm);
    LnProblem p = ln_problem_new(2, 8193, 1e-5f);
    p.norm = norm;
    ln_problem_fill_random(&p, 19, 0.0, 1.0);
    const char *forward = gpu_run_problem(&p, 3, 1, 0);
    EXPECT(forward != NULL && strstr(forward, "registers") != NULL, "%s norm: forward 3 refuses d = 8193: %s", name,
           forward != NULL ? forward : "it ran");
    for (int version = 2; version <= LAYERNORM_BACKWARD_GPU_VERSIONS; version++) {
        const char *backward = gpu_run_problem(&p, 1, version, 0);
        EXPECT(backward != NULL && strstr(backward, "registers") != NULL, "%s norm: backward %d refuses d = 8193: %s",
               name, version, backward != NULL ? backward : "it ran");
    }
    const char *missing = gpu_run_problem(&p, LAYERNORM_FORWARD_GPU_VERSIONS + 1, 1, 0);
    EXPECT(missing != NULL && strstr(missing, "no version 4: there are 1 .. 3") != NULL,
           "%s norm: a version after the last is refused: %s", name, missing != NULL ? missing : "it ran");
    EXPECT(gpu_run_problem(&p, 2, 1, 0) == NULL, "%s norm: forward 2 and backward 1 take it", name);
    ln_problem_free(&p);
}

int main(int argc, char **argv)
{
    long rows = (long)max_rows;
    const CliOption options[] = {
        {"--max-rows", CLI_INT, &rows, 1, (double)max_rows, "the most rows of any shape (fewer on the CUDA emulator)"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), "every layer norm kernel version against the CPU");
    max_rows = (size_t)rows;
    if (!cuda_device_available())
        test_skip("no CUDA device");
    char device[256];
    cuda_device_describe(device, sizeof device);
    printf("%s\n", device);
    const NormKind norms[] = {NORM_LAYER, NORM_RMS};
    const LnStorage storages[] = {STORAGE_FLOAT32, STORAGE_FP16, STORAGE_BF16};
    for (int k = 0; k < 2; k++) {
        for (int t = 0; t < 3; t++) {
            test_every_version_on_every_shape(norms[k], storages[t]);
            test_blocks_take_many_rows(norms[k], storages[t]);
            for (int b = 2; b <= LAYERNORM_BACKWARD_GPU_VERSIONS; b++)
                test_backward_is_deterministic(norms[k], storages[t], b);
        }
        test_rows_too_long_are_refused(norms[k]);
    }
    test_offset_costs_nothing();
    test_overflow_costs_nothing();
    test_nonfinite_rows_stay_in_their_rows();
    return test_finish();
}
