/* Storage types: x, dy, y and dx held in 16 bits (fp16 or bf16), with the
 * arithmetic, the statistics and the parameters in float32, and a row's
 * sums in double.
 *
 * A 16-bit input widens to float exactly (kernels/fp16.h, kernels/bf16.h),
 * the kernels compute in float32 as they do for float32 inputs (a 16-bit
 * row's sums are taken in double, and the elements of y and dx near
 * cancellation computed in double), and y and dx are rounded
 * once, to nearest even, into the storage type. gamma, beta,
 * their gradients and the saved mean and rstd stay float32 (the chapter
 * says why). The accuracy goal: y and dx within one ulp of the storage
 * type of the float64 result on the same stored inputs everywhere, and
 * equal to its correct rounding in at least 99.9% of the elements. */
#ifndef CHAPTERS_02_LAYERNORM_STORAGE_H
#define CHAPTERS_02_LAYERNORM_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hostdevice.h"
#include "common/npy.h"
#include "kernels/layernorm_storage.h"

COMMON_BEGIN_C

/* LnStorage, the enum of kernels/layernorm_storage.h: the GPU kernels take the same. */

/* "float32", "fp16" or "bf16"; ln_storage_parse is false for any other name. */
const char *ln_storage_name(LnStorage storage);
bool ln_storage_parse(const char *name, LnStorage *storage);
extern const char ln_storage_names[]; /* "float32, fp16, bf16", for messages */

/* The storage type of an .npy dtype as a layer norm file holds it: float16
 * is fp16, the 16-bit integers are bf16 bits (what `--dtype bf16` let
 * through), anything else float32. And the dtype to write a storage type
 * in: bf16 as int16, what t.view(torch.int16) gives. */
LnStorage ln_storage_of_dtype(NpyDtype dtype);
NpyDtype ln_storage_dtype(LnStorage storage);

/* v rounded to the storage type, to nearest even, by the kernels'
 * conversions; the result is a float (16-bit values widen exactly). */
float ln_storage_narrow(LnStorage storage, float v);
void ln_storage_narrow_array(LnStorage storage, float *values, size_t count);
/* The 16 bits of ln_storage_narrow(storage, values[i]) (fp16 or bf16 only),
 * and back: values[i] the float that bits[i] holds, exactly. */
void ln_storage_bits(LnStorage storage, uint16_t *bits, const float *values, size_t count);
void ln_storage_widen_bits(LnStorage storage, float *values, const uint16_t *bits, size_t count);

/* The same rounding computed independently, from a double, without
 * rounding to float first (that could round twice): the correctly rounded
 * value of v in the storage type. And the spacing of the storage type's
 * values at v (for v in [2^e, 2^(e+1)), 2^(e-p+1) with p significant
 * bits, never less than the spacing of the subnormals). */
double ln_storage_round_exact(LnStorage storage, double v);
double ln_storage_ulp(LnStorage storage, double v);

/* How close stored results come to a double reference: how many equal
 * its correct rounding, and the largest |got - ref| in ulps of the storage
 * type at ref (NaN if any value is NaN). */
typedef struct {
    size_t count, correctly_rounded;
    double max_ulps;
    double worst_ref;      /* the reference where max_ulps was reached */
    size_t beyond_one_ulp; /* elements more than one ulp away */
    double largest_beyond; /* the largest |ref| among those (0 if none) */
} StorageAccuracy;

StorageAccuracy ln_storage_accuracy(LnStorage storage, const float *got, const double *ref, size_t count);
/* Below this magnitude the float32 kernels' own error bound (ln_compare's
 * atol at unit scale, 3e-6 for y and dx) exceeds half an ulp of the
 * storage type (at least 2^-(p+1) |v| for p significant bits): only there
 * may a stored result be more than one ulp off. */
double ln_storage_unresolved_below(LnStorage storage);
/* The accuracy goal: at least 99.9% correctly rounded, and nothing more
 * than one ulp off at or above ln_storage_unresolved_below. */
#define LN_STORAGE_GOAL_SHARE 0.999
/* a and b together (counts summed, the larger error, NaN kept). */
StorageAccuracy ln_storage_accuracy_merge(StorageAccuracy a, StorageAccuracy b);
double ln_storage_correct_share(const StorageAccuracy *a); /* correctly_rounded / count */

COMMON_END_C

#endif
