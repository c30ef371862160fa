#include "chapters/03-softmax-topk/loop_counts.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/files.h"

typedef struct {
    long address;
    char mnemonic[32];
    char operands[160];
} Instruction;

typedef struct {
    const char *function;
    bool inside, found;
    Instruction *code;
    size_t count, capacity;
    int line_number;
    char *err;
    size_t err_size;
} Listing;

#define refuse(p, ...) refuse_line((p)->err, (p)->err_size, (p)->line_number, __VA_ARGS__)

/* "0000000000000780 <sum_exp16>:" starts a function: is it ours? */
static bool is_function_header(const char *line, const char *function, bool *ours)
{
    const char *open = strchr(line, '<');
    size_t length = strlen(line);
    if (open == NULL || length < 3 || strcmp(line + length - 2, ">:") != 0 || strchr(line, '\t') != NULL)
        return false;
    size_t name_length = (size_t)(line + length - 2 - (open + 1));
    *ours = name_length == strlen(function) && strncmp(open + 1, function, name_length) == 0;
    return true;
}

/* "     820:\tvmovups (%rdi),%zmm12": the address, a colon, a tab, the
 * mnemonic, blanks, the operands. */
static int read_instruction(Listing *l, const char *line)
{
    char *end;
    long address = strtol(line, &end, 16);
    if (end == line || end[0] != ':' || end[1] != '\t')
        return refuse(l, "not an instruction: \"%s\"", line);
    const char *text = end + 2;
    size_t mnemonic_length = strcspn(text, " \t");
    const char *operands = text + mnemonic_length + strspn(text + mnemonic_length, " \t");
    Instruction in = {.address = address};
    if (mnemonic_length == 0 || mnemonic_length >= sizeof in.mnemonic || strlen(operands) >= sizeof in.operands)
        return refuse(l, "an instruction this reader cannot hold: \"%s\"", line);
    memcpy(in.mnemonic, text, mnemonic_length);
    strcpy(in.operands, operands);
    if (l->count == l->capacity) {
        size_t grown = l->capacity == 0 ? 256 : 2 * l->capacity;
        l->code = array_resize(l->code, l->capacity, grown, sizeof(Instruction));
        l->capacity = grown;
    }
    l->code[l->count++] = in;
    return 0;
}

static int read_line(void *state, char *line, int line_number)
{
    Listing *l = state;
    l->line_number = line_number;
    bool ours;
    if (is_function_header(line, l->function, &ours)) {
        if (ours && l->found)
            return refuse(l, "function \"%s\" listed twice", l->function);
        l->inside = ours;
        l->found |= ours;
        return 0;
    }
    /* A blank line ends a function; objdump's other lines (the file's
     * format, "Disassembly of section .text:", "...") are not code. */
    if (line[0] == '\0')
        l->inside = false;
    if (!l->inside || line[0] == '\0')
        return 0;
    return read_instruction(l, line);
}

static bool starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* A jump to an earlier address of the function: the index of its target,
 * or -1 for any other instruction (an indirect jump included). */
static long backward_target(const Listing *l, size_t at)
{
    const Instruction *in = &l->code[at];
    if (in->mnemonic[0] != 'j')
        return -1;
    char *end;
    long target = strtol(in->operands, &end, 16);
    if (end == in->operands || target > in->address)
        return -1;
    for (size_t i = 0; i <= at; i++) {
        if (l->code[i].address == target)
            return (long)i;
    }
    return -1;
}

/* The floats a register of the instruction holds: 16 in a zmm, 8 in a
 * ymm, 4 in an xmm; 0 if it names no vector register. */
static int register_floats(const Instruction *in)
{
    if (strstr(in->operands, "%zmm") != NULL)
        return 16;
    if (strstr(in->operands, "%ymm") != NULL)
        return 8;
    return strstr(in->operands, "%xmm") != NULL ? 4 : 0;
}

static bool is_vector(const Instruction *in)
{
    return register_floats(in) > 0 || in->mnemonic[0] == 'k';
}

