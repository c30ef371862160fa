#include "common/sass.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/files.h"

/* ---- One instruction ------------------------------------------------ */

enum { OPCODE_MAX = 48, REGISTER_COUNT = 256 };

typedef struct {
    long address;
    char opcode[OPCODE_MAX]; /* "LDG.E.128", its predicate (@!P0) dropped */
    char *operands;          /* what follows the opcode, up to the ';' */
    long branch_target;      /* -1 if it is not a branch to an address */
    bool predicated;         /* runs only where its predicate holds */
    char predicate[8];       /* "P1" of "@!P1" */
    bool predicate_negated;  /* "@!P1": runs where P1 is false */
} Instruction;

/* The opcode's first part: "LDG" of "LDG.E.128". */
static bool opcode_is(const Instruction *in, const char *base)
{
    size_t length = strlen(base);
    return strncmp(in->opcode, base, length) == 0 && (in->opcode[length] == '\0' || in->opcode[length] == '.');
}

/* BRA.DIV: a branch taken only when the warp's lanes have diverged. */
static bool is_divergence_branch(const Instruction *in)
{
    return strncmp(in->opcode, "BRA.DIV", strlen("BRA.DIV")) == 0;
}

static bool is_global_load(const Instruction *in)
{
    /* LD is a generic load: the code does not say which memory it reads, and
     * a kernel's pointers into global memory are often read that way. */
    return opcode_is(in, "LDG") || opcode_is(in, "LD");
}

static bool is_global_store(const Instruction *in)
{
    return opcode_is(in, "STG") || opcode_is(in, "ST");
}

/* The bytes one thread moves: the width is a suffix of the opcode. */
static int access_bytes(const Instruction *in)
{
    static const struct {
        const char *suffix;
        int bytes;
    } widths[] = {
        {".128", 16},
        {".64",  8 },
        {".U16", 2 },
        {".S16", 2 },
        {".U8",  1 },
        {".S8",  1 },
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        const char *at = strstr(in->opcode, widths[i].suffix);
        if (at != NULL) {
            char next = at[strlen(widths[i].suffix)];
            if (next == '\0' || next == '.')
                return widths[i].bytes;
        }
    }
    return 4;
}

static bool is_padding(const Instruction *in)
{
    return opcode_is(in, "NOP");
}

static long access_bytes_if_global(const Instruction *in)
{
    return is_global_load(in) || is_global_store(in) ? access_bytes(in) : 0;
}

/* ---- Registers ------------------------------------------------------ */

typedef struct {
    uint64_t bits[REGISTER_COUNT / 64];
} RegisterSet;

static void register_set_add(RegisterSet *set, int r)
{
    if (r >= 0 && r < REGISTER_COUNT)
        set->bits[r / 64] |= (uint64_t)1 << (r % 64);
}

static bool register_set_has(const RegisterSet *set, int r)
{
    return r >= 0 && r < REGISTER_COUNT && (set->bits[r / 64] >> (r % 64) & 1);
}

/* Whether an operand list names a general register of `set`: "R12" names
 * R12, and "R12.64", a 64-bit address, R12 and R13. UR (uniform), SR
 * (special) and RZ (zero) are not general registers. */
static bool any_register(const char *operands, const RegisterSet *set)
{
    for (const char *c = operands; *c != '\0'; c++) {
        bool starts_name = c == operands || !(isalnum((unsigned char)c[-1]) || c[-1] == '_');
        if (*c != 'R' || !starts_name || !isdigit((unsigned char)c[1]))
            continue;
        char *end;
        int r = (int)strtol(c + 1, &end, 10);
        int count = strncmp(end, ".64", 3) == 0 ? 2 : 1;
        for (int k = 0; k < count; k++)
            if (register_set_has(set, r + k))
                return true;
        c = end - 1;
    }
    return false;
}

/* A load's destination, the first operand, and the registers its width
 * fills: LDG.E.128 R4 fills R4 to R7. */
static void add_destination(const Instruction *load, RegisterSet *pending)
{
    const char *c = load->operands;
    while (*c == ' ')
        c++;
    if (c[0] != 'R' || !isdigit((unsigned char)c[1]))
        return;
    int first = atoi(c + 1);
    int count = access_bytes(load) <= 4 ? 1 : access_bytes(load) / 4;
    for (int k = 0; k < count; k++)
        register_set_add(pending, first + k);
}

/* ---- The steady state ----------------------------------------------- */

