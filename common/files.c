/* realpath() is X/Open, beyond the POSIX the build asks for. */
#define _XOPEN_SOURCE 700

#include "common/files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/cli.h"

/* "cannot <doing>: <the system's reason>", for the calling thread. */
static _Thread_local char failure[160];

static const char *cannot(const char *doing)
{
    /* Callers read errno after a failure (results_show tells a missing file
     * from an unreadable one): formatting must not change it. */
    int reason = errno;
    snprintf(failure, sizeof failure, "cannot %s: %s", doing, strerror(reason));
    errno = reason;
    return failure;
}

FILE *open_regular_file(const char *path, const char **why)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer. It changes nothing for regular files. */
    int descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (descriptor < 0) {
        *why = cannot("open");
        return NULL;
    }
    struct stat info;
    if (fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
        *why = "not a regular file";
        close(descriptor);
        errno = EINVAL;
        return NULL;
    }
    FILE *file = fdopen(descriptor, "rb");
    if (file == NULL) {
        *why = cannot("open");
        close(descriptor);
    }
    return file;
}

int read_lines(FILE *stream, LineReader *read_line, void *state)
{
    char *line = NULL;
    size_t size = 0;
    int status = 0;
    for (int number = 1; status == 0 && getline(&line, &size, stream) >= 0; number++) {
        size_t length = strlen(line);
        while (length > 0 && isspace((unsigned char)line[length - 1]))
            line[--length] = '\0';
        status = read_line(state, line, number);
    }
    free(line);
    return status;
}

int refuse_line(char *err, size_t err_size, int line_number, const char *fmt, ...)
{
    char where[32];
    snprintf(where, sizeof where, "line %d", line_number);
    va_list args;
    va_start(args, fmt);
    cli_error_message(err, err_size, line_number > 0 ? where : NULL, fmt, args);
    va_end(args);
    return -1;
}

int parse_text(const char *text, TextParser *parse, void *out, char *err, size_t err_size)
{
    /* fmemopen refuses a buffer of size 0: an empty text reads as /dev/null. */
    size_t length = strlen(text);
    FILE *stream = length == 0 ? fopen("/dev/null", "r") : fmemopen((void *)text, length, "r");
    if (stream == NULL) {
        snprintf(err, err_size, "cannot read the text from memory: %s", strerror(errno));
        return -1;
    }
    int status = parse(stream, out, err, err_size);
    fclose(stream);
    return status;
}

int parse_text_file(const char *path, TextParser *parse, void *out, char *err, size_t err_size)
{
    const char *why;
    FILE *file = open_regular_file(path, &why);
    if (file == NULL) {
        snprintf(err, err_size, "%s: %s", path, why);
        return -1;
    }
    char reason[512];
    int status = parse(file, out, reason, sizeof reason);
    /* getline ends on a read error as at the end of the file: without this
     * test, a file that fails half-way (EIO) would read as a shorter one. */
    if (status == 0 && ferror(file)) {
        snprintf(reason, sizeof reason, "read error: %s", strerror(errno));
        status = -1;
    }
    fclose(file);
    if (status != 0)
        snprintf(err, err_size, "%s: %s", path, reason);
    return status;
}

bool partial_file_path(char *buffer, size_t size, const char *path)
{
    const char *slash = strrchr(path, '/');
    int dir_length = slash != NULL ? (int)(slash - path) + 1 : 0;
    int length = snprintf(buffer, size, "%.*s.%s.partial", dir_length, path, path + dir_length);
    return length >= 0 && (size_t)length < size;
}

/* partial_file_path, allocated to fit; the caller frees. */
static char *partial_path(const char *path)
{
    size_t size = strlen(path) + sizeof "..partial";
    char *partial = ALLOC_ARRAY(size, char);
    partial_file_path(partial, size, path);
    return partial;
}

/* The file that writing to `path` replaces: `path` itself, or the file a
 * symbolic link there points to, resolved, so that the rename replaces the
 * file and not the link (which, renamed over, would become a plain file,
 * and its target would keep its old contents). NULL, with *why set, for a
 * link that leads nowhere. The caller frees. */
static char *file_to_replace(const char *path, const char **why)
{
    struct stat info;
    bool is_link = lstat(path, &info) == 0 && S_ISLNK(info.st_mode);
    char *resolved = is_link ? realpath(path, NULL) : NULL;
    if (is_link && resolved == NULL) {
        *why = cannot("follow the symbolic link");
        return NULL;
    }
    const char *target = is_link ? resolved : path;
    char *copy = ALLOC_ARRAY(strlen(target) + 1, char);
    strcpy(copy, target);
    free(resolved);
    return copy;
}

int whole_file_open(WholeFile *out, const char *path, const char **why)
{
    struct stat info;
    *out = (WholeFile){0};
    if (stat(path, &info) == 0 && !S_ISREG(info.st_mode)) {
        *why = "not a regular file";
        return -1;
    }
    char *final = file_to_replace(path, why);
    if (final == NULL)
        return -1;
    char *partial = partial_path(final);
    FILE *file = fopen(partial, "w");
    if (file == NULL) {
        *why = cannot("create");
        array_free(partial);
        array_free(final);
        return -1;
    }
    *out = (WholeFile){file, final, partial};
    return 0;
}

int whole_file_commit(WholeFile *out, const char **why)
{
    int status = 0;
    if (ferror(out->file) | fclose(out->file)) { /* "|", not "||": close it either way */
        *why = "cannot write the whole file";
        status = -1;
    } else if (rename(out->partial, out->path) != 0) {
        *why = cannot("rename into place");
        status = -1;
    }
    if (status != 0)
        remove(out->partial);
    array_free(out->path);
    array_free(out->partial);
    *out = (WholeFile){0};
    return status;
}

FILE *whole_file_open_or_exit(WholeFile *out, const char *path)
{
    const char *why;
    if (whole_file_open(out, path, &why) != 0)
        cli_fail_status(1, "cannot write %s: %s", path, why);
    return out->file;
}

void whole_file_commit_or_exit(WholeFile *out)
{
    char *path = ALLOC_ARRAY(strlen(out->path) + 1, char); /* the commit frees out->path */
    strcpy(path, out->path);
    const char *why;
    if (whole_file_commit(out, &why) != 0)
        cli_fail_status(1, "cannot write %s: %s", path, why);
    array_free(path);
}
