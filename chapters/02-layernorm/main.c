/* layernorm: the program of chapter 2. With no mode flag it runs the float
 * forward and backward passes on random (or loaded) inputs and checks them
 * against the double reference; each mode flag prints one of the chapter's
 * tables. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "chapters/02-layernorm/analysis.h"
#include "chapters/02-layernorm/bench_cpu.h"
#include "chapters/02-layernorm/edge_cases.h"
#include "chapters/02-layernorm/gradcheck.h"
#include "chapters/02-layernorm/problem.h"
#include "chapters/02-layernorm/stability.h"
#include "common/cli.h"
#include "common/results.h"
#include "common/table.h"
#ifdef HAVE_CUDA
#include "chapters/02-layernorm/gpu.h"
#endif

typedef struct {
    bool gradcheck, edge_cases, complexity, cache_memory, bench, quick, gpu, markdown;
    const char *failure, *load, *save, *results, *commit, *show_results;
    long n, d, seed, kernel;
    double eps;
} Options;

static TableFormat table_format(const Options *o)
{
    return o->markdown ? TABLE_MARKDOWN : TABLE_TEXT;
}

/* The default mode: float kernels against the double reference. */
static int run_and_check(const Options *o)
{
    LnProblem p;
    if (o->load != NULL) {
        p = ln_problem_load(o->load, (float)o->eps);
        printf("%zu x %zu from %s, eps %g\n", p.n, p.d, o->load, o->eps);
    } else {
        p = ln_problem_new((size_t)o->n, (size_t)o->d, (float)o->eps);
        ln_problem_fill_random(&p, (uint64_t)o->seed, 0.0, 1.0);
        printf("%zu x %zu, random inputs (seed %ld), eps %g\n", p.n, p.d, o->seed, o->eps);
    }
    ln_problem_run_cpu(&p);
    LnReference ref = ln_reference_compute(&p);
    LnComparison comparison = ln_compare(&p, &ref);
    bool ok = ln_comparison_print(stdout, "cpu float vs double reference:", &comparison);
    if (o->save != NULL) {
        ln_problem_save(&p, o->save);
        printf("saved x, gamma, beta, dy, y, mean, rstd, dx, dgamma, dbeta to %s/*.npy\n", o->save);
    }
    ln_reference_free(&ref);
    ln_problem_free(&p);
    return ok ? 0 : 1;
}

// ANCHOR: plan_the_gradient_checks
/* Which check runs on which shape: every element on small shapes, random
 * directions on a transformer-sized batch (B x T x D = 4 x 512 x 1024). */
typedef struct {
    GradCheckMethod method;
    size_t n, d;
} GradCheckPlan;

static const GradCheckPlan gradcheck_plan[] = {
    {CHECK_NODE_BY_NODE,          4 * 512, 1024},
    {CHECK_CENTRAL_EVERY_ELEMENT, 3,       5   },
    {CHECK_CENTRAL_EVERY_ELEMENT, 8,       64  },
    {CHECK_COMPLEX_EVERY_ELEMENT, 8,       64  },
    {CHECK_DIRECTIONAL,           4 * 512, 1024},
    {CHECK_COMPLEX_DIRECTIONAL,   4 * 512, 1024},
};
enum { GRADCHECK_DIRECTIONS = 4 };
// ANCHOR_END: plan_the_gradient_checks

static int run_gradcheck(const Options *o)
{
    const char *headers[] = {"check",         "shape",        "gradient",         "compared", "max abs error",
                             "max rel error", "of tolerance", "loss evaluations", "time"};
    Table *table = table_new(9, headers, "lllrrrrrr");
    bool ok = true;
    for (size_t i = 0; i < sizeof gradcheck_plan / sizeof gradcheck_plan[0]; i++) {
        const GradCheckPlan *plan = &gradcheck_plan[i];
        GradProblem p = grad_problem_random(plan->n, plan->d, 1e-5, (uint64_t)o->seed);
        for (int t = 0; t < TENSOR_COUNT; t++) {
            GradCheckResult r = grad_check(&p, plan->method, (GradTensor)t, GRADCHECK_DIRECTIONS, (uint64_t)o->seed);
            ok = ok && r.report.ok;
            table_cell(table, "%s", grad_check_method_name(r.method));
            table_cell(table, "%zu x %zu", plan->n, plan->d);
            table_cell(table, "%s", grad_tensor_name(r.tensor));
            table_cell(table, "%zu %s", r.report.count,
                       plan->method == CHECK_DIRECTIONAL || plan->method == CHECK_COMPLEX_DIRECTIONAL ? "directions"
                                                                                                      : "values");
            table_cell(table, "%.1e", r.report.max_abs_error);
            table_cell(table, "%.1e", r.report.max_rel_error);
            table_cell(table, "%s%.2g%%", r.report.ok ? "" : "FAIL ", 100.0 * r.report.tolerance_used);
            table_cell(table, "%zu", r.evaluations);
            table_cell(table, "%.3f s", r.seconds);
        }
        grad_problem_free(&p);
    }
    table_print(table, stdout, table_format(o));
    table_free(table);
    return ok ? 0 : 1;
}

static int run_edge_cases(const Options *o)
{
    static EdgeChecks checks;
    bool ok = edge_cases_run_all(&checks);
    const char *headers[] = {"case", "shape", "check", "measured", "allowed", "result"};
    Table *table = table_new(6, headers, "llllll");
    for (int i = 0; i < checks.count; i++) {
        const EdgeCheck *c = &checks.checks[i];
        table_cell(table, "%s", c->name);
        table_cell(table, "%s", c->shape);
        table_cell(table, "%s", c->check);
        table_cell(table, "%s", c->measured);
        table_cell(table, "%s", c->allowed);
        table_cell(table, "%s", c->ok ? "ok" : "FAIL");
    }
    table_print(table, stdout, table_format(o));
    table_free(table);
    return ok ? 0 : 1;
}

