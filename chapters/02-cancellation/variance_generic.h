/* The variance algorithms, written once for a floating-point type REAL.
 *
 * variance.c includes this file twice: with REAL = float, where TYPED(name)
 * is name_f32, and with REAL = double, where it is name_f64. Every operation
 * in a function is carried out in REAL: in the float versions the data, the
 * running sums and the result are all float, which is the point. There is no
 * include guard on purpose.
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
    REAL mean = 0, m2 = 0; /* m2: sum of squared deviations from the running mean */
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

// ANCHOR: compute_the_reference_in_quadruple_precision
VarianceReference TYPED(variance_reference)(const REAL *x, size_t n)
{
    quad sum = 0;
    double max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i]; /* float and double convert to quad exactly */
        max_abs = fmax(max_abs, fabs((double)x[i]));
    }
    quad mean = sum / (quad)n;
    quad sum_of_squared_deviations = 0;
    for (size_t i = 0; i < n; i++) {
        quad deviation = x[i] - mean;
        sum_of_squared_deviations += deviation * deviation;
    }
    quad variance = sum_of_squared_deviations / (quad)n;
    VarianceReference reference = {.mean = (double)mean, .variance = (double)variance, .max_abs = max_abs};
    reference.kappa = variance > 0 ? sqrt(1.0 + (double)(mean * mean / variance)) : INFINITY;
    return reference;
}
// ANCHOR_END: compute_the_reference_in_quadruple_precision
