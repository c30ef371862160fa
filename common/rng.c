#include "common/rng.h"

#include <math.h>

/* splitmix64 (Steele, Lea and Flood): one multiply-xorshift mix per step.
 * Used only to turn a seed into a full xoshiro state, so that seeds 1 and 2
 * give unrelated streams and no seed gives the all-zero state. */
static uint64_t splitmix64_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void rng_seed(Rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        rng->state[i] = splitmix64_next(&x);
    }
    rng->spare_normal = 0.0;
    rng->has_spare_normal = 0;
}

static uint64_t rotate_left(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** 1.0, as in the reference implementation by Blackman and Vigna. */
uint64_t rng_next_u64(Rng *rng)
{
    uint64_t *s = rng->state;
    const uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

double rng_uniform(Rng *rng)
{
    /* The top 53 bits (the best ones) scaled by 2^-53: every value k * 2^-53
     * in [0, 1) is equally likely. */
    return (double)(rng_next_u64(rng) >> 11) * 0x1.0p-53;
}

double rng_uniform_range(Rng *rng, double lo, double hi)
{
    double x = lo + (hi - lo) * rng_uniform(rng);
    /* Rounding the sum can land on hi itself (e.g. lo = 1, hi = 2 and the
     * largest draw); the interval is half-open, so step back below it. */
    return x < hi ? x : nextafter(hi, lo);
}

uint64_t rng_below(Rng *rng, uint64_t bound)
{
    /* Rejection: 2^64 mod bound values at the bottom of the range would make
     * the small results of `x % bound` more likely than the others; draw again
     * when one of them comes up (at most half the time, for any bound).
     * -bound % bound is 2^64 mod bound in unsigned arithmetic. */
    const uint64_t threshold = -bound % bound;
    for (;;) {
        uint64_t x = rng_next_u64(rng);
        if (x >= threshold) {
            return x % bound;
        }
    }
}

double rng_normal(Rng *rng)
{
    if (rng->has_spare_normal) {
        rng->has_spare_normal = 0;
        return rng->spare_normal;
    }
    /* Box-Muller: a radius from one uniform, an angle from another, and two
     * independent normals from the one point. 1 - u lies in (0, 1], so the
     * logarithm is finite. */
    const double two_pi = 6.283185307179586476925286766559;
    double radius = sqrt(-2.0 * log(1.0 - rng_uniform(rng)));
    double angle = two_pi * rng_uniform(rng);
    rng->spare_normal = radius * sin(angle);
    rng->has_spare_normal = 1;
    return radius * cos(angle);
}

void rng_fill_uniform_f32(Rng *rng, float *out, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (float)rng_uniform_range(rng, lo, hi);
    }
}

void rng_fill_uniform_f64(Rng *rng, double *out, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = rng_uniform_range(rng, lo, hi);
    }
}

void rng_fill_normal_f32(Rng *rng, float *out, size_t n, double mean, double stddev)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (float)(mean + stddev * rng_normal(rng));
    }
}

void rng_fill_normal_f64(Rng *rng, double *out, size_t n, double mean, double stddev)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = mean + stddev * rng_normal(rng);
    }
}
