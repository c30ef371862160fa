/* The merge-tree figure (merge_tree.c) draws what the merge does: with the
 * tree inside each row, no merge mixes rows and every row's state is its
 * own; with the tree across the block (the bug), the merges that bring in
 * another row are the block's 7 merges less the 8 - rows that stay inside a
 * row, and the rows whose first warp absorbed another row, half of them,
 * are marked wrong (as test_block_merge finds them wrong). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapters/03-softmax-topk/merge_demo.h"
#include "chapters/03-softmax-topk/merge_tree.h"
#include "common/testing.h"

static int occurrences(const char *text, const char *word)
{
    int count = 0;
    for (const char *at = strstr(text, word); at != NULL; at = strstr(at + 1, word)) {
        count++;
    }
    return count;
}

static void check_tree(int rows, int merge_group)
{
    CapturedOutput captured;
    write_seeded_merge_tree_diagram(capture_output(&captured), 1000, rows, merge_group, 7);
    char *dot = captured_text(&captured);
    bool across = merge_group == EMULATED_BLOCK_WARPS && rows > 1;
    int mixing = occurrences(dot, "label=\"other row\""), wrong = occurrences(dot, "wrong:");
    int results = occurrences(dot, "the tree's state");
    int expected_mixing = across ? (EMULATED_BLOCK_WARPS - 1) - (EMULATED_BLOCK_WARPS - rows) : 0;
    int expected_wrong = across ? rows / 2 : 0;
    EXPECT(mixing == expected_mixing && wrong == expected_wrong && results == rows,
           "%d rows per block, merge group %d: %d merges mix rows (expected %d), %d rows marked wrong (expected %d), "
           "%d rows drawn",
           rows, merge_group, mixing, expected_mixing, wrong, expected_wrong, results);
    free(dot);
}

int main(void)
{
    for (int rows = 1; rows <= EMULATED_BLOCK_WARPS; rows *= 2) {
        check_tree(rows, EMULATED_BLOCK_WARPS / rows);
        check_tree(rows, EMULATED_BLOCK_WARPS);
    }
    return test_finish();
}
