/* Every CUDA kernel version against the double reference on the shapes of
 * chapters/02-layernorm/gpu.c; backward 2 deterministic; a row too long
 * for the register-resident versions refused, not mangled. */
#include <stdio.h>
#include <string.h>

#include "chapters/02-layernorm/gpu.h"
#include "common/cli.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/layernorm.h"
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

static void test_every_version_on_every_shape(void)
{
    for (int s = 0; s < gpu_check_shape_count; s++) {
        GpuCheckShape shape = gpu_check_shapes[s];
        shape.n = rows_at_most(shape.n);
        for (int f = 1; f <= LAYERNORM_FORWARD_GPU_VERSIONS; f++)
            for (int b = 1; b <= LAYERNORM_BACKWARD_GPU_VERSIONS; b++)
                EXPECT(gpu_check_versions(&shape, f, b, 17, stdout), "forward %d, backward %d, %zu x %zu (%s)", f, b,
                       shape.n, shape.d, shape.why);
    }
}

/* No floating-point atomics: two runs give the same bits. */
static void test_backward_is_deterministic(void)
{
    size_t n = rows_at_most(4097);
    LnProblem a = ln_problem_new(n, 768, 1e-5f), b = ln_problem_new(n, 768, 1e-5f);
    ln_problem_fill_random(&a, 18, 0.0, 1.0);
    ln_problem_fill_random(&b, 18, 0.0, 1.0);
    EXPECT(gpu_run_problem(&a, 3, 2, 0) == NULL && gpu_run_problem(&b, 3, 2, 0) == NULL, "both runs launched");
    EXPECT(memcmp(a.dgamma, b.dgamma, a.d * sizeof(float)) == 0 && memcmp(a.dbeta, b.dbeta, a.d * sizeof(float)) == 0,
           "dgamma and dbeta identical across runs");
    EXPECT(memcmp(a.dx, b.dx, a.n * a.d * sizeof(float)) == 0, "dx identical across runs");
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

/* Every forward version with backward 2, and backward 1 after forward 3:
 * each kernel centres its rows exactly. */
static void test_offset_costs_nothing(void)
{
    const VersionPair pairs[] = {
        {1, 2},
        {2, 2},
        {3, 2},
        {3, 1},
    };
    check_version_pairs(pairs, sizeof pairs / sizeof pairs[0], expect_offset_costs_nothing);
}

static void expect_layer_norm_overflow_costs_nothing(LnRunKernels run, void *context, const char *label)
{
    expect_huge_rows_normalise(run, context, NORM_LAYER, label);
    expect_rescaling_is_exact(run, context, NORM_LAYER, label);
}

/* Every forward version (each rescales its own way: float sums in
 * registers, double sums, double Welford states), with both backward ones. */
static void test_overflow_costs_nothing(void)
{
    const VersionPair pairs[] = {
        {1, 2},
        {2, 1},
        {3, 2},
    };
    check_version_pairs(pairs, sizeof pairs / sizeof pairs[0], expect_layer_norm_overflow_costs_nothing);
}

static void test_rows_too_long_are_refused(void)
{
    /* 8193 single floats (misaligned) need more than 1024 threads x 8. */
    LnProblem p = ln_problem_new(2, 8193, 1e-5f);
    ln_problem_fill_random(&p, 19, 0.0, 1.0);
    const char *forward = gpu_run_problem(&p, 3, 1, 0);
    const char *backward = gpu_run_problem(&p, 1, 2, 0);
    EXPECT(forward != NULL && strstr(forward, "registers") != NULL, "forward 3 refuses d = 8193: %s", forward);
    EXPECT(backward != NULL && strstr(backward, "registers") != NULL, "backward 2 refuses d = 8193: %s", backward);
    const char *missing = gpu_run_problem(&p, LAYERNORM_FORWARD_GPU_VERSIONS + 1, 1, 0);
    EXPECT(missing != NULL && strstr(missing, "no version 4: there are 1 .. 3") != NULL,
           "a version after the last is refused: %s", missing);
    EXPECT(gpu_run_problem(&p, 2, 1, 0) == NULL, "forward 2 and backward 1 take it");
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
    test_every_version_on_every_shape();
    test_backward_is_deterministic();
    test_rows_too_long_are_refused();
    test_offset_costs_nothing();
    test_overflow_costs_nothing();
    return test_finish();
}
