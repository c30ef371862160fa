/* Opening files without surprises: an input that is not a regular file (a
 * directory, a FIFO, a device such as /dev/zero) is refused before anything
 * reads from it, so that a FIFO cannot block the program and a device cannot
 * feed it without end. */
#ifndef COMMON_FILES_H
#define COMMON_FILES_H

#include <stdio.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

/* Open `path` for reading if it is a regular file. On failure return NULL,
 * with errno telling why (EINVAL: not a regular file), and set *why to the reason for an error line:
 * "not a regular file", or "cannot open: " and the system's message. Opening never blocks: the file is opened non-blocking,
 * checked, and only then read. */
FILE *open_regular_file(const char *path, const char **why);

COMMON_END_C

#endif
