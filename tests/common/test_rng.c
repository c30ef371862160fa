#include <math.h>
#include <stdint.h>

#include "common/alloc.h"
#include "common/rng.h"
#include "common/testing.h"

/* Statistical checks below allow 5 standard errors: a correct generator
 * fails one with probability under 1e-6, and with fixed seeds the outcome
 * never changes from run to run anyway. */
enum { SAMPLES = 1000000 };
static const double SIGMAS = 5.0;

static void test_published_vectors(void)
{
    /* xoshiro256** from the state {1, 2, 3, 4}: the reference outputs that
     * implementations check against (e.g. Rust's rand_xoshiro). */
    Rng rng = {
        .state = {1, 2, 3, 4}
    };
    const uint64_t expected[] = {11520u,
                                 0u,
                                 1509978240u,
                                 1215971899390074240u,
                                 1216172134540287360u,
                                 607988272756665600u,
                                 16172922978634559625u,
                                 8476171486693032832u,
                                 10595114339597558777u,
                                 2904607092377533576u};
    for (int i = 0; i < 10; i++) {
        uint64_t got = rng_next_u64(&rng);
        EXPECT(got == expected[i], "xoshiro256** output %d is %llu, the reference says %llu", i,
               (unsigned long long)got, (unsigned long long)expected[i]);
    }
    /* splitmix64 from 1234567: its published first outputs become the state. */
    const uint64_t splitmix[] = {6457827717110365317u, 3203168211198807973u, 9817491932198370423u,
                                 4593380528125082431u};
    rng_seed(&rng, 1234567);
    for (int i = 0; i < 4; i++) {
        EXPECT(rng.state[i] == splitmix[i], "seeded state word %d is splitmix64 output %d", i, i);
    }
}

static void test_determinism(void)
{
    Rng a, b, c;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    rng_seed(&c, 43);
    int same = 0, same_as_other_seed = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rng_next_u64(&a);
        same += x == rng_next_u64(&b);
        same_as_other_seed += x == rng_next_u64(&c);
    }
    EXPECT(same == 1000, "the same seed gives the same stream (%d of 1000 equal)", same);
    EXPECT(same_as_other_seed == 0, "seed 43 gives another stream (%d of 1000 equal)", same_as_other_seed);

    /* Reseeding must also drop the cached second Box-Muller normal. */
    rng_seed(&a, 7);
    double first = rng_normal(&a);
    rng_seed(&a, 7);
    EXPECT(rng_normal(&a) == first, "reseeding restarts the normals, spare included");
}

static void test_uniform(void)
{
    Rng rng;
    rng_seed(&rng, 1);
    double sum = 0, lowest = 1, highest = 0;
    for (int i = 0; i < SAMPLES; i++) {
        double u = rng_uniform(&rng);
        sum += u;
        lowest = fmin(lowest, u);
        highest = fmax(highest, u);
    }
    EXPECT(lowest >= 0 && highest < 1, "uniforms lie in [0, 1): min %g, max %.17g", lowest, highest);
    /* The mean of n uniforms has standard error sqrt(1/12 / n). */
    double mean = sum / SAMPLES, standard_error = sqrt(1.0 / 12.0 / SAMPLES);
    EXPECT(fabs(mean - 0.5) <= SIGMAS * standard_error, "mean of %d uniforms %.6f is within 5 sigma of 0.5", SAMPLES,
           mean);

    double range[1000];
    rng_fill_uniform_f64(&rng, range, 1000, -3.0, -2.5);
    int inside = 0;
    for (int i = 0; i < 1000; i++) {
        inside += range[i] >= -3.0 && range[i] < -2.5;
    }
    EXPECT(inside == 1000, "rng_fill_uniform_f64 stays in [-3, -2.5) (%d of 1000)", inside);
    float narrow[1000];
    rng_fill_uniform_f32(&rng, narrow, 1000, 10.0, 11.0);
    inside = 0;
    for (int i = 0; i < 1000; i++) {
        inside += narrow[i] >= 10.0f && narrow[i] <= 11.0f;
    }
    EXPECT(inside == 1000, "rng_fill_uniform_f32 stays in [10, 11] (%d of 1000)", inside);
}

