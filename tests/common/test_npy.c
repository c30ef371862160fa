#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/npy.h"
#include "common/testing.h"
#include "tests/scratch_directory.h"

/* Fixtures are written by this program into its scratch directory: files
 * that NumPy would write (checked byte for byte against the format
 * description) and files that are broken in one way each. */

static void write_bytes(const char *path, const void *bytes, size_t size)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
        perror(path);
        exit(1);
    }
}

/* A .npy file by hand: the magic, version major.0, the header length field
 * (2 bytes for version 1, 4 for 2 and 3), the header text as given, then
 * data_bytes bytes of data (a counting pattern). */
static void write_npy_with_header_bytes(const char *path, int major, const char *header, size_t header_length,
                                        size_t data_bytes)
{
    size_t field_bytes = major == 1 ? 2 : 4;
    size_t size = 8 + field_bytes + header_length + data_bytes;
    unsigned char *file = array_alloc(size, 1);
    memcpy(file, "\x93NUMPY", 6);
    file[6] = (unsigned char)major;
    file[7] = 0;
    for (size_t i = 0; i < field_bytes; i++) {
        file[8 + i] = (unsigned char)(header_length >> (8 * i));
    }
    memcpy(file + 8 + field_bytes, header, header_length);
    for (size_t i = 0; i < data_bytes; i++) {
        file[8 + field_bytes + header_length + i] = (unsigned char)i;
    }
    write_bytes(path, file, size);
    array_free(file);
}

static void write_npy_by_hand(const char *path, int major, const char *header, size_t data_bytes)
{
    write_npy_with_header_bytes(path, major, header, strlen(header), data_bytes);
}

/* Values that tell elements apart and include negative and large ones. */
static void fill_pattern(NpyDtype dtype, void *data, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        double value = ((double)i - 3.0) * 1.25;
        switch (dtype) {
        case NPY_FLOAT32:
            ((float *)data)[i] = (float)value;
            break;
        case NPY_FLOAT64:
            ((double *)data)[i] = value / 3.0;
            break;
        case NPY_INT32:
            ((int32_t *)data)[i] = (int32_t)(i * 2654435761u);
            break;
        case NPY_INT64:
            ((int64_t *)data)[i] = (int64_t)(i * 0x9e3779b97f4a7c15u);
            break;
        case NPY_FLOAT16:
        case NPY_INT16:
        case NPY_UINT16:
            /* Any bits: the file holds them, whatever they mean. */
            ((uint16_t *)data)[i] = (uint16_t)(i * 40503u);
            break;
        }
    }
}

static size_t header_length_of_file(const char *path)
{
    unsigned char prefix[10] = {0};
    FILE *file = fopen(path, "rb");
    if (file == NULL || fread(prefix, 1, 10, file) != 10) {
        prefix[8] = prefix[9] = 0;
    }
    if (file != NULL) {
        fclose(file);
    }
    return (size_t)prefix[8] | (size_t)prefix[9] << 8;
}

static void test_round_trips(void)
{
    const NpyDtype dtypes[] = {NPY_FLOAT32, NPY_FLOAT64, NPY_FLOAT16, NPY_INT16, NPY_UINT16, NPY_INT32, NPY_INT64};
    const struct {
        int ndim;
        size_t shape[NPY_MAX_DIMS];
    } shapes[] = {
        {0, {0}                     },
        {1, {7}                     },
        {2, {0, 3}                  },
        {3, {3, 5, 2}               },
        {2, {1823, 781}             },
        {8, {2, 1, 3, 1, 1, 2, 1, 3}}
    };
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            NpyArray saved = {.dtype = dtypes[d], .ndim = shapes[s].ndim};
            memcpy(saved.shape, shapes[s].shape, sizeof saved.shape);
            size_t count = npy_element_count(&saved), bytes = count * npy_dtype_size(dtypes[d]);
            void *data = array_alloc(count, npy_dtype_size(dtypes[d]));
            fill_pattern(dtypes[d], data, count);
            const char *path = scratch_path("round_trip.npy");
            char err[256] = "";
            int saved_status = npy_save(path, dtypes[d], saved.ndim, saved.shape, data, err, sizeof err);
            EXPECT(saved_status == 0, "save %s ndim %d: %s", npy_dtype_name(dtypes[d]), saved.ndim, err);
            size_t header_length = header_length_of_file(path);
            EXPECT((10 + header_length) % 64 == 0, "the data starts at a multiple of 64 bytes (%zu)",
                   10 + header_length);
            NpyArray loaded;
            int status = npy_load(path, &loaded, err, sizeof err);
            bool same = status == 0 && loaded.dtype == saved.dtype && loaded.ndim == saved.ndim &&
                        memcmp(loaded.shape, saved.shape, (size_t)saved.ndim * sizeof saved.shape[0]) == 0 &&
                        memcmp(loaded.data, data, bytes) == 0;
            EXPECT(same, "%s with %d dimensions (%zu elements) comes back unchanged: %s", npy_dtype_name(dtypes[d]),
                   saved.ndim, count, status == 0 ? "differs" : err);
            if (status == 0) {
                npy_free(&loaded);
                EXPECT(loaded.data == NULL, "npy_free clears the pointer");
            }
            array_free(data);
        }
    }
}

