/* The hard inputs every version must get right, one row each. The program
 * prints what it returns for them (the book's table), and the CPU and GPU
 * tests check every version against the double reference on them. */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_HARD_INPUTS_H
#define CHAPTERS_03_SOFTMAX_TOPK_HARD_INPUTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    size_t vocab;
    int k;
    void (*fill)(float *row, size_t vocab);
} HardInput;

extern const HardInput HARD_INPUTS[];
extern const int HARD_INPUT_COUNT;

/* Random logits, normal(0, 3) rounded to multiples of 1/16: a few hundred
 * distinct values, so a long row has ties among its top K, the case where
 * kernels disagree. */
void fill_tied_logits(float *logits, size_t count, uint64_t seed);

#endif
