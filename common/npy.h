/* Read and write NumPy .npy files (format version 1.0, and 2.0/3.0 on read),
 * so that any array a chapter program loads or saves can be checked against
 * NumPy or PyTorch: np.load("dx.npy").
 *
 * Supported: little-endian float32, float64, float16, int16, uint16, int32,
 * int64; C order; up to NPY_MAX_DIMS dimensions. Anything else (Fortran order, big-endian, other
 * dtypes, a truncated file, a file that is not .npy) is refused with a
 * one-line reason. */
#ifndef COMMON_NPY_H
#define COMMON_NPY_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define NPY_MAX_DIMS 8

typedef enum { NPY_FLOAT32, NPY_FLOAT64, NPY_FLOAT16, NPY_INT16, NPY_UINT16, NPY_INT32, NPY_INT64 } NpyDtype;

typedef struct {
    NpyDtype dtype;
    int ndim;
    size_t shape[NPY_MAX_DIMS];
    void *data;          /* array_alloc'ed; release with npy_free */
    NpyDtype file_dtype; /* the dtype in the file: npy_load_as_float32 widens 16-bit ones to float32 */
} NpyArray;

size_t npy_dtype_size(NpyDtype dtype);
const char *npy_dtype_name(NpyDtype dtype); /* "float32", ... */
size_t npy_element_count(const NpyArray *array);

/* Return 0 on success; on failure return -1 and put one line (no newline) in err. */
int npy_save(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data, char *err,
             size_t err_size);
int npy_load(const char *path, NpyArray *out, char *err, size_t err_size);

/* Load and require a dtype and shape; a 0 in expected_shape accepts any length
 * in that dimension. On any mismatch or error, print one line and exit 2:
 *     layernorm: error: x.npy: expected float32, got float64 */
NpyArray npy_load_or_exit(const char *path, NpyDtype dtype, int ndim, const size_t *expected_shape);
/* Save, or print one line and exit 1 (a write that fails is not a usage error). */
void npy_save_or_exit(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data);

void npy_free(NpyArray *array);

/* Numbers stored in 16 bits, read as float32: the logits of the softmax
 * chapter and the inputs of the layer norm chapter, which servers and
 * training runs often hold in fp16 or bf16. NumPy has fp16 ('<f2') but no
 * bfloat16, so bf16 arrives as its raw bits in a 16-bit integer array, and
 * only the user can say that the integers are bits: the programs' option
 * `--dtype bf16`. From PyTorch, for a bf16 tensor t:
 *     np.save("x.npy", t.view(torch.int16).numpy())
 * Either conversion to float32 is exact (kernels/fp16.h, kernels/bf16.h). */
typedef enum {
    NPY_IEEE_FLOATS, /* float32 ('<f4') as it is, or fp16 ('<f2'), as the header says */
    NPY_BF16_BITS,   /* bfloat16 bits in uint16 ('<u2') or int16 ('<i2') */
} NpyFloatEncoding;

/* The value of a `--dtype` option: "auto" (NPY_IEEE_FLOATS, the file's own
 * dtype) or "bf16"; anything else is one line and exit 2. */
NpyFloatEncoding npy_float_encoding_option(const char *option, const char *text);

/* Load an array of any shape as float32 (dtype NPY_FLOAT32 in out), or
 * return -1 with one line in err: a dtype that does not fit the encoding (a
 * 16-bit integer array without NPY_BF16_BITS, NPY_BF16_BITS on anything
 * else, float64, int32, ...) is refused, never reinterpreted. */
int npy_load_as_float32(const char *path, NpyFloatEncoding encoding, NpyArray *out, char *err, size_t err_size);
/* The same, with npy_load_or_exit's shape check, and one line and exit 2 on
 * any error. */
NpyArray npy_load_as_float32_or_exit(const char *path, NpyFloatEncoding encoding, int ndim,
                                     const size_t *expected_shape);

/* The output files of one run, in one directory, appear all together or not
 * at all: a reader never finds new x.npy beside an older run's dx.npy. Each
 * file is written as DIR/.NAME.partial; npy_output_dir_commit renames them
 * all to DIR/NAME once every one has been written (after checking that no
 * directory stands where a file will go, the likely reason for a rename in
 * the same directory to fail). A write that fails
 * removes the partial files and exits 1 with one line; a DIR too long for
 * its file names is refused with exit 2 before anything is written. */
#define NPY_OUTPUT_DIR_MAX_FILES 16
#define NPY_OUTPUT_NAME_MAX 64

typedef struct {
    const char *dir;
    int count;
    char names[NPY_OUTPUT_DIR_MAX_FILES][NPY_OUTPUT_NAME_MAX];
} NpyOutputDir;

/* Create DIR if it does not exist (its parent must). */
NpyOutputDir npy_output_dir_open(const char *dir);
void npy_output_dir_add(NpyOutputDir *out, const char *name, NpyDtype dtype, int ndim, const size_t *shape,
                        const void *data);
void npy_output_dir_commit(NpyOutputDir *out);

COMMON_END_C

#endif
