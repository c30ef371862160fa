#include "common/npy.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/files.h"
#include "kernels/bf16.h"
#include "kernels/fp16.h"

/* .npy data is little-endian and is written and read here straight from
 * memory, which is right only on a little-endian host (x86-64, ARM64). */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host"
#endif

/* The file starts with the magic "\x93NUMPY", a major and a minor version
 * byte, the header length (2 bytes in version 1, 4 in versions 2 and 3,
 * little-endian) and the header: a Python dict literal ending in '\n'. */
static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
enum { NPY_PREFIX_BYTES = 8, NPY_HEADER_ALIGNMENT = 64 };
/* Real array headers are a few hundred bytes; refusing a longer one avoids
 * allocating whatever a corrupt length field says. */
enum { NPY_HEADER_LIMIT = 1 << 20 };

typedef struct {
    NpyDtype dtype;
    const char *descr; /* the NumPy type string: '<' little-endian, kind, bytes */
    const char *name;
    size_t size;
} DtypeInfo;

static const DtypeInfo dtype_table[] = {
    {NPY_FLOAT32, "<f4", "float32", 4},
    {NPY_FLOAT64, "<f8", "float64", 8},
    {NPY_FLOAT16, "<f2", "float16", 2},
    {NPY_INT16,   "<i2", "int16",   2},
    {NPY_UINT16,  "<u2", "uint16",  2},
    {NPY_INT32,   "<i4", "int32",   4},
    {NPY_INT64,   "<i8", "int64",   8},
};
enum { DTYPE_COUNT = sizeof dtype_table / sizeof dtype_table[0] };

static const DtypeInfo *dtype_info(NpyDtype dtype)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++) {
        if (dtype_table[i].dtype == dtype) {
            return &dtype_table[i];
        }
    }
    return NULL;
}

size_t npy_dtype_size(NpyDtype dtype)
{
    const DtypeInfo *info = dtype_info(dtype);
    return info != NULL ? info->size : 0;
}

const char *npy_dtype_name(NpyDtype dtype)
{
    const DtypeInfo *info = dtype_info(dtype);
    return info != NULL ? info->name : "unknown dtype";
}

size_t npy_element_count(const NpyArray *array)
{
    size_t count = 1; /* a scalar, ndim 0, is one element */
    for (int d = 0; d < array->ndim; d++) {
        count *= array->shape[d];
    }
    return count;
}

/* Elements in a shape, or false if they (or their bytes) overflow size_t. */
static bool shape_count(int ndim, const size_t *shape, size_t elem_size, size_t *count)
{
    size_t product = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] != 0 && product > SIZE_MAX / shape[d]) {
            return false;
        }
        product *= shape[d];
    }
    *count = product;
    return elem_size == 0 || product <= SIZE_MAX / elem_size;
}

/* "[1823 x 781]", "[5]", "[]" for a scalar; with any_zero, a 0 prints as N
 * (the "any length" of an expected shape). */
static void format_shape(char *text, size_t size, int ndim, const size_t *shape, bool any_zero)
{
    size_t used = (size_t)snprintf(text, size, "[");
    for (int d = 0; d < ndim && used < size; d++) {
        const char *separator = d > 0 ? " x " : "";
        if (any_zero && shape[d] == 0) {
            used += (size_t)snprintf(text + used, size - used, "%sN", separator);
        } else {
            used += (size_t)snprintf(text + used, size - used, "%s%zu", separator, shape[d]);
        }
    }
    if (used < size) {
        snprintf(text + used, size - used, "]");
    }
}

