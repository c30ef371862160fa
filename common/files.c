#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "cannot open: <the system's reason>", for the calling thread. */
static _Thread_local char open_failure[160];

static const char *cannot_open(void)
{
    /* Callers read errno after a failure (results_show tells a missing file
     * from an unreadable one): formatting must not change it. */
    int reason = errno;
    snprintf(open_failure, sizeof open_failure, "cannot open: %s", strerror(reason));
    errno = reason;
    return open_failure;
}

FILE *open_regular_file(const char *path, const char **why)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer. It changes nothing for regular files. */
    int descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (descriptor < 0) {
        *why = cannot_open();
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
        *why = cannot_open();
        close(descriptor);
    }
    return file;
}
