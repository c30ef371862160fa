/* kernels/fp8.h against the CUDA toolkit's own conversions (cuda_fp8.h,
 * host code: no GPU needed), the independent check of a second
 * implementation, bit for bit:
 *
 *   - decoding: all 256 codes of both formats through
 *     __nv_cvt_fp8_to_halfraw, widened by half_to_float (exact), against
 *     fp8_to_float;
 *   - decoding in pairs: all 65,536 pairs through __nv_cvt_fp8x2_to_halfraw2,
 *     the function that runs the GPU's cvt.rn.f16x2.e4m3x2 / e5m2x2 on
 *     sm_89 and later, as fp8_pair_to_floats does, against
 *     fp8_pair_to_floats's host path: the same values, the low byte first;
 *   - encoding: every float of the FP8 sweep (fp8_sweep.h: ties, binade
 *     boundaries, subnormals, infinities, the dense sweep) through
 *     __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), vLLM's conversion,
 *     against fp8_from_float.
 *
 * The one difference is NaN, which the comparisons take as equal when both
 * sides are NaN: cuda_fp8.h encodes every NaN as 0x7f in both formats and
 * decodes every NaN code to the fp16 0x7fff, dropping the sign; fp8.h keeps
 * the sign and encodes E5M2's NaN as 0x7e, the top byte of fp16's quiet NaN
 * 0x7e00. Every NaN code reads back as a NaN either way, and nothing in a
 * cache depends on a NaN's sign or payload, so fp8.h stays as it is.
 *
 * Only a build with CUDA has the toolkit's headers; elsewhere this test is
 * skipped. */
#include <math.h>
#include <stdint.h>

#include "common/testing.h"
#include "kernels/fp16.h"
#include "kernels/fp8.h"
#include "tests/04-kv-cache/fp8_sweep.h"

#if defined(HAVE_CUDA) && defined(__has_include)
#if __has_include(<cuda_fp8.h>)
#define HAVE_CUDA_FP8 1
#include <cuda_fp8.h>
#endif
#endif

#ifdef HAVE_CUDA_FP8
typedef struct {
    const char *name;
    Fp8Format format;
    __nv_fp8_interpretation_t cuda;
} Format;

static bool is_nan_code(uint8_t code, Fp8Format f)
{
    return isnan(fp8_to_float(code, f)) != 0;
}

static void decoding_agrees(const Format *f)
{
    int wrong = 0, first_wrong = -1;
    for (int code = 0; code < 256; code++) {
        float cuda = half_to_float(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, f->cuda).x);
        if (!test_same_float(cuda, fp8_to_float((uint8_t)code, f->format))) {
            first_wrong = wrong++ == 0 ? code : first_wrong;
        }
    }
    EXPECT(wrong == 0, "%s: %d of 256 codes decode differently from cuda_fp8.h (first 0x%02x)", f->name, wrong,
           first_wrong);
    long pairs_wrong = 0;
    for (uint32_t pair = 0; pair < 0x10000u; pair++) {
        __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)pair, f->cuda);
        float first, second;
        fp8_pair_to_floats((uint16_t)pair, f->format, &first, &second);
        pairs_wrong +=
            !test_same_float(half_to_float(halves.x), first) || !test_same_float(half_to_float(halves.y), second);
    }
    EXPECT(pairs_wrong == 0, "%s: %ld of 65536 pairs decode differently from cuda_fp8.h's pair conversion", f->name,
           pairs_wrong);
}

typedef struct {
    const Format *format;
    long wrong;
    float first_wrong;
} Sweep;

static void check_encoding(void *context, float x)
{
    Sweep *w = context;
    uint8_t cuda = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, w->format->cuda);
    if (cuda != fp8_from_float(x, w->format->format)) {
        w->first_wrong = w->wrong++ == 0 ? x : w->first_wrong;
    }
}

static void encoding_agrees(const Format *f)
{
    double values[128];
    int n = 0;
    for (int code = 0; code < 0x80 && isfinite(fp8_to_float((uint8_t)code, f->format)); code++)
        values[n++] = fp8_to_float((uint8_t)code, f->format);
    Sweep w = {f, 0, 0.0f};
    long checked = fp8_sweep(values, n, check_encoding, &w);
    EXPECT(w.wrong == 0, "%s: %ld of %ld floats encode differently from cuda_fp8.h (first %a)", f->name, w.wrong,
           checked, (double)w.first_wrong);
    EXPECT(checked > 1000000, "%s: %ld floats checked", f->name, checked);
    bool nans = true;
    for (int sign = 0; sign < 2; sign++) {
        float nan = sign ? -NAN : NAN;
        nans = nans && is_nan_code(__nv_cvt_float_to_fp8(nan, __NV_SATFINITE, f->cuda), f->format) &&
               is_nan_code(fp8_from_float(nan, f->format), f->format);
    }
    EXPECT(nans, "%s: NaN encodes as a NaN code in both", f->name);
}
#endif

int main(void)
{
#ifdef HAVE_CUDA_FP8
    const Format formats[] = {
        {"E4M3", fp8_e4m3(), __NV_E4M3},
        {"E5M2", fp8_e5m2(), __NV_E5M2},
    };
    for (int i = 0; i < 2; i++) {
        decoding_agrees(&formats[i]);
        encoding_agrees(&formats[i]);
    }
    return test_finish();
#else
    test_skip("no CUDA: this build was configured without it, so it has no cuda_fp8.h");
#endif
}
