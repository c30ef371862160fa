#include "common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *program_name = "program";

/* While a subcommand runs: its entry, and "program subcommand" for error lines. */
static const CliCommand *running_command;
static char command_program_name[256];

const char *cli_program_name(void)
{
    return program_name;
}

void cli_set_program_name(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    program_name = slash != NULL ? slash + 1 : argv0;
}

void cli_escape_control_bytes(const char *text, char *escaped, size_t size)
{
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0' && used + 5 < size; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            used += (size_t)snprintf(escaped + used, size - used, "\\x%02x", *c);
        } else {
            escaped[used++] = (char)*c;
        }
    }
    escaped[used] = '\0';
}

void cli_error_message(char *escaped, size_t size, const char *where, const char *fmt, va_list args)
{
    char message[CLI_MESSAGE_SIZE];
    int used = where != NULL ? snprintf(message, sizeof message, "%s: ", where) : 0;
    if (used >= 0 && (size_t)used < sizeof message)
        vsnprintf(message + used, sizeof message - (size_t)used, fmt, args);
    cli_escape_control_bytes(message, escaped, size);
}

/* "<program>: <kind>: <message>" on stderr. stderr is unbuffered: format
 * the message first, so that the whole line goes out in one write and never
 * interleaves with other output. The message is as long as it needs to be:
 * a path may take thousands of bytes, and the reason comes after it. */
static void print_line(const char *kind, const char *fmt, va_list args)
{
    va_list measuring;
    va_copy(measuring, args);
    int length = vsnprintf(NULL, 0, fmt, measuring);
    va_end(measuring);
    size_t size = length > 0 ? (size_t)length + 1 : 1;
    char *message = malloc(size), *escaped = malloc(4 * size + 1); /* a control byte becomes 4 */
    if (message != NULL && escaped != NULL) {
        vsnprintf(message, size, fmt, args);
        cli_escape_control_bytes(message, escaped, 4 * size + 1);
        fprintf(stderr, "%s: %s: %s\n", program_name, kind, escaped);
    } else {
        fprintf(stderr, "%s: %s: (no memory left to say more)\n", program_name, kind);
    }
    free(message);
    free(escaped);
}

static _Noreturn void fail_with(int exit_status, const char *fmt, va_list args)
{
    print_line("error", fmt, args);
    exit(exit_status);
}

void cli_note(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    print_line("note", fmt, args);
    va_end(args);
}

_Noreturn void cli_fail(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fail_with(CLI_EXIT_USAGE, fmt, args);
}

_Noreturn void cli_fail_status(int exit_status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fail_with(exit_status, fmt, args);
}

/* strtol and strtod skip leading white space; a value that starts with it
 * was most likely mangled by quoting, so it is refused like other junk. */
static bool starts_like_a_number(const char *text)
{
    return text[0] != '\0' && !isspace((unsigned char)text[0]);
}

long cli_parse_long(const char *what, const char *text, long min, long max)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (!starts_like_a_number(text) || *end != '\0' || errno == ERANGE || value < min || value > max) {
        cli_fail("%s expects an integer in [%ld, %ld], got '%s'", what, min, max, text);
    }
    return value;
}

double cli_parse_double(const char *what, const char *text, double min, double max, bool above_min)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    /* strtod also reads hexadecimal ("0x1p-3"), which the integers, read
     * in base 10, refuse: one notation for every number. */
    bool number = starts_like_a_number(text) && *end == '\0' && strpbrk(text, "xX") == NULL;
    /* ERANGE is overflow, whose inf the range test refuses, or underflow: a
     * value below DBL_MIN (subnormal) is still the number given, to fewer
     * digits, but "1e-400" would silently become 0, and is refused. NaN
     * fails the range test by itself. */
    if (number && errno == ERANGE && value == 0.0) {
        cli_fail("%s: '%s' is too small for a double: it would become 0", what, text);
    }
    bool in_range = (above_min ? value > min : value >= min) && value <= max; /* false for NaN */
    if (!number || !isfinite(value) || !in_range) {
        cli_fail("%s expects a finite decimal number in %c%g, %g], got '%s'", what, above_min ? '(' : '[', min, max,
                 text);
    }
    return value;
}

/* An option's range as a long. A double bound beyond the range of long (such
 * as 1e300 for "no limit") stands for the limit of long itself; converting it
 * directly would be undefined behaviour. */