/* Put "<path>: <reason>" in err, control bytes escaped, and return -1. */
static int npy_error(char *err, size_t err_size, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int npy_error(char *err, size_t err_size, const char *path, const char *fmt, ...)
{
    /* One line whatever the file holds: a header may quote anything. */
    va_list args;
    va_start(args, fmt);
    cli_error_message(err, err_size, path, fmt, args);
    va_end(args);
    return -1;
}

/* The version 1.0 header, padded with spaces so that the data starts at a
 * multiple of 64 bytes, as NumPy does (the data can then be memory-mapped and
 * read with aligned vector loads). Returns the header length. */
static size_t build_header(char *header, size_t size, const DtypeInfo *info, int ndim, const size_t *shape)
{
    size_t length = (size_t)snprintf(header, size, "{'descr': '%s', 'fortran_order': False, 'shape': (", info->descr);
    for (int d = 0; d < ndim; d++) {
        length += (size_t)snprintf(header + length, size - length, d > 0 ? ", %zu" : "%zu", shape[d]);
    }
    /* A 1-tuple needs its comma in Python: (5,) */
    length += (size_t)snprintf(header + length, size - length, "%s), }", ndim == 1 ? "," : "");
    size_t unpadded = NPY_PREFIX_BYTES + 2 + length + 1;
    size_t padding = (NPY_HEADER_ALIGNMENT - unpadded % NPY_HEADER_ALIGNMENT) % NPY_HEADER_ALIGNMENT;
    memset(header + length, ' ', padding);
    length += padding;
    header[length++] = '\n';
    return length;
}

static bool write_file(FILE *file, const char *header, size_t header_length, const void *data, size_t data_bytes)
{
    unsigned char prefix[NPY_PREFIX_BYTES + 2];
    memcpy(prefix, npy_magic, sizeof npy_magic);
    prefix[6] = 1; /* version 1.0 */
    prefix[7] = 0;
    prefix[8] = (unsigned char)(header_length & 0xFF);
    prefix[9] = (unsigned char)(header_length >> 8);
    return fwrite(prefix, 1, sizeof prefix, file) == sizeof prefix &&
           fwrite(header, 1, header_length, file) == header_length && fwrite(data, 1, data_bytes, file) == data_bytes;
}

int npy_save(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data, char *err,
             size_t err_size)
{
    const DtypeInfo *info = dtype_info(dtype);
    if (info == NULL) {
        return npy_error(err, err_size, path, "cannot save dtype number %d: not a supported dtype", (int)dtype);
    }
    if (ndim < 0 || ndim > NPY_MAX_DIMS) {
        return npy_error(err, err_size, path, "cannot save %d dimensions (0 to %d are supported)", ndim, NPY_MAX_DIMS);
    }
    size_t count;
    if (!shape_count(ndim, shape, info->size, &count)) {
        return npy_error(err, err_size, path, "cannot save: the shape's size in bytes overflows size_t");
    }
    /* Longest case: 8 dimensions of 20 digits each, well under 512 bytes,
     * plus at most 63 bytes of padding. */
    char header[640];
    size_t header_length = build_header(header, sizeof header, info, ndim, shape);

    FILE *file = fopen(path, "wb");
    if (file == NULL) {
        return npy_error(err, err_size, path, "cannot open for writing: %s", strerror(errno));
    }
    bool written = write_file(file, header, header_length, data, count * info->size);
    int write_errno = errno;
    if (fclose(file) != 0 && written) {
        written = false;
        write_errno = errno;
    }
    if (!written) {
        remove(path); /* leave no truncated file behind to be read later */
        return npy_error(err, err_size, path, "write failed: %s", strerror(write_errno));
    }
    return 0;
}

void npy_save_or_exit(const char *path, NpyDtype dtype, int ndim, const size_t *shape, const void *data)
{
    char err[CLI_MESSAGE_SIZE];
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err) != 0) {
        cli_fail_status(1, "%s", err);
    }
}

/* Reading the header: a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * with the keys in any order, either kind of quotes, any spacing. */

typedef struct {
    const char *p, *end;
} Cursor;

static void skip_spaces(Cursor *c)
{
    while (c->p < c->end && isspace((unsigned char)*c->p)) {
        c->p++;
    }
}

