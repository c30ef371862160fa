/* kernels/fp8.h against the OCP FP8 specification, for E4M3 and E5M2:
 *
 *   - every one of the 256 codes decodes to the value its sign, exponent and
 *     mantissa fields define, computed here independently in double (and a
 *     few values the specification states);
 *   - encoding agrees with a correctly rounded reference, written here the
 *     slow and obvious way (the nearer of the two finite codes around it, ties
 *     to the even mantissa, anything past the largest finite number saturated),
 *     on every midpoint between neighbouring codes and its float neighbours,
 *     every binade boundary, the subnormals, +-0, +-inf, NaN, and a dense
 *     sweep over the float line;
 *   - the GPU's route through fp16 (fp8_pair_to_floats) is exact: an E5M2
 *     code shifted up a byte is the fp16 of its value, every E4M3 value is
 *     an fp16, and the pair function's host path takes the low byte first. */
#include <math.h>
#include <stdint.h>

#include "common/testing.h"
#include "kernels/fp16.h"
#include "kernels/fp8.h"
#include "tests/04-kv-cache/fp8_sweep.h"

typedef struct {
    const char *name;
    int exponent_bits, mantissa_bits, bias;
    bool has_infinity;
    uint8_t (*encode)(float);
    float (*decode)(uint8_t);
} Spec;

/* The value of a code from its fields, as the specification defines it. */
static double spec_value(const Spec *s, uint8_t code)
{
    int top = (1 << s->exponent_bits) - 1;
    int exponent = (code >> s->mantissa_bits) & top, mantissa = code & ((1 << s->mantissa_bits) - 1);
    double sign = (code & 0x80) ? -1.0 : 1.0;
    if (s->has_infinity && exponent == top)
        return mantissa ? NAN : sign * INFINITY;
    if (!s->has_infinity && exponent == top && mantissa == (1 << s->mantissa_bits) - 1)
        return NAN;
    if (exponent == 0)
        return sign * ldexp(mantissa, 1 - s->bias - s->mantissa_bits);
    return sign * ldexp((1 << s->mantissa_bits) + mantissa, exponent - s->bias - s->mantissa_bits);
}

static void every_code_decodes_to_its_value(const Spec *s)
{
    int wrong = 0, first_wrong = -1, nans = 0;
    for (int i = 0; i < 256; i++) {
        double expected = spec_value(s, (uint8_t)i);
        float got = s->decode((uint8_t)i);
        bool ok = isnan(expected) ? isnan(got) : (double)got == expected && !signbit(got) == !signbit(expected);
        nans += isnan(expected) != 0;
        wrong += !ok;
        if (!ok && first_wrong < 0)
            first_wrong = i;
    }
    EXPECT(wrong == 0, "%s: %d codes decode wrongly (first 0x%02x)", s->name, wrong, first_wrong);
    EXPECT(nans == (s->has_infinity ? 6 : 2), "%s: %d NaN codes", s->name, nans);
}

/* The finite magnitudes, in code order (which is value order). */
static int finite_magnitudes(const Spec *s, double *values)
{
    int n = 0;
    for (int code = 0; code < 0x80 && isfinite(spec_value(s, (uint8_t)code)); code++)
        values[n++] = spec_value(s, (uint8_t)code);
    return n;
}

/* The correctly rounded, saturating code of x: of the two finite codes
 * around |x|, the nearer one, and of two equally near the one with the even
 * mantissa (the even code); from the largest up, the largest. Comparing 2|x|
 * with the sum of the two is exact in double, where distances would not be. */
static uint8_t reference_encode(const double *values, int n, float x)
{
    double magnitude = fabs((double)x);
    int below = 0;
    while (below + 1 < n && values[below + 1] <= magnitude)
        below++;
    int best = below;
    if (below + 1 < n) {
        double twice = 2 * magnitude, sum = values[below] + values[below + 1];
        best = twice < sum ? below : twice > sum ? below + 1 : below % 2 == 0 ? below : below + 1;
    }
    return (uint8_t)((signbit(x) ? 0x80 : 0) | best);
}

typedef struct {
    const Spec *spec;
    const double *values;
    int n_values;
    long wrong;
    float first_wrong;
} Sweep;

static void check_encoding(void *context, float x)
{
    Sweep *w = context;
    uint8_t expected = reference_encode(w->values, w->n_values, x), got = w->spec->encode(x);
    if (got != expected) {
        if (w->wrong == 0)
            w->first_wrong = x;
        w->wrong++;
    }
}

