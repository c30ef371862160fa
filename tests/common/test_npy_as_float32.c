/* npy_load_as_float32: every one of the 65536 fp16 and the 65536 bf16 bit
 * patterns, saved in a file and read back, is the float its sign, exponent
 * and mantissa fields define (computed here with ldexp, independently of
 * kernels/fp16.h and kernels/bf16.h); a small file of floats that both
 * formats hold comes back unchanged; and each combination of dtype and
 * encoding that does not fit is refused with one line. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/npy.h"
#include "common/testing.h"
#include "kernels/float_bits.h"
#include "tests/scratch_directory.h"

/* A 16-bit float's value from its fields: `mantissa_bits` after an
 * exponent of `exponent_bits` with bias 2^(exponent_bits - 1) - 1. */
static double value_of_fields(uint16_t bits, int exponent_bits, int mantissa_bits)
{
    int exponent_max = (1 << exponent_bits) - 1, bias = exponent_max / 2;
    int exponent = (bits >> mantissa_bits) & exponent_max, mantissa = bits & ((1 << mantissa_bits) - 1);
    double sign = (bits & 0x8000) ? -1.0 : 1.0;
    if (exponent == exponent_max) {
        return mantissa ? copysign(NAN, sign) : sign * INFINITY;
    }
    if (exponent == 0) {
        return sign * ldexp(mantissa, 1 - bias - mantissa_bits);
    }
    return sign * ldexp((1 << mantissa_bits) + mantissa, exponent - bias - mantissa_bits);
}

/* Same value, same sign (zeros included); NaN for NaN. */
static bool converted_exactly(float got, double expected)
{
    if (isnan(expected)) {
        return isnan(got) && !signbit(got) == !signbit(expected);
    }
    return (double)got == expected && !signbit(got) == !signbit(expected);
}

/* All 65536 patterns in a [256, 256] file of `dtype`, read with `encoding`. */
static void every_pattern_converts_exactly(const char *name, NpyDtype dtype, NpyFloatEncoding encoding,
                                           int exponent_bits, int mantissa_bits)
{
    static uint16_t patterns[65536];
    for (uint32_t i = 0; i < 65536; i++) {
        patterns[i] = (uint16_t)i;
    }
    const size_t shape[2] = {256, 256};
    const char *path = scratch_path("patterns.npy");
    npy_save_or_exit(path, dtype, 2, shape, patterns);
    NpyArray array;
    char err[512] = "";
    if (npy_load_as_float32(path, encoding, &array, err, sizeof err) != 0) {
        EXPECT(false, "%s: %s", name, err);
        return;
    }
    const float *values = array.data;
    int wrong = 0, first_wrong = -1;
    for (uint32_t i = 0; i < 65536; i++) {
        bool ok = converted_exactly(values[i], value_of_fields((uint16_t)i, exponent_bits, mantissa_bits));
        wrong += !ok;
        first_wrong = !ok && first_wrong < 0 ? (int)i : first_wrong;
    }
    EXPECT(array.dtype == NPY_FLOAT32 && array.ndim == 2 && array.shape[0] == 256 && array.shape[1] == 256,
           "%s: read as float32 [256 x 256]", name);
    EXPECT(wrong == 0, "%s: %d of 65536 patterns convert to the wrong float (first 0x%04x: %a)", name, wrong,
           first_wrong, first_wrong < 0 ? 0.0 : (double)values[first_wrong]);
    npy_free(&array);
}

/* Floats that fp16 and bf16 both hold exactly (at most 8 significant bits,
 * within fp16's range, a subnormal of each among them), saved as each
 * format's bits and read back. */
