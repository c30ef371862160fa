/* The CUDA kernel versions against the double reference, on the inputs
 * that catch the bugs seen in published versions of this kernel: several rows
 * per block and per launch (a merge that mixes rows, shared memory reused
 * too early), blocks that loop over rows, winners in the last tile, V
 * smaller than a tile, V not a multiple of 4 (rows that start unaligned
 * for the 16-byte loads), ties, NaN and infinities, K at each version's
 * limit (1024 for the radix select, with ties across its K-th key), and
 * versions 4 and 8 with empty slices, and version 8's last-block merge on one
 * row cut into many slices. Needs a GPU; skipped without. */
#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/compare.h"
#include "chapters/03-softmax-topk/hard_inputs.h"
#include "common/alloc.h"
#include "common/cuda_util.h"
#include "common/testing.h"
#include "kernels/softmax_topk_gpu.h"
#include "tests/03-softmax-topk/expect_topk.h"

/* Run one version and compare every row; false (with a printed line) on
 * any difference. */
static bool version_matches(int version, const char *what, const float *logits, size_t rows, size_t vocab, int k,
                            SoftmaxTopkGpuConfig config)
{
    float *probs = ALLOC_ARRAY(rows * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY(rows * (size_t)k, int64_t);
    char label[256];
    snprintf(label, sizeof label, "version %d, %s (rows %zu, V %zu, K %d, max_blocks %d, splits %d)", version, what,
             rows, vocab, k, config.max_blocks, config.splits);
    const char *why = softmax_topk_gpu(version, logits, rows, vocab, k, &config, probs, indices);
    bool ok = why == NULL;
    if (!ok) {
        printf("FAIL %s: %s\n", label, why);
    } else {
        ok = topk_matches_reference(label, logits, rows, vocab, k, probs, indices, topk_rtol_gpu(vocab));
    }
    array_free(probs);
    array_free(indices);
    return ok;
}

/* Every version that supports k, with the grid as large as the rows need and
 * with a grid of 3 blocks, so that each block handles several rows. */
static void check_all_versions(const char *what, const float *logits, size_t rows, size_t vocab, int k)
{
    const int max_blocks[] = {0, 3};
    for (int version = 1; version <= SOFTMAX_TOPK_GPU_VERSIONS; version++) {
        if (k > softmax_topk_gpu_max_k(version)) {
            continue;
        }
        for (int b = 0; b < 2; b++) {
            SoftmaxTopkGpuConfig config = {max_blocks[b], 0};
            EXPECT(version_matches(version, what, logits, rows, vocab, k, config), "version %d: %s, K %d", version,
                   what, k);
        }
    }
}

static void test_hard_inputs(void)
{
    for (int c = 0; c < HARD_INPUT_COUNT; c++) {
        const HardInput *input = &HARD_INPUTS[c];
        float *row = ALLOC_ARRAY(input->vocab, float);
        input->fill(row, input->vocab);
        check_all_versions(input->name, row, 1, input->vocab, input->k);
        array_free(row);
    }
}

/* Small V (a block holds up to 8 rows in version 3, and 8 warps hold 8 rows
 * in version 2), odd V (unaligned rows), V below one step of a warp. */
static void test_shapes(void)
{
    const size_t vocabs[] = {1, 3, 5, 31, 100, 129, 1000, 1001, 1823, 4099, 50257};
    const int ks[] = {1, 7, 32, 256};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        size_t vocab = vocabs[v], rows = vocab > 10000 ? 5 : 37;
        float *logits = ALLOC_ARRAY(rows * vocab, float);
        fill_tied_logits(logits, rows * vocab, 100 + vocab);
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            int k = ks[t] > (int)vocab ? (int)vocab : ks[t];
            check_all_versions("random rows with ties", logits, rows, vocab, k);
        }
        array_free(logits);
    }
}

/* The winners at the very end of each row: in the last float4 and in the
 * scalar tail after it. */