static void encoding_rounds_correctly(const Spec *s)
{
    double values[128];
    Sweep w = {s, values, finite_magnitudes(s, values), 0, 0.0f};
    long checked = fp8_sweep(values, w.n_values, check_encoding, &w);
    EXPECT(w.wrong == 0, "%s: %ld of %ld floats encode wrongly (first %a)", s->name, w.wrong, checked,
           (double)w.first_wrong);
    EXPECT(checked > 1000000, "%s: %ld floats checked", s->name, checked);
}

static bool is_nan_code(const Spec *s, uint8_t code)
{
    return isnan(spec_value(s, code));
}

static void specials(const Spec *s, double largest)
{
    EXPECT(s->encode(0.0f) == 0x00 && s->encode(-0.0f) == 0x80, "%s: signed zeros stay", s->name);
    EXPECT((double)s->decode(s->encode(INFINITY)) == largest && (double)s->decode(s->encode(-INFINITY)) == -largest,
           "%s: infinities saturate to +-%g", s->name, largest);
    EXPECT(is_nan_code(s, s->encode(NAN)) && is_nan_code(s, s->encode(-NAN)), "%s: NaN stays NaN", s->name);
    EXPECT((double)s->decode(s->encode(1e30f)) == largest, "%s: huge floats saturate", s->name);
}

static void decoding_through_fp16_is_exact(void)
{
    int shifted_wrong = 0, not_a_half = 0;
    for (int code = 0; code < 256; code++) {
        float e5m2 = fp8_e5m2_to_float((uint8_t)code), e4m3 = fp8_e4m3_to_float((uint8_t)code);
        shifted_wrong += !test_same_float(half_to_float((uint16_t)(code << 8)), e5m2);
        not_a_half += !test_same_float(half_to_float(half_from_float(e4m3)), e4m3);
    }
    EXPECT(shifted_wrong == 0, "E5M2: %d codes differ from the fp16 whose top byte they are", shifted_wrong);
    EXPECT(not_a_half == 0, "E4M3: %d values are not fp16 values", not_a_half);
    const Fp8Format formats[] = {fp8_e4m3(), fp8_e5m2()};
    for (int f = 0; f < 2; f++) {
        long wrong = 0;
        for (uint32_t pair = 0; pair < 0x10000u; pair++) {
            float first, second;
            fp8_pair_to_floats((uint16_t)pair, formats[f], &first, &second);
            wrong += !test_same_float(first, fp8_to_float((uint8_t)pair, formats[f])) ||
                     !test_same_float(second, fp8_to_float((uint8_t)(pair >> 8), formats[f]));
        }
        EXPECT(wrong == 0, "%s: %ld of 65536 pairs decode wrongly", f == 0 ? "E4M3" : "E5M2", wrong);
    }
}

int main(void)
{
    const Spec specs[] = {
        {"E4M3", 4, 3, 7,  false, fp8_e4m3_from_float, fp8_e4m3_to_float},
        {"E5M2", 5, 2, 15, true,  fp8_e5m2_from_float, fp8_e5m2_to_float},
    };
    for (int i = 0; i < 2; i++) {
        every_code_decodes_to_its_value(&specs[i]);
        encoding_rounds_correctly(&specs[i]);
    }
    /* Values the OCP specification states. */
    EXPECT(fp8_e4m3_to_float(0x7e) == 448.0f && FP8_E4M3_MAX == 448.0f, "E4M3: S.1111.110 is the largest, 448");
    EXPECT(fp8_e4m3_to_float(0x08) == 0x1p-6f && fp8_e4m3_to_float(0x01) == 0x1p-9f, "E4M3: 2^-6 and 2^-9");
    EXPECT(fp8_e5m2_to_float(0x7b) == 57344.0f && FP8_E5M2_MAX == 57344.0f, "E5M2: S.11110.11 is 57344");
    EXPECT(fp8_e5m2_to_float(0x04) == 0x1p-14f && fp8_e5m2_to_float(0x01) == 0x1p-16f, "E5M2: 2^-14 and 2^-16");
    EXPECT(isinf(fp8_e5m2_to_float(0x7c)) && isinf(fp8_e5m2_to_float(0xfc)), "E5M2: S.11111.00 is infinity");
    specials(&specs[0], 448.0);
    specials(&specs[1], 57344.0);
    decoding_through_fp16_is_exact();
    return test_finish();
}