/* Flags that only make sense with another one. */
static void require(bool used, bool with, const char *flag, const char *needs)
{
    if (used && !with)
        cli_fail("%s needs %s", flag, needs);
}

int main(int argc, char **argv)
{
    Options o = {.n = 64, .d = 1024, .seed = 1, .eps = 1e-5};
    const CliOption options[] = {
        {"--gradcheck",    CLI_FLAG,   &o.gradcheck,    0,     0,        "check the backward pass three ways, in double"                            },
        {"--edge-cases",   CLI_FLAG,   &o.edge_cases,   0,     0,        "run the edge cases and print what each checked"                           },
        {"--complexity",   CLI_FLAG,   &o.complexity,   0,     0,        "print bytes and FLOPs per element, unfused vs fused"                      },
        {"--cache-memory", CLI_FLAG,   &o.cache_memory, 0,     0,        "print what caching xhat costs in real models"                             },
        {"--failure",      CLI_STRING, &o.failure,      0,     0,
         "show a numerical failure mode: zero-variance, huge-mean, tiny-eps, overflow, rsqrt"                                                       },
        {"--bench",        CLI_FLAG,   &o.bench,        0,     0,        "measure throughput against memcpy (with --gpu: on the GPU)"               },
        {"--quick",        CLI_FLAG,   &o.quick,        0,     0,        "with --bench: fewer timed runs"                                           },
        {"--gpu",          CLI_FLAG,   &o.gpu,          0,     0,        "validate the CUDA kernels against the double reference (on --n x --d too)"},
        {"--kernel",       CLI_INT,    &o.kernel,       0,     3,        "with --gpu: only kernel version N (0: all)"                               },
        {"--results",      CLI_STRING, &o.results,      0,     0,        "with --gpu --bench: write the results table to this file"                 },
        {"--commit",       CLI_STRING, &o.commit,       0,     0,        "with --gpu --bench: the commit to stamp (else $GIT_COMMIT)"               },
        {"--show-results", CLI_STRING, &o.show_results, 0,     0,        "print a results file, or say there is none"                               },
        {"--load",         CLI_STRING, &o.load,         0,     0,        "read x, gamma, beta, dy (.npy, float32) from this directory"              },
        {"--save",         CLI_STRING, &o.save,         0,     0,        "write inputs and results (.npy) to this directory"                        },
        {"--n",            CLI_INT,    &o.n,            1,     1 << 24,  "rows"                                                                     },
        {"--d",            CLI_INT,    &o.d,            1,     1 << 20,  "row length (the normalised dimension)"                                    },
        {"--eps",          CLI_DOUBLE, &o.eps,          1e-30, 1.0,      "epsilon added to the variance"                                            },
        {"--seed",         CLI_INT,    &o.seed,         0,     1L << 62, "random seed"                                                              },
        {"--markdown",     CLI_FLAG,   &o.markdown,     0,     0,        "print tables as Markdown"                                                 },
    };
    cli_parse(argc, argv, options, sizeof options / sizeof options[0],
              "layer norm forward and backward, gradient checks, edge cases and benchmarks");
    int cpu_modes = o.gradcheck + o.edge_cases + o.complexity + o.cache_memory + (o.failure != NULL) +
                    (o.bench && !o.gpu) + (o.show_results != NULL);
    if (cpu_modes + o.gpu > 1)
        cli_fail("choose one of --gradcheck, --edge-cases, --complexity, --cache-memory, --failure, --bench, --gpu, "
                 "--show-results");
    if ((double)o.n * (double)o.d > (double)(1L << 28))
        cli_fail("--n x --d = %ld x %ld is more than 2^28 elements", o.n, o.d);
    require(o.quick, o.bench, "--quick", "--bench");
    require(o.kernel != 0, o.gpu, "--kernel", "--gpu");
    require(o.results != NULL || o.commit != NULL, o.gpu && o.bench, "--results and --commit", "--gpu --bench");
    require(o.load != NULL || o.save != NULL, cpu_modes == 0, "--load and --save", "the default run or --gpu");

    if (o.gradcheck)
        return run_gradcheck(&o);
    if (o.edge_cases)
        return run_edge_cases(&o);
    if (o.complexity) {
        complexity_print(stdout, table_format(&o));
        return 0;
    }
    if (o.cache_memory) {
        cache_memory_print(stdout, table_format(&o));
        return 0;
    }
    if (o.show_results != NULL) {
        results_show(o.show_results);
        return 0;
    }
    if (o.failure != NULL) {
        if (!failure_mode_print(o.failure, stdout, table_format(&o)))
            cli_fail("--failure expects one of %s, got '%s'", failure_mode_names, o.failure);
        return 0;
    }
    if (o.gpu) {
#ifdef HAVE_CUDA
        GpuOptions g = {.n = (size_t)o.n,
                        .d = (size_t)o.d,
                        .eps = (float)o.eps,
                        .seed = (uint64_t)o.seed,
                        .kernel = (int)o.kernel,
                        .bench = o.bench,
                        .quick = o.quick,
                        .load = o.load,
                        .save = o.save,
                        .results = o.results,
                        .commit = o.commit,
                        .format = table_format(&o)};
        return gpu_main(&g);
#else
        cli_fail("--gpu: this program was built without CUDA");
#endif
    }
    if (o.bench) {
        bench_cpu_print(stdout, table_format(&o), o.quick);
        return 0;
    }
    return run_and_check(&o);
}