/* Consume `ch` (after any spaces) if it comes next. */
static bool accept_char(Cursor *c, char ch)
{
    skip_spaces(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static bool accept_word(Cursor *c, const char *word)
{
    skip_spaces(c);
    size_t length = strlen(word);
    if ((size_t)(c->end - c->p) >= length && memcmp(c->p, word, length) == 0) {
        c->p += length;
        return true;
    }
    return false;
}

/* A quoted string ('...' or "...") into text; false if malformed or too long. */
static bool parse_string(Cursor *c, char *text, size_t size)
{
    skip_spaces(c);
    if (c->p == c->end || (*c->p != '\'' && *c->p != '"')) {
        return false;
    }
    char quote = *c->p++;
    size_t length = 0;
    while (c->p < c->end && *c->p != quote) {
        /* A NUL would end the C string early: '<f4\0x' must not read as '<f4'. */
        if (length + 1 >= size || *c->p == '\0') {
            return false;
        }
        text[length++] = *c->p++;
    }
    text[length] = '\0';
    return accept_char(c, quote);
}

/* A dimension; one too large for size_t becomes SIZE_MAX, which the element
 * count then reports as an overflow. */
static bool parse_dimension(Cursor *c, size_t *dimension)
{
    skip_spaces(c);
    if (c->p == c->end || !isdigit((unsigned char)*c->p)) {
        return false;
    }
    size_t value = 0;
    for (; c->p < c->end && isdigit((unsigned char)*c->p); c->p++) {
        size_t digit = (size_t)(*c->p - '0');
        value = value > (SIZE_MAX - digit) / 10 ? SIZE_MAX : value * 10 + digit;
    }
    *dimension = value;
    return true;
}

/* A tuple of dimensions: (), (5,), (3, 4). *ndim counts every dimension,
 * also those beyond NPY_MAX_DIMS (which are not stored), so that the caller
 * can say how many there were. */
static bool parse_shape(Cursor *c, size_t shape[NPY_MAX_DIMS], int *ndim)
{
    *ndim = 0;
    if (!accept_char(c, '(')) {
        return false;
    }
    while (!accept_char(c, ')')) {
        size_t dimension;
        if (!parse_dimension(c, &dimension)) {
            return false;
        }
        if (*ndim < NPY_MAX_DIMS) {
            shape[*ndim] = dimension;
        }
        (*ndim)++;
        if (!accept_char(c, ',')) {
            return accept_char(c, ')');
        }
    }
    return true;
}

typedef struct {
    char descr[32];
    bool fortran_order;
    size_t shape[NPY_MAX_DIMS];
    int ndim;
    bool has_descr, has_fortran_order, has_shape;
} Header;

typedef enum { PARSE_OK, PARSE_MALFORMED, PARSE_UNKNOWN_KEY, PARSE_DESCR_NOT_STRING } ParseStatus;

static ParseStatus parse_entry(Cursor *c, const char *key, Header *header)
{
    if (strcmp(key, "descr") == 0) {
        /* A list here describes a record (structured) dtype. */
        header->has_descr = true;
        skip_spaces(c);
        if (c->p < c->end && *c->p == '[') {
            return PARSE_DESCR_NOT_STRING;
        }
        return parse_string(c, header->descr, sizeof header->descr) ? PARSE_OK : PARSE_MALFORMED;
    }
    if (strcmp(key, "fortran_order") == 0) {
        header->has_fortran_order = true;
        header->fortran_order = accept_word(c, "True");
        return header->fortran_order || accept_word(c, "False") ? PARSE_OK : PARSE_MALFORMED;
    }
    if (strcmp(key, "shape") == 0) {
        header->has_shape = true;
        return parse_shape(c, header->shape, &header->ndim) ? PARSE_OK : PARSE_MALFORMED;
    }
    return PARSE_UNKNOWN_KEY;
}

static ParseStatus parse_dict(Cursor *c, Header *header, char *key, size_t key_size)
{
    if (!accept_char(c, '{')) {
        return PARSE_MALFORMED;
    }
    while (!accept_char(c, '}')) {
        if (!parse_string(c, key, key_size) || !accept_char(c, ':')) {
            return PARSE_MALFORMED;
        }
        ParseStatus status = parse_entry(c, key, header);
        if (status != PARSE_OK) {
            return status;
        }
        if (!accept_char(c, ',')) {
            if (!accept_char(c, '}')) {
                return PARSE_MALFORMED;
            }
            break;
        }
    }
    /* Only the padding (spaces and the final newline) may follow. */
    skip_spaces(c);
    return c->p == c->end ? PARSE_OK : PARSE_MALFORMED;
}

/* The dtype for a type string, or an error naming why it is refused. */
static int dtype_from_descr(const char *path, const char *descr, NpyDtype *dtype, char *err, size_t err_size)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++) {
        if (strcmp(descr, dtype_table[i].descr) == 0) {
            *dtype = dtype_table[i].dtype;
            return 0;
        }
    }
    for (size_t i = 0; i < DTYPE_COUNT; i++) {
        if (descr[0] == '>' && strcmp(descr + 1, dtype_table[i].descr + 1) == 0) {
            return npy_error(err, err_size, path, "big-endian %s ('%s') is not supported; save it with .astype('%s')",
                             dtype_table[i].name, descr, dtype_table[i].descr);
        }
    }
    return npy_error(err, err_size, path,
                     "unsupported dtype '%s' (supported: '<f4' float32, '<f8' float64, '<f2' float16, '<i2' int16, "
                     "'<u2' uint16, '<i4' int32, '<i8' int64)",
                     descr);
}

