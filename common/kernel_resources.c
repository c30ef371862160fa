#include "common/kernel_resources.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/files.h"

/* ptxas reports a function in three lines, in this order; `seen` says how
 * far the current one has come. */
typedef enum { SEEN_NOTHING, SEEN_PROPERTIES, SEEN_STACK_FRAME } Seen;

typedef struct {
    KernelResourceList *list;
    int capacity;
    Seen seen;
    KernelResources current;
    int line_number;
    char *err;
    size_t err_size;
} Parser;

#define refuse(p, ...) refuse_line((p)->err, (p)->err_size, (p)->line_number, __VA_ARGS__)

/* Move *cursor past `text` if the line continues with it. */
static bool take_text(const char **cursor, const char *text)
{
    size_t length = strlen(text);
    if (strncmp(*cursor, text, length) != 0)
        return false;
    *cursor += length;
    return true;
}

/* Move *cursor past a count written in decimal digits, into *value. */
static bool take_count(const char **cursor, long *value)
{
    if (!isdigit((unsigned char)**cursor))
        return false;
    char *end;
    errno = 0;
    *value = strtol(*cursor, &end, 10);
    if (errno == ERANGE)
        return false;
    *cursor = end;
    return true;
}

/* The message of a "ptxas info    : MESSAGE" line, or NULL for any other line. */
static const char *ptxas_info(const char *line)
{
    if (!take_text(&line, "ptxas info"))
        return NULL;
    line += strspn(line, " ");
    if (!take_text(&line, ":"))
        return NULL;
    return line + strspn(line, " ");
}

/* ptxas writes the stack frame line indented, under its properties line. */
static bool is_stack_frame_line(const char *line)
{
    return isspace((unsigned char)line[0]) && strstr(line, "bytes stack frame") != NULL;
}

static char *copy_text(const char *text)
{
    size_t size = strlen(text) + 1;
    return memcpy(array_alloc(size, 1), text, size);
}

static void start_function(Parser *p, const char *name)
{
    array_free(p->current.name);
    p->current = (KernelResources){.name = copy_text(name)};
    p->seen = SEEN_PROPERTIES;
}

/* "    624 bytes stack frame, 1464 bytes spill stores, 1248 bytes spill loads" */
static int read_stack_frame(Parser *p, const char *line)
{
    KernelResources *k = &p->current;
    const char *cursor = line + strspn(line, " \t");
    if (!(take_count(&cursor, &k->stack_bytes) && take_text(&cursor, " bytes stack frame, ") &&
          take_count(&cursor, &k->spill_store_bytes) && take_text(&cursor, " bytes spill stores, ") &&
          take_count(&cursor, &k->spill_load_bytes) && take_text(&cursor, " bytes spill loads") && *cursor == '\0'))
        return refuse(p,
                      "not a stack frame line as ptxas writes it (N bytes stack frame, N bytes spill stores, "
                      "N bytes spill loads): \"%s\"",
                      line);
    p->seen = SEEN_STACK_FRAME;
    return 0;
}

static void append_current(Parser *p, bool is_kernel)
{
    KernelResourceList *list = p->list;
    if (list->count == p->capacity) {
        int grown = p->capacity == 0 ? 16 : 2 * p->capacity;
        list->kernels = array_resize(list->kernels, (size_t)p->capacity, (size_t)grown, sizeof *list->kernels);
        p->capacity = grown;
    }
    p->current.is_kernel = is_kernel;
    list->kernels[list->count++] = p->current;
    p->current = (KernelResources){0};
    p->seen = SEEN_NOTHING;
}

/* A function whose properties were not followed by a "Used" line is a
 * device function: ptxas gives its stack frame only. */
static void end_device_function(Parser *p)
{
    if (p->seen == SEEN_STACK_FRAME)
        append_current(p, false);
}

/* "Used 32 registers, used 1 barriers, 624 bytes cumulative stack size, 256 bytes smem" */
static int read_usage(Parser *p, const char *message)
{
    if (p->seen != SEEN_STACK_FRAME)
        return refuse(p,
                      "a \"Used ... registers\" line with no \"Function properties for\" and stack frame "
                      "lines before it: \"%s\"",
                      message);
    const char *cursor = message;
    long registers;
    if (!(take_text(&cursor, "Used ") && take_count(&cursor, &registers) && registers <= INT_MAX &&
          take_text(&cursor, " registers") && (*cursor == '\0' || *cursor == ',')))
        return refuse(p, "not a usage line as ptxas writes it (Used N registers, ...): \"%s\"", message);
    p->current.registers = (int)registers;
    /* The fields after the registers: only the shared memory matters here
     * (the others count barriers, constant memory, the stack with callees). */
    while (take_text(&cursor, ", ")) {
        long bytes;
        const char *field = cursor;
        if (take_count(&field, &bytes) && take_text(&field, " bytes smem") && (*field == '\0' || *field == ','))
            p->current.shared_bytes = bytes;
        cursor += strcspn(cursor, ",");
    }
    append_current(p, true);
    return 0;
}

static int read_line(void *state, char *line, int line_number)
{
    Parser *p = state;
    p->line_number = line_number;
    const char *message = ptxas_info(line);
    bool properties = message != NULL && take_text(&message, "Function properties for ");
    if (p->seen == SEEN_PROPERTIES && !is_stack_frame_line(line))
        return refuse(p, "\"Function properties for %s\" is not followed by its stack frame line", p->current.name);
    if (properties) {
        if (*message == '\0')
            return refuse(p, "\"Function properties for\" names no function");
        end_device_function(p);
        start_function(p, message);
        return 0;
    }
    if (is_stack_frame_line(line)) {
        if (p->seen != SEEN_PROPERTIES)
            return refuse(p, "a stack frame line with no \"Function properties for\" line before it: \"%s\"", line);
        return read_stack_frame(p, line);
    }
    if (message != NULL && strncmp(message, "Used ", strlen("Used ")) == 0)
        return read_usage(p, message);
    return 0; /* a line this reader has no use for */
}

static int parse_stream(FILE *stream, void *record, char *err, size_t err_size)
{
    KernelResourceList *out = record;
    *out = (KernelResourceList){0};
    Parser p = {.list = out, .err = err, .err_size = err_size};
    int status = read_lines(stream, read_line, &p);
    if (status == 0 && p.seen == SEEN_PROPERTIES)
        status = refuse(&p, "the report ends before the stack frame line of \"%s\"", p.current.name);
    if (status == 0)
        end_device_function(&p);
    array_free(p.current.name);
    if (status != 0)
        kernel_resources_free(out);
    return status;
}

int kernel_resources_parse(const char *report, KernelResourceList *out, char *err, size_t err_size)
{
    return parse_text(report, parse_stream, out, err, err_size);
}

int kernel_resources_read(const char *path, KernelResourceList *out, char *err, size_t err_size)
{
    return parse_text_file(path, parse_stream, out, err, err_size);
}

void kernel_resources_free(KernelResourceList *list)
{
    for (int i = 0; i < list->count; i++)
        array_free(list->kernels[i].name);
    array_free(list->kernels);
    *list = (KernelResourceList){0};
}
