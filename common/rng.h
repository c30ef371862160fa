/* Deterministic random numbers: every experiment in the book is reproducible
 * from its seed, on any machine, so the numbers printed in the book are the
 * numbers a reader gets.
 *
 * Generator: xoshiro256** (Blackman and Vigna), seeded through splitmix64 so
 * that nearby seeds give unrelated streams. Not for cryptography. */
#ifndef COMMON_RNG_H
#define COMMON_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

typedef struct {
    uint64_t state[4];
    double spare_normal; /* Box-Muller makes normals in pairs: the second waits here */
    int has_spare_normal;
} Rng;

void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next_u64(Rng *rng);
/* Uniform in [0, 1), with all 53 bits of a double's mantissa random. */
double rng_uniform(Rng *rng);
/* Uniform in [lo, hi), lo < hi. */
double rng_uniform_range(Rng *rng, double lo, double hi);
/* Uniform integer in [0, bound), without modulo bias; bound > 0. */
uint64_t rng_below(Rng *rng, uint64_t bound);
/* Standard normal (mean 0, standard deviation 1). */
double rng_normal(Rng *rng);

/* The f32 fills draw in double and round to float; a value just below hi can
 * round to the float nearest hi. */
void rng_fill_uniform_f32(Rng *rng, float *out, size_t n, double lo, double hi);
void rng_fill_uniform_f64(Rng *rng, double *out, size_t n, double lo, double hi);
void rng_fill_normal_f32(Rng *rng, float *out, size_t n, double mean, double stddev);
void rng_fill_normal_f64(Rng *rng, double *out, size_t n, double mean, double stddev);

COMMON_END_C

#endif
