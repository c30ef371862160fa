#include <math.h>
#include <string.h>
#include <time.h>

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

/* A body that sleeps uses no CPU time: bench_run sees the 20 ms it waits,
 * bench_run_thread_cpu does not (a thread that waits for a core is the
 * same to it). A body that spins uses CPU time, which it sees. */
static void sleep_20_ms(void *ctx)
{
    (void)ctx;
    struct timespec wait = {0, 20 * 1000 * 1000};
    nanosleep(&wait, NULL);
}

static void spin_20_ms(void *ctx)
{
    (void)ctx;
    double start = thread_cpu_seconds();
    while (thread_cpu_seconds() - start < 0.02) {
    }
}

static void test_thread_cpu_time(void)
{
    BenchStats wall = bench_run(sleep_20_ms, NULL, 0, 3);
    BenchStats asleep = bench_run_thread_cpu(sleep_20_ms, NULL, 0, 3);
    BenchStats spinning = bench_run_thread_cpu(spin_20_ms, NULL, 0, 3);
    EXPECT(wall.min >= 0.02, "a sleep of 20 ms took %g s of wall time", wall.min);
    EXPECT(asleep.max < 0.005, "a sleep of 20 ms took %g s of the thread's CPU time, expected about 0", asleep.max);
    EXPECT(spinning.min >= 0.02 && spinning.max < 0.1, "a spin of 20 ms took %g to %g s of CPU time", spinning.min,
           spinning.max);
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

/* Shares are taken round by round, each from the two times of its round:
 * here the middle share is 2 (2 bytes a second against 1), where the
 * ratio of the median times would be 4/3. */
static void test_shares_round_by_round(void)
{
    const double limit_seconds[] = {1.0, 3.0, 2.0}, seconds[] = {1.0, 3.0, 8.0};
    BenchStats shares = bench_share_stats(4.0, seconds, 2.0, limit_seconds, 3);
    EXPECT(shares.median == 2.0 && shares.min == 0.5 && shares.max == 2.0 && shares.runs == 3,
           "shares 2, 2, 0.5 by round: median %g, least %g, most %g of %d", shares.median, shares.min, shares.max,
           shares.runs);
    EXPECT(seconds[2] == 8.0 && limit_seconds[1] == 3.0, "the times are left in their rounds");
}

/* A read pass reads every value: the sum says so, with 1 thread, all, and
 * a count that divides into neither the sum's lanes nor the threads. */
static void test_read_pass(void)
{
    enum { COUNT = 1000003 };
    static float values[COUNT];
    for (size_t i = 0; i < COUNT; i++) {
        values[i] = 1.0f / 64;
    }
    const int threads[] = {1, 0, 3};
    for (int i = 0; i < 3; i++) {
        ReadPass pass = {values, COUNT, threads[i], 0.0f};
        read_pass_run(&pass);
        /* Sums of multiples of 1/64 below 2^18 are exact in float. */
        EXPECT(pass.sum == (float)COUNT / 64, "a read pass with %d threads summed %.9g, expected %.9g", threads[i],
               (double)pass.sum, (double)COUNT / 64);
    }
}

/* A copy pass copies every byte, whatever the threads and the size. */
static void test_copy_pass(void)
{
    enum { BYTES = (3 << 20) | 100 };
    static unsigned char source[BYTES], destination[BYTES];
    for (size_t i = 0; i < BYTES; i++) {
        source[i] = (unsigned char)(i * 7 + 1);
    }
    const int threads[] = {1, 0, 3};
    for (int i = 0; i < 3; i++) {
        memset(destination, 0, BYTES);
        CopyPass pass = {destination, source, BYTES, threads[i]};
        copy_pass_run(&pass);
        EXPECT(memcmp(destination, source, BYTES) == 0, "a copy pass with %d threads copied every byte", threads[i]);
    }
}

/* The verdict agrees with the share as a table prints it (rounded to a
 * whole percent): 79.6% shows as 80% but is below the goal. */
static void test_goal_verdicts(void)
{
    const struct {
        double share;
        const char *verdict;
    } cases[] = {
        {80.0, "meets 80%"                  },
        {93.2, "meets 80%"                  },
        {79.6, "misses 80% by under 1 point"},
        {78.7, "misses 80% by 1 point"      },
        {79.2, "misses 80% by 1 point"      },
        {70.2, "misses 80% by 10 points"    },
        {NAN,  "no share measured"          }
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[64];
        bench_goal_verdict(text, sizeof text, cases[i].share, 80.0);
        EXPECT(strcmp(text, cases[i].verdict) == 0, "share %.1f%%: \"%s\", expected \"%s\"", cases[i].share, text,
               cases[i].verdict);
    }
}

static void test_large_bytes(void)
{
    const size_t mib = (size_t)1 << 20;
    size_t llc = bench_llc_bytes(), large = bench_large_bytes();
    if (bench_sanitized()) {
        EXPECT(large == BENCH_SANITIZED_BYTES, "a sanitizer build's working set: %zu MiB", large / mib);
        return;
    }
    EXPECT(large >= 256 * mib && large <= 1024 * mib, "256 MiB <= %zu MiB <= 1 GiB", large / mib);
    EXPECT(large >= 2 * llc || large == 1024 * mib, "twice the %zu MiB LLC or the cap: %zu MiB", llc / mib,
           large / mib);
}

int main(void)
{
    test_stats_of_known_times();
    test_bench_run();
    test_thread_cpu_time();
    test_probes();
    test_shares_round_by_round();
    test_read_pass();
    test_copy_pass();
    test_large_bytes();
    test_goal_verdicts();
    return test_finish();
}
