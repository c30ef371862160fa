/* The bench subcommand: how fast each double-precision variance function
 * reads an array larger than the last-level cache, on one thread, against
 * memcpy and a plain read measured in the same run. */
#include "chapters/01-cancellation/accuracy.h"
#include "chapters/01-cancellation/commands.h"
#include "chapters/01-cancellation/throughput.h"
#include "common/alloc.h"
#include "common/bench.h"
#include "common/cli.h"
#include "common/rng.h"

typedef struct {
    double (*variance)(const double *x, size_t n);
    const double *x;
    size_t n;
    double result; /* kept, so that the compiler cannot drop the work */
} BenchContext;

static void bench_body(void *context)
{
    BenchContext *bench = context;
    bench->result = bench->variance(bench->x, bench->n);
}

enum { BENCH_WARMUP = 2, BENCH_RUNS = 7 };

static void print_limits(size_t n, size_t bytes, double memcpy_gbs, double read_gbs)
{
    char cache[64] = "last-level cache size unknown";
    if (bench_llc_bytes() > 0) {
        snprintf(cache, sizeof cache, "last-level cache %.0f MiB", bench_llc_bytes() / 1048576.0);
    }
    printf("One thread, %zu doubles (%.0f MiB; %s), median of %d runs; in parentheses, the slowest and the "
           "fastest run.\n"
           "memcpy, one thread: %.1f GB/s (bytes read + bytes written).\n"
           "read, one thread: %.1f GB/s (a sum in independent lanes: bytes read).\n\n",
           n, bytes / 1048576.0, cache, BENCH_RUNS, memcpy_gbs, read_gbs);
}

int bench_command(int argc, char **argv)
{
    long seed = 1;
    bool markdown = false;
    const CliOption options[] = {
        {"--seed",     CLI_INT,  &seed,     0, 1e18, "random seed of the data"    },
        {"--markdown", CLI_FLAG, &markdown, 0, 0,    "print the table as Markdown"},
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);

    size_t bytes = bench_large_bytes(), n = bytes / sizeof(double);
    double *x = ALLOC_ARRAY(double, n);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    rng_fill_normal_f64(&rng, x, n, 1e4, DATA_SPREAD);
    double memcpy_gbs = memcpy_bandwidth_gbs(bytes, 1), read_gbs = read_bandwidth_gbs(bytes, 1);
    print_limits(n, bytes, memcpy_gbs, read_gbs);

    const char *headers[] = {"method", "passes", "ms", "GB/s read", "of memcpy", "of read", "speed-up over naive"};
    Table *table = table_new(7, headers, "lrrrrrr");
    BenchStats naive = {0};
    for (int m = 0; m < timed_method_count; m++) {
        const TimedMethod *method = &timed_methods[m];
        BenchContext context = {.variance = method->variance, .x = x, .n = n};
        BenchStats stats = bench_run(bench_body, &context, BENCH_WARMUP, BENCH_RUNS);
        double bytes_read = (double)method->passes * (double)bytes;
        if (m == 0) {
            naive = stats;
        }
        table_cell(table, "%s", method->name);
        table_cell(table, "%d", method->passes);
        table_cell(table, "%.0f", stats.median * 1e3);
        table_cell(table, "%.1f", gb_per_s(bytes_read, stats.median));
        bench_share_cell(table, bytes_read, stats, memcpy_gbs);
        bench_share_cell(table, bytes_read, stats, read_gbs);
        bench_speedup_cell(table, naive, stats);
    }
    print_table(table, markdown);
    array_free(x);
    return 0;
}
