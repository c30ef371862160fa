/* common/files: a text file written whole or not at all (WholeFile), and a
 * text file whose reading fails half-way, which must not read as a shorter
 * file. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/testing.h"
#include "tests/scratch_directory.h"

/* The file's text, or NULL where it cannot be read (the caller frees). */
static char *read_text(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return NULL;
    char *text = calloc(1, 4096);
    size_t length = fread(text, 1, 4095, file);
    text[length] = '\0';
    fclose(file);
    return text;
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        perror(path);
        exit(1);
    }
    fputs(text, file);
    fclose(file);
}

static bool holds(const char *path, const char *expected)
{
    char *text = read_text(path);
    bool same = text != NULL && strcmp(text, expected) == 0;
    free(text);
    return same;
}

/* Nothing in the directory but `only`: no partial file left behind. */
static bool alone_in_directory(const char *only)
{
    char command[256];
    snprintf(command, sizeof command, "test \"$(ls -A '%s')\" = '%s'", scratch_directory, only);
    return system(command) == 0;
}

static void test_whole_file_is_written(void)
{
    const char *path = scratch_path("data.txt"), *why = "";
    WholeFile out;
    EXPECT(whole_file_open(&out, path, &why) == 0, "opens: %s", why);
    fputs("one\ntwo\n", out.file);
    EXPECT(access(path, F_OK) != 0, "nothing at the path before the commit");
    EXPECT(whole_file_commit(&out, &why) == 0 && holds(path, "one\ntwo\n") && alone_in_directory("data.txt"),
           "the commit puts the whole text at the path, and no partial file stays: %s", why);
    unlink(path);
}

/* In a child, with a file-size limit below the text (SIGXFSZ ignored, so
 * the write fails with EFBIG instead of killing the process). */
static void write_past_a_size_limit(void *ctx)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit original, limit;
    getrlimit(RLIMIT_FSIZE, &original);
    limit = original;
    limit.rlim_cur = 16;
    setrlimit(RLIMIT_FSIZE, &limit);
    WholeFile out;
    const char *why = "";
    if (whole_file_open(&out, ctx, &why) != 0) {
        printf("open: %s\n", why);
        exit(3);
    }
    for (int i = 0; i < 100; i++)
        fputs("a line longer than the limit allows\n", out.file);
    int status = whole_file_commit(&out, &why);
    setrlimit(RLIMIT_FSIZE, &original); /* the limit holds for stdout too */
    printf("%s\n", why);
    exit(status == 0 ? 0 : 1);
}

static void test_failed_write_keeps_the_older_file(void)
{
    const char *path = scratch_path("kept.txt");
    write_file(path, "older\n");
    ChildResult child = test_run_child(write_past_a_size_limit, (void *)path);
    EXPECT(child.exit_status == 1 && strstr(child.out, "cannot write the whole file") != NULL,
           "a write past the size limit fails: status %d, out: %s", child.exit_status, child.out);
    EXPECT(holds(path, "older\n") && alone_in_directory("kept.txt"),
           "the older file is as it was, and the partial file is gone");
    unlink(path);
}

/* A program's forms: one line naming the file, and status 1. */
static void open_a_directory_or_exit(void *ctx)
{
    WholeFile out;
    whole_file_open_or_exit(&out, ctx);
}

static void write_past_a_size_limit_or_exit(void *ctx)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096}; /* room for the error line in the captured stderr, a file too */
    WholeFile out;
    FILE *file = whole_file_open_or_exit(&out, ctx);
    setrlimit(RLIMIT_FSIZE, &limit);
    for (int i = 0; i < 1000; i++)
        fputs("a line longer than the limit allows\n", file);
    whole_file_commit_or_exit(&out);
}

static void expect_one_line_and_status_1(ChildResult child, const char *expected, const char *what)
{
    EXPECT(child.exit_status == 1 && child.err_lines == 1 && strstr(child.err, expected) != NULL,
           "%s: status %d (expected 1), stderr (expected one line with '%s'): %s", what, child.exit_status, expected,
           child.err);
}