/* The inverse of an odd number modulo 2^64, by Newton's iteration (each step
 * doubles the number of correct low bits: 3, 6, 12, 24, 48, 96). */
static uint64_t inverse_mod_2_64(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 5; i++) {
        x *= 2 - a * x;
    }
    return x;
}

/* A state whose next output is `output`: xoshiro256** returns
 * rotl(s[1] * 5, 7) * 9, and 5 and 9 are invertible modulo 2^64. */
static Rng rng_about_to_return(uint64_t output)
{
    uint64_t rotated = output * inverse_mod_2_64(9);
    uint64_t s1 = ((rotated >> 7) | (rotated << 57)) * inverse_mod_2_64(5);
    return (Rng){
        .state = {1, s1, 3, 4}
    };
}

static void test_uniform_range_is_half_open(void)
{
    /* The largest uniform, 1 - 2^-53, makes 1 + (2 - 1) * u round to 2. */
    Rng rng = rng_about_to_return(~(uint64_t)0 << 11);
    Rng copy = rng;
    EXPECT(rng_uniform(&copy) == 1.0 - 0x1.0p-53, "the crafted state gives the largest uniform");
    double x = rng_uniform_range(&rng, 1.0, 2.0);
    EXPECT(x < 2.0, "rng_uniform_range(1, 2) stays below 2 at the largest draw, got %.17g", x);
}

static void test_normal_moments(void)
{
    Rng rng;
    rng_seed(&rng, 2);
    double *x = ALLOC_ARRAY(SAMPLES, double);
    rng_fill_normal_f64(&rng, x, SAMPLES, 3.0, 2.0);
    double sum = 0;
    for (int i = 0; i < SAMPLES; i++) {
        sum += x[i];
    }
    double mean = sum / SAMPLES;
    double squares = 0;
    for (int i = 0; i < SAMPLES; i++) {
        squares += (x[i] - mean) * (x[i] - mean);
    }
    double variance = squares / (SAMPLES - 1);
    /* Standard errors for normals: sigma / sqrt(n) for the mean, and
     * sigma^2 * sqrt(2 / (n - 1)) for the sample variance. */
    EXPECT(fabs(mean - 3.0) <= SIGMAS * 2.0 / sqrt(SAMPLES), "mean of %d normals(3, 2) is %.5f", SAMPLES, mean);
    EXPECT(fabs(variance - 4.0) <= SIGMAS * 4.0 * sqrt(2.0 / (SAMPLES - 1)), "variance of normals(3, 2) is %.5f",
           variance);
    /* The share beyond one sigma, P(|z| > 1) = 0.3173, checks the shape of
     * the distribution, which mean and variance do not (a uniform scaled to
     * the same variance passes those). Binomial standard error sqrt(p (1 - p) / n). */
    int outside = 0;
    for (int i = 0; i < SAMPLES; i++) {
        outside += fabs(x[i] - 3.0) > 2.0;
    }
    double p = 0.31731050786291415, fraction = (double)outside / SAMPLES;
    EXPECT(fabs(fraction - p) <= SIGMAS * sqrt(p * (1 - p) / SAMPLES), "P(|z| > 1) is %.5f, expected %.5f", fraction,
           p);
    array_free(x);

    float y[999];
    rng_fill_normal_f32(&rng, y, 999, 0.0, 1.0);
    int finite = 0;
    for (int i = 0; i < 999; i++) {
        finite += isfinite(y[i]);
    }
    EXPECT(finite == 999, "rng_fill_normal_f32 gives finite values (%d of 999)", finite);
}

