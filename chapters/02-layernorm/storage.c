#include "chapters/02-layernorm/storage.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/bf16.h"
#include "kernels/fp16.h"

const char ln_storage_names[] = "float32, fp16, bf16";

static const char *const STORAGE_NAMES[] = {"float32", "fp16", "bf16"};

const char *ln_storage_name(LnStorage storage)
{
    return STORAGE_NAMES[storage];
}

bool ln_storage_parse(const char *name, LnStorage *storage)
{
    for (int s = STORAGE_FLOAT32; s <= STORAGE_BF16; s++) {
        if (strcmp(name, STORAGE_NAMES[s]) == 0) {
            *storage = (LnStorage)s;
            return true;
        }
    }
    return false;
}

LnStorage ln_storage_of_dtype(NpyDtype dtype)
{
    if (dtype == NPY_FLOAT16)
        return STORAGE_FP16;
    return dtype == NPY_INT16 || dtype == NPY_UINT16 ? STORAGE_BF16 : STORAGE_FLOAT32;
}

NpyDtype ln_storage_dtype(LnStorage storage)
{
    const NpyDtype dtypes[] = {NPY_FLOAT32, NPY_FLOAT16, NPY_INT16};
    return dtypes[storage];
}

float ln_storage_narrow(LnStorage storage, float v)
{
    switch (storage) {
    case STORAGE_FP16:
        return half_to_float(half_from_float(v));
    case STORAGE_BF16:
        return bf16_to_float(bf16_from_float(v));
    default:
        return v;
    }
}

void ln_storage_narrow_array(LnStorage storage, float *values, size_t count)
{
    if (storage == STORAGE_FLOAT32)
        return;
    for (size_t i = 0; i < count; i++)
        values[i] = ln_storage_narrow(storage, values[i]);
}

void ln_storage_bits(LnStorage storage, uint16_t *bits, const float *values, size_t count)
{
    if (storage == STORAGE_FP16)
        halves_from_floats(bits, values, count); /* 8 at a time, the same bits */
    else
        bf16s_from_floats(bits, values, count);
}

void ln_storage_widen_bits(LnStorage storage, float *values, const uint16_t *bits, size_t count)
{
    for (size_t i = 0; i < count; i++)
        values[i] = storage == STORAGE_FP16 ? half_to_float(bits[i]) : bf16_to_float(bits[i]);
}

/* Each type's smallest normal exponent and largest finite value (its
 * significant bits: ln_storage_significant_bits). */
typedef struct {
    int min_exponent;
    double max;
} StorageFormat;

static StorageFormat storage_format(LnStorage storage)
{
    const StorageFormat formats[] = {
        {-126, FLT_MAX                                   },
        {-14,  65504.0                                   },
        {-126, (2.0 - 0x1p-7) * 0x1p127 /* 0x7f7f bits */},
    };
    return formats[storage];
}

double ln_storage_ulp(LnStorage storage, double v)
{
    StorageFormat f = storage_format(storage);
    if (!isfinite(v))
        return NAN;
    int exponent = v == 0.0 ? f.min_exponent : ilogb(v);
    return ldexp(1.0,
                 (exponent < f.min_exponent ? f.min_exponent : exponent) - ln_storage_significant_bits(storage) + 1);
}

// ANCHOR: round_a_double_once
/* v / ulp is exact (a power of two), rint rounds it to the nearest integer,
 * ties to even, and the product is exact again: one rounding. Past the
 * largest finite value plus half an ulp, that is infinity. */
double ln_storage_round_exact(LnStorage storage, double v)
{
    if (!isfinite(v) || v == 0.0)
        return v;
    double ulp = ln_storage_ulp(storage, v), rounded = rint(v / ulp) * ulp;
    return fabs(rounded) > storage_format(storage).max ? copysign(INFINITY, v) : rounded;
}
// ANCHOR_END: round_a_double_once

/* Is error a worse than b? A NaN is worse than any number (fmax would drop it). */
static bool is_worse(double a, double b)
{
    return !isnan(b) && (isnan(a) || a > b);
}

static double ulps_away(LnStorage storage, float got, double ref)
{
    if (got == ref)
        return 0.0; /* infinities included */
    return fabs(got - ref) / ln_storage_ulp(storage, ref);
}

StorageAccuracy ln_storage_accuracy(LnStorage storage, const float *got, const double *ref, size_t count)
{
    StorageAccuracy a = {.count = count};
    for (size_t i = 0; i < count; i++) {
        a.correctly_rounded += got[i] == ln_storage_round_exact(storage, ref[i]);
        double ulps = isnan(got[i]) || isnan(ref[i]) ? NAN : ulps_away(storage, got[i], ref[i]);
        if (is_worse(ulps, a.max_ulps)) {
            a.max_ulps = ulps;
            a.worst_ref = ref[i];
        }
        if (!(ulps <= 1.0)) {
            a.beyond_one_ulp++;
            a.largest_beyond = fmax(a.largest_beyond, fabs(ref[i]));
        }
    }
    return a;
}

StorageAccuracy ln_storage_accuracy_merge(StorageAccuracy a, StorageAccuracy b)
{
    StorageAccuracy merged = is_worse(b.max_ulps, a.max_ulps) ? b : a;
    merged.count = a.count + b.count;
    merged.correctly_rounded = a.correctly_rounded + b.correctly_rounded;
    merged.beyond_one_ulp = a.beyond_one_ulp + b.beyond_one_ulp;
    merged.largest_beyond = fmax(a.largest_beyond, b.largest_beyond);
    return merged;
}

double ln_storage_correct_share(const StorageAccuracy *a)
{
    return a->count == 0 ? 1.0 : (double)a->correctly_rounded / (double)a->count;
}

double ln_storage_unresolved_below(LnStorage storage)
{
    return 3e-6 / (0.5 * ln_storage_ulp(storage, 1.0)) * 2.0;
}
