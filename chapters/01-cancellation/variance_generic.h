/* The variance algorithms, written once for a floating-point type REAL.
 *
 * variance.c includes this file twice: with REAL = float, where TYPED(name)
 * is name_f32, and with REAL = double, where it is name_f64. Every operation
 * on the data is carried out in REAL: in the float versions the data, the
 * running sums and the result are all float, which is the point. (The one
 * exception is the fold of the blocked method, which merges its few chunk
 * states in the double WelfordState of kernels/welford.h, as the CUDA kernel
 * does.) There is no include guard on purpose.
 *
 * All of them compute the population variance (1/n) * sum (x_i - mean)^2 of
 * n >= 1 values. */

REAL TYPED(mean)(const REAL *x, size_t n)
{
    REAL sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
    }
    return sum / (REAL)n;
}

// ANCHOR: accumulate_sum_and_sum_of_squares
REAL TYPED(variance_naive)(const REAL *x, size_t n)
{
    REAL sum = 0, sum_of_squares = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        sum_of_squares += x[i] * x[i];
    }
    REAL mean = sum / (REAL)n;
    return sum_of_squares / (REAL)n - mean * mean;
}
// ANCHOR_END: accumulate_sum_and_sum_of_squares

// ANCHOR: subtract_the_mean_first
REAL TYPED(variance_two_pass)(const REAL *x, size_t n)
{
    REAL mean = TYPED(mean)(x, n);
    REAL sum_of_squared_deviations = 0;
    for (size_t i = 0; i < n; i++) {
        REAL deviation = x[i] - mean;
        sum_of_squared_deviations += deviation * deviation;
    }
    return sum_of_squared_deviations / (REAL)n;
}
// ANCHOR_END: subtract_the_mean_first

// ANCHOR: update_mean_and_m2
REAL TYPED(variance_welford)(const REAL *x, size_t n)
{
    /* m2: the sum of squared deviations from the running mean */
    REAL mean = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        REAL delta = x[i] - mean;
        mean += delta / (REAL)(i + 1);
        m2 += delta * (x[i] - mean); /* old deviation times new one */
    }
    return m2 / (REAL)n;
}
// ANCHOR_END: update_mean_and_m2

// ANCHOR: correct_for_the_error_in_the_mean
REAL TYPED(variance_corrected_two_pass)(const REAL *x, size_t n)
{
    REAL mean = TYPED(mean)(x, n);
    REAL sum_of_deviations = 0, sum_of_squared_deviations = 0;
    for (size_t i = 0; i < n; i++) {
        REAL deviation = x[i] - mean;
        sum_of_deviations += deviation; /* zero in exact arithmetic */
        sum_of_squared_deviations += deviation * deviation;
    }
    REAL correction = sum_of_deviations * sum_of_deviations / (REAL)n;
    return (sum_of_squared_deviations - correction) / (REAL)n;
}
// ANCHOR_END: correct_for_the_error_in_the_mean

// ANCHOR: sum_in_independent_lanes
/* Element i goes to lane i % VARIANCE_LANES. Each lane is a chain of
 * additions of its own, in the order written, so the compiler may run the
 * lanes side by side in vector registers without reordering anything. */
static REAL TYPED(add_lanes)(REAL lane[VARIANCE_LANES])
{
    for (size_t width = VARIANCE_LANES / 2; width > 0; width /= 2) {
        for (size_t l = 0; l < width; l++) {
            lane[l] += lane[l + width];
        }
    }
    return lane[0];
}

static REAL TYPED(sum_of_shifted_values)(const REAL *x, size_t n, REAL shift)
{
    REAL lane[VARIANCE_LANES] = {0};
    size_t i = 0;
    for (; i + VARIANCE_LANES <= n; i += VARIANCE_LANES) {
        for (size_t l = 0; l < VARIANCE_LANES; l++) {
            lane[l] += x[i + l] - shift;
        }
    }
    for (; i < n; i++) {
        lane[i % VARIANCE_LANES] += x[i] - shift;
    }
    return TYPED(add_lanes)(lane);
}
// ANCHOR_END: sum_in_independent_lanes

