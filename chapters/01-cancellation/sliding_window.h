/* A variance over a sliding window, from one Welford state: the newest value
 * merged in, the oldest taken out. The answer to an exercise of the chapter,
 * which derives welford_remove from welford_merge. */
#ifndef CHAPTERS_01_CANCELLATION_SLIDING_WINDOW_H
#define CHAPTERS_01_CANCELLATION_SLIDING_WINDOW_H

#include <stddef.h>

#include "kernels/welford.h"

/* The state of A, given the state of A and B merged and the state of B
 * (B's values among the merged ones; B may be all of them). */
WelfordState welford_remove(WelfordState merged, WelfordState b);

/* The state of x[window .. 2 window), reached by sliding a window of
 * `window` values over x[0 .. 2 window): the state of the first window,
 * then for each later value, that value pushed and the oldest removed. */
WelfordState welford_slide_through(const double *x, size_t window);

#endif