static void test_below(void)
{
    Rng rng;
    rng_seed(&rng, 3);
    int ones = 0;
    for (int i = 0; i < 100; i++) {
        ones += rng_below(&rng, 1) == 0;
    }
    EXPECT(ones == 100, "rng_below(1) is always 0");

    enum { BOUND = 7, DRAWS = 70000 };
    int counts[BOUND] = {0}, out_of_range = 0;
    for (int i = 0; i < DRAWS; i++) {
        uint64_t k = rng_below(&rng, BOUND);
        if (k < BOUND) {
            counts[k]++;
        } else {
            out_of_range++;
        }
    }
    EXPECT(out_of_range == 0, "rng_below(7) stays below 7 (%d outside)", out_of_range);
    double p = 1.0 / BOUND, expected = DRAWS * p, standard_error = sqrt(DRAWS * p * (1 - p));
    for (int k = 0; k < BOUND; k++) {
        EXPECT(fabs(counts[k] - expected) <= SIGMAS * standard_error, "rng_below(7) gives %d %d times of %d", k,
               counts[k], DRAWS);
    }

    /* Modulo bias made visible: with bound = 2/3 of 2^64, x % bound would
     * give results below bound / 2 two times in three instead of half the time. */
    const uint64_t bound = UINT64_MAX / 3 * 2;
    int below_half = 0, too_big = 0;
    enum { BIG_DRAWS = 100000 };
    for (int i = 0; i < BIG_DRAWS; i++) {
        uint64_t k = rng_below(&rng, bound);
        below_half += k < bound / 2;
        too_big += k >= bound;
    }
    double fraction = (double)below_half / BIG_DRAWS;
    EXPECT(too_big == 0, "rng_below(2^64 * 2/3) stays below the bound (%d outside)", too_big);
    EXPECT(fabs(fraction - 0.5) <= SIGMAS * sqrt(0.25 / BIG_DRAWS),
           "rng_below(2^64 * 2/3) is unbiased: %.4f of draws in the lower half", fraction);

    uint64_t largest = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t k = rng_below(&rng, UINT64_MAX);
        largest = k > largest ? k : largest;
    }
    EXPECT(largest < UINT64_MAX, "rng_below(UINT64_MAX) stays below it");
}

/* Random123's known-answer vectors for Philox4x32-10 (its kat_vectors file):
 * a wrong round, constant or word order changes every output word. */
static void test_philox_published_vectors(void)
{
    struct {
        Philox4x32 counter;
        uint32_t key[2];
        Philox4x32 expected;
    } cases[] = {
        {{{0, 0, 0, 0}},                                         {0, 0}, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
        {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
         {0xffffffffu, 0xffffffffu},
         {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}                                                                },
        {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
         {0xa4093822u, 0x299f31d0u},
         {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}                                                                },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Philox4x32 out = philox4x32_10(cases[c].counter, cases[c].key[0], cases[c].key[1]);
        for (int w = 0; w < 4; w++) {
            EXPECT(out.word[w] == cases[c].expected.word[w], "philox case %zu word %d: %08x, expected %08x", c, w,
                   out.word[w], cases[c].expected.word[w]);
        }
    }
}

/* philox_uniform: in [0, 1), mean 1/2 and variance 1/12 over consecutive
 * counters, and a different value for each word of the counter and key. */
static void test_philox_uniform(void)
{
    enum { DRAWS = 200000 };
    double sum = 0.0, sum_sq = 0.0;
    int outside = 0;
    for (uint32_t i = 0; i < DRAWS; i++) {
        double u = philox_uniform(42, 7, i, 0);
        outside += !(u >= 0.0 && u < 1.0);
        sum += u;
        sum_sq += u * u;
    }
    double mean = sum / DRAWS, variance = sum_sq / DRAWS - mean * mean;
    EXPECT(outside == 0, "philox_uniform: %d values outside [0, 1)", outside);
    EXPECT(fabs(mean - 0.5) <= SIGMAS * sqrt(1.0 / 12.0 / DRAWS), "philox_uniform mean %.5f", mean);
    /* The variance of u^2 is 4/45; its mean's standard error bounds this. */
    EXPECT(fabs(variance - 1.0 / 12.0) <= SIGMAS * sqrt(4.0 / 45.0 / DRAWS), "philox_uniform variance %.5f", variance);
    double base = philox_uniform(1, 2, 3, 4);
    EXPECT(philox_uniform(0, 2, 3, 4) != base && philox_uniform(1u + (1ull << 32), 2, 3, 4) != base &&
               philox_uniform(1, 2u + (1ull << 32), 3, 4) != base && philox_uniform(1, 2, 4, 4) != base &&
               philox_uniform(1, 2, 3, 5) != base,
           "every part of the seed and counter changes the value");
}

int main(void)
{
    test_published_vectors();
    test_determinism();
    test_uniform();
    test_uniform_range_is_half_open();
    test_normal_moments();
    test_below();
    test_philox_published_vectors();
    test_philox_uniform();
    return test_finish();
}