static bool is_data_movement(const Instruction *in)
{
    bool from_memory = strchr(in->operands, '(') != NULL;
    return starts_with(in->mnemonic, "vmov") || (strstr(in->mnemonic, "broadcast") != NULL && from_memory);
}

static bool is_multiply(const Instruction *in)
{
    static const char *const prefixes[] = {"vmul", "vfmadd", "vfmsub", "vfnmadd", "vfnmsub"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (starts_with(in->mnemonic, prefixes[i]))
            return true;
    }
    return false;
}

/* The instruction's memory operand as written ("0x40(%rdi)"), into
 * `operand`, if it reads a vector of data: not a stack slot (%rsp, %rbp),
 * not a constant (%rip), not one float broadcast to every lane ({1toN}). */
static bool data_operand(const Instruction *in, char *operand, size_t size)
{
    const char *open = strchr(in->operands, '('), *close = open ? strchr(open, ')') : NULL;
    if (close == NULL || register_floats(in) == 0 || strstr(in->operands, "{1to") != NULL)
        return false;
    if (starts_with(open + 1, "%rsp") || starts_with(open + 1, "%rbp") || starts_with(open + 1, "%rip"))
        return false;
    const char *start = open;
    while (start > in->operands && start[-1] != ',')
        start--;
    size_t length = (size_t)(close + 1 - start);
    if (length >= size)
        return false;
    memcpy(operand, start, length);
    operand[length] = '\0';
    return true;
}

/* The distinct data operands are kept as they are met: at most one per
 * instruction of the body, so the body's length bounds them. */
typedef char Operand[sizeof((Instruction *)0)->operands];

static LoopCounts count_body(const Listing *l, size_t first, size_t last)
{
    LoopCounts counts = {0};
    Operand *seen = ALLOC_ARRAY(last - first + 1, Operand);
    size_t distinct = 0;
    for (size_t i = first; i <= last; i++) {
        const Instruction *in = &l->code[i];
        Operand operand;
        if (data_operand(in, operand, sizeof operand)) {
            size_t s = 0;
            while (s < distinct && strcmp(seen[s], operand) != 0)
                s++;
            if (s == distinct) {
                strcpy(seen[distinct++], operand);
                counts.floats_read += register_floats(in);
            }
        }
        if (is_vector(in) && !is_data_movement(in)) {
            counts.vector_instructions++;
            counts.multiplies += is_multiply(in);
        }
    }
    array_free(seen);
    return counts;
}

/* A loop is innermost if no other backward jump lies inside its body. */
static bool is_innermost(const Listing *l, size_t first, size_t last)
{
    for (size_t i = first; i < last; i++) {
        long target = backward_target(l, i);
        if (target >= (long)first)
            return false;
    }
    return true;
}

static int count_innermost_loop(Listing *l, LoopCounts *out)
{
    bool found = false;
    for (size_t at = 0; at < l->count; at++) {
        long target = backward_target(l, at);
        if (target < 0 || !is_innermost(l, (size_t)target, at))
            continue;
        LoopCounts counts = count_body(l, (size_t)target, at);
        if (!found || counts.vector_instructions > out->vector_instructions)
            *out = counts;
        found = true;
    }
    if (!found)
        return refuse(l, "function \"%s\" has no loop", l->function);
    if (out->floats_read == 0)
        return refuse(l, "the loop of \"%s\" reads no vector of data", l->function);
    return 0;
}

int count_function_loop(FILE *listing, void *query, char *err, size_t err_size)
{
    LoopCountQuery *q = query;
    Listing l = {.function = q->function, .err = err, .err_size = err_size};
    int status = read_lines(listing, read_line, &l);
    l.line_number = 0;
    if (status == 0 && !l.found)
        status = refuse(&l, "function \"%s\" is not in the listing", q->function);
    if (status == 0)
        status = count_innermost_loop(&l, &q->counts);
    array_free(l.code);
    return status;
}

double per_floats(int count, const LoopCounts *counts, int floats)
{
    return (double)count * floats / counts->floats_read;
}