static void test_winners_in_the_last_tile(void)
{
    enum { ROWS = 11 };
    const size_t vocabs[] = {4096, 4099, 128256 + 3};
    for (size_t v = 0; v < 3; v++) {
        size_t vocab = vocabs[v];
        float *logits = ALLOC_ARRAY(ROWS * vocab, float);
        fill_tied_logits(logits, ROWS * vocab, 7 + vocab);
        for (size_t row = 0; row < ROWS; row++) {
            float *x = logits + row * vocab;
            x[vocab - 1] = 50.0f;
            x[vocab - 2] = 49.0f;
            x[vocab - 5] = 48.0f;
            x[vocab - 6] = 48.0f; /* a tie across the float4 boundary */
        }
        check_all_versions("winners at the end of the row", logits, ROWS, vocab, 8);
        array_free(logits);
    }
}

/* Rows of different kinds in one launch: a NaN row or an all -inf row must
 * not leak into its neighbours (in version 3 they share a block). */
static void test_mixed_rows(void)
{
    enum { ROWS = 16, VOCAB = 300, K = 5 };
    float *logits = ALLOC_ARRAY(ROWS * VOCAB, float);
    fill_tied_logits(logits, ROWS * VOCAB, 99);
    logits[2 * VOCAB + 17] = NAN;
    for (int i = 0; i < VOCAB; i++) {
        logits[5 * VOCAB + i] = -INFINITY;
        logits[9 * VOCAB + i] = 1.5f;
    }
    logits[11 * VOCAB + 299] = INFINITY;
    logits[11 * VOCAB + 3] = INFINITY;
    check_all_versions("NaN, -inf, equal and +inf rows among others", logits, ROWS, VOCAB, K);
    array_free(logits);
}

/* K up to 1024 (version 5 alone above 256), several rows per block and a
 * grid of 3: random rows (ties everywhere: logits are multiples of 1/16),
 * and rows built so that many entries share the K-th key on both sides of
 * the boundary, where only the index decides (the radix select's tie rule):
 * a large block of equal logits, -0.0 and +0.0 interleaved, NaNs, and all
 * -inf but one. K = V = 1024 too. */
static void test_large_k(void)
{
    enum { ROWS = 7 };
    const size_t vocabs[] = {1024, 1500, 4099, 50257};
    const int ks[] = {257, 1000, 1024};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        size_t vocab = vocabs[v];
        float *logits = ALLOC_ARRAY(ROWS * vocab, float);
        fill_tied_logits(logits, ROWS * vocab, 300 + vocab);
        float *equal_block = logits + vocab, *zeros = logits + 2 * vocab;
        float *with_nan = logits + 3 * vocab, *one_finite = logits + 4 * vocab;
        for (size_t i = 0; i < vocab; i++) {
            equal_block[i] = i % 7 == 0 ? 4.0f : i % 3 == 0 ? 1.25f : -2.0f;
            zeros[i] = i % 11 == 0 ? 3.0f : i % 2 == 0 ? -0.0f : 0.0f;
            with_nan[i] = i % 97 == 5 ? NAN : with_nan[i];
            one_finite[i] = i == vocab / 2 ? -1.0f : -INFINITY;
        }
        for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
            if ((size_t)ks[t] <= vocab) {
                check_all_versions("large K: ties at the K-th key, zeros, NaN, -inf", logits, ROWS, vocab, ks[t]);
            }
        }
        array_free(logits);
    }
}

/* Versions 4 and 8 with chosen splits, including more slices than logits to
 * fill (empty slices), a split count that is not a power of two, and the
 * most slices K = 256 allows (a merge in 226 KiB of shared memory, which
 * the kernels must opt in to). */
static void test_splits(void)
{
    struct {
        size_t vocab;
        int k, splits;
    } cases[] = {
        {5000,   64,  1  },
        {5000,   64,  2  },
        {5000,   64,  3  },
        {5000,   256, 7  },
        {10,     3,   9  },
        {10,     10,  10 },
        {128256, 16,  40 },
        {128256, 256, 112}
    };
    enum { ROWS = 6 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float *logits = ALLOC_ARRAY(ROWS * cases[c].vocab, float);
        fill_tied_logits(logits, ROWS * cases[c].vocab, 5 + c);
        for (int version = 4; version <= 8; version += 4) {
            for (int max_blocks = 0; max_blocks <= 2; max_blocks += 2) {
                SoftmaxTopkGpuConfig config = {max_blocks, cases[c].splits};
                EXPECT(version_matches(version, "chosen splits", logits, ROWS, cases[c].vocab, cases[c].k, config),
                       "version %d with %d splits", version, cases[c].splits);
            }
        }
        array_free(logits);
    }
}

