/* A fresh directory for the files a test program writes, paths in it, and
 * its removal at the end: what $scratch is to the cli test scripts. Only
 * in a header, because the test directories link no helper in common; so
 * each program that includes it has a directory of its own. */
#ifndef TESTS_SCRATCH_DIRECTORY_H
#define TESTS_SCRATCH_DIRECTORY_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Its path, once scratch_directory_make has made it. */
static char scratch_directory[64];

/* Make a directory from the template ("/tmp/NAME.XXXXXX", the X's made
 * unique); false, with the reason on stderr, where none can be made. */
static inline bool scratch_directory_make(const char *name_template)
{
    snprintf(scratch_directory, sizeof scratch_directory, "%s", name_template);
    if (mkdtemp(scratch_directory) == NULL) {
        perror("mkdtemp");
        return false;
    }
    return true;
}

/* The path of `name` in the directory, in one of eight buffers taken in
 * turn: it holds until the eighth call after this one, enough for the
 * paths of one command line. */
static inline const char *scratch_path(const char *name)
{
    static char paths[8][4200];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", scratch_directory, name);
    return path;
}

/* Remove the directory and all in it; where that fails, say so and go on:
 * the test's result does not depend on it. */
static inline void scratch_directory_remove(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", scratch_directory);
    if (system(command) != 0) {
        printf("could not remove %s\n", scratch_directory);
    }
}

#endif