typedef struct {
    int first, last; /* instruction indices, inclusive */
} Span;

/* Whether control can go on to the next instruction: not after a branch or
 * an exit that always happens. BRA.DIV branches only when the warp has
 * diverged, so it falls through too. */
static bool falls_through(const Instruction *in)
{
    if (in->predicated)
        return true;
    if (opcode_is(in, "EXIT") || opcode_is(in, "RET"))
        return false;
    return !(opcode_is(in, "BRA") && !is_divergence_branch(in));
}

typedef struct {
    bool reached;
    long bytes;       /* global bytes moved on the best way here */
    int instructions; /* instructions issued on it */
    int previous;     /* the instruction before, -1 at the start */
} Way;

static bool better_way(long bytes, int instructions, const Way *than)
{
    return !than->reached || bytes > than->bytes || (bytes == than->bytes && instructions < than->instructions);
}

/* Whether `in` sets predicate `name`: a predicate it writes is its first or
 * second operand (ISETP P1, ...; IADD3 R12, P3, ... for a carry). */
static bool writes_predicate(const Instruction *in, const char *name)
{
    const char *c = in->operands;
    for (int operand = 0; operand < 2 && c != NULL; operand++) {
        while (*c == ' ')
            c++;
        size_t length = strcspn(c, ",");
        if (length == strlen(name) && strncmp(c, name, length) == 0)
            return true;
        c = strchr(c, ',');
        if (c != NULL)
            c++;
    }
    return false;
}

/* The bytes of the loads on the way to branch `at` that did not happen if
 * control goes on with `branch_taken`: a load predicated on the opposite
 * of the branch's condition ("@!P1 LDG" before "@P1 BRA", taken), back to
 * where the predicate was set. Only a branch tells: any other guarded
 * instruction ("@!P1 IMAD.U32" widening what "@!P1 LDG" loaded) is passed
 * whichever way its guard goes, and says nothing about the load. */
static long bytes_not_loaded(const Instruction *code, int first, const Way *ways, int at, bool branch_taken)
{
    const Instruction *branch = &code[first + at];
    if (!branch->predicated || !opcode_is(branch, "BRA"))
        return 0;
    bool branch_runs_when = !branch->predicate_negated; /* the predicate's value when the branch is taken */
    bool predicate_value = branch_taken ? branch_runs_when : !branch_runs_when;
    long bytes = 0;
    for (int i = ways[at].previous; i >= 0; i = ways[i].previous) {
        const Instruction *in = &code[first + i];
        if (writes_predicate(in, branch->predicate))
            break;
        bool load_runs_when = !in->predicate_negated;
        if (in->predicated && is_global_load(in) && strcmp(in->predicate, branch->predicate) == 0 &&
            load_runs_when != predicate_value)
            bytes += access_bytes(in);
    }
    return bytes;
}

static void offer_way(Way *ways, int from, int to, long bytes, int instructions)
{
    if (better_way(bytes, instructions, &ways[to]))
        ways[to] = (Way){true, bytes, instructions, from};
}

static int counted(const Instruction *in)
{
    return is_padding(in) ? 0 : 1;
}

/* The way through the body that moves the most global bytes and, of those,
 * issues the fewest instructions: the loads a pass must make, without the
 * code a pass rarely runs (a candidate that beats the threshold, a
 * remainder). Branches go forward inside the body; an inner loop that moves
 * no global memory is counted once. Marks its instructions in on_path. */
static void mark_fast_path(const Instruction *code, Span span, bool is_loop, bool *on_path)
{
    int n = span.last - span.first + 1;
    Way *ways = ALLOC_ARRAY((size_t)n, Way);
    const Instruction *first = &code[span.first];
    ways[0] = (Way){true, access_bytes_if_global(first), counted(first), -1};
    for (int i = 0; i < n; i++) {
        if (!ways[i].reached)
            continue;
        const Instruction *in = &code[span.first + i];
        int to_next = i + 1, to_target = -1;
        if (in->branch_target > in->address && in->branch_target <= code[span.last].address)
            for (int t = i + 1; t < n; t++)
                if (code[span.first + t].address == in->branch_target)
                    to_target = t;
        int next_targets[2] = {falls_through(in) ? to_next : -1, to_target};
        for (int k = 0; k < 2; k++) {
            int t = next_targets[k];
            if (t < 0 || t >= n)
                continue;
            const Instruction *target = &code[span.first + t];
            bool taken = t == to_target && !(falls_through(in) && t == to_next);
            long moved = ways[i].bytes - bytes_not_loaded(code, span.first, ways, i, taken);
            offer_way(ways, i, t, moved + access_bytes_if_global(target), ways[i].instructions + counted(target));
        }
    }
    /* A loop's pass ends at its backward branch; a whole kernel's at an exit. */
    int end = -1;
    for (int i = 0; i < n; i++) {
        bool is_end = is_loop ? i == n - 1 : opcode_is(&code[span.first + i], "EXIT");
        if (is_end && ways[i].reached && (end < 0 || better_way(ways[i].bytes, ways[i].instructions, &ways[end])))
            end = i;
    }
    for (int i = end; i >= 0; i = ways[i].previous)
        on_path[span.first + i] = true;
    array_free(ways);
}