/* Check a parsed header and fill in dtype and shape. */
static int header_to_array(const char *path, const Header *header, NpyArray *out, char *err, size_t err_size)
{
    if (!header->has_descr || !header->has_fortran_order || !header->has_shape) {
        return npy_error(err, err_size, path, "the header lacks '%s'",
                         !header->has_descr           ? "descr"
                         : !header->has_fortran_order ? "fortran_order"
                                                      : "shape");
    }
    if (dtype_from_descr(path, header->descr, &out->dtype, err, err_size) != 0) {
        return -1;
    }
    out->file_dtype = out->dtype;
    if (header->fortran_order) {
        return npy_error(err, err_size, path,
                         "Fortran-order (column-major) arrays are not supported; save np.ascontiguousarray(a)");
    }
    if (header->ndim > NPY_MAX_DIMS) {
        return npy_error(err, err_size, path, "%d dimensions, at most %d are supported", header->ndim, NPY_MAX_DIMS);
    }
    out->ndim = header->ndim;
    memcpy(out->shape, header->shape, (size_t)header->ndim * sizeof header->shape[0]);
    size_t count;
    if (!shape_count(out->ndim, out->shape, npy_dtype_size(out->dtype), &count)) {
        return npy_error(err, err_size, path, "the shape's size in bytes overflows size_t");
    }
    return 0;
}

static int parse_header(const char *path, const char *text, size_t length, NpyArray *out, char *err, size_t err_size)
{
    Header header = {0};
    char key[64] = "";
    Cursor cursor = {text, text + length};
    switch (parse_dict(&cursor, &header, key, sizeof key)) {
    case PARSE_OK:
        return header_to_array(path, &header, out, err, err_size);
    case PARSE_UNKNOWN_KEY:
        return npy_error(err, err_size, path, "unexpected key '%s' in the header", key);
    case PARSE_DESCR_NOT_STRING:
        return npy_error(err, err_size, path, "unsupported dtype: record (structured) dtypes are not read");
    case PARSE_MALFORMED:
        break;
    }
    /* Quote the header (without its padding and newline) to show what is wrong. */
    int shown = (int)length;
    while (shown > 0 && isspace((unsigned char)text[shown - 1])) {
        shown--;
    }
    return npy_error(err, err_size, path, "malformed header %.*s", shown > 200 ? 200 : shown, text);
}

/* A read that came back short: the file ended (`at_the_end` says what that
 * means), or reading it failed, which a shorter file must not hide. */
static int short_read(FILE *file, const char *path, const char *at_the_end, char *err, size_t err_size)
{
    if (ferror(file)) {
        return npy_error(err, err_size, path, "read error: %s", strerror(errno));
    }
    return npy_error(err, err_size, path, "%s", at_the_end);
}