/* The bytes NumPy writes for np.zeros((3, 4), np.float32): the exact header. */
static void test_header_bytes(void)
{
    const char *path = scratch_path("header.npy");
    const size_t shape[] = {3, 4};
    float data[12] = {0};
    npy_save_or_exit(path, NPY_FLOAT32, 2, shape, data);
    char expected[128 + 48];
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    memcpy(expected, "\x93NUMPY\x01\x00\x76\x00", 10);
    size_t used = 10 + strlen(dict);
    memcpy(expected + 10, dict, strlen(dict));
    memset(expected + used, ' ', 127 - used);
    expected[127] = '\n';
    memset(expected + 128, 0, 48);
    char got[sizeof expected + 1] = {0};
    FILE *file = fopen(path, "rb");
    size_t length = file != NULL ? fread(got, 1, sizeof got, file) : 0;
    if (file != NULL) {
        fclose(file);
    }
    EXPECT(length == sizeof expected && memcmp(got, expected, sizeof expected) == 0,
           "the file is the 128-byte v1.0 header NumPy writes plus 48 bytes of data (%zu bytes)", length);

    const size_t vector[] = {5};
    npy_save_or_exit(path, NPY_INT64, 1, vector, (int64_t[5]){0});
    file = fopen(path, "rb");
    length = file != NULL ? fread(got, 1, 128, file) : 0;
    if (file != NULL) {
        fclose(file);
    }
    got[length] = '\0';
    EXPECT(strstr(got + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }") == got + 10,
           "a 1-d shape is written as the tuple (5,): %s", got + 10);
}

static void expect_loads(const char *name, int major, const char *header, size_t data_bytes, NpyDtype dtype, int ndim,
                         const size_t *shape, const char *what)
{
    const char *path = scratch_path(name);
    write_npy_by_hand(path, major, header, data_bytes);
    NpyArray array;
    char err[256] = "";
    int status = npy_load(path, &array, err, sizeof err);
    bool same = status == 0 && array.dtype == dtype && array.ndim == ndim;
    for (int d = 0; same && d < ndim; d++) {
        same = array.shape[d] == shape[d];
    }
    if (same) {
        const unsigned char *bytes = array.data;
        for (size_t i = 0; i < data_bytes; i++) {
            same = same && bytes[i] == (unsigned char)i;
        }
    }
    EXPECT(same, "%s: %s", what, status == 0 ? "wrong dtype, shape or data" : err);
    if (status == 0) {
        npy_free(&array);
    }
}

static void test_other_writers(void)
{
    const size_t two_by_three[] = {2, 3}, four[] = {4}, two_by_two[] = {2, 2};
    /* Version 2.0 and 3.0 differ from 1.0 only in a 4-byte header length. */
    expect_loads("v2.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }          \n", 48,
                 NPY_FLOAT64, 2, two_by_three, "a version 2.0 file");
    expect_loads("v3.npy", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", 16, NPY_FLOAT32, 1, four,
                 "a version 3.0 file");
    expect_loads("order.npy", 1, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<i4\"}\n", 16, NPY_INT32, 1,
                 four, "keys in another order, double quotes, no trailing comma");
    expect_loads("spaces.npy", 1, "{ 'descr' : '<i8' ,'shape':( 2 ,2 ) , 'fortran_order' : False , }  \n", 32,
                 NPY_INT64, 2, two_by_two, "other spacing");
    expect_loads("unpadded.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, NPY_FLOAT32, 0, NULL,
                 "a scalar, header without padding or newline");
}