static long long_bound(double bound)
{
    if (bound <= (double)LONG_MIN) {
        return LONG_MIN;
    }
    if (bound >= (double)LONG_MAX) {
        return LONG_MAX;
    }
    return (long)bound;
}

static void parse_value(const CliOption *option, const char *text)
{
    switch (option->kind) {
    case CLI_INT:
        *(long *)option->value = cli_parse_long(option->name, text, long_bound(option->min), long_bound(option->max));
        break;
    case CLI_DOUBLE:
        *(double *)option->value = cli_parse_double(option->name, text, option->min, option->max, false);
        break;
    case CLI_DOUBLE_ABOVE_MIN:
        *(double *)option->value = cli_parse_double(option->name, text, option->min, option->max, true);
        break;
    case CLI_STRING:
        if (text[0] == '\0') {
            cli_fail("%s expects a non-empty value", option->name);
        }
        *(const char **)option->value = text;
        break;
    case CLI_FLAG:
        cli_fail("%s takes no value, got '%s'", option->name, text);
    }
}

static const CliOption *find_option(const CliOption *options, size_t count, const char *name, size_t length)
{
    for (size_t i = 0; i < count; i++) {
        if (strlen(options[i].name) == length && strncmp(options[i].name, name, length) == 0) {
            return &options[i];
        }
    }
    return NULL;
}

static const char *value_placeholder(CliKind kind)
{
    switch (kind) {
    case CLI_INT:
        return " <int>";
    case CLI_DOUBLE:
    case CLI_DOUBLE_ABOVE_MIN:
        return " <number>";
    case CLI_STRING:
        return " <text>";
    case CLI_FLAG:
        break;
    }
    return "";
}

/* A numeric default outside the accepted range is a "not given" marker that
 * the program tests for: there is no default value to show. */
static bool is_not_given_marker(const CliOption *option, double value)
{
    bool above_min = option->kind == CLI_DOUBLE_ABOVE_MIN;
    return value < option->min || (above_min && value == option->min) || value > option->max;
}

static void print_default(const CliOption *option)
{
    switch (option->kind) {
    case CLI_FLAG:
        printf("(default %s)", *(const bool *)option->value ? "on" : "off");
        break;
    case CLI_INT: {
        long value = *(const long *)option->value;
        is_not_given_marker(option, (double)value) ? printf("(optional)") : printf("(default %ld)", value);
        break;
    }
    case CLI_DOUBLE:
    case CLI_DOUBLE_ABOVE_MIN: {
        double value = *(const double *)option->value;
        is_not_given_marker(option, value) ? printf("(optional)") : printf("(default %g)", value);
        break;
    }
    case CLI_STRING: {
        const char *text = *(const char *const *)option->value;
        text != NULL ? printf("(default '%s')", text) : printf("(optional)");
        break;
    }
    }
}

/* Standard output is buffered: a write that fails (a full disk, a closed
 * pipe) shows only when the buffer is flushed, so flush before deciding the
 * exit status. */
static bool stdout_written(void)
{
    return fflush(stdout) == 0 && !ferror(stdout);
}

_Noreturn void cli_exit(int status)
{
    if (!stdout_written()) {
        cli_fail_status(1, "cannot write standard output: %s", strerror(errno));
    }
    exit(status);
}

static _Noreturn void print_help(const CliOption *options, size_t count, const char *summary)
{
    if (summary == NULL) {
        summary = running_command != NULL ? running_command->summary : "";
    }
    printf("%s: %s\n", program_name, summary);
    int width = (int)strlen("--help");
    for (size_t i = 0; i < count; i++) {
        int length = (int)(strlen(options[i].name) + strlen(value_placeholder(options[i].kind)));
        width = length > width ? length : width;
    }
    for (size_t i = 0; i < count; i++) {
        char usage[256];
        snprintf(usage, sizeof usage, "%s%s", options[i].name, value_placeholder(options[i].kind));
        printf("  %-*s  %s ", width, usage, options[i].help);
        print_default(&options[i]);
        printf("\n");
    }
    printf("  %-*s  %s\n", width, "--help", "print this help and exit");
    cli_exit(0);
}

/* An option given twice is refused: the last value would win, and the
 * first would be ignored without a word. `given` holds the options seen so
 * far, at most one of each. */
