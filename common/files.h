/* Opening files without surprises: an input that is not a regular file (a
 * directory, a FIFO, a device such as /dev/zero) is refused before anything
 * reads from it, so that a FIFO cannot block the program and a device cannot
 * feed it without end. */
#ifndef COMMON_FILES_H
#define COMMON_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

/* Open `path` for reading if it is a regular file. On failure return NULL,
 * with errno telling why (EINVAL: not a regular file), and set *why to the reason for an error line:
 * "not a regular file", or "cannot open: " and the system's message. Opening never blocks: the file is opened non-blocking,
 * checked, and only then read. */
FILE *open_regular_file(const char *path, const char **why);

/* A reader of a text format: fill *out from `stream`, or return -1 with one
 * line in err ("line 5: ...") and nothing in *out. */
typedef int TextParser(FILE *stream, void *out, char *err, size_t err_size);

/* A reader of one line: `line` without its newline or trailing blanks,
 * `line_number` counted from 1. Nonzero stops the reading. */
typedef int LineReader(void *state, char *line, int line_number);

/* Give each line of `stream` to `read_line`, in order, until it returns
 * nonzero; return that, or 0 at the end of the stream. */
int read_lines(FILE *stream, LineReader *read_line, void *state);

/* The error of a TextParser: put "line N: <message>" in err (without the
 * "line N: " where N is 0: an error of the whole text), control bytes
 * escaped since the line may hold anything, and return -1. A parser's
 * state usually keeps err, its size and the line number; a macro passes
 * them: #define refuse(p, ...) refuse_line((p)->err, (p)->err_size,
 * (p)->line_number, __VA_ARGS__). */
int refuse_line(char *err, size_t err_size, int line_number, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Run `parse` on text in memory (an empty text is an empty stream). */
int parse_text(const char *text, TextParser *parse, void *out, char *err, size_t err_size);

/* Run `parse` on the regular file at `path`; the error line starts with the
 * path. */
int parse_text_file(const char *path, TextParser *parse, void *out, char *err, size_t err_size);

/* A text file written whole or not at all, as the .npy outputs are
 * (common/npy.h): the text goes to ".NAME.partial" beside PATH, and only a
 * complete, closed file is renamed to PATH. A write that fails half-way
 * (a full disk, a file-size limit) leaves PATH as it was, never cut short.
 * An existing PATH that is not a regular file (/dev/full, a directory) is
 * refused: a rename would put a file where the device stood. A PATH that
 * is a symbolic link is written through: the file it points to is the one
 * replaced (its partial beside it), and the link stays a link. */
typedef struct {
    FILE *file;
    char *path, *partial;
} WholeFile;

/* The name a file is written under until it is whole: DIR/.NAME.partial
 * for DIR/NAME (.NAME.partial for a bare NAME), hidden from a listing and
 * beside the final file, on the same file system, so that renaming it into
 * place is atomic. The one spelling of it, for these files and the .npy
 * outputs. Written into `buffer` (`size` bytes); false if it does not fit. */
bool partial_file_path(char *buffer, size_t size, const char *path);

/* 0, or -1 with *why set ("not a regular file", "cannot create: ...")
 * and nothing created. */
int whole_file_open(WholeFile *out, const char *path, const char **why);
/* Close and rename into place: 0, or -1 if a write, the close or the rename
 * failed, with the partial file removed and *why set. */
int whole_file_commit(WholeFile *out, const char **why);

/* The same for a program: where writing fails, one line ("cannot write
 * PATH: why") and exit status 1. */
FILE *whole_file_open_or_exit(WholeFile *out, const char *path);
void whole_file_commit_or_exit(WholeFile *out);

COMMON_END_C

#endif