static void expect_refused(const char *path, const char *reason, const char *what)
{
    NpyArray array = {.data = (void *)&array};
    char err[512] = "";
    int status = npy_load(path, &array, err, sizeof err);
    size_t path_length = strlen(path);
    bool one_line = strchr(err, '\n') == NULL;
    bool names_path = strncmp(err, path, path_length) == 0 && strncmp(err + path_length, ": ", 2) == 0;
    EXPECT(status == -1 && array.data == NULL && one_line && names_path && strstr(err, reason) != NULL,
           "%s: expected \"%s\", got status %d: %s", what, reason, status, err);
}

/* Files that are .npy up to the header, and broken in one way each. */
typedef struct {
    const char *name;
    int major; /* format version */
    const char *header;
    size_t data_bytes;
    const char *reason; /* expected in the error line */
} BrokenFile;

#define GOOD_HEADER "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n"

static const BrokenFile broken_files[] = {
    {"v4.npy",        4, GOOD_HEADER,                                                                                48, "unsupported .npy format version 4.0"                               },
    {"big.npy",       1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }\n",                            48,
     "big-endian float32 ('>f4') is not supported"                                                                                                                                           },
    {"fortran.npy",   1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }\n",                             48, "Fortran-order"                                                     },
    {"u4.npy",        1, "{'descr': '<u4', 'fortran_order': False, 'shape': (3, 4), }\n",                            48, "unsupported dtype '<u4'"                                           },
    {"u1.npy",        1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 4), }\n",                            12, "unsupported dtype '|u1'"                                           },
    {"c8.npy",        1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }\n",                              24, "unsupported dtype '<c8'"                                           },
    {"record.npy",    1, "{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (3,), }\n",       24,
     "record (structured) dtypes"                                                                                                                                                            },
    {"nine.npy",      1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }\n",       4,
     "9 dimensions, at most 8 are supported"                                                                                                                                                 },
 /* 2^64 elements; 2^61 doubles, 2^64 bytes; a dimension beyond size_t. */
    {"overflow.npy",  1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n",          0,
     "overflows size_t"                                                                                                                                                                      },
    {"bytes.npy",     1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }\n",            0,
     "overflows size_t"                                                                                                                                                                      },
    {"huge.npy",      1, "{'descr': '<f4', 'fortran_order': False, 'shape': (123456789012345678901234567890,), }\n", 0,
     "overflows size_t"                                                                                                                                                                      },
    {"truncated.npy", 1, GOOD_HEADER,                                                                                40, "truncated: float32 [3 x 4] needs 48 bytes of data, the file has 40"},
    {"trailing.npy",  1, GOOD_HEADER,                                                                                50, "2 unexpected bytes after the 48 bytes of float32 [3 x 4] data"     },
    {"no_shape.npy",  1, "{'descr': '<f4', 'fortran_order': False, }\n",                                             4,  "the header lacks 'shape'"                                          },
    {"extra.npy",     1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}\n",                      4,
     "unexpected key 'extra'"                                                                                                                                                                },
    {"open.npy",      1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)   \n",                            48,
     "malformed header {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)"                                                                                                             },
    {"junk.npy",      1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)} junk\n",                         48, "malformed header"                                                  },
    {"maybe.npy",     1, "{'descr': '<f4', 'fortran_order': maybe, 'shape': (3, 4)}\n",                              48, "malformed header"                                                  },
    {"comma.npy",     1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}\n",                               48, "malformed header"                                                  },
};