enum { CLI_MOST_OPTIONS = 32 };

static void refuse_a_second_time(const CliOption **given, size_t *given_count, const CliOption *option)
{
    for (size_t i = 0; i < *given_count; i++) {
        if (given[i] == option) {
            cli_fail("%s is given twice", option->name);
        }
    }
    given[(*given_count)++] = option;
}

void cli_parse(int argc, char **argv, const CliOption *options, size_t option_count, const char *summary)
{
    if (option_count > CLI_MOST_OPTIONS) {
        cli_fail_status(1, "%zu options, more than CLI_MOST_OPTIONS (a program error)", option_count);
    }
    const CliOption *given[CLI_MOST_OPTIONS];
    size_t given_count = 0;
    if (argc > 0 && running_command == NULL) {
        cli_set_program_name(argv[0]);
    }
    /* --help wins wherever it stands, before any value has been parsed, so
     * the defaults it shows are the real ones. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            print_help(options, option_count, summary);
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *equals = strchr(arg, '=');
        size_t name_length = equals != NULL ? (size_t)(equals - arg) : strlen(arg);
        /* Options are found by their declared name, dashes included, so a
         * program may declare a short one such as "-k" beside "--name"s. */
        const CliOption *option = find_option(options, option_count, arg, name_length);
        if (option == NULL && equals != NULL && strncmp(arg, "--help=", strlen("--help=")) == 0) {
            cli_fail("--help takes no value, got '%s'", equals + 1);
        }
        if (option == NULL && strncmp(arg, "--", 2) != 0) {
            cli_fail("unexpected argument '%s' (options start with --; see --help)", arg);
        }
        if (option == NULL) {
            cli_fail("unknown option '%.*s' (see --help)", (int)name_length, arg);
        }
        refuse_a_second_time(given, &given_count, option);
        if (equals != NULL) {
            parse_value(option, equals + 1);
        } else if (option->kind == CLI_FLAG) {
            *(bool *)option->value = true;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            /* A following "--name" is the next option, not this one's value:
             * "--n --bench" means the value was forgotten. */
            parse_value(option, argv[++i]);
        } else {
            cli_fail("%s expects a value", option->name);
        }
    }
}

static _Noreturn void print_commands(const CliCommand *commands, size_t count, const char *summary)
{
    printf("%s: %s\n\nusage: %s COMMAND [options]   (%s COMMAND --help lists its options)\n\n", program_name, summary,
           program_name, program_name);
    int width = 0;
    for (size_t i = 0; i < count; i++) {
        int length = (int)strlen(commands[i].name);
        width = length > width ? length : width;
    }
    for (size_t i = 0; i < count; i++) {
        printf("  %-*s  %s\n", width, commands[i].name, commands[i].summary);
    }
    cli_exit(0);
}

int cli_run_command(int argc, char **argv, const CliCommand *commands, size_t command_count, const char *summary)
{
    cli_set_program_name(argc > 0 ? argv[0] : "program");
    if (argc < 2) {
        cli_fail("no command given (see %s --help)", program_name);
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2) {
            cli_fail("%s takes nothing after it, got '%s' (a command's options: %s COMMAND --help)", name, argv[2],
                     program_name);
        }
        print_commands(commands, command_count, summary);
    }
    for (size_t i = 0; i < command_count; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            snprintf(command_program_name, sizeof command_program_name, "%s %s", program_name, name);
            program_name = command_program_name;
            running_command = &commands[i];
            int status = commands[i].run(argc - 1, argv + 1);
            cli_exit(status);
        }
    }
    if (name[0] == '-') {
        cli_fail("'%s': give a command first (see %s --help)", name, program_name);
    }
    cli_fail("unknown command '%s' (see %s --help)", name, program_name);
}

int cli_without_cuda(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_fail("this program was built without CUDA (./configure found no nvcc), so it has no GPU");
}

CliOption cli_markdown_option(bool *markdown)
{
    return (CliOption){"--markdown", CLI_FLAG, markdown, 0, 0, "print tables as Markdown"};
}

bool cli_parse_markdown_only(int argc, char **argv)
{
    bool markdown = false;
    const CliOption options[] = {cli_markdown_option(&markdown)};
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);
    return markdown;
}
