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

/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3", SC11), the generator of cuRAND and of PyTorch on the
 * GPU: a keyed function of a 128-bit counter, with no state. The random
 * numbers of (seed, row, draw) are the function at that counter: any thread
 * computes any of them, so they do not depend on how rows are split among
 * threads, and the GPU computes the same ones (HOST_DEVICE). */
typedef struct {
    uint32_t word[4];
} Philox4x32;

HOST_DEVICE static inline uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t product = (uint64_t)a * b;
    *hi = (uint32_t)(product >> 32);
    return (uint32_t)product;
}

HOST_DEVICE static inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t key0, uint32_t key1)
{
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = philox_mulhilo(0xD2511F53u, counter.word[0], &hi0);
        uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, counter.word[2], &hi1);
        Philox4x32 next = {
            {hi1 ^ counter.word[1] ^ key0, lo1, hi0 ^ counter.word[3] ^ key1, lo0}
        };
        counter = next;
        key0 += 0x9E3779B9u; /* the key schedule: Weyl sequences */
        key1 += 0xBB67AE85u;
    }
    return counter;
}

/* A uniform double in [0, 1), all 53 bits random, for the counter
 * (stream, index, lane) under the key seed: the 4 words of the counter are
 * lane, index and the two halves of stream. */
HOST_DEVICE static inline double philox_uniform(uint64_t seed, uint64_t stream, uint32_t index, uint32_t lane)
{
    Philox4x32 counter = {
        {lane, index, (uint32_t)stream, (uint32_t)(stream >> 32)}
    };
    Philox4x32 out = philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32));
    uint64_t bits = ((uint64_t)out.word[0] << 32 | out.word[1]) >> 11;
    return (double)bits * 0x1.0p-53;
}

COMMON_END_C

#endif