/* The header length field: 2 bytes in version 1, 4 in versions 2 and 3. */
static int read_header_length(FILE *file, const char *path, size_t *length, size_t *prefix_bytes, char *err,
                              size_t err_size)
{
    unsigned char prefix[NPY_PREFIX_BYTES + 4];
    const char *not_npy = "not a .npy file (it does not start with \\x93NUMPY)";
    if (fread(prefix, 1, NPY_PREFIX_BYTES, file) != NPY_PREFIX_BYTES) {
        return short_read(file, path, not_npy, err, err_size);
    }
    if (memcmp(prefix, npy_magic, sizeof npy_magic) != 0) {
        return npy_error(err, err_size, path, "%s", not_npy);
    }
    int major = prefix[6], minor = prefix[7];
    if (major < 1 || major > 3 || minor != 0) {
        return npy_error(err, err_size, path, "unsupported .npy format version %d.%d (1.0, 2.0 and 3.0 are read)",
                         major, minor);
    }
    size_t field_bytes = major == 1 ? 2 : 4;
    if (fread(prefix + NPY_PREFIX_BYTES, 1, field_bytes, file) != field_bytes) {
        return short_read(file, path, "truncated: the file ends inside the header", err, err_size);
    }
    size_t value = 0;
    for (size_t i = field_bytes; i-- > 0;) {
        value = value << 8 | prefix[NPY_PREFIX_BYTES + i];
    }
    *length = value;
    *prefix_bytes = NPY_PREFIX_BYTES + field_bytes;
    return 0;
}

static int read_header(FILE *file, const char *path, NpyArray *out, size_t *data_offset, char *err, size_t err_size)
{
    size_t length = 0, prefix_bytes = 0;
    if (read_header_length(file, path, &length, &prefix_bytes, err, err_size) != 0) {
        return -1;
    }
    if (length > NPY_HEADER_LIMIT) {
        return npy_error(err, err_size, path, "the header claims %zu bytes, more than any array header needs", length);
    }
    char *text = array_alloc(length + 1, 1);
    int status = fread(text, 1, length, file) == length
                     ? parse_header(path, text, length, out, err, err_size)
                     : short_read(file, path, "truncated: the file ends inside the header", err, err_size);
    array_free(text);
    *data_offset = prefix_bytes + length;
    return status;
}

/* The data must be exactly what the shape says: fewer bytes is a truncated
 * file, more is something else appended that a reader should not ignore.
 * Checked against the file size before allocating, so a corrupt shape
 * cannot make the program allocate gigabytes first. */
static int read_data(FILE *file, const char *path, off_t file_size, size_t data_offset, NpyArray *out, char *err,
                     size_t err_size)
{
    size_t count = npy_element_count(out);
    size_t data_bytes = count * npy_dtype_size(out->dtype);
    size_t available = file_size > (off_t)data_offset ? (size_t)file_size - data_offset : 0;
    char shape[128];
    format_shape(shape, sizeof shape, out->ndim, out->shape, false);
    if (available < data_bytes) {
        return npy_error(err, err_size, path, "truncated: %s %s needs %zu bytes of data, the file has %zu",
                         npy_dtype_name(out->dtype), shape, data_bytes, available);
    }
    if (available > data_bytes) {
        return npy_error(err, err_size, path, "%zu unexpected bytes after the %zu bytes of %s %s data",
                         available - data_bytes, data_bytes, npy_dtype_name(out->dtype), shape);
    }
    out->data = array_alloc(count, npy_dtype_size(out->dtype));
    if (fread(out->data, 1, data_bytes, file) != data_bytes) {
        npy_free(out);
        return npy_error(err, err_size, path, "read failed: %s", strerror(errno));
    }
    return 0;
}

int npy_load(const char *path, NpyArray *out, char *err, size_t err_size)
{
    *out = (NpyArray){0};
    const char *why;
    FILE *file = open_regular_file(path, &why);
    if (file == NULL) {
        return npy_error(err, err_size, path, "%s", why);
    }
    struct stat info;
    size_t data_offset = 0;
    int status;
    if (fstat(fileno(file), &info) != 0) {
        status = npy_error(err, err_size, path, "cannot read: %s", strerror(errno));
    } else if (read_header(file, path, out, &data_offset, err, err_size) != 0) {
        status = -1;
    } else {
        status = read_data(file, path, info.st_size, data_offset, out, err, err_size);
    }
    fclose(file);
    return status;
}

