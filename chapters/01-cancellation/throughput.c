/* The variance functions the benchmark times, and the bytes each reads. */
#include "chapters/01-cancellation/throughput.h"

#include "chapters/01-cancellation/variance.h"

// ANCHOR: count_the_bytes_each_method_reads
/* Each method with its passes over the data: a call reads passes * 8n bytes. */
const TimedMethod timed_methods[] = {
    {"naive",              variance_naive_f64,              1},
    {"two-pass",           variance_two_pass_f64,           2},
    {"Welford",            variance_welford_f64,            1},
    {"corrected two-pass", variance_corrected_two_pass_f64, 2},
    {"blocked",            variance_blocked_f64,            1}, /* the second pass hits L1 */
};
// ANCHOR_END: count_the_bytes_each_method_reads
const int timed_method_count = (int)(sizeof timed_methods / sizeof timed_methods[0]);
_Static_assert(sizeof timed_methods / sizeof timed_methods[0] <= TIMED_METHOD_MAX, "raise TIMED_METHOD_MAX");
