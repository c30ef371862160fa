#include "chapters/03-softmax-topk/merge_tree.h"

#include "chapters/03-softmax-topk/merge_demo.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "kernels/softmax_topk.h"

/* A state of the tree: what it holds (warps first .. last, rows as bits)
 * and its name in the graph (warp `first` after `round` rounds). */
typedef struct {
    SoftmaxState state;
    int first, last, round;
    unsigned rows;
} TreeNode;

static const char *const ROW_COLOURS[] = {"#d8e6f3", "#dcebd5", "#efe0f5", "#f3ead0"};
static const char *const MIXED_COLOUR = "#f4c2bd";

static const char *node_colour(unsigned rows)
{
    for (int r = 0; r < EMULATED_BLOCK_WARPS; r++) {
        if (rows == 1u << r) {
            return ROW_COLOURS[r % 4];
        }
    }
    return MIXED_COLOUR;
}

/* A state as a box: the warps it holds, its (m, d); leaves of a block
 * with several rows also name their row. */
static void write_node(FILE *out, TreeNode node, int warps_per_row)
{
    fprintf(out, "  w%d_%d [label=\"", node.first, node.round);
    if (node.first == node.last && warps_per_row < EMULATED_BLOCK_WARPS) {
        fprintf(out, "warp %d\\nrow %d", node.first, node.first / warps_per_row);
    } else if (node.first == node.last) {
        fprintf(out, "warp %d", node.first);
    } else {
        fprintf(out, "warps %d-%d", node.first, node.last);
    }
    fprintf(out, "\\nm = %.4g\\nd = %.4g\", fillcolor=\"%s\"];\n", node.state.max, node.state.sum,
            node_colour(node.rows));
}

/* An edge into the merged node; red where it brings in another row. */
static void write_edge(FILE *out, TreeNode from, TreeNode into, bool mixes)
{
    fprintf(out, "  w%d_%d -> w%d_%d%s;\n", from.first, from.round, into.first, into.round,
            mixes ? " [color=\"#c0392b\", penwidth=2.2, fontcolor=\"#c0392b\", label=\"other row\"]" : "");
}

/* Under a row's first warp: the state the kernel normalises the row with,
 * and the row's own state, pushed one logit at a time (equal up to
 * rounding when the tree stayed in the row). */
static void write_row_result(FILE *out, int row, TreeNode leader, const float *logits, size_t vocab)
{
    SoftmaxState alone = softmax_state_empty();
    for (size_t i = 0; i < vocab; i++) {
        alone = softmax_state_push(alone, logits[(size_t)row * vocab + i]);
    }
    bool mixed = leader.rows != 1u << row;
    fprintf(out,
            "  row%d [shape=box, style=\"rounded\", color=\"%s\", label=\"row %d: the tree's state\\n"
            "m = %.9g, d = %.9g\\none logit at a time\\nm = %.9g, d = %.9g%s\"];\n",
            row, mixed ? "#c0392b" : "#555555", row, leader.state.max, leader.state.sum, alone.max, alone.sum,
            mixed ? "\\nwrong: it holds another row" : "");
    fprintf(out, "  w%d_%d -> row%d [style=dashed];\n", leader.first, leader.round, row);
}

void write_merge_tree_diagram(FILE *out, const float *logits, size_t vocab, int rows_per_block, int merge_group)
{
    const int warps_per_row = EMULATED_BLOCK_WARPS / rows_per_block;
    fprintf(out, "digraph merge_tree {\n"
                 "  graph [rankdir=TB, nodesep=0.12, ranksep=0.3];\n"
                 "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, "
                 "margin=\"0.05,0.03\"];\n"
                 "  edge [arrowsize=0.6, color=\"#555555\", fontname=\"Helvetica\", fontsize=9];\n");
    TreeNode nodes[EMULATED_BLOCK_WARPS];
    TopkEntry best; /* the list of one that scan_warp_share fills too */
    for (int warp = 0; warp < EMULATED_BLOCK_WARPS; warp++) {
        int row = warp / warps_per_row;
        Partial partial = {.list = &best};
        scan_warp_share(logits + (size_t)row * vocab, vocab, warp % warps_per_row, warps_per_row, 1, &partial);
        nodes[warp] = (TreeNode){partial.state, warp, warp, 0, 1u << row};
        write_node(out, nodes[warp], warps_per_row);
    }
    int round = 0;
    for (int span = 1; span < merge_group; span *= 2) {
        round++;
        for (int warp = 0; warp < EMULATED_BLOCK_WARPS; warp++) {
            if (merge_tree_absorbs(warp % merge_group, span, merge_group)) {
                TreeNode into = nodes[warp], from = nodes[warp + span];
                nodes[warp] = (TreeNode){softmax_state_merge(into.state, from.state), into.first, from.last, round,
                                         into.rows | from.rows};
                write_node(out, nodes[warp], warps_per_row);
                write_edge(out, into, nodes[warp], false);
                write_edge(out, from, nodes[warp], from.rows != into.rows);
            }
        }
    }
    for (int row = 0; row < rows_per_block; row++) {
        write_row_result(out, row, nodes[row * warps_per_row], logits, vocab);
    }
    /* The leaves in warp order, on one line. */
    fprintf(out, "  { rank=same; w0_0");
    for (int warp = 1; warp < EMULATED_BLOCK_WARPS; warp++) {
        fprintf(out, " -> w%d_0", warp);
    }
    fprintf(out, " [style=invis]; }\n}\n");
}

void write_seeded_merge_tree_diagram(FILE *out, size_t vocab, int rows_per_block, int merge_group, uint64_t seed)
{
    float *logits = ALLOC_ARRAY((size_t)rows_per_block * vocab, float);
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal_f32(&rng, logits, (size_t)rows_per_block * vocab, 0.0, 3.0);
    write_merge_tree_diagram(out, logits, vocab, rows_per_block, merge_group);
    array_free(logits);
}
