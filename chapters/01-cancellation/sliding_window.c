#include "chapters/01-cancellation/sliding_window.h"

// ANCHOR: take_a_state_out_of_a_merge
/* welford_merge solved for its first argument. With n = a.count + b.count
 * and delta = b.mean - merged.mean (B's distance from the whole, not from
 * A: A is what is unknown), A's mean is the whole's moved away from B,
 * and A's m2 is what is left of the whole's once B's own m2 and B's share
 * of the spread between the means are taken out. That is a subtraction of
 * rounded numbers, and it cancels when what is taken out is much larger
 * than what is left. */
WelfordState welford_remove(WelfordState merged, WelfordState b)
{
    double count = merged.count - b.count;
    if (count == 0.0) {
        return welford_empty(); /* all of it removed */
    }
    double delta = b.mean - merged.mean;
    double b_per_a = b.count / count;
    WelfordState a;
    a.count = count;
    a.mean = merged.mean - delta * b_per_a;
    a.m2 = merged.m2 - b.m2 - delta * delta * merged.count * b_per_a;
    return a;
}
// ANCHOR_END: take_a_state_out_of_a_merge

WelfordState welford_slide_through(const double *x, size_t window)
{
    WelfordState state = welford_empty();
    for (size_t i = 0; i < window; i++) {
        state = welford_push(state, x[i]);
    }
    for (size_t i = window; i < 2 * window; i++) {
        WelfordState oldest = {1.0, x[i - window], 0.0};
        state = welford_remove(welford_push(state, x[i]), oldest);
    }
    return state;
}