static SassSteadyState measure(const Instruction *code, int count, Span span, bool is_loop)
{
    SassSteadyState s = {
        .is_loop = is_loop, .first_address = code[span.first].address, .last_address = code[span.last].address};
    for (int i = span.first; i <= span.last; i++)
        s.instructions_on_all_paths += counted(&code[i]) && !(!is_loop && code[i].branch_target == code[i].address);
    bool *on_path = ALLOC_ARRAY((size_t)count, bool);
    mark_fast_path(code, span, is_loop, on_path);
    /* Every access to a register that a load in flight will fill waits for
     * that load: a read, and also a write (the old value must not land on
     * the new one). The scan counts such waits; loads still in flight at the
     * end of the body are waited for in the next pass, one wait more. */
    RegisterSet pending = {0};
    bool any_pending = false;
    for (int i = span.first; i <= span.last; i++) {
        const Instruction *in = &code[i];
        if (!on_path[i])
            continue;
        s.instructions += counted(in);
        if (any_pending && any_register(in->operands, &pending)) {
            s.memory_waits++;
            pending = (RegisterSet){0};
            any_pending = false;
        }
        if (is_global_load(in)) {
            s.global_loads++;
            s.wide_global_loads += access_bytes(in) == 16;
            s.global_load_bytes += access_bytes(in);
            add_destination(in, &pending);
            any_pending = true;
        } else if (is_global_store(in)) {
            s.global_store_bytes += access_bytes(in);
        }
    }
    s.memory_waits += any_pending;
    array_free(on_path);
    return s;
}

static long global_bytes(const Instruction *code, Span span)
{
    long bytes = 0;
    for (int i = span.first; i <= span.last; i++)
        bytes += access_bytes_if_global(&code[i]);
    return bytes;
}

static long load_bytes(const Instruction *code, Span span)
{
    long bytes = 0;
    for (int i = span.first; i <= span.last; i++)
        if (is_global_load(&code[i]))
            bytes += access_bytes(&code[i]);
    return bytes;
}

static int index_of_address(const Instruction *code, int count, long address)
{
    for (int i = 0; i < count; i++)
        if (code[i].address == address)
            return i;
    return -1;
}

static bool strictly_inside(Span inner, Span outer)
{
    return inner.first >= outer.first && inner.last <= outer.last &&
           (inner.first != outer.first || inner.last != outer.last);
}

/* Where a warp that has diverged meets a warp-wide operation (a shuffle),
 * BRA.DIV jumps to code that resynchronises its lanes, redoes the
 * operation and branches back: a backward branch, but not a loop. Is
 * code[i] that branch back, the end of a block that starts at a BRA.DIV's
 * target? */
static bool returns_from_divergence(const Instruction *code, int count, int i)
{
    int start = i;
    while (start > 0 && falls_through(&code[start - 1]))
        start--;
    for (int j = 0; j < count; j++)
        if (is_divergence_branch(&code[j]) && code[j].branch_target == code[start].address)
            return true;
    return false;
}

/* A loop's end: a branch back (or to itself), not the return of a
 * diverged warp to where it left. */
static bool is_backward_branch(const Instruction *code, int count, int i)
{
    return code[i].branch_target >= 0 && code[i].branch_target <= code[i].address &&
           !returns_from_divergence(code, count, i);
}

/* The loops that move global memory: each backward branch whose target is
 * an instruction of the kernel. */
