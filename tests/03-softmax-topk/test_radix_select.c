/* Version 5's radix select, run on the CPU (radix_select.c, with the
 * kernel's bins and digit step): on every row and every K it must find the
 * K-th key and the number of keys above it that sorting the keys gives.
 * Rows with many ties (logits in 1/16ths), with the special values (NaN,
 * +-inf, -0.0 and +0.0, which share a key), and K at 1, V and on both
 * sides of a run of equal keys. */
#include <math.h>
#include <stdlib.h>

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/radix_select.h"
#include "common/alloc.h"
#include "common/testing.h"

static int larger_key_first(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* The K-th key and how many keys exceed it, by sorting every key. */
static void check_against_sort(const char *what, const float *row, size_t vocab, int k)
{
    uint32_t *keys = ALLOC_ARRAY(vocab, uint32_t);
    for (size_t i = 0; i < vocab; i++) {
        keys[i] = topk_radix_key(row[i]);
    }
    qsort(keys, vocab, sizeof keys[0], larger_key_first);
    uint32_t kth = keys[k - 1];
    int above = 0;
    while (keys[above] > kth) {
        above++;
    }
    RadixPass passes[RADIX_PASSES];
    RadixSelection found = radix_select_kth_key(row, vocab, k, passes);
    EXPECT(found.prefix == kth && found.above == above && found.mask == UINT32_MAX,
           "%s, V = %zu, K = %d: key 0x%08X with %d above, sorting gives 0x%08X with %d above", what, vocab, k,
           found.prefix, found.above, kth, above);
    array_free(keys);
}

/* K = 1, V, and around the K that ends the first run of equal keys after
 * position V / 3: the run's last entry and the next one. */
static void check_ks(const char *what, const float *row, size_t vocab)
{
    uint32_t *keys = ALLOC_ARRAY(vocab, uint32_t);
    for (size_t i = 0; i < vocab; i++) {
        keys[i] = topk_radix_key(row[i]);
    }
    qsort(keys, vocab, sizeof keys[0], larger_key_first);
    size_t end = vocab / 3;
    while (end + 1 < vocab && keys[end + 1] == keys[end]) {
        end++;
    }
    array_free(keys);
    const int ks[] = {1, 2, (int)vocab / 3 + 1, (int)end + 1, (int)end + 2, (int)vocab};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        if (ks[i] >= 1 && ks[i] <= (int)vocab) {
            check_against_sort(what, row, vocab, ks[i]);
        }
    }
}

int main(void)
{
    const size_t vocabs[] = {1, 7, 1000, 32003};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        size_t vocab = vocabs[v];
        float *row = ALLOC_ARRAY(vocab, float);
        for (uint64_t seed = 1; seed <= 3; seed++) {
            fill_tied_logits(row, vocab, seed);
            check_ks("tied logits", row, vocab);
            const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, NAN};
            for (size_t i = 0; i < sizeof specials / sizeof specials[0] && i < vocab; i++) {
                row[(i * 7919 + seed) % vocab] = specials[i];
            }
            check_ks("tied logits with NaN, inf and zeros", row, vocab);
        }
        array_free(row);
    }
    return test_finish();
}
