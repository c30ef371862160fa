/* The accuracy goal of the storage types, measured: layer norm on random
 * rows stored in fp16 or bf16, y and dx against the float64 result on the
 * same stored inputs, and the table `layernorm storage` prints, with
 * PyTorch's figures on the same inputs beside ours. */
#ifndef CHAPTERS_02_LAYERNORM_STORAGE_ACCURACY_H
#define CHAPTERS_02_LAYERNORM_STORAGE_ACCURACY_H

#include <stdbool.h>
#include <stdio.h>

#include "chapters/02-layernorm/rmsnorm.h"
#include "chapters/02-layernorm/storage.h"
#include "common/table.h"

COMMON_BEGIN_C

/* Rows x = offset + N(0, 1), dy ~ N(0, 1), from `seed` (ln_problem_fill_random),
 * both rounded to the storage type; gamma and beta float32. */
typedef struct {
    long n, d, seed;
    double offset;
} StorageCase;

/* The rstd the backward pass reads: the forward's float32 one (what the
 * kernels save), or that rounded to bf16 (what goes wrong if the cache is
 * stored like the activations). */
typedef enum { RSTD_SAVED_FLOAT32, RSTD_SAVED_BF16 } RstdSaving;

typedef struct {
    StorageAccuracy y, dx;
} StoredResultsAccuracy;

/* Run one case in `storage` (forward, backward from the saved rstd, y and
 * dx rounded to storage) and measure y and dx. */
StoredResultsAccuracy storage_case_accuracy(const StorageCase *c, NormKind norm, LnStorage storage, RstdSaving saving);

/* The goal: max error at most 1 ulp, and at least 99.9% correctly rounded. */
bool storage_accuracy_meets_goal(const StorageAccuracy *a);

/* The table of `layernorm storage`. */
void storage_accuracy_print(FILE *out, TableFormat format);

COMMON_END_C

#endif