static int global_loops(const Instruction *code, int count, Span *loops)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (!is_backward_branch(code, count, i))
            continue;
        int target = index_of_address(code, count, code[i].branch_target);
        Span loop = {target, i};
        if (target >= 0 && global_bytes(code, loop) > 0)
            loops[n++] = loop;
    }
    return n;
}

/* Which of two innermost loops is the steady state: the one that loads
 * more (a streaming kernel's time goes to reading its input; a loop that
 * only writes results runs once per result), then the one that stores more. */
static bool moves_more(const Instruction *code, Span a, Span b)
{
    long a_loads = load_bytes(code, a), b_loads = load_bytes(code, b);
    if (a_loads != b_loads)
        return a_loads > b_loads;
    return global_bytes(code, a) > global_bytes(code, b);
}

static int counted_in(const Instruction *code, Span span)
{
    int n = 0;
    for (int i = span.first; i <= span.last; i++)
        n += counted(&code[i]);
    return n;
}

/* The innermost recorded loop around loop j, or -1. */
static int enclosing_loop(const SassSteadyState *s, int j)
{
    const SassInnerLoop *inner = &s->inner_loops[j];
    int parent = -1;
    for (int o = 0; o < s->inner_loop_count; o++) {
        const SassInnerLoop *l = &s->inner_loops[o];
        bool contains = o != j && l->first_address <= inner->first_address && l->last_address >= inner->last_address;
        if (contains && (parent < 0 || l->instructions < s->inner_loops[parent].instructions))
            parent = o;
    }
    return parent;
}

static int by_first_instruction(const void *a, const void *b)
{
    int first_a = ((const Span *)a)->first, first_b = ((const Span *)b)->first;
    return (first_a > first_b) - (first_a < first_b);
}

/* Every loop whose branch back lies inside the steady state's body, the
 * body's own branch left out; then, sorted by first address, their parents. */
static void record_inner_loops(const Instruction *code, int count, Span steady, SassSteadyState *s)
{
    Span found[SASS_MAX_INNER_LOOPS];
    int n = 0;
    for (int i = steady.first; i < steady.last && n < SASS_MAX_INNER_LOOPS; i++) {
        if (!is_backward_branch(code, count, i))
            continue;
        int target = index_of_address(code, count, code[i].branch_target);
        if (target >= steady.first)
            found[n++] = (Span){target, i};
    }
    qsort(found, (size_t)n, sizeof found[0], by_first_instruction);
    s->inner_loop_count = n;
    for (int j = 0; j < n; j++)
        s->inner_loops[j] =
            (SassInnerLoop){code[found[j].first].address, code[found[j].last].address, counted_in(code, found[j]), -1};
    for (int j = 0; j < n; j++)
        s->inner_loops[j].parent = enclosing_loop(s, j);
}

static SassSteadyState find_steady_state(const Instruction *code, int count)
{
    Span *loops = ALLOC_ARRAY((size_t)count + 1, Span);
    int n = global_loops(code, count, loops);
    int best = -1;
    for (int a = 0; a < n; a++) {
        bool innermost = true;
        for (int b = 0; b < n && innermost; b++)
            innermost = !strictly_inside(loops[b], loops[a]);
        if (innermost && (best < 0 || moves_more(code, loops[a], loops[best])))
            best = a;
    }
    SassSteadyState s =
        best >= 0 ? measure(code, count, loops[best], true) : measure(code, count, (Span){0, count - 1}, false);
    if (best >= 0)
        record_inner_loops(code, count, loops[best], &s);
    array_free(loops);
    return s;
}

/* ---- Reading the record --------------------------------------------- */

typedef struct {
    SassRecord *record;
    char *name; /* of the kernel being read */
    Instruction *code;
    int count, capacity;
    int line_number;
    char *err;
    size_t err_size;
} Parser;

#define refuse(p, ...) refuse_line((p)->err, (p)->err_size, (p)->line_number, __VA_ARGS__)

static void free_code(Parser *p)
{
    for (int i = 0; i < p->count; i++)
        array_free(p->code[i].operands);
    p->count = 0;
}

static int end_kernel(Parser *p)
{
    if (p->name == NULL)
        return 0;
    if (p->count == 0)
        return refuse(p, "kernel \"%s\" has no instructions", p->name);
    SassRecord *r = p->record;
    r->kernels = array_resize(r->kernels, (size_t)r->count, (size_t)r->count + 1, sizeof *r->kernels);
    r->kernels[r->count++] = (SassKernel){
        .name = p->name,
        .instructions = p->count,
        .steady = find_steady_state(p->code, p->count),
    };
    p->name = NULL;
    free_code(p);
    return 0;
}

