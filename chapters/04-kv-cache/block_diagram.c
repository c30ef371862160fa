#include "chapters/04-kv-cache/block_diagram.h"

#include "chapters/04-kv-cache/accuracy.h"
#include "chapters/04-kv-cache/block_pool.h"
#include "common/rng.h"
#include "kernels/kv_quant.h"
#include "kernels/paged_kv.h"

typedef struct {
    const char *name;
    BlockTable table;
} Sequence;

enum { SEQUENCES = 2 };

static const char *block_colour(int users)
{
    return users == 0 ? "#ffffff" : users == 1 ? "#d8e6f3" : "#f6d7a7";
}

/* One sequence's block table: a row per logical block, with the positions
 * it holds, each row a port that an edge leaves from. */
static void write_table(FILE *out, const Sequence *seq, int block_size)
{
    fprintf(out, "  %s [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\">\n", seq->name);
    fprintf(out, "    <TR><TD><B>%s</B>: %d positions</TD></TR>\n", seq->name, seq->table.length);
    for (int i = 0; i < seq->table.n_blocks; i++) {
        int first = i * block_size, last = (i + 1) * block_size - 1;
        if (last >= seq->table.length)
            last = seq->table.length - 1;
        fprintf(out, "    <TR><TD PORT=\"l%d\" ALIGN=\"LEFT\">logical %d: positions %d&#8211;%d</TD></TR>\n", i, i,
                first, last);
    }
    fprintf(out, "  </TABLE>>];\n");
}

/* The pool: a row per physical block, coloured by how many tables use it. */
static void write_pool(FILE *out, const BlockPool *pool)
{
    fprintf(out, "  pool [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\">\n");
    fprintf(out, "    <TR><TD><B>physical blocks</B></TD></TR>\n");
    for (int b = 0; b < pool->num_blocks; b++) {
        int users = pool->ref_count[b];
        fprintf(out, "    <TR><TD PORT=\"p%d\" BGCOLOR=\"%s\" ALIGN=\"LEFT\">block %d: ", b, block_colour(users), b);
        if (users == 0)
            fprintf(out, "<FONT COLOR=\"#888888\">free</FONT>");
        else
            fprintf(out, "%d user%s", users, users == 1 ? "" : "s");
        fprintf(out, "</TD></TR>\n");
    }
    fprintf(out, "  </TABLE>>];\n");
}

/* One stage as a whole graph: the tables on the left, A above B, the pool
 * on the right, an edge per logical block, and the copy if one was made. */
static void write_stage(FILE *out, const BlockPool *pool, const Sequence *seqs, BlockCopy copy)
{
    fprintf(out, "digraph blocks {\n"
                 "  graph [rankdir=LR, nodesep=0.3, ranksep=0.9];\n"
                 "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10];\n"
                 "  edge [arrowsize=0.6, color=\"#555555\", fontname=\"Helvetica\", fontsize=9];\n");
    for (int s = 0; s < SEQUENCES; s++)
        write_table(out, &seqs[s], pool->block_size);
    write_pool(out, pool);
    for (int s = 0; s < SEQUENCES; s++)
        for (int i = 0; i < seqs[s].table.n_blocks; i++)
            fprintf(out, "  %s:l%d:e -> pool:p%d:w;\n", seqs[s].name, i, seqs[s].table.blocks[i]);
    if (copy.from != NO_BLOCK)
        fprintf(out, "  pool:p%d:e -> pool:p%d:e [style=dashed, color=\"#b35c00\", label=\"copy\"];\n", copy.from,
                copy.to);
    /* A above B: an invisible edge between nodes of one rank orders them. */
    fprintf(out, "  { rank=same; A -> B [style=invis]; }\n}\n");
}

bool block_diagram_copy_on_write(FILE *out, BlockDiagramStage stage, int num_blocks, int block_size, int prompt_len,
                                 uint64_t seed)
{
    /* The figure needs a partly full last block, and one free block for its copy. */
    if (prompt_len < 1 || prompt_len % block_size == 0 || paged_kv_blocks_for(prompt_len, block_size) + 1 > num_blocks)
        return false;
    BlockPool pool = block_pool_create(num_blocks, block_size, false);
    Rng rng;
    rng_seed(&rng, seed);
    block_pool_shuffle(&pool, &rng);
    Sequence seqs[SEQUENCES] = {
        {"A", block_table_create(num_blocks)},
        {"B", block_table_create(num_blocks)}
    };
    BlockCopy none, copy;
    block_table_reserve(&pool, &seqs[0].table, prompt_len, &none);
    block_table_fork(&pool, &seqs[0].table, &seqs[1].table);
    if (stage == BLOCK_DIAGRAM_AFTER_FORK) {
        write_stage(out, &pool, seqs, none);
    } else {
        /* A writes first: its last block is shared, so it copies it. B then
         * finds itself the block's only user and writes in place. */
        block_table_reserve(&pool, &seqs[0].table, prompt_len + 1, &copy);
        block_table_reserve(&pool, &seqs[1].table, prompt_len + 1, &none);
        write_stage(out, &pool, seqs, copy);
    }
    for (int s = 0; s < SEQUENCES; s++) {
        block_table_release(&pool, &seqs[s].table);
        block_table_free(&seqs[s].table);
    }
    block_pool_free(&pool);
    return true;
}