static void small_file_round_trips(void)
{
    enum { ROWS = 2, COLS = 5 };
    const float values[ROWS * COLS] = {1.0f,     -2.5f, 0.15625f, 57344.0f, -0.0f,
                                       0x1p-24f, 3.0f,  -0.75f,   INFINITY, -INFINITY};
    uint16_t bf16[ROWS * COLS], fp16[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        /* bf16: the top half of the float's bits (the low half is zero). */
        bf16[i] = (uint16_t)(float_bits(values[i]) >> 16);
        /* fp16, from the fields: 1 + 10 bits, exponent rebiased by 112. */
        uint32_t f = float_bits(values[i]), sign = f >> 16 & 0x8000, exponent = f >> 23 & 0xff;
        uint32_t magnitude = exponent == 0xff ? 0x7c00
                             : exponent == 0  ? 0
                             : exponent < 113 ? (uint32_t)ldexp(fabsf(values[i]), 24) /* subnormal half */
                                              : (exponent - 112) << 10 | (f >> 13 & 0x3ff);
        fp16[i] = (uint16_t)(sign | magnitude);
    }
    const size_t shape[2] = {ROWS, COLS};
    const struct {
        const char *name;
        NpyDtype dtype;
        NpyFloatEncoding encoding;
        const uint16_t *bits;
    } files[] = {
        {"fp16 '<f2'",      NPY_FLOAT16, NPY_IEEE_FLOATS, fp16},
        {"bf16 bits '<u2'", NPY_UINT16,  NPY_BF16_BITS,   bf16},
        {"bf16 bits '<i2'", NPY_INT16,   NPY_BF16_BITS,   bf16},
        {"float32 '<f4'",   NPY_FLOAT32, NPY_IEEE_FLOATS, NULL},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        const char *path = scratch_path("small.npy");
        npy_save_or_exit(path, files[f].dtype, 2, shape, files[f].bits != NULL ? (const void *)files[f].bits : values);
        const size_t any_by_5[2] = {0, COLS};
        NpyArray array = npy_load_as_float32_or_exit(path, files[f].encoding, 2, any_by_5);
        const float *got = array.data;
        int wrong = 0;
        for (int i = 0; i < ROWS * COLS; i++) {
            wrong += !converted_exactly(got[i], values[i]);
        }
        EXPECT(wrong == 0, "%s: %d of %d values differ after the round trip", files[f].name, wrong, ROWS * COLS);
        npy_free(&array);
    }
}

/* The combinations that do not fit: the reason is in the line. */
static void refusals(void)
{
    const size_t shape[2] = {1, 2};
    const uint16_t bits[2] = {0x3f80, 0x4000};
    const float floats[2] = {1.0f, 2.0f};
    const double doubles[2] = {1.0, 2.0};
    const struct {
        NpyDtype dtype;
        const void *data;
        NpyFloatEncoding encoding;
        const char *words;
    } cases[] = {
        {NPY_UINT16,  bits,    NPY_IEEE_FLOATS, "uint16: if these are bfloat16 bits, say --dtype bf16"                   },
        {NPY_INT16,   bits,    NPY_IEEE_FLOATS, "int16: if these are bfloat16 bits, say --dtype bf16"                    },
        {NPY_FLOAT32, floats,  NPY_BF16_BITS,   "--dtype bf16 reads bfloat16 bits from int16 or uint16, not from float32"},
        {NPY_FLOAT16, bits,    NPY_BF16_BITS,   "not from float16"                                                       },
        {NPY_FLOAT64, doubles, NPY_IEEE_FLOATS, "expected float32 or float16"                                            },
        {NPY_FLOAT64, doubles, NPY_BF16_BITS,   "not from float64"                                                       },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *path = scratch_path("refused.npy");
        npy_save_or_exit(path, cases[c].dtype, 2, shape, cases[c].data);
        NpyArray array;
        char err[512] = "";
        int status = npy_load_as_float32(path, cases[c].encoding, &array, err, sizeof err);
        EXPECT(status == -1 && strstr(err, cases[c].words) != NULL && strchr(err, '\n') == NULL,
               "%s read as %s: refused with \"%s\", got status %d and \"%s\"", npy_dtype_name(cases[c].dtype),
               cases[c].encoding == NPY_BF16_BITS ? "bf16 bits" : "IEEE floats", cases[c].words, status, err);
    }
}

int main(void)
{
    if (!scratch_directory_make("/tmp/test_npy_as_float32.XXXXXX")) {
        return 1;
    }
    every_pattern_converts_exactly("fp16 '<f2'", NPY_FLOAT16, NPY_IEEE_FLOATS, 5, 10);
    every_pattern_converts_exactly("bf16 bits '<u2'", NPY_UINT16, NPY_BF16_BITS, 8, 7);
    every_pattern_converts_exactly("bf16 bits '<i2'", NPY_INT16, NPY_BF16_BITS, 8, 7);
    small_file_round_trips();
    refusals();
    scratch_directory_remove();
    return test_finish();
}