static void test_or_exit_forms(void)
{
    char expected[512];
    snprintf(expected, sizeof expected, "cannot write %s: not a regular file", scratch_directory);
    expect_one_line_and_status_1(test_run_child(open_a_directory_or_exit, (void *)scratch_directory), expected,
                                 "opening a directory");
    const char *path = scratch_path("limited.txt");
    snprintf(expected, sizeof expected, "cannot write %s: cannot write the whole file", path);
    expect_one_line_and_status_1(test_run_child(write_past_a_size_limit_or_exit, (void *)path), expected,
                                 "a write past the size limit");
    EXPECT(access(path, F_OK) != 0 && alone_in_directory(""), "nothing is left of the failed file");
}

static void test_refuses_what_is_no_regular_file(void)
{
    WholeFile out;
    const char *why = "";
    EXPECT(whole_file_open(&out, scratch_directory, &why) == -1 && strcmp(why, "not a regular file") == 0,
           "a directory: %s", why);
    if (access("/dev/full", F_OK) == 0) {
        struct stat before;
        stat("/dev/full", &before);
        EXPECT(whole_file_open(&out, "/dev/full", &why) == -1 && strcmp(why, "not a regular file") == 0 &&
                   S_ISCHR(before.st_mode),
               "a device is refused, not replaced by a file: %s", why);
    }
    EXPECT(whole_file_open(&out, scratch_path("no such directory/x.txt"), &why) == -1 &&
               strncmp(why, "cannot create: ", strlen("cannot create: ")) == 0,
           "a directory that does not exist: %s", why);
}

/* A symbolic link is written through: its target gets the text, the link
 * stays a link, and no partial file stays beside either. A link that leads
 * nowhere is refused. */
static void test_symbolic_link_is_written_through(void)
{
    const char *target = scratch_path("target.txt"), *link = scratch_path("link.txt"), *why = "";
    write_file(target, "old\n");
    EXPECT(symlink("target.txt", link) == 0, "made the link");
    WholeFile out;
    EXPECT(whole_file_open(&out, link, &why) == 0, "opens through the link: %s", why);
    fputs("new\n", out.file);
    struct stat info;
    EXPECT(whole_file_commit(&out, &why) == 0 && holds(target, "new\n") && lstat(link, &info) == 0 &&
               S_ISLNK(info.st_mode),
           "the target holds the new text and the link is still a link: %s", why);
    unlink(target);
    EXPECT(whole_file_open(&out, link, &why) == -1 &&
               strncmp(why, "cannot follow the symbolic link: ", strlen("cannot follow the symbolic link: ")) == 0,
           "a link to nothing: %s", why);
    EXPECT(alone_in_directory("link.txt"), "nothing made beside the dangling link");
    unlink(link);
}

/* A line reader that accepts every line. */
static int count_lines(FILE *stream, void *out, char *err, size_t err_size)
{
    (void)err;
    (void)err_size;
    int *count = out;
    char line[256];
    while (fgets(line, sizeof line, stream) != NULL)
        (*count)++;
    return 0;
}

/* /proc/self/mem is a regular file to stat, and its first read fails (EIO:
 * address 0 is not mapped). Read as text, that must be an error, not an
 * empty file. */
static void test_read_error_is_an_error(void)
{
    int count = 0;
    char err[256] = "";
    EXPECT(parse_text_file(scratch_path("none.txt"), count_lines, &count, err, sizeof err) == -1 &&
               strstr(err, "cannot open") != NULL,
           "a missing file: %s", err);
    if (access("/proc/self/mem", R_OK) == 0) {
        EXPECT(parse_text_file("/proc/self/mem", count_lines, &count, err, sizeof err) == -1 &&
                   strstr(err, "/proc/self/mem: read error: ") != NULL,
               "a file whose read fails: %s", err);
    }
    const char *path = scratch_path("three.txt");
    write_file(path, "a\nb\nc\n");
    EXPECT(parse_text_file(path, count_lines, &count, err, sizeof err) == 0 && count == 3, "a file of 3 lines: %d",
           count);
    unlink(path);
}

int main(void)
{
    if (!scratch_directory_make("/tmp/test_files.XXXXXX"))
        return 1;
    test_whole_file_is_written();
    test_failed_write_keeps_the_older_file();
    test_refuses_what_is_no_regular_file();
    test_or_exit_forms();
    test_symbolic_link_is_written_through();
    test_read_error_is_an_error();
    scratch_directory_remove();
    return test_finish();
}
