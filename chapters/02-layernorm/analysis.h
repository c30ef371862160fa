/* What layer norm costs: a model of the memory traffic and arithmetic per
 * element of each implementation, and the memory its cache takes in real
 * models. Printed by the program (--complexity, --cache-memory). */
#ifndef CHAPTERS_02_LAYERNORM_ANALYSIS_H
#define CHAPTERS_02_LAYERNORM_ANALYSIS_H

#include <stdio.h>

#include "common/table.h"

/* Bytes moved and FLOPs per element, unfused (one kernel per node of the
 * graph) and fused, forward and backward. */
void complexity_print(FILE *out, TableFormat format);

/* Bytes cached for the backward pass: xhat versus mean and rstd per row,
 * for GPT-2 small and a Llama-sized model. */
void cache_memory_print(FILE *out, TableFormat format);

#endif
