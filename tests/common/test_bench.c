#include <math.h>

#include "common/bench.h"
#include "common/testing.h"

static void test_stats_of_known_times(void)
{
    double odd[] = {5.0, 1.0, 3.0, 4.0, 2.0};
    BenchStats stats = bench_stats_from_times(odd, 5);
    EXPECT(stats.median == 3.0 && stats.min == 1.0 && stats.max == 5.0 && stats.runs == 5,
           "median 3, min 1, max 5 of 5 runs: got %g, %g, %g, %d", stats.median, stats.min, stats.max, stats.runs);
    double even[] = {4.0, 1.0, 3.0, 2.0};
    stats = bench_stats_from_times(even, 4);
    EXPECT(stats.median == 2.5, "the median of an even count is the mean of the middle two: got %g", stats.median);
    double one[] = {0.25};
    stats = bench_stats_from_times(one, 1);
    EXPECT(stats.median == 0.25 && stats.min == 0.25 && stats.max == 0.25, "one run is its own median");
}

static void count_call(void *ctx)
{
    int *calls = ctx;
    (*calls)++;
}

static void test_bench_run(void)
{
    int calls = 0;
    BenchStats stats = bench_run(count_call, &calls, 2, 5);
    EXPECT(calls == 7, "2 warm-up and 5 timed runs make 7 calls, got %d", calls);
    EXPECT(stats.runs == 5, "5 timed runs reported, got %d", stats.runs);
    EXPECT(0 <= stats.min && stats.min <= stats.median && stats.median <= stats.max,
           "0 <= min <= median <= max: %g %g %g", stats.min, stats.median, stats.max);

    double start = clock_seconds();
    double later = clock_seconds();
    EXPECT(later >= start && start > 0, "the monotonic clock does not go back");
    EXPECT(gb_per_s(3e9, 1.5) == 2.0, "3e9 bytes in 1.5 s is 2 GB/s");
}

static void test_probes(void)
{
    /* A test is not a benchmark: a few MiB is enough to check that the
     * probes run and give a sensible number, with 1 and with all threads,
     * and with a size that divides into neither cache lines nor threads. */
    const size_t bytes = (size_t)3 << 20 | 100;
    const int threads[] = {1, 0, 3};
    for (int i = 0; i < 3; i++) {
        double copy = memcpy_bandwidth_gbs(bytes, threads[i]);
        double read = read_bandwidth_gbs(bytes, threads[i]);
        EXPECT(isfinite(copy) && copy > 0, "memcpy bandwidth with %d threads is positive: %g GB/s", threads[i], copy);
        EXPECT(isfinite(read) && read > 0, "read bandwidth with %d threads is positive: %g GB/s", threads[i], read);
    }
    EXPECT(bench_max_threads() >= 1, "at least one thread");
}

static void test_large_bytes(void)
{
    const size_t mib = (size_t)1 << 20;
    size_t llc = bench_llc_bytes(), large = bench_large_bytes();
    EXPECT(large >= 256 * mib && large <= 1024 * mib, "256 MiB <= %zu MiB <= 1 GiB", large / mib);
    EXPECT(large >= 2 * llc || large == 1024 * mib, "twice the %zu MiB LLC or the cap: %zu MiB", llc / mib,
           large / mib);
}

int main(void)
{
    test_stats_of_known_times();
    test_bench_run();
    test_probes();
    test_large_bytes();
    return test_finish();
}
