#include "chapters/03-softmax-topk/keep_ties.h"

#include "chapters/03-softmax-topk/hard_inputs.h"
#include "chapters/03-softmax-topk/softmax_topk.h"
#include "common/alloc.h"

// ANCHOR: keep_every_tie_of_the_kth
/* The K of the fused version already hold the K-th logit's ties of lower
 * index (ties rank by index), so the ones left out are exactly the later
 * indices with the same logit: one more pass finds them. Equal logits have
 * equal probabilities, to the bit. A NaN equals nothing, so a K-th logit
 * that is NaN keeps no ties: NaNs rank by index, as before. */
size_t topk_keep_ties(const float *logits, size_t vocab, int k, float *probs, int64_t *indices)
{
    RowScratch scratch = row_scratch_new(CPU_FUSED, vocab, k);
    softmax_topk_row(CPU_FUSED, logits, vocab, k, &scratch, probs, indices);
    row_scratch_free(&scratch);
    size_t kept = (size_t)k;
    float kth = logits[indices[k - 1]];
    for (size_t i = (size_t)indices[k - 1] + 1; i < vocab; i++) {
        if (logits[i] == kth) {
            probs[kept] = probs[k - 1];
            indices[kept++] = (int64_t)i;
        }
    }
    return kept;
}
// ANCHOR_END: keep_every_tie_of_the_kth

static size_t count_equal(const float *logits, size_t vocab, float value)
{
    size_t count = 0;
    for (size_t i = 0; i < vocab; i++) {
        count += logits[i] == value;
    }
    return count;
}

void print_ties_table(size_t vocab, int k, size_t rows, uint64_t seed, TableFormat format)
{
    const char *headers[] = {"row", "K-th logit", "logits equal to it", "top K", "top K with its ties"};
    Table *table = TABLE_NEW(headers, "rrrrr");
    float *logits = ALLOC_ARRAY(vocab, float), *probs = ALLOC_ARRAY(vocab, float);
    int64_t *indices = ALLOC_ARRAY(vocab, int64_t);
    for (size_t row = 0; row < rows; row++) {
        fill_tied_logits(logits, vocab, seed + row);
        size_t kept = topk_keep_ties(logits, vocab, k, probs, indices);
        float kth = logits[indices[k - 1]];
        table_cell(table, "%zu", row);
        table_cell(table, "%g", kth);
        table_cell(table, "%zu", count_equal(logits, vocab, kth));
        table_cell(table, "%d", k);
        table_cell(table, "%zu", kept);
    }
    table_print(table, stdout, format);
    table_free(table);
    array_free(logits);
    array_free(probs);
    array_free(indices);
}
