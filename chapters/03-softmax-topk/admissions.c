#include "chapters/03-softmax-topk/admissions.h"

#include <math.h>
#include <stdio.h>

#include "chapters/03-softmax-topk/topk_collect.h"
#include "common/alloc.h"
#include "common/rng.h"

enum { ROWS = 32, VOCAB = 128256, CHECKPOINTS = 18 };

// ANCHOR: count_expected_admissions
/* Logit i (counting from 1) in random order is among the best K of the
 * first i with probability K / i, for i > K; the first K all get in. */
static double expected_admissions(double position, int k)
{
    return position <= k ? position : k * (1.0 + log(position / k));
}
// ANCHOR_END: count_expected_admissions

void write_admissions_data(FILE *out)
{
    const int ks[] = {1, 16, 256};
    size_t positions[CHECKPOINTS];
    for (int c = 0; c < CHECKPOINTS - 1; c++) {
        positions[c] = (size_t)1 << c;
    }
    positions[CHECKPOINTS - 1] = VOCAB;
    double admitted[3][CHECKPOINTS] = {{0}};
    float *row = ALLOC_ARRAY(VOCAB, float);
    Rng rng;
    rng_seed(&rng, 1);
    for (int r = 0; r < ROWS; r++) {
        rng_fill_normal_f32(&rng, row, VOCAB, 0.0, 3.0);
        for (int t = 0; t < 3; t++) {
            TopkEntry *storage = ALLOC_ARRAY(topk_collector_storage(ks[t]), TopkEntry);
            TopkCollector collector;
            topk_collector_init(&collector, ks[t], storage);
            size_t i = 0;
            for (int c = 0; c < CHECKPOINTS; c++) {
                for (; i < positions[c]; i++) {
                    topk_collector_offer(&collector, topk_entry(row[i], (int32_t)i));
                }
                admitted[t][c] += (double)collector.admitted / ROWS;
            }
            array_free(storage);
        }
    }
    fprintf(out,
            "# position  K=1 measured  K=1 expected  K=16 measured  K=16 expected  K=256 measured  K=256 expected\n");
    for (int c = 0; c < CHECKPOINTS; c++) {
        fprintf(out, "%zu", positions[c]);
        for (int t = 0; t < 3; t++) {
            fprintf(out, " %.2f %.2f", admitted[t][c], expected_admissions((double)positions[c], ks[t]));
        }
        fprintf(out, "\n");
    }
    array_free(row);
}