/* The shared-memory opt-in is a kernel's, not a run's: a run made after
 * another, with a merge far smaller, must leave the first one able to
 * launch its merge in 226 KiB (a planted opt-in to each run's own bytes
 * fails here, with an invalid argument). */
static void test_runs_made_before_either_launches(void)
{
    enum { ROWS = 1 };
    const size_t vocab = 128256;
    float *logits = ALLOC_ARRAY(ROWS * vocab, float);
    fill_tied_logits(logits, ROWS * vocab, 909);
    for (int version = 4; version <= 8; version += 4) {
        SoftmaxTopkGpuConfig large = {0, 112}, small = {0, 2};
        SoftmaxTopkGpuRun *first, *second;
        const char *why = softmax_topk_gpu_run_new(&first, version, logits, ROWS, vocab, 256, &large);
        EXPECT(why == NULL, "version %d, K = 256, 112 splits: %s", version, why);
        why = softmax_topk_gpu_run_new(&second, version, logits, ROWS, vocab, 1, &small);
        EXPECT(why == NULL, "version %d, K = 1, 2 splits: %s", version, why);
        if (first == NULL || second == NULL) {
            softmax_topk_gpu_run_free(first);
            softmax_topk_gpu_run_free(second);
            continue;
        }
        float *probs = ALLOC_ARRAY(ROWS * 256, float);
        int64_t *indices = ALLOC_ARRAY(ROWS * 256, int64_t);
        softmax_topk_gpu_run_once(first, probs, indices);
        EXPECT(topk_matches_reference("the first of two runs, K = 256, 112 splits", logits, ROWS, vocab, 256, probs,
                                      indices, topk_rtol_gpu(vocab)),
               "version %d", version);
        array_free(probs);
        array_free(indices);
        softmax_topk_gpu_run_free(first);
        softmax_topk_gpu_run_free(second);
    }
    array_free(logits);
}

/* Versions 6 and 9 with 8 warps on a row (V >= 4096) sharing one
 * threshold, at every size of its kept list (K = 1 is the argmax): rows of
 * ties (one warp's threshold meets another's equal logits, whose indices
 * may be smaller; in version 9, many logits equal to the floor), all equal,
 * increasing (a new maximum at every float4: the rescale), decreasing (the
 * threshold rises at once), with NaN (which the steps' maxima hide: version
 * 9 must revisit every step), with two +inf, all -inf, one finite among
 * -inf. */
static void check_one_threshold_per_row(int version, size_t vocab)
{
    enum { ROWS = 8 };
    float *logits = ALLOC_ARRAY(ROWS * vocab, float);
    fill_tied_logits(logits, ROWS * vocab, 61);
    for (size_t i = 0; i < vocab; i++) {
        logits[1 * vocab + i] = 1.5f;
        logits[2 * vocab + i] = -20.0f + 40.0f * (float)i / (float)vocab;
        logits[3 * vocab + i] = 20.0f - 40.0f * (float)i / (float)vocab;
        logits[6 * vocab + i] = -INFINITY;
        logits[7 * vocab + i] = i == vocab - 2 ? 3.0f : -INFINITY;
    }
    logits[4 * vocab + 4000] = NAN;
    logits[4 * vocab + 17] = NAN;
    logits[5 * vocab + 5000] = INFINITY;
    logits[5 * vocab + 2] = INFINITY;
    const int ks[] = {1, 2, 3, 5, 8, 16, 33, 64, 100, 129, 256};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (int max_blocks = 0; max_blocks <= 3; max_blocks += 3) {
            SoftmaxTopkGpuConfig config = {max_blocks, 0};
            EXPECT(version_matches(version, "shared threshold: ties, equal, monotone, NaN, inf rows", logits, ROWS,
                                   vocab, ks[t], config),
                   "version %d, V %zu, K %d", version, vocab, ks[t]);
        }
    }
    array_free(logits);
}

