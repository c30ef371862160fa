/* Command-line parsing with clear errors.
 *
 * Every program takes `--name value` (or `--name=value`) options described by
 * a table of CliOption. Anything wrong (an unknown flag, a missing value,
 * "abc" where a number belongs, a number outside its range, trailing junk as
 * in "12x", an option given twice) stops the program with ONE line on stderr,
 *     cancellation: error: --n expects an integer in [2, 100000000], got '-3'
 * and exit status 2. Nothing is silently clamped. `--help` prints the usage
 * and exits 0. */
#ifndef COMMON_CLI_H
#define COMMON_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

#define CLI_EXIT_USAGE 2

typedef enum {
    CLI_FLAG,             /* bool*: present means true; takes no value */
    CLI_INT,              /* long*: integer in [min, max] */
    CLI_DOUBLE,           /* double*: finite decimal number in [min, max] */
    CLI_DOUBLE_ABOVE_MIN, /* double*: the same in (min, max], as a temperature, which cannot be 0 */
    CLI_STRING            /* const char**: any non-empty text */
} CliKind;

typedef struct {
    const char *name; /* with its dashes: "--n"; a short option may be declared as "-k" */
    CliKind kind;
    void *value;      /* where the parsed value goes; holds the default before parsing */
    double min, max;  /* inclusive range for CLI_INT and CLI_DOUBLE */
    const char *help; /* one line for --help */
} CliOption;

/* Room for an error message that names a file: a path may take PATH_MAX
 * (4096) bytes, and the reason comes after it. */
#define CLI_MESSAGE_SIZE 8192

/* The number of entries of an array of options or commands. */
#define CLI_COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Parse argv against the options, or exit 2 with one clear line. Positional
 * arguments are not accepted. `summary` is the first line of --help; NULL
 * inside a subcommand means the subcommand's own summary from its table. */
void cli_parse(int argc, char **argv, const CliOption *options, size_t option_count, const char *summary);

/* --markdown, which every command that prints tables takes. */
CliOption cli_markdown_option(bool *markdown);

/* For a command that takes nothing but --markdown: whether it was given. */
bool cli_parse_markdown_only(int argc, char **argv);

/* The function of a subcommand: it parses its own options from argv
 * (argv[0] is the subcommand's name) and returns the exit status. A function
 * type, so that one declaration declares them all:
 *     CliCommandFunction show_command, bench_command; */
typedef int CliCommandFunction(int argc, char **argv);

/* A subcommand: `program NAME [options]`. Every chapter program is a table
 * of these, and its main() is one call of cli_run_command. */
typedef struct {
    const char *name;        /* "offset-sweep" */
    CliCommandFunction *run; /* called with the arguments from NAME on */
    const char *summary;     /* one line: the program's --help lists it */
} CliCommand;

/* Run the subcommand that argv[1] names with the arguments after it, and
 * return its exit status. `program --help` (or `program help`) lists the
 * subcommands and exits 0; no subcommand or an unknown one is one line on
 * stderr and exit 2. Inside the subcommand, error lines and --help name it
 * ("softmax_topk apply: error: ..."). If standard output could not be
 * written (a full disk, a closed pipe), the status is 1, never 0. */
int cli_run_command(int argc, char **argv, const CliCommand *commands, size_t command_count, const char *summary);

/* The GPU subcommands of a program built without CUDA: one line saying so,
 * and exit 2 (the status of a waived GPU run). */
int cli_without_cuda(int argc, char **argv);

/* Flush standard output and exit with `status`, or with 1 and one line if
 * what was printed could not be written. */
COMMON_NORETURN void cli_exit(int status);

/* The program name used in error lines (set by cli_parse from argv[0];
 * "program" until then). */
const char *cli_program_name(void);

/* Set the program name to the last path component of argv0, for programs
 * (and tests) that report errors through cli_fail without calling cli_parse. */
void cli_set_program_name(const char *argv0);

/* Print "<program>: error: <message>" to stderr and exit 2. */
COMMON_NORETURN void cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The same line, with another exit status: 1 for failures that are not the
 * user's input (out of memory, a write that failed). */
COMMON_NORETURN void cli_fail_status(int exit_status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "<program>: note: <message>" on stderr, and go on: something the user
 * should know about a run that still succeeds (escaped like an error line). */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An error line is one line of plain text whatever it quotes (a file name,
 * a malformed header): control bytes (a newline, or the escape that starts a
 * sequence that would clear the terminal) are written as \xNN. `escaped`
 * holds `size` bytes; the text is cut short rather than overflow it.
 * cli_fail and cli_fail_status escape their message this way. */
void cli_escape_control_bytes(const char *text, char *escaped, size_t size);

/* The error line of a reader: "<where>: <message>" in `escaped` (`size`
 * bytes), escaped as above, so that one line it stays whatever the message
 * quotes. `where` is a file's path, or "line 5"; NULL: the message alone. */
void cli_error_message(char *escaped, size_t size, const char *where, const char *fmt, va_list args);

/* The parsers behind cli_parse, for programs with their own argument forms.
 * `what` names the thing being parsed in the error line (e.g. "--n"). */
long cli_parse_long(const char *what, const char *text, long min, long max);
double cli_parse_double(const char *what, const char *text, double min, double max, bool above_min);

COMMON_END_C

#endif
