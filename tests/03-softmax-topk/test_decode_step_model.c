/* The decode-step model's counts (chapters/03-softmax-topk/decode_step_model.h)
 * on rows whose replay can be followed by hand: the buffer sorts of a warp
 * when every later logit loses to the earlier ones, and when every one
 * wins; and the steps of a merge and the merges of the last block's tree. */
#include <stdio.h>

#include "chapters/03-softmax-topk/decode_step_model.h"
#include "common/alloc.h"
#include "common/testing.h"

/* One slice of 8 warps x 4 steps x 128 floats, aligned (no scalar step),
 * K = 8, a buffer of 256: each warp makes 4 loads. */
enum { WARPS = 8, STEPS = 4, VOCAB = WARPS * STEPS * 128, K = 8, CAPACITY = 256 };

static DecodeStepCounts counts_of(const float *row)
{
    DecodeStepKernel kernel = {8, VOCAB, K, 1, CAPACITY, WARPS};
    return decode_step_counts(row, kernel);
}

static void expect_sorts(const char *what, DecodeStepCounts counts, int sorts, const int *sizes)
{
    bool same = counts.buffer_sorts == sorts;
    for (int s = 0; same && s < sorts; s++)
        same = counts.sort_sizes[s] == sizes[s];
    EXPECT(same, "%s: %d sorts, of %d, %d, ...; expected %d", what, counts.buffer_sorts, counts.sort_sizes[0],
           counts.sort_sizes[1], sorts);
    EXPECT(counts.scan_loads == STEPS, "%s: %d loads in sequence, expected %d", what, counts.scan_loads, STEPS);
}

/* Falling logits. Step 1 admits its 128 (the threshold is the sentinel):
 * they are 4K or more, so the warp sorts them, 128 entries, and the 8th
 * becomes the threshold. Steps 2 to 4 lose to it: the vote skips them. The
 * final sort holds the 8 kept: a sort of 8. */
static void test_falling_row(float *row)
{
    for (int i = 0; i < VOCAB; i++)
        row[i] = (float)(VOCAB - i);
    const int sizes[] = {128, 8};
    expect_sorts("falling row", counts_of(row), 2, sizes);
}

/* Rising logits: every logit beats every threshold. Step 1 as above (a
 * sort of 128), then steps 2 and 3 each admit 128 on top of the 8 kept:
 * 136 > 256 - 128, a sort of 256 each. Step 4 admits 128 too, but no step
 * follows it (the row is aligned: no scalar step), so the final sort is
 * the one that sorts them, 256 again. */
static void test_rising_row(float *row)
{
    for (int i = 0; i < VOCAB; i++)
        row[i] = (float)i;
    const int sizes[] = {128, 256, 256, 256};
    expect_sorts("rising row", counts_of(row), 4, sizes);
}

/* One slice of a block's step (1024 logits, a float4 per lane of 8 warps),
 * and one three logits longer, as the launcher cut V = 128256 into 125
 * slices: the last warp reads the 3 scalars too, holds 131 candidates at
 * K = 64, and its one sort, at the end, covers 256. At 1024 it covers 128. */
static void test_slice_of_a_block_step(float *row)
{
    for (int i = 0; i < VOCAB; i++)
        row[i] = (float)(VOCAB - i);
    const int lengths[] = {1024, 1027}, sorted[] = {128, 256};
    for (int t = 0; t < 2; t++) {
        DecodeStepKernel kernel = {8, lengths[t], 64, 1, CAPACITY, WARPS};
        DecodeStepCounts counts = decode_step_counts(row, kernel);
        EXPECT(counts.buffer_sorts == 1 && counts.sort_sizes[0] == sorted[t],
               "a slice of %d at K = 64: %d sorts, the first of %d (1 of %d)", lengths[t], counts.buffer_sorts,
               counts.sort_sizes[0], sorted[t]);
    }
}

/* 125 slices merged by 8 warps: rounds of 62, 31, 16, 8, 4, 2 and 1
 * merges. Dealt in turn, the busiest warp makes 8 + 4 + 2 + 1 + 1 + 1 + 1
 * = 18. Dealt by index, the merges into 0, 2, 4, ... fall to the even
 * warps, 16 each; into 0, 4, 8, ... to warps 0 and 4, 16 each; and from
 * span 4 on (into multiples of 8) to warp 0 alone, all of them:
 * 16 + 16 + 16 + 8 + 4 + 2 + 1 = 63. */
static void test_merges_in_sequence(void)
{
    int in_turn = decode_step_busiest_warp_merges(125, 8, false);
    int by_index = decode_step_busiest_warp_merges(125, 8, true);
    EXPECT(in_turn == 18 && by_index == 63, "125 partials, 8 warps: %d merges in turn (18), %d by index (63)", in_turn,
           by_index);
}

/* A merge of two lists of K = 8 (warp_merge_sorted): the better of each
 * of 8 reversed pairs, then 3 stages of the bitonic merge, 4 steps; a lane
 * takes at most one entry or pair at each, 4 exchanges. At K = 64: 1 + 6
 * steps, and a lane takes 2 of the 64 entries, then 1 of the 32 pairs at
 * each stage, 8 exchanges. The tree of 125 slices after the block's 8
 * warps: 3 rounds, then 7 (62, 31, 16, 8, 4, 2 and 1 merges). */
static void test_merge_counts(float *row)
{
    DecodeStepCounts at_8 = counts_of(row);
    DecodeStepKernel kernel = {8, VOCAB, 64, 125, CAPACITY, WARPS};
    DecodeStepCounts at_64 = decode_step_counts(row, kernel);
    EXPECT(at_8.merge_steps == 4 && at_8.merge_exchanges_per_lane == 4,
           "K = 8: a merge of %d steps, %d exchanges per lane (4, 4)", at_8.merge_steps, at_8.merge_exchanges_per_lane);
    EXPECT(at_64.merge_steps == 7 && at_64.merge_exchanges_per_lane == 8,
           "K = 64: a merge of %d steps, %d exchanges per lane (7, 8)", at_64.merge_steps,
           at_64.merge_exchanges_per_lane);
    EXPECT(at_8.merge_rounds == 3 && at_64.merge_rounds == 10 && at_64.block_merges == 3 + 18,
           "merge rounds: %d for one slice (3), %d for 125 (10), with %d merges for the busiest warp (21)",
           at_8.merge_rounds, at_64.merge_rounds, at_64.block_merges);
}

/* The predicted time adds its parts: the high costs give more than the
 * low ones, and the sorts are part of it. */
static void test_time_has_its_parts(float *row)
{
    DecodeStepCounts counts = counts_of(row);
    double low = decode_step_seconds(&counts, &DECODE_STEP_LOW);
    double high = decode_step_seconds(&counts, &DECODE_STEP_HIGH);
    double sorts = decode_step_sort_seconds(&counts, &DECODE_STEP_LOW);
    EXPECT(low > 0 && high > low && sorts > 0 && sorts < low, "low %g s, high %g s, sorts %g s", low, high, sorts);
}

int main(void)
{
    float *row = ALLOC_ARRAY(VOCAB, float);
    test_falling_row(row);
    test_rising_row(row);
    test_slice_of_a_block_step(row);
    test_merges_in_sequence();
    test_merge_counts(row);
    test_time_has_its_parts(row);
    array_free(row);
    return test_finish();
}