static bool array_matches(const NpyArray *array, NpyDtype dtype, int ndim, const size_t *expected_shape)
{
    if (array->dtype != dtype || array->ndim != ndim) {
        return false;
    }
    for (int d = 0; d < ndim; d++) {
        if (expected_shape[d] != 0 && expected_shape[d] != array->shape[d]) {
            return false;
        }
    }
    return true;
}

/* One line and exit 2 unless the array has the dtype, ndim dimensions and
 * the expected shape (a 0 there: any length). */
static void require_shape(const char *path, NpyArray *array, NpyDtype dtype, int ndim, const size_t *expected_shape)
{
    if (!array_matches(array, dtype, ndim, expected_shape)) {
        char expected[160], got[160];
        format_shape(expected, sizeof expected, ndim, expected_shape, true);
        format_shape(got, sizeof got, array->ndim, array->shape, false);
        NpyDtype got_dtype = array->dtype;
        npy_free(array);
        cli_fail("%s: expected %s %s, got %s %s", path, npy_dtype_name(dtype), expected, npy_dtype_name(got_dtype),
                 got);
    }
}

NpyArray npy_load_or_exit(const char *path, NpyDtype dtype, int ndim, const size_t *expected_shape)
{
    NpyArray array;
    char err[CLI_MESSAGE_SIZE];
    if (npy_load(path, &array, err, sizeof err) != 0) {
        cli_fail("%s", err);
    }
    require_shape(path, &array, dtype, ndim, expected_shape);
    return array;
}

void npy_free(NpyArray *array)
{
    array_free(array->data);
    array->data = NULL;
}

NpyFloatEncoding npy_float_encoding_option(const char *option, const char *text)
{
    if (strcmp(text, "bf16") == 0) {
        return NPY_BF16_BITS;
    }
    if (strcmp(text, "auto") != 0) {
        cli_fail("%s expects auto (the file's float32 or float16) or bf16 (bfloat16 bits in int16 or uint16), got "
                 "'%s'",
                 option, text);
    }
    return NPY_IEEE_FLOATS;
}

/* Whether the encoding reads this dtype; if not, why not, in err. */
static int check_encoding(const char *path, NpyDtype dtype, NpyFloatEncoding encoding, char *err, size_t err_size)
{
    bool bits = dtype == NPY_INT16 || dtype == NPY_UINT16;
    if (encoding == NPY_BF16_BITS && !bits) {
        return npy_error(err, err_size, path, "--dtype bf16 reads bfloat16 bits from int16 or uint16, not from %s",
                         npy_dtype_name(dtype));
    }
    if (encoding == NPY_IEEE_FLOATS && bits) {
        return npy_error(err, err_size, path,
                         "%s: if these are bfloat16 bits, say --dtype bf16; integers are not read as numbers",
                         npy_dtype_name(dtype));
    }
    if (encoding == NPY_IEEE_FLOATS && dtype != NPY_FLOAT32 && dtype != NPY_FLOAT16) {
        return npy_error(err, err_size, path,
                         "expected float32 or float16 (or bfloat16 bits with --dtype bf16), got %s",
                         npy_dtype_name(dtype));
    }
    return 0;
}

// ANCHOR: widen_16_bit_floats_to_float32
/* fp16 and bf16 both widen exactly: every value of theirs is a float. */
static void widen_to_float32(const NpyArray *array, float *widened)
{
    const uint16_t *bits = array->data;
    size_t count = npy_element_count(array);
    for (size_t i = 0; i < count; i++) {
        widened[i] = array->dtype == NPY_FLOAT16 ? half_to_float(bits[i]) : bf16_to_float(bits[i]);
    }
}
// ANCHOR_END: widen_16_bit_floats_to_float32

int npy_load_as_float32(const char *path, NpyFloatEncoding encoding, NpyArray *out, char *err, size_t err_size)
{
    if (npy_load(path, out, err, err_size) != 0) {
        return -1;
    }
    if (check_encoding(path, out->dtype, encoding, err, err_size) != 0) {
        npy_free(out);
        return -1;
    }
    if (out->dtype != NPY_FLOAT32) {
        float *widened = array_alloc(npy_element_count(out), sizeof(float));
        widen_to_float32(out, widened);
        npy_free(out);
        out->data = widened;
        out->dtype = NPY_FLOAT32;
    }
    return 0;
}

