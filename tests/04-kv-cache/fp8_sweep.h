/* The floats the FP8 encoding tests try (test_fp8 against a correctly
 * rounded reference, test_fp8_vs_cuda against cuda_fp8.h), for a format
 * whose finite magnitudes, in code order, are values[0..n):
 *
 *   every code and every midpoint between neighbouring codes (the ties),
 *   the subnormals among them; past the largest, where the next code and
 *   its midpoint would be, FLT_MAX and infinity; every binade boundary a
 *   float has; each with its four float neighbours on either side and both
 *   signs; then a dense sweep: every 127th float from 2^-26 to 2^18, where
 *   the codes live, and every 65537th over the whole float line.
 *
 * visit(context, x) is called for each (never with a NaN); returns the
 * number of calls. */
#ifndef TESTS_04_KV_CACHE_FP8_SWEEP_H
#define TESTS_04_KV_CACHE_FP8_SWEEP_H

long fp8_sweep(const double *values, int n, void (*visit)(void *context, float x), void *context);

#endif
