/* Read and write NumPy .npy files (format version 1.0, and 2.0/3.0 on read),
 * so that any array a chapter program loads or saves can be checked against
 * NumPy or PyTorch: np.load("dx.npy").
 *
 * Supported: little-endian float32, float64, int32, int64; C order; up to
 * NPY_MAX_DIMS dimensions. Anything else (Fortran order, big-endian, other
 * dtypes, a truncated file, a file that is not .npy) is refused with a
 * one-line reason. */
#ifndef COMMON_NPY_H
#define COMMON_NPY_H

#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define NPY_MAX_DIMS 8

typedef enum { NPY_FLOAT32, NPY_FLOAT64, NPY_INT32, NPY_INT64 } NpyDtype;

typedef struct {
    NpyDtype dtype;
    int ndim;
    size_t shape[NPY_MAX_DIMS];
    void *data; /* array_alloc'ed; release with npy_free */
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