static void test_errors(void)
{
    expect_refused(scratch_path("missing.npy"), "cannot open: No such file or directory", "a missing file");
    expect_refused(scratch_directory, "not a regular file", "a directory");
    write_bytes(scratch_path("empty.npy"), "", 0);
    expect_refused(scratch_path("empty.npy"), "not a .npy file", "an empty file");
    write_bytes(scratch_path("text.npy"), "x,y\n1,2\n3,4\n", 12);
    expect_refused(scratch_path("text.npy"), "not a .npy file (it does not start with \\x93NUMPY)", "a CSV file");
    /* A regular file to stat whose first read fails (EIO): an error, not a
     * file too short to be .npy. */
    if (access("/proc/self/mem", R_OK) == 0)
        expect_refused("/proc/self/mem", "read error: ", "a file whose reading fails");
    write_bytes(scratch_path("short.npy"), "\x93NUMPY\x01\x00\x76", 9);
    expect_refused(scratch_path("short.npy"), "truncated: the file ends inside the header", "a cut length field");
    /* The length field claims more header than the file holds. */
    write_bytes(scratch_path("cut_header.npy"), "\x93NUMPY\x01\x00\x76\x00{'descr'", 18);
    expect_refused(scratch_path("cut_header.npy"), "truncated: the file ends inside the header", "a cut header");

    for (size_t i = 0; i < sizeof broken_files / sizeof broken_files[0]; i++) {
        const BrokenFile *broken = &broken_files[i];
        const char *path = scratch_path(broken->name);
        write_npy_by_hand(path, broken->major, broken->header, broken->data_bytes);
        expect_refused(path, broken->reason, broken->name);
    }
}

/* A NUL inside a string of the header would end it early in C, and
 * '<f4\0' would read as '<f4'. */
static void test_nul_in_the_header(void)
{
    static const char header[] = "{'descr': '<f4\0', 'fortran_order': False, 'shape': (3,), }\n";
    const char *path = scratch_path("nul.npy");
    write_npy_with_header_bytes(path, 1, header, sizeof header - 1, 12);
    expect_refused(path, "malformed header", "a NUL inside the dtype string");
}

/* A header that quotes a newline and a terminal escape sequence: the error
 * is still one line, with no control byte in it. */
static void test_control_bytes_are_escaped(void)
{
    const char *path = scratch_path("control.npy");
    write_npy_by_hand(path, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,\n3) \x1b[2J}\n", 24);
    NpyArray array;
    char err[512] = "";
    npy_load(path, &array, err, sizeof err);
    bool control_free = true;
    for (const char *c = err; *c != '\0'; c++) {
        control_free = control_free && (unsigned char)*c >= 0x20 && *c != 0x7f;
    }
    EXPECT(control_free && strstr(err, "(2,\\x0a3) \\x1b[2J}") != NULL,
           "a header with a newline and ESC: one line, control bytes as \\xNN: %s", err);
}

/* A FIFO opened for reading waits for a writer: npy_load must refuse it
 * without opening it that way. The child process fails the test if the
 * load has not returned within 5 seconds. */
static void test_fifo_is_refused_at_once(void)
{
    const char *path = scratch_path("fifo.npy");
    if (mkfifo(path, 0600) != 0) {
        perror("mkfifo");
        exit(1);
    }
    pid_t watchdog = fork();
    if (watchdog == 0) {
        sleep(5);
        fprintf(stderr, "npy_load of a FIFO has not returned after 5 s\n");
        kill(getppid(), SIGKILL);
        _exit(1);
    }
    expect_refused(path, "not a regular file", "a FIFO");
    kill(watchdog, SIGKILL);
    waitpid(watchdog, NULL, 0);
}