// ANCHOR: square_the_deviations_in_lanes
static REAL TYPED(sum_of_squared_deviations)(const REAL *x, size_t n, REAL shift, REAL mean)
{
    REAL lane[VARIANCE_LANES] = {0};
    size_t i = 0;
    for (; i + VARIANCE_LANES <= n; i += VARIANCE_LANES) {
        for (size_t l = 0; l < VARIANCE_LANES; l++) {
            REAL deviation = (x[i + l] - shift) - mean;
            lane[l] += deviation * deviation;
        }
    }
    for (; i < n; i++) {
        REAL deviation = (x[i] - shift) - mean;
        lane[i % VARIANCE_LANES] += deviation * deviation;
    }
    return TYPED(add_lanes)(lane);
}
// ANCHOR_END: square_the_deviations_in_lanes

// ANCHOR: summarise_a_chunk_while_it_is_in_cache
/* The Welford state of the n values x[i] - shift, computed the two-pass
 * way: the first pass brings the chunk into L1, the second reads it there. */
static WelfordState TYPED(summarise_chunk)(const REAL *x, size_t n, REAL shift)
{
    REAL mean = TYPED(sum_of_shifted_values)(x, n, shift) / (REAL)n;
    REAL m2 = TYPED(sum_of_squared_deviations)(x, n, shift, mean);
    WelfordState chunk = {(double)n, mean, m2};
    return chunk;
}
// ANCHOR_END: summarise_a_chunk_while_it_is_in_cache

/* The number of values in the chunk at `start` of n: 0 past the end. */
static size_t TYPED(chunk_length)(size_t n, size_t start)
{
    return n - start < VARIANCE_CHUNK ? n - start : VARIANCE_CHUNK;
}

// ANCHOR: prefetch_the_next_chunk
/* While a chunk is summed from L1 no load misses the cache, and the
 * hardware prefetcher, which follows the misses, stops running ahead: the
 * memory would idle. Asking for the next chunk first keeps it busy. (A
 * prefetch never faults, but the pointer must stay inside the array.) */
static void TYPED(prefetch)(const REAL *x, size_t n)
{
    for (size_t i = 0; i < n; i += CACHE_LINE_BYTES / sizeof(REAL)) {
        __builtin_prefetch(x + i);
    }
}
// ANCHOR_END: prefetch_the_next_chunk

// ANCHOR: fold_the_chunk_states
REAL TYPED(variance_blocked)(const REAL *x, size_t n)
{
    /* Measured from x[0], the data keep their spread and lose their
     * offset: the means in the states are of the size of the spread, and
     * so are the rounding errors they carry into the merges. */
    REAL shift = x[0];
    WelfordState state = welford_empty();
    for (size_t start = 0; start < n; start += VARIANCE_CHUNK) {
        size_t length = TYPED(chunk_length)(n, start);
        size_t next = start + length;
        TYPED(prefetch)(x + next, TYPED(chunk_length)(n, next));
        WelfordState chunk = TYPED(summarise_chunk)(x + start, length, shift);
        state = welford_merge(state, chunk);
    }
    return (REAL)welford_variance(state);
}
// ANCHOR_END: fold_the_chunk_states

// ANCHOR: compute_the_reference_in_quadruple_precision
VarianceReference TYPED(variance_reference)(const REAL *x, size_t n)
{
    quad sum = 0;
    double max_abs = 0, max_from_first = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i]; /* float and double convert to quad exactly */
        max_abs = fmax(max_abs, fabs((double)x[i]));
        quad from_first = (quad)x[i] - x[0];
        max_from_first = fmax(max_from_first, fabs((double)from_first));
    }
    quad mean = sum / (quad)n;
    quad sum_of_squared_deviations = 0;
    for (size_t i = 0; i < n; i++) {
        quad deviation = x[i] - mean;
        sum_of_squared_deviations += deviation * deviation;
    }
    quad variance = sum_of_squared_deviations / (quad)n;
    VarianceReference reference = {
        .mean = (double)mean,
        .variance = (double)variance,
        .kappa = variance > 0 ? sqrt(1 + (double)(mean * mean / variance)) : INFINITY,
        .max_abs = max_abs,
        .max_from_first = max_from_first,
    };
    return reference;
}
// ANCHOR_END: compute_the_reference_in_quadruple_precision
