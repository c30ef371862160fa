/* A libFuzzer target for the .npy reader (common/npy.c), built with clang
 * -fsanitize=fuzzer,address,undefined (see the Tupfile).
 *
 * Each input is written to a file and given to npy_load, as a user's file
 * would be. An input that is refused must be refused with one line that
 * holds no control byte (the message quotes the file's header, escaped). An
 * input that loads must round-trip: saved and loaded again it is the same
 * array, dtype, shape and every byte of the data; and saving that copy
 * writes the same bytes again. A finding is a crash, a sanitizer report, a
 * leak, or an abort() below, which libFuzzer saves as a reproducer. */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/npy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char directory[] = "/tmp/fuzz_npy.XXXXXX";
static char input_path[64], first_save[64], second_save[64];

static void remove_files(void)
{
    unlink(input_path);
    unlink(first_save);
    unlink(second_save);
    rmdir(directory);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (mkdtemp(directory) == NULL) {
        perror("fuzz_npy: mkdtemp");
        exit(1);
    }
    snprintf(input_path, sizeof input_path, "%s/input.npy", directory);
    snprintf(first_save, sizeof first_save, "%s/first.npy", directory);
    snprintf(second_save, sizeof second_save, "%s/second.npy", directory);
    atexit(remove_files);
    return 0;
}

static void finding(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_npy: %s: %s\n", what, detail);
    abort();
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, 1, size, file) != size || fclose(file) != 0) {
        perror("fuzz_npy: writing the input");
        exit(1);
    }
}

/* The whole file, or NULL; *size is its length. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    long length = fseek(file, 0, SEEK_END) == 0 ? ftell(file) : -1;
    uint8_t *bytes = length >= 0 ? malloc((size_t)length + 1) : NULL;
    if (bytes == NULL || fseek(file, 0, SEEK_SET) != 0) {
        free(bytes);
        fclose(file);
        return NULL;
    }
    *size = fread(bytes, 1, (size_t)length, file);
    fclose(file);
    return bytes;
}

static void require_one_clean_line(const char *message)
{
    if (message[0] == '\0') {
        finding("a refusal without a reason", "(empty)");
    }
    for (const char *c = message; *c != '\0'; c++) {
        if (iscntrl((unsigned char)*c)) {
            finding("a control byte in a refusal", message);
        }
    }
}

static bool same_array(const NpyArray *a, const NpyArray *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) != 0) {
        return false;
    }
    size_t bytes = npy_element_count(a) * npy_dtype_size(a->dtype);
    return bytes == 0 || memcmp(a->data, b->data, bytes) == 0;
}

static void save_or_finding(const char *path, const NpyArray *array)
{
    char err[512];
    if (npy_save(path, array->dtype, array->ndim, array->shape, array->data, err, sizeof err) != 0) {
        finding("an array that loaded cannot be saved", err);
    }
}

static void require_same_files(const char *a, const char *b)
{
    size_t a_size = 0, b_size = 0;
    uint8_t *a_bytes = read_file(a, &a_size), *b_bytes = read_file(b, &b_size);
    bool same = a_bytes != NULL && b_bytes != NULL && a_size == b_size && memcmp(a_bytes, b_bytes, a_size) == 0;
    free(a_bytes);
    free(b_bytes);
    if (!same) {
        finding("saving the reloaded array wrote other bytes", b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_file(input_path, data, size);
    char err[512];
    NpyArray loaded, reloaded;
    if (npy_load(input_path, &loaded, err, sizeof err) != 0) {
        require_one_clean_line(err);
        return 0;
    }
    save_or_finding(first_save, &loaded);
    if (npy_load(first_save, &reloaded, err, sizeof err) != 0) {
        finding("a file npy_save wrote does not load", err);
    }
    if (!same_array(&loaded, &reloaded)) {
        finding("the round trip changed the array", input_path);
    }
    save_or_finding(second_save, &reloaded);
    require_same_files(first_save, second_save);
    npy_free(&loaded);
    npy_free(&reloaded);
    return 0;
}