static void test_save_errors(void)
{
    char err[512] = "";
    const size_t shape[NPY_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float value = 0;
    int status = npy_save("/nonexistent-directory/x.npy", NPY_FLOAT32, 1, shape, &value, err, sizeof err);
    EXPECT(status == -1 && strcmp(err, "/nonexistent-directory/x.npy: cannot open for writing: No such file or "
                                       "directory") == 0,
           "an unwritable path is refused: %s", err);
    status = npy_save(scratch_path("nine.npy"), NPY_FLOAT32, NPY_MAX_DIMS + 1, shape, &value, err, sizeof err);
    EXPECT(status == -1 && strstr(err, "cannot save 9 dimensions (0 to 8 are supported)") != NULL,
           "9 dimensions are refused: %s", err);
}

typedef struct {
    const char *path;
    NpyDtype dtype;
    int ndim;
    const size_t *shape;
} LoadRequest;

static void load_or_exit(void *ctx)
{
    const LoadRequest *request = ctx;
    NpyArray array = npy_load_or_exit(request->path, request->dtype, request->ndim, request->shape);
    npy_free(&array);
}

static void save_or_exit(void *ctx)
{
    const LoadRequest *request = ctx;
    float value = 1;
    npy_save_or_exit(request->path, request->dtype, request->ndim, request->shape, &value);
}

/* In a child process: exit status, and stderr is exactly `expected` (one line). */
static void expect_exit(void (*body)(void *), LoadRequest request, int status, const char *expected, const char *what)
{
    ChildResult child = test_run_child(body, &request);
    char line[512];
    snprintf(line, sizeof line, "test_npy: error: %s\n", expected);
    bool ok = child.exit_status == status && child.err_lines == (expected[0] != '\0') &&
              strcmp(child.err, expected[0] != '\0' ? line : "") == 0;
    EXPECT(ok, "%s: expected status %d and \"%s\", got status %d (signal %d) and:\n%s", what, status, expected,
           child.exit_status, child.signal, child.err);
}

static void test_load_or_exit(void)
{
    const char *path = scratch_path("matrix.npy");
    const size_t shape[] = {3, 4};
    double data[12];
    fill_pattern(NPY_FLOAT64, data, 12);
    npy_save_or_exit(path, NPY_FLOAT64, 2, shape, data);

    const size_t any_by_4[] = {0, 4}, five_by_4[] = {5, 4}, three_by_4_by_1[] = {3, 4, 1};
    NpyArray array = npy_load_or_exit(path, NPY_FLOAT64, 2, any_by_4);
    EXPECT(array.shape[0] == 3 && memcmp(array.data, data, sizeof data) == 0, "a matching file loads");
    npy_free(&array);

    char expected[512];
    expect_exit(load_or_exit, (LoadRequest){path, NPY_FLOAT64, 2, any_by_4}, 0, "", "a matching request");
    snprintf(expected, sizeof expected, "%s: expected float32 [N x 4], got float64 [3 x 4]", path);
    expect_exit(load_or_exit, (LoadRequest){path, NPY_FLOAT32, 2, any_by_4}, 2, expected, "the wrong dtype");
    snprintf(expected, sizeof expected, "%s: expected float64 [5 x 4], got float64 [3 x 4]", path);
    expect_exit(load_or_exit, (LoadRequest){path, NPY_FLOAT64, 2, five_by_4}, 2, expected, "the wrong length");
    snprintf(expected, sizeof expected, "%s: expected float64 [3 x 4 x 1], got float64 [3 x 4]", path);
    expect_exit(load_or_exit, (LoadRequest){path, NPY_FLOAT64, 3, three_by_4_by_1}, 2, expected,
                "the wrong number of dimensions");
    snprintf(expected, sizeof expected, "%s: expected int64 [], got float64 [3 x 4]", path);
    expect_exit(load_or_exit, (LoadRequest){path, NPY_INT64, 0, NULL}, 2, expected, "a scalar expected");
    const char *missing = scratch_path("missing.npy");
    snprintf(expected, sizeof expected, "%s: cannot open: No such file or directory", missing);
    expect_exit(load_or_exit, (LoadRequest){missing, NPY_FLOAT64, 2, any_by_4}, 2, expected, "a missing file");
    const char *big = scratch_path("big.npy");
    snprintf(expected, sizeof expected, "%s: big-endian float32 ('>f4') is not supported; save it with .astype('<f4')",
             big);
    expect_exit(load_or_exit, (LoadRequest){big, NPY_FLOAT32, 2, any_by_4}, 2, expected, "a big-endian file");

    const char *unwritable = "/nonexistent-directory/out.npy";
    snprintf(expected, sizeof expected, "%s: cannot open for writing: No such file or directory", unwritable);
    expect_exit(save_or_exit, (LoadRequest){unwritable, NPY_FLOAT32, 0, NULL}, 1, expected,
                "a write that fails exits 1");
}

static bool exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}

static const float output_values[3] = {1.0f, 2.0f, 3.0f};
static const size_t output_shape[1] = {3};

/* Write a.npy and b.npy into the directory ctx names, all or nothing. */
static void write_output_pair(void *ctx)
{
    NpyOutputDir out = npy_output_dir_open(ctx);
    npy_output_dir_add(&out, "a.npy", NPY_FLOAT32, 1, output_shape, output_values);
    npy_output_dir_add(&out, "b.npy", NPY_FLOAT32, 1, output_shape, output_values);
    npy_output_dir_commit(&out);
}