NpyArray npy_load_as_float32_or_exit(const char *path, NpyFloatEncoding encoding, int ndim,
                                     const size_t *expected_shape)
{
    NpyArray array;
    char err[CLI_MESSAGE_SIZE];
    if (npy_load_as_float32(path, encoding, &array, err, sizeof err) != 0) {
        cli_fail("%s", err);
    }
    require_shape(path, &array, NPY_FLOAT32, ndim, expected_shape);
    return array;
}

/* DIR/NAME, or the name it is written under until then (partial_file_path,
 * common/files.h); false if it does not fit. */
static bool output_path(char *path, size_t size, const char *dir, const char *name, bool partial)
{
    char final[PATH_MAX];
    int length = snprintf(final, sizeof final, "%s/%s", dir, name);
    if (length < 0 || (size_t)length >= sizeof final)
        return false;
    if (partial)
        return partial_file_path(path, size, final);
    snprintf(path, size, "%s", final);
    return (size_t)length < size;
}

static void remove_partial_files(const NpyOutputDir *out)
{
    char path[PATH_MAX];
    for (int i = 0; i < out->count; i++) {
        if (output_path(path, sizeof path, out->dir, out->names[i], true)) {
            remove(path);
        }
    }
}

NpyOutputDir npy_output_dir_open(const char *dir)
{
    NpyOutputDir out = {.dir = dir};
    /* The longest path this directory will hold must fit, or a name would
     * be cut short: refuse before writing anything. */
    char path[PATH_MAX];
    char longest_name[NPY_OUTPUT_NAME_MAX];
    memset(longest_name, 'x', sizeof longest_name - 1);
    longest_name[sizeof longest_name - 1] = '\0';
    if (!output_path(path, sizeof path, dir, longest_name, true)) {
        cli_fail("the output directory's name is too long (%zu characters) to hold its files", strlen(dir));
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cli_fail_status(1, "%s: cannot create the directory: %s", dir, strerror(errno));
    }
    return out;
}

void npy_output_dir_add(NpyOutputDir *out, const char *name, NpyDtype dtype, int ndim, const size_t *shape,
                        const void *data)
{
    if (out->count == NPY_OUTPUT_DIR_MAX_FILES || strlen(name) >= NPY_OUTPUT_NAME_MAX) {
        cli_fail_status(1, "%s/%s: too many output files or too long a name (a program error)", out->dir, name);
    }
    snprintf(out->names[out->count], NPY_OUTPUT_NAME_MAX, "%s", name);
    out->count++;
    char path[PATH_MAX], err[CLI_MESSAGE_SIZE];
    output_path(path, sizeof path, out->dir, name, true);
    if (npy_save(path, dtype, ndim, shape, data, err, sizeof err) != 0) {
        remove_partial_files(out);
        cli_fail_status(1, "%s", err);
    }
}

/* rename() cannot put a file where a directory stands: check every final
 * name before renaming the first, so that a refusal leaves the older run's
 * files as they were. */
static void refuse_directories_in_the_way(NpyOutputDir *out)
{
    char final[PATH_MAX];
    struct stat info;
    for (int i = 0; i < out->count; i++) {
        output_path(final, sizeof final, out->dir, out->names[i], false);
        if (stat(final, &info) == 0 && S_ISDIR(info.st_mode)) {
            remove_partial_files(out);
            cli_fail_status(1, "%s: a directory is in the way of the output file", final);
        }
    }
}

void npy_output_dir_commit(NpyOutputDir *out)
{
    char partial[PATH_MAX], final[PATH_MAX];
    refuse_directories_in_the_way(out);
    for (int i = 0; i < out->count; i++) {
        output_path(partial, sizeof partial, out->dir, out->names[i], true);
        output_path(final, sizeof final, out->dir, out->names[i], false);
        if (rename(partial, final) != 0) {
            remove_partial_files(out);
            cli_fail_status(1, "%s: cannot rename into place: %s", final, strerror(errno));
        }
    }
}