/* V = 8195 starts rows unaligned (a scalar head), V = 8192 aligned (none:
 * every logit goes through the float4 path). Version 9 takes its floor
 * from 64 steps there (K <= 64; above, it revisits every step), and from
 * 258 at V = 33001, which every K up to 256 reaches. */
static void test_one_threshold_per_row(void)
{
    check_one_threshold_per_row(6, 8195);
    check_one_threshold_per_row(6, 8192);
    check_one_threshold_per_row(9, 8195);
    check_one_threshold_per_row(9, 8192);
    check_one_threshold_per_row(9, 33001);
}

/* Version 8, the decode step it is for: one row of V = 128256 + 3 (rows
 * start unaligned) cut into up to 128 slices, K = 1, 8 and 64, with a grid
 * as large as the slices and with 3 blocks (a block takes several slices,
 * and the ticket that merges is drawn by a block that has more to do).
 * Then four such rows in one launch, a NaN row and an all -inf row among
 * them: each row counts its own tickets. Each run is launched twice, since
 * the tickets it leaves are the next launch's. Planted, a merge by the block
 * that draws ticket splits - 2 (one slice still unwritten) fails here. */
static bool launched_twice_matches(const char *what, const float *logits, size_t rows, size_t vocab, int k,
                                   SoftmaxTopkGpuConfig config)
{
    SoftmaxTopkGpuRun *run;
    const char *why = softmax_topk_gpu_run_new(&run, 8, logits, rows, vocab, k, &config);
    if (why != NULL) {
        printf("FAIL %s: %s\n", what, why);
        return false;
    }
    float *probs = ALLOC_ARRAY(rows * (size_t)k, float);
    int64_t *indices = ALLOC_ARRAY(rows * (size_t)k, int64_t);
    bool ok = true;
    for (int launch = 1; launch <= 2; launch++) {
        char label[256];
        snprintf(label, sizeof label, "version 8, %s, launch %d (rows %zu, V %zu, K %d, max_blocks %d, splits %d)",
                 what, launch, rows, vocab, k, config.max_blocks, softmax_topk_gpu_run_splits(run));
        softmax_topk_gpu_run_once(run, probs, indices);
        ok = topk_matches_reference(label, logits, rows, vocab, k, probs, indices, topk_rtol_gpu(vocab)) && ok;
    }
    array_free(probs);
    array_free(indices);
    softmax_topk_gpu_run_free(run);
    return ok;
}

static void test_last_block_merge(void)
{
    enum { ROWS = 4 };
    const size_t vocab = 128256 + 3;
    const int ks[] = {1, 8, 64}, splits[] = {0, 1, 7, 46, 128};
    float *logits = ALLOC_ARRAY(ROWS * vocab, float);
    fill_tied_logits(logits, ROWS * vocab, 808);
    for (size_t i = 0; i < vocab; i++) {
        logits[2 * vocab + i] = -INFINITY;
    }
    logits[1 * vocab + 77777] = NAN;
    logits[3 * vocab + vocab - 1] = 40.0f; /* the winner in the last slice's scalar tail */
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
            for (int max_blocks = 0; max_blocks <= 3; max_blocks += 3) {
                SoftmaxTopkGpuConfig config = {max_blocks, splits[s]};
                EXPECT(launched_twice_matches("one row", logits, 1, vocab, ks[t], config), "K %d, %d splits", ks[t],
                       splits[s]);
                EXPECT(launched_twice_matches("a NaN row and an all -inf row among four", logits, ROWS, vocab, ks[t],
                                              config),
                       "K %d, %d splits, 4 rows", ks[t], splits[s]);
            }
        }
    }
    array_free(logits);
}

int main(void)
{
    if (!cuda_device_available()) {
        test_skip("no CUDA device");
    }
    test_hard_inputs();
    test_shapes();
    test_winners_in_the_last_tile();
    test_mixed_rows();
    test_large_k();
    test_splits();
    test_runs_made_before_either_launches();
    test_last_block_merge();
    test_one_threshold_per_row();
    return test_finish();
}