/* "/ *0270* / @!P0 LDG.E.128 R4, desc[UR10][R12.64] ;" (without the
 * spaces inside the comment marks). */
static int read_instruction(Parser *p, const char *line)
{
    char *end;
    long address = strtol(line + 2, &end, 16);
    if (end == line + 2 || strncmp(end, "*/", 2) != 0)
        return refuse(p, "an instruction line without its address: \"%s\"", line);
    const char *c = end + 2;
    while (*c == ' ')
        c++;
    bool predicated = *c == '@';
    const char *guard = c;
    if (predicated)
        c += strcspn(c, " ");
    while (*c == ' ')
        c++;
    size_t opcode_length = strcspn(c, " ;");
    const char *semicolon = strrchr(c, ';');
    if (opcode_length == 0 || opcode_length >= OPCODE_MAX || semicolon == NULL)
        return refuse(p, "not an instruction: \"%s\"", line);
    if (p->count == p->capacity) {
        int grown = p->capacity == 0 ? 256 : 2 * p->capacity;
        p->code = array_resize(p->code, (size_t)p->capacity, (size_t)grown, sizeof *p->code);
        p->capacity = grown;
    }
    Instruction *in = &p->code[p->count++];
    memcpy(in->opcode, c, opcode_length);
    in->opcode[opcode_length] = '\0';
    const char *operands = c + opcode_length;
    size_t operands_length = (size_t)(semicolon - operands);
    in->operands = ALLOC_ARRAY(operands_length + 1, char);
    memcpy(in->operands, operands, operands_length);
    in->operands[operands_length] = '\0';
    in->address = address;
    in->predicated = predicated;
    in->predicate_negated = predicated && guard[1] == '!';
    if (predicated) {
        const char *name = guard + 1 + in->predicate_negated;
        size_t length = strcspn(name, " ");
        if (length >= sizeof in->predicate)
            return refuse(p, "a predicate too long: \"%s\"", line);
        memcpy(in->predicate, name, length);
        in->predicate[length] = '\0';
    }
    in->branch_target = -1;
    const char *hex = strstr(in->operands, "0x");
    if (opcode_is(in, "BRA") && hex != NULL)
        in->branch_target = strtol(hex, NULL, 16);
    return 0;
}

static int read_line(void *state, char *line, int line_number)
{
    Parser *p = state;
    p->line_number = line_number;
    static const char function[] = "Function : ";
    if (strncmp(line, function, strlen(function)) == 0) {
        if (end_kernel(p) != 0)
            return -1;
        const char *name = line + strlen(function);
        if (*name == '\0')
            return refuse(p, "a \"Function :\" line with no name");
        p->name = ALLOC_ARRAY(strlen(name) + 1, char);
        strcpy(p->name, name);
        return 0;
    }
    if (strncmp(line, "/*", 2) == 0) {
        if (p->name == NULL)
            return refuse(p, "an instruction before any \"Function :\" line");
        return read_instruction(p, line);
    }
    return refuse(p, "neither a \"Function :\" line nor an instruction: \"%s\"", line);
}

static int parse_stream(FILE *stream, void *out, char *err, size_t err_size)
{
    SassRecord *record = out;
    *record = (SassRecord){0};
    Parser p = {.record = record, .err = err, .err_size = err_size};
    int status = read_lines(stream, read_line, &p);
    if (status == 0)
        status = end_kernel(&p);
    array_free(p.name);
    free_code(&p);
    array_free(p.code);
    if (status != 0)
        sass_record_free(record);
    return status;
}

int sass_record_parse(const char *text, SassRecord *out, char *err, size_t err_size)
{
    return parse_text(text, parse_stream, out, err, err_size);
}

int sass_record_read(const char *path, SassRecord *out, char *err, size_t err_size)
{
    return parse_text_file(path, parse_stream, out, err, err_size);
}

const SassKernel *sass_record_find(const SassRecord *record, const char *name)
{
    for (int i = 0; i < record->count; i++)
        if (strcmp(record->kernels[i].name, name) == 0)
            return &record->kernels[i];
    return NULL;
}

void sass_record_free(SassRecord *record)
{
    for (int i = 0; i < record->count; i++)
        array_free(record->kernels[i].name);
    array_free(record->kernels);
    *record = (SassRecord){0};
}
