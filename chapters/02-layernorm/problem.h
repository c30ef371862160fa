/* One layer-norm problem: the inputs, the float results of the CPU (or a
 * GPU) kernels, and their comparison with the double reference. The
 * program, its tests and the GPU validation all go through here, so they
 * use the same data and the same tolerances. */
#ifndef CHAPTERS_02_LAYERNORM_PROBLEM_H
#define CHAPTERS_02_LAYERNORM_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chapters/02-layernorm/rmsnorm.h"
#include "chapters/02-layernorm/storage.h"
#include "common/check.h"
#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef struct {
    size_t n, d;
    float eps;
    NormKind norm;                /* NORM_LAYER unless set; RMSNorm leaves beta, mean and dbeta alone */
    LnStorage storage;            /* of x, dy, y and dx: float32 unless set; the rest is always float32 */
    float *x, *gamma, *beta, *dy; /* inputs: x and dy are n x d, gamma and beta d */
    float *y, *mean, *rstd;       /* forward: y, and the cache (one mean and rstd per row) */
    float *dx, *dgamma, *dbeta;   /* backward */
} LnProblem;

/* Stop with one line (exit 2) if an n x d problem asked for on the command
 * line has more than 2^28 elements, which keeps each n x d array of floats
 * within 1 GiB. */
void ln_problem_check_size(long n, long d);
/* Zeroed arrays for an n x d problem. */
LnProblem ln_problem_new(size_t n, size_t d, float eps);
/* x ~ N(x_mean, x_std^2), gamma ~ N(1, 0.1^2), beta ~ N(0, 0.1^2) (layer
 * norm only), dy ~ N(0, 1), from `seed`. */
void ln_problem_fill_random(LnProblem *p, uint64_t seed, double x_mean, double x_std);
/* Read DIR/x.npy (n x d, n >= 0, d >= 1), DIR/dy.npy (n x d), DIR/gamma.npy
 * (d) and, for layer norm, DIR/beta.npy (d). x and dy are float32 or fp16
 * ('<f2'), or with NPY_BF16_BITS bf16 bits ('<u2', '<i2'), both of one
 * storage type, which p->storage records; gamma and beta are float32. A
 * missing file, another dtype or a shape that does not fit is one line on
 * stderr and exit 2. */
LnProblem ln_problem_load(const char *dir, NormKind norm, float eps, NpyFloatEncoding encoding);
/* Round x and dy (inputs), or y and dx (results), to p->storage. */
void ln_problem_narrow_inputs(LnProblem *p);
void ln_problem_narrow_results(LnProblem *p);
/* The results of p->norm, as a list for messages: "y, rstd, dx, dgamma"
 * for RMSNorm, with mean and dbeta too for layer norm. */
const char *ln_problem_result_names(NormKind norm);
/* Write those results to DIR (NAME.npy each), y and dx in p->storage (bf16
 * as int16 bits), the rest float32, creating DIR if it does not exist (but
 * not its parents); a failed write is one line on stderr and exit 1. */
void ln_problem_save_results(const LnProblem *p, const char *dir);
/* The same for the inputs, x, gamma, beta (layer norm) and dy: what `apply
 * --load` reads, for another program to run on the same numbers. */
void ln_problem_save_inputs(const LnProblem *p, const char *dir);
/* FNV-1a (64 bits) of x's float32 bytes: the scripts that record PyTorch's
 * results on the same inputs compute it too, so a record made on other
 * inputs is known to be stale. */
uint64_t ln_problem_x_checksum(const LnProblem *p);
void ln_problem_free(LnProblem *p);

/* The CPU float kernels of p->norm: forward, then backward from the cache
 * (results in float32: ln_problem_narrow_results rounds them to storage). */
void ln_problem_run_cpu(LnProblem *p);
/* The backward pass alone, from the mean and rstd in p. */
void ln_problem_backward_cpu(LnProblem *p);

typedef struct {
    size_t n, d;
    double *y, *mean, *rstd, *dx, *dgamma, *dbeta;
} LnReference;

/* The double reference on the same (float) inputs. */
LnReference ln_reference_compute(const LnProblem *p);
void ln_reference_free(LnReference *ref);

typedef struct {
    NormKind norm; /* for RMSNorm, mean and dbeta are not outputs, and compare zeros */
    CloseReport y, mean, rstd, dx, dgamma, dbeta;
    bool ok;
} LnComparison;

/* The float results of p against the reference, with the tolerances for
 * inputs of unit scale plus what the float mean's rounding costs at the
 * row's condition number (see problem.c for each one's reason). */
LnComparison ln_compare(const LnProblem *p, const LnReference *ref);
/* The largest |float - reference| of y, dx and dgamma (NaN if any is NaN). */
typedef struct {
    double y, dx, dgamma;
} LnMaxErrors;
LnMaxErrors ln_max_errors(const LnProblem *p, const LnReference *ref);

/* Runs some kernels on p's inputs, results into p; NULL, or why it refused. */
typedef const char *(*LnRunKernels)(LnProblem *p, void *context);

/* x = offset + N(0, 1) on a 64 x 1024 layer-norm problem (the same inputs
 * for every caller), run through `run`, against the double reference on
 * the same float inputs. *refused is run's answer. */
LnMaxErrors ln_errors_at_offset(double offset, LnRunKernels run, void *context, const char **refused);

/* One line per output, as close_report_print; returns comparison->ok. */
bool ln_comparison_print(FILE *out, const char *label, const LnComparison *comparison);

COMMON_END_C

#endif