static void test_output_dir(void)
{
    char dir[128], path[192];
    snprintf(dir, sizeof dir, "%s/outputs", scratch_directory);
    ChildResult child = test_run_child(write_output_pair, dir);
    snprintf(path, sizeof path, "%s/b.npy", dir);
    NpyArray loaded = {0};
    char err[512] = "";
    bool loads = npy_load(path, &loaded, err, sizeof err) == 0 && loaded.shape[0] == 3 &&
                 memcmp(loaded.data, output_values, sizeof output_values) == 0;
    EXPECT(child.exit_status == 0 && loads, "a new directory holds both files after the commit: %s", err);
    npy_free(&loaded);
    snprintf(path, sizeof path, "%s/.a.npy.partial", dir);
    EXPECT(!exists(path), "no partial file is left after the commit");

    /* The second write fails (its partial name is taken by a directory):
     * the first partial file is removed, and the older a.npy stays. */
    snprintf(path, sizeof path, "%s/.b.npy.partial", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    write_bytes(path, "older", 5);
    child = test_run_child(write_output_pair, dir);
    EXPECT(child.exit_status == 1 && child.err_lines == 1, "a failed write exits 1 with one line: %s", child.err);
    NpyArray older = {0};
    EXPECT(npy_load(path, &older, err, sizeof err) != 0 && strstr(err, "not a .npy file") != NULL,
           "a.npy is still the older file: %s", err);
    snprintf(path, sizeof path, "%s/.a.npy.partial", dir);
    EXPECT(!exists(path), "the partial a.npy of the failed run is removed");

    /* Both writes succeed but b.npy's final name is taken by a directory:
     * the commit refuses before it renames anything, so a.npy is still the
     * older file, and no partial file is left. */
    snprintf(path, sizeof path, "%s/.b.npy.partial", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/b.npy", dir);
    unlink(path);
    mkdir(path, 0700);
    child = test_run_child(write_output_pair, dir);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, "b.npy") != NULL,
           "a final name taken by a directory exits 1 with one line: %s", child.err);
    EXPECT(npy_load(path, &older, err, sizeof err) != 0 && strstr(err, "not a .npy file") != NULL,
           "a.npy is still the older file, not renamed before the refusal: %s", err);
    snprintf(path, sizeof path, "%s/.a.npy.partial", dir);
    EXPECT(!exists(path), "the partial a.npy of the refused commit is removed");

    /* A directory whose files' names would not fit in a path. */
    char long_dir[PATH_MAX];
    memset(long_dir, 'd', sizeof long_dir - 60);
    long_dir[sizeof long_dir - 60] = '\0';
    child = test_run_child(write_output_pair, long_dir);
    EXPECT(child.exit_status == 2 && child.err_lines == 1 && strstr(child.err, "too long") != NULL,
           "a directory name too long for its files is refused with exit 2: %s", child.err);
}

static void test_dtype_facts(void)
{
    EXPECT(npy_dtype_size(NPY_FLOAT32) == 4 && npy_dtype_size(NPY_FLOAT64) == 8 && npy_dtype_size(NPY_INT32) == 4 &&
               npy_dtype_size(NPY_INT64) == 8,
           "dtype sizes");
    EXPECT(strcmp(npy_dtype_name(NPY_FLOAT32), "float32") == 0 && strcmp(npy_dtype_name(NPY_INT64), "int64") == 0,
           "dtype names");
    NpyArray scalar =
                 {
                     .ndim = 0
    },
             empty = {.ndim = 2, .shape = {4, 0}};
    EXPECT(npy_element_count(&scalar) == 1 && npy_element_count(&empty) == 0, "a scalar has 1 element, 4 x 0 none");
}

int main(int argc, char **argv)
{
    (void)argc;
    cli_set_program_name(argv[0]);
    if (!scratch_directory_make("/tmp/test_npy.XXXXXX")) {
        return 1;
    }
    test_dtype_facts();
    test_round_trips();
    test_header_bytes();
    test_other_writers();
    test_errors();
    test_nul_in_the_header();
    test_control_bytes_are_escaped();
    test_fifo_is_refused_at_once();
    test_save_errors();
    test_output_dir();
    test_load_or_exit();
    scratch_directory_remove();
    return test_finish();
}
