/* The bench subcommand: how fast each double-precision variance function
 * reads an array larger than the last-level cache, on one thread, against
 * memcpy and a plain read measured in the same run. */
#include <string.h>

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
           "read, one thread: %.1f GB/s (a sum in independent lanes: bytes read).\n",
           n, bytes / 1048576.0, cache, BENCH_RUNS, memcpy_gbs, read_gbs);
    bench_print_machine(stdout, 1);
    printf("\n");
}

/* The comparison the chapter's prose makes, computed from this run: is the
 * blocked method faster than the naive formula and than Welford's, by the
 * median, and in every timed run (its slowest against their fastest)? */
static void print_verdict(const BenchStats *stats, int naive, int welford, int blocked)
{
    const struct {
        const char *name;
        int index;
    } rivals[] = {
        {"the naive formula", naive  },
        {"Welford",           welford},
    };
    printf("\nVerdict of this run:");
    for (size_t r = 0; r < sizeof rivals / sizeof rivals[0]; r++) {
        BenchStats rival = stats[rivals[r].index], own = stats[blocked];
        const char *how = own.max < rival.min         ? "faster in every timed run"
                          : own.median < rival.median ? "faster by the median, though the runs overlap"
                                                      : "not faster by the median";
        printf("%s blocked takes %.2f of the time of %s: %s", r == 0 ? "" : ";", own.median / rival.median,
               rivals[r].name, how);
    }
    printf(".\n");
}

static int method_index(const char *name)
{
    for (int m = 0; m < timed_method_count; m++) {
        if (strcmp(timed_methods[m].name, name) == 0) {
            return m;
        }
    }
    cli_fail_status(1, "no timed method is called %s (a program error)", name);
}

int bench_command(int argc, char **argv)
{
    long seed = 1;
    bool markdown = false;
    const CliOption options[] = {
        {"--seed", CLI_INT, &seed, 0, 1e18, "random seed of the data"},
        cli_markdown_option(&markdown),
    };
    cli_parse(argc, argv, options, CLI_COUNT(options), NULL);

    size_t bytes = bench_large_bytes(), n = bytes / sizeof(double);
    double *x = ALLOC_ARRAY(n, double);
    Rng rng;
    rng_seed(&rng, (uint64_t)seed);
    rng_fill_normal_f64(&rng, x, n, 1e4, DATA_SPREAD);
    double memcpy_gbs = memcpy_bandwidth_gbs(bytes, 1), read_gbs = read_bandwidth_gbs(bytes, 1);
    print_limits(n, bytes, memcpy_gbs, read_gbs);

    const char *headers[] = {"method", "passes", "ms", "GB/s read", "of memcpy", "of read", "speed-up over naive"};
    Table *table = TABLE_NEW(headers, "lrrrrrr");
    BenchStats naive = {0}, stats[TIMED_METHOD_MAX];
    for (int m = 0; m < timed_method_count; m++) {
        const TimedMethod *method = &timed_methods[m];
        BenchContext context = {.variance = method->variance, .x = x, .n = n};
        stats[m] = bench_run(bench_body, &context, BENCH_WARMUP, BENCH_RUNS);
        double bytes_read = (double)method->passes * (double)bytes;
        if (m == 0) {
            naive = stats[m];
        }
        table_cell(table, "%s", method->name);
        table_cell(table, "%d", method->passes);
        table_cell(table, "%.0f", stats[m].median * 1e3);
        table_cell(table, "%.1f", gb_per_s(bytes_read, stats[m].median));
        bench_share_cell(table, bytes_read, stats[m], memcpy_gbs);
        bench_share_cell(table, bytes_read, stats[m], read_gbs);
        bench_speedup_cell(table, naive, stats[m]);
    }
    print_table(table, markdown);
    print_verdict(stats, method_index("naive"), method_index("Welford"), method_index("blocked"));
    array_free(x);
    return 0;
}