/* The layout figure zooms in three steps: physical blocks of one layer's
 * pool, the kv heads of one block, the rows and scales of one head's part,
 * every cell labelled with its bytes, as the offset functions of
 * kernels/kv_quant.h compute them. */
static void write_cell(FILE *out, const char *port, const char *colour, const char *what, size_t first, size_t end)
{
    fprintf(out, "<TD PORT=\"%s\" BGCOLOR=\"%s\">%s<BR/><FONT POINT-SIZE=\"8\">bytes %zu&#8211;%zu</FONT></TD>", port,
            colour, what, first, end - 1);
}

static void write_blocks(FILE *out, KvBlockLayout l, int shown_blocks, int zoomed_block)
{
    size_t block = kv_block_bytes(l);
    fprintf(out, "  pool [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\"><TR>");
    for (int b = 0; b < shown_blocks; b++) {
        char port[16], what[32];
        snprintf(port, sizeof port, "b%d", b);
        snprintf(what, sizeof what, "physical block %d", b);
        write_cell(out, port, b == zoomed_block ? "#f6d7a7" : "#ffffff", what, b * block, (b + 1) * block);
    }
    fprintf(out, "<TD BORDER=\"0\">&#8230;</TD></TR></TABLE>>];\n");
}

static void write_heads(FILE *out, KvBlockLayout l, int zoomed_block, int zoomed_head)
{
    fprintf(out, "  block [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\"><TR>");
    for (int h = 0; h < l.shape.n_kv_heads; h++) {
        char port[16], what[32];
        snprintf(port, sizeof port, "h%d", h);
        snprintf(what, sizeof what, "kv head %d", h);
        size_t first = kv_head_offset(l, zoomed_block, h);
        write_cell(out, port, h == zoomed_head ? "#f6d7a7" : "#ffffff", what, first, first + kv_head_bytes(l));
    }
    fprintf(out, "</TR></TABLE>>];\n");
}

static void write_rows(FILE *out, KvBlockLayout l, int zoomed_block, int zoomed_head)
{
    size_t head = kv_head_offset(l, zoomed_block, zoomed_head), row = kv_row_bytes(l);
    size_t scales_at = kv_scales_offset(l), scales = 2 * (size_t)kv_scale_count(l), end = kv_head_bytes(l);
    fprintf(out, "  head [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\"><TR>");
    for (int slot = 0; slot < l.shape.block_size; slot++) {
        char port[16], what[32];
        snprintf(port, sizeof port, "r%d", slot);
        snprintf(what, sizeof what, "position %d", slot);
        write_cell(out, port, "#d8e6f3", what, head + slot * row, head + (slot + 1) * row);
    }
    size_t rows_end = (size_t)l.shape.block_size * row;
    if (scales_at > rows_end)
        write_cell(out, "pad", "#eeeeee", "padding", head + rows_end, head + scales_at);
    if (scales > 0)
        write_cell(out, "scales", "#f6d7a7", "fp16 scales", head + scales_at, head + scales_at + scales);
    if (end > scales_at + scales)
        write_cell(out, "tail", "#eeeeee", "padding", head + scales_at + scales, head + end);
    fprintf(out, "</TR></TABLE>>];\n");
}

void block_diagram_layout(FILE *out, KvBlockLayout l, int zoomed_block, int zoomed_head)
{
    enum { SHOWN_BLOCKS = 3 };
    fprintf(out, "digraph layout {\n  graph [ranksep=0.4];\n"
                 "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10];\n"
                 "  edge [arrowsize=0.6, color=\"#555555\", style=dashed];\n");
    write_blocks(out, l, SHOWN_BLOCKS, zoomed_block);
    write_heads(out, l, zoomed_block, zoomed_head);
    write_rows(out, l, zoomed_block, zoomed_head);
    fprintf(out, "  pool:b%d:s -> block:n;\n  block:h%d:s -> head:n;\n}\n", zoomed_block, zoomed_head);
}
