/* Chunked Welford: accumulate each chunk, merge the chunk states in a tree. */
#include "chapters/01-cancellation/parallel_welford.h"

#include "common/alloc.h"

WelfordState welford_accumulate(const double *x, size_t n)
{
    WelfordState state = welford_empty();
    for (size_t i = 0; i < n; i++) {
        state = welford_push(state, x[i]);
    }
    return state;
}

// ANCHOR: merge_neighbours_level_by_level
WelfordState welford_merge_tree(WelfordState *states, size_t count)
{
    for (size_t stride = 1; stride < count; stride *= 2) {
        for (size_t i = 0; i + stride < count; i += 2 * stride) {
            states[i] = welford_merge(states[i], states[i + stride]);
        }
    }
    return states[0];
}
// ANCHOR_END: merge_neighbours_level_by_level

WelfordState welford_by_chunks(const double *x, const size_t *bounds, size_t chunks)
{
    WelfordState *states = ALLOC_ARRAY(chunks, WelfordState);
    for (size_t c = 0; c < chunks; c++) {
        states[c] = welford_accumulate(x + bounds[c], bounds[c + 1] - bounds[c]);
    }
    WelfordState merged = welford_merge_tree(states, chunks);
    array_free(states);
    return merged;
}
