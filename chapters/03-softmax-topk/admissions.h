/* How many logits get past the top-K threshold as a row is read: the
 * measurement behind "one comparison per logit" (the figure admissions.svg). */
#ifndef CHAPTERS_03_SOFTMAX_TOPK_ADMISSIONS_H
#define CHAPTERS_03_SOFTMAX_TOPK_ADMISSIONS_H

#include <stdio.h>

/* Write, for K in {1, 16, 256} and positions i = 2^m up to V = 128256, the
 * mean number of logits admitted among the first i (random rows), and the
 * expectation for logits in random order, K (1 + ln(i / K)). */
void write_admissions_data(FILE *out);

#endif
