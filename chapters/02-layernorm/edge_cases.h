/* The edge cases of layer norm and RMSNorm, each a function that runs the
 * float kernels (or the double reference) of one norm on one hard input
 * and records what it checked. The program prints them as a table
 * (edge-cases [--norm rms]); the tests run each one and fail when it does. */
#ifndef CHAPTERS_02_LAYERNORM_EDGE_CASES_H
#define CHAPTERS_02_LAYERNORM_EDGE_CASES_H

#include <stdbool.h>

#include "chapters/02-layernorm/rmsnorm.h"

enum { EDGE_MAX_CHECKS = 24 };

typedef struct {
    const char *name; /* the case */
    char shape[32];
    const char *check; /* what must hold */
    char measured[64];
    char allowed[48];
    bool ok;
} EdgeCheck;

typedef struct {
    EdgeCheck checks[EDGE_MAX_CHECKS];
    int count;
} EdgeChecks;

typedef struct {
    const char *name;
    NormKind norm;
    void (*run)(EdgeChecks *out, NormKind norm); /* appends its checks to out */
} EdgeCase;

extern const EdgeCase edge_cases[];
extern const int edge_case_count;

/* Run every case of `norm`; true when all checks held. */
bool edge_cases_run_all(NormKind norm, EdgeChecks *out);

#endif
