/* What one pass of a loop costs in vector instructions, counted in the
 * machine code the compiler made of it, not by hand.
 *
 * The build keeps the disassembly of the benchmark's two exponential loops
 * in exp_loops.asm (objdump -d --no-show-raw-insn, see the Tupfile): for
 * each function a line "0000000000000780 <sum_exp16>:", then one line per
 * instruction, "     820:\tvmovups (%rdi),%zmm12". A loop in machine code
 * is a backward jump; the instructions from its target to the jump are the
 * body. The count is of the innermost loop (no backward jump inside it),
 * the one with the most vector instructions if there are several. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_LOOP_COUNTS_H
#define CHAPTERS_03_SOFTMAX_TOPK_LOOP_COUNTS_H

#include <stddef.h>
#include <stdio.h>

/* One pass through the body. */
typedef struct {
    /* Instructions on vector registers, data movement left out: the moves
     * (vmov*: loads, stores, copies between registers) and the broadcasts
     * from memory. What remains is the arithmetic, the comparisons, the
     * shifts and the permutes: the work each pass must issue. */
    int vector_instructions;
    /* Of those, the multiplies and multiply-adds (vmul*, vfmadd*, vfmsub*,
     * vfnmadd*, vfnmsub*): the work of the multiply-add units. */
    int multiplies;
    /* The floats the body reads: for each distinct vector operand in memory
     * (a stack slot, a constant or a broadcast aside), as many floats as its
     * register holds. A pass reads each float of its data once at least. */
    int floats_read;
} LoopCounts;

/* The query and its answer: give the function's name, get its counts. */
typedef struct {
    const char *function;
    LoopCounts counts;
} LoopCountQuery;

/* Count the innermost loop of query->function in an objdump listing. -1,
 * with one line in err, if the text is not such a listing or the function
 * or a loop in it is not there. Fits common/files.h's TextParser: use it
 * with parse_text_file or parse_text. */
int count_function_loop(FILE *listing, void *query, char *err, size_t err_size);

/* A count per `floats` floats read: count * floats / floats_read. */
double per_floats(int count, const LoopCounts *counts, int floats);

#endif
