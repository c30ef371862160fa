/* bench and bench-formats print a verdict for each goal the chapter sets
 * them (paged within 10% of contiguous at blocks of 16; FP8 at 1.6 times
 * fp16's speed), which the prose points at instead of asserting an outcome.
 * The outcome varies between runs on a shared machine; that a verdict is
 * printed, and says "meets" or "misses by", does not. Small caches keep
 * the test short: the verdicts are printed whatever the size. */
#include <stdlib.h>
#include <string.h>

#include "chapters/04-kv-cache/attention_bench.h"
#include "common/testing.h"

typedef bool BenchFunction(int block_size, size_t cache_bytes, FILE *out, TableFormat format);

/* What the bench printed, as one string (free it). */
static char *bench_output(BenchFunction *bench, size_t cache_bytes, bool *outputs_match)
{
    CapturedOutput captured;
    *outputs_match = bench(16, cache_bytes, capture_output(&captured), TABLE_MARKDOWN);
    return captured_text(&captured);
}

/* The line that starts with `goal`, then "meets" or "misses by" after
 * its colon. */
static void expect_verdict(const char *text, const char *goal)
{
    const char *line = strstr(text, goal);
    EXPECT(line != NULL, "a line \"%s...\" is printed", goal);
    if (line == NULL)
        return;
    const char *end = strchr(line, '\n');
    const char *verdict = strstr(line, ": ");
    bool on_the_line = verdict != NULL && (end == NULL || verdict < end);
    EXPECT(on_the_line && (strncmp(verdict + 2, "meets", 5) == 0 || strncmp(verdict + 2, "misses by ", 10) == 0),
           "\"%s\" says meets or misses by: %.*s", goal, (int)(end ? end - line : (long)strlen(line)), line);
}

int main(void)
{
    bool match;
    char *layouts = bench_output(attention_bench_report, (size_t)2 << 20, &match);
    EXPECT(match, "both layouts give the same output");
    expect_verdict(layouts, "goal, paged within 10% of contiguous (contiguous's time / paged's at least 0.90 in every "
                            "row), blocks of 16");
    free(layouts);

    char *formats = bench_output(attention_bench_formats, (size_t)1 << 20, &match);
    EXPECT(match, "every format matches the reference");
    expect_verdict(formats, "goal, FP8 E4M3 at 1.6× fp16's speed or more");
    expect_verdict(formats, "goal, FP8 E5M2 at 1.6× fp16's speed or more");
    free(formats);
    return test_finish();
}
