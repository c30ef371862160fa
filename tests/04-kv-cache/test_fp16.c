/* kernels/fp16.h on every one of the 65536 halves: each converts to the
 * float its fields define (computed here independently, with ldexp), each
 * finite one converts back to itself, and every boundary between two
 * neighbouring halves rounds as IEEE 754 says (to nearest, ties to even),
 * including the step into infinity and the subnormals near zero. */
#include <math.h>
#include <stdint.h>

#include "common/testing.h"
#include "kernels/fp16.h"

/* The value of a half from its sign, exponent and mantissa fields. */
static double half_value(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0x1f)
        return mantissa ? NAN : sign * INFINITY;
    if (exponent == 0)
        return sign * ldexp(mantissa, -24);
    return sign * ldexp(1024 + mantissa, exponent - 25);
}

static bool is_half_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

static void every_half_converts_exactly_and_back(void)
{
    int wrong_value = 0, wrong_round_trip = 0, first_wrong = -1;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = half_to_float(h);
        double expected = half_value(h);
        bool value_ok = isnan(expected) ? isnan(f) : (double)f == expected && !signbit(f) == !signbit(expected);
        /* NaN keeps being NaN; every other half comes back to its own bits. */
        bool back_ok = is_half_nan(h) ? is_half_nan(half_from_float(f)) : half_from_float(f) == h;
        wrong_value += !value_ok;
        wrong_round_trip += !back_ok;
        if ((!value_ok || !back_ok) && first_wrong < 0)
            first_wrong = (int)i;
    }
    EXPECT(wrong_value == 0, "%d halves convert to the wrong float (first 0x%04x)", wrong_value, first_wrong);
    EXPECT(wrong_round_trip == 0, "%d halves do not come back from float (first 0x%04x)", wrong_round_trip,
           first_wrong);
}

/* Between neighbouring halves a < b (same sign): just below the midpoint
 * rounds to a, just above to b, and the midpoint itself (exact in float:
 * halves have 11 significant bits) to whichever has an even mantissa. */
static void boundaries_round_to_nearest_even(void)
{
    int wrong = 0, checked = 0;
    for (uint32_t i = 0; i < 0x7c00; i++) {
        for (int negative = 0; negative < 2; negative++) {
            uint16_t sign = negative ? 0x8000 : 0;
            uint16_t a = (uint16_t)(sign | i), b = (uint16_t)(sign | (i + 1)); /* b may be infinity */
            float lo = half_to_float(a), hi = half_to_float(b);
            /* Past 65504 the next step would be 65536: infinity starts at 65520. */
            double hi_for_midpoint = i + 1 == 0x7c00 ? (negative ? -65536.0 : 65536.0) : hi;
            float mid = (float)(((double)lo + hi_for_midpoint) / 2);
            uint16_t even = (i & 1) ? b : a;
            wrong += half_from_float(nextafterf(mid, lo)) != a;
            wrong += half_from_float(nextafterf(mid, hi)) != b;
            wrong += half_from_float(mid) != even;
            checked += 3;
        }
    }
    EXPECT(wrong == 0, "%d of %d boundary cases round the wrong way", wrong, checked);
}

static void edges(void)
{
    EXPECT(half_from_float(65504.0f) == 0x7bff, "65504 is the largest half");
    EXPECT(half_from_float(65519.99f) == 0x7bff, "just below 65520 rounds down to 65504");
    EXPECT(half_from_float(65520.0f) == 0x7c00, "65520 rounds (to even) to infinity");
    EXPECT(half_from_float(1e30f) == 0x7c00 && half_from_float(-1e30f) == 0xfc00, "huge floats overflow to +-inf");
    EXPECT(half_from_float(INFINITY) == 0x7c00 && half_from_float(-INFINITY) == 0xfc00, "infinities stay");
    EXPECT(is_half_nan(half_from_float(NAN)) && is_half_nan(half_from_float(-NAN)), "NaN stays NaN");
    EXPECT(half_from_float(0x1p-24f) == 0x0001, "2^-24 is the smallest subnormal");
    EXPECT(half_from_float(0x1p-25f) == 0x0000, "2^-25, halfway to zero, rounds to even: zero");
    EXPECT(half_from_float(1e-30f) == 0x0000 && half_from_float(-1e-30f) == 0x8000, "tiny floats flush to signed zero");
    EXPECT(half_from_float(0x1p-149f) == 0x0000, "a float subnormal becomes zero");
    EXPECT(half_from_float(1.0f) == 0x3c00 && half_to_float(0x3c00) == 1.0f, "one");
    EXPECT(half_from_float(1.0f + 0x1p-11f) == 0x3c00, "1 + 2^-11 is a tie: rounds to even, 1");
    EXPECT(half_from_float(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01, "just above the tie rounds up");
    EXPECT(half_from_float(0x1p-14f - 0x1p-25f) == 0x0400, "just below the smallest normal rounds up to it");
}

int main(void)
{
    every_half_converts_exactly_and_back();
    boundaries_round_to_nearest_even();
    edges();
    return test_finish();
}
