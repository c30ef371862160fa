#include "chapters/03-softmax-topk/radix_select.h"

#include <string.h>

#include "common/alloc.h"
#include "common/rng.h"

/* count_digits of kernel 5, one thread: every key of the row goes to its
 * bin, or nowhere if it lacks the prefix. */
static void count_digits(const float *row, size_t vocab, RadixSelection selection, int shift,
                         unsigned histogram[TOPK_RADIX_DIGITS])
{
    memset(histogram, 0, TOPK_RADIX_DIGITS * sizeof histogram[0]);
    for (size_t i = 0; i < vocab; i++) {
        int bin = topk_radix_bin(topk_radix_key(row[i]), selection, shift);
        if (bin >= 0) {
            histogram[bin]++;
        }
    }
}

RadixSelection radix_select_kth_key(const float *row, size_t vocab, int k, RadixPass passes[RADIX_PASSES])
{
    RadixSelection selection = {0, 0, 0};
    for (int p = 0; p < RADIX_PASSES; p++) {
        RadixPass *pass = &passes[p];
        pass->shift = 32 - TOPK_RADIX_BITS * (p + 1);
        pass->before = selection;
        count_digits(row, vocab, selection, pass->shift, pass->histogram);
        topk_radix_select_digit(pass->histogram, pass->shift, k, &selection);
        pass->after = selection;
    }
    return selection;
}

static unsigned chosen_digit(const RadixPass *pass)
{
    return (pass->after.prefix >> pass->shift) % TOPK_RADIX_DIGITS;
}

/* A pass as a data block: its legend (the column title of the counts:
 * the prefix it counts under, the digit where the count reaches K, and a
 * after it), then a line per bin: digit, count ("?" if empty: nothing to
 * draw on a log scale) and where the bin lies from the chosen one (0
 * above, 1 the chosen, 2 below). */
static void write_pass(FILE *out, const RadixPass *pass, int k)
{
    unsigned chosen = chosen_digit(pass);
    int prefix_digits = (32 - pass->shift - TOPK_RADIX_BITS) / 4;
    fprintf(out, "digit \"");
    if (prefix_digits > 0) {
        fprintf(out, "prefix %0*X: ", prefix_digits, pass->before.prefix >> (32 - 4 * prefix_digits));
    }
    fprintf(out, "K = %d reached at %02X, a = %d\" where\n", k, chosen, pass->after.above);
    for (unsigned digit = 0; digit < TOPK_RADIX_DIGITS; digit++) {
        fprintf(out, "%u ", digit);
        fprintf(out, pass->histogram[digit] > 0 ? "%u" : "?", pass->histogram[digit]);
        fprintf(out, " %d\n", digit > chosen ? 0 : digit == chosen ? 1 : 2);
    }
    fprintf(out, "\n\n");
}

void write_radix_histogram_data(FILE *out, size_t vocab, int k, uint64_t seed)
{
    float *row = ALLOC_ARRAY(vocab, float);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, row, vocab, 0.0, 3.0);
    RadixPass passes[RADIX_PASSES];
    RadixSelection kth = radix_select_kth_key(row, vocab, k, passes);
    fprintf(out, "# Radix select of version 5 on %zu logits, K = %d: the K-th key is 0x%08X, %d keys above it\n", vocab,
            k, kth.prefix, kth.above);
    for (int p = 0; p < RADIX_PASSES; p++) {
        fprintf(out, "# pass %d\n", p + 1);
        write_pass(out, &passes[p], k);
    }
    array_free(row);
}
