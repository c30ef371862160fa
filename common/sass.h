/* The machine code of each kernel, read back from the build, and the part
 * of it that runs once per step of the kernel's steady state.
 *
 * Where cuobjdump is found (./configure --sass-tools), the CUDA build keeps
 * the machine code (SASS) of every kernels/OP.cu in kernels/OP.sass
 * (kernels/record-sass.sh): for each kernel a line
 *
 *     Function : void layernorm_forward_v3<4, 8>(float*, ...)
 *
 * then its instructions, one per line, each after its address (which the
 * file writes as a C comment, shown here in brackets):
 *
 *     [0270] @!P0 LDG.E.128 R4, desc[UR10][R12.64+0x10] ;
 *
 * The steady state is where the kernel spends its time as the data grow: a
 * loop. Loops in machine code are backward branches, a BRA to an earlier
 * address; the instructions from that address to the branch are the loop's
 * body. Of the loops that load or store global memory, the steady state is
 * an innermost one (no such loop inside it) that moves the most bytes per
 * pass: the unrolled main loop rather than its remainder. A kernel with no
 * such loop (a block per row, the row held in registers) does all its work
 * once per launch, and its whole code is the body.
 *
 * A body has branches: a candidate that beats the threshold takes the slow
 * way, a row's remainder another. One pass is counted on its fast path:
 * the way through the body that moves the most global bytes with the
 * fewest instructions (see SassSteadyState). The rare ways cost more. */
#ifndef COMMON_SASS_H
#define COMMON_SASS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/hostdevice.h"

COMMON_BEGIN_C

enum { SASS_MAX_INNER_LOOPS = 32 };

/* A loop inside the steady state's body (a sort of a candidate buffer, a
 * merge): its body's instructions on all paths, NOPs not counted, the
 * loops inside it included; and the loop it sits in, an index into
 * inner_loops, or -1 for the steady state itself. What one pass costs when
 * it runs them is iterations x body, which the fast path leaves out. */
typedef struct {
    long first_address, last_address;
    int instructions;
    int parent;
} SassInnerLoop;

/* One pass through a kernel's steady state, per thread. */
typedef struct {
    bool is_loop;       /* false: no loop moves global memory, the body is the whole kernel */
    long first_address; /* of the body, as cuobjdump prints it */
    long last_address;
    /* Instructions of the fast path: of the ways through the body, the one
     * that moves the most global bytes and, of those, issues the fewest
     * (the code a pass rarely runs left out). NOPs are not counted. The
     * counts below are of the same path. */
    int instructions;
    int instructions_on_all_paths; /* every instruction of the body, the final self-branch not counted */
    int global_loads;              /* LDG (and generic LD, whose space the code does not say) */
    int wide_global_loads;         /* of those, 128-bit: LDG.E.128 */
    long global_load_bytes;        /* per thread, per pass */
    long global_store_bytes;
    /* The times a thread waits for a global load in one pass: at each
     * instruction that needs a register a load in flight will fill (to read
     * it, or to write it: a use of the loaded value, or a load whose address
     * depends on one). Between two waits a thread's loads are all in flight
     * at once, so global_load_bytes / memory_waits is what one thread keeps
     * in flight, on average. */
    int memory_waits;
    /* The loops inside the body, in the order of their first address (a
     * loop before the loops inside it); at most SASS_MAX_INNER_LOOPS, the
     * rest not recorded. */
    int inner_loop_count;
    SassInnerLoop inner_loops[SASS_MAX_INNER_LOOPS];
} SassSteadyState;

typedef struct {
    char *name; /* demangled, parameters included, as in kernels/OP.resources */
    int instructions;
    SassSteadyState steady;
} SassKernel;

typedef struct {
    SassKernel *kernels;
    int count;
} SassRecord;

/* Parse a record (as above) into *out, which sass_record_free releases.
 * Return 0; or -1 with one line in err, "line 5: ...", and nothing in *out. */
int sass_record_parse(const char *text, SassRecord *out, char *err, size_t err_size);

/* The same for a file; the error line starts with its path. */
int sass_record_read(const char *path, SassRecord *out, char *err, size_t err_size);

/* The kernel of that exact name, or NULL. */
const SassKernel *sass_record_find(const SassRecord *record, const char *name);

void sass_record_free(SassRecord *record);

COMMON_END_C

#endif
