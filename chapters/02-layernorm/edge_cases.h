/* The edge cases of layer norm, each a function that runs the float
 * kernels (or the double reference) on one hard input and records what it
 * checked. The program prints them as a table (--edge-cases); the tests
 * run each one and fail when it does. */
#ifndef CHAPTERS_02_LAYERNORM_EDGE_CASES_H
#define CHAPTERS_02_LAYERNORM_EDGE_CASES_H

#include <stdbool.h>

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
    void (*run)(EdgeChecks *out); /* appends its checks to out */
} EdgeCase;

extern const EdgeCase edge_cases[];
extern const int edge_case_count;

/* Run every case; true when all checks held. */
bool edge_cases_run_all(EdgeChecks *out);

#endif
