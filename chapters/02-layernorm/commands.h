/* The subcommands of `layernorm` (main.c lists them), one function each:
 * it parses its own options, runs the chapter's code and prints. */
#ifndef CHAPTERS_02_LAYERNORM_COMMANDS_H
#define CHAPTERS_02_LAYERNORM_COMMANDS_H

#include "chapters/02-layernorm/problem.h"
#include "common/cli.h"
#include "common/npy.h"

CliCommandFunction run_command, apply_command, gradcheck_command, edge_cases_command, complexity_command,
    cache_memory_command, storage_command, failure_command, bench_command;

/* The random problem of `run` and `gpu-check`: --n N --d D --seed S --eps E
 * --offset M --scale S,
 * the first RANDOM_PROBLEM_OPTIONS entries of their option tables, which
 * random_problem_options fills, pointing at *args and its defaults. */
typedef struct {
    long n, d, seed;
    double eps;
    double offset, scale; /* x ~ offset + scale N(0, 1) */
} RandomProblemArgs;

enum { RANDOM_PROBLEM_OPTIONS = 6 };

void random_problem_options(CliOption *options, RandomProblemArgs *args);

/* The problem of a norm, once parsed and its size checked
 * (ln_problem_check_size). */
LnProblem random_problem_new(const RandomProblemArgs *args, NormKind norm);

/* The .npy interface, shared by `apply` and `gpu-apply`: the options
 * --load DIR --save DIR [--eps E] [--norm layer|rms] [--dtype auto|bf16],
 * parsed (both directories required; the norm NORM_LAYER unless given; the
 * storage type of x and dy their files' own unless --dtype bf16 says that
 * 16-bit integers are bf16 bits). */
typedef struct {
    const char *load, *save;
    double eps;
    NormKind norm;
    NpyFloatEncoding encoding;
} ApplyArgs;

ApplyArgs apply_parse(int argc, char **argv);

/* Load the inputs, compute(p) fills the results in float32, rounded then to
 * the inputs' storage type, check them against the
 * double reference (lines labelled `label`) and save them. The exit status:
 * 0 on any valid input, 1 only when a result is outside ln_compare's bound,
 * which counts what float's conditioning costs: a defect (it is saved all
 * the same). */
int apply_run(const ApplyArgs *args, const char *label, void (*compute)(LnProblem *p));

#endif
