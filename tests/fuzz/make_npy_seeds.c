/* The seed corpus of the .npy fuzz target: small valid files of every dtype
 * the reader takes, 0 to NPY_MAX_DIMS dimensions, empty arrays, and format
 * versions 1.0, 2.0 and 3.0 (npy_save writes 1.0; the others are the same
 * header behind a 4-byte length). Every seed is loaded back before the
 * fuzzer starts: a seed that does not load would only test the refusals.
 *
 *   make_npy_seeds DIR      (DIR must not exist yet) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/npy.h"

static const NpyDtype DTYPES[] = {NPY_FLOAT32, NPY_FLOAT64, NPY_INT32, NPY_INT64};
enum { DTYPE_COUNT = sizeof DTYPES / sizeof DTYPES[0] };

static int failures;

static void check_loads(const char *path)
{
    char err[512];
    NpyArray array;
    if (npy_load(path, &array, err, sizeof err) != 0) {
        fprintf(stderr, "make_npy_seeds: a seed does not load: %s\n", err);
        failures++;
        return;
    }
    npy_free(&array);
}

/* Counting bytes 0, 1, 2, ...: every element differs, so a round trip that
 * moves or drops bytes shows. */
static void save_seed(const char *dir, const char *name, NpyDtype dtype, int ndim, const size_t *shape)
{
    size_t count = 1;
    for (int d = 0; d < ndim; d++) {
        count *= shape[d];
    }
    size_t bytes = count * npy_dtype_size(dtype);
    uint8_t *data = ALLOC_ARRAY(bytes > 0 ? bytes : 1, uint8_t);
    for (size_t i = 0; i < bytes; i++) {
        data[i] = (uint8_t)(i * 7 + 1);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    npy_save_or_exit(path, dtype, ndim, shape, data);
    array_free(data);
    check_loads(path);
}

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        exit(1);
    }
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *bytes = ALLOC_ARRAY(*size, uint8_t);
    if (fread(bytes, 1, *size, file) != *size) {
        perror(path);
        exit(1);
    }
    fclose(file);
    return bytes;
}

/* Rewrite a version 1.0 file as `major`.0: the magic, the version, the header
 * length as 4 little-endian bytes, then the same header and data. */
static void save_as_version(const char *dir, const char *v1_name, int major)
{
    char v1_path[512], path[512];
    snprintf(v1_path, sizeof v1_path, "%s/%s.npy", dir, v1_name);
    snprintf(path, sizeof path, "%s/%s_v%d.npy", dir, v1_name, major);
    size_t size;
    uint8_t *v1 = read_all(v1_path, &size);
    size_t header_length = (size_t)v1[8] | (size_t)v1[9] << 8;
    uint8_t prefix[12];
    memcpy(prefix, v1, 6);
    prefix[6] = (uint8_t)major;
    prefix[7] = 0;
    for (int i = 0; i < 4; i++) {
        prefix[8 + i] = (uint8_t)(header_length >> (8 * i));
    }
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(prefix, 1, sizeof prefix, file) != sizeof prefix ||
        fwrite(v1 + 10, 1, size - 10, file) != size - 10 || fclose(file) != 0) {
        perror(path);
        exit(1);
    }
    array_free(v1);
    check_loads(path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_npy_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    if (mkdir(dir, 0777) != 0) {
        perror(dir);
        return 1;
    }
    char name[64];
    for (int t = 0; t < DTYPE_COUNT; t++) {
        /* 0-d (a scalar) to 8-d, the first two dimensions 3 and 2, then 1s. */
        for (int ndim = 0; ndim <= NPY_MAX_DIMS; ndim++) {
            size_t shape[NPY_MAX_DIMS] = {3, 2, 1, 1, 1, 1, 1, 1};
            snprintf(name, sizeof name, "%s_%dd", npy_dtype_name(DTYPES[t]), ndim);
            save_seed(dir, name, DTYPES[t], ndim, shape);
        }
        const size_t empty[] = {4, 0};
        snprintf(name, sizeof name, "%s_empty", npy_dtype_name(DTYPES[t]));
        save_seed(dir, name, DTYPES[t], 2, empty);
    }
    save_as_version(dir, "float32_2d", 2);
    save_as_version(dir, "float32_2d", 3);
    save_as_version(dir, "int64_empty", 2);
    save_as_version(dir, "float64_0d", 3);
    printf("seeds in %s; %d did not load\n", dir, failures);
    return failures == 0 ? 0 : 1;
}
