#include "chapters/03-softmax-topk/lanes_diagram.h"

#include <stdint.h>

#include "common/alloc.h"
#include "kernels/softmax_topk.h"

/* kWarpSize of kernels/softmax_topk_kernels.cuh. */
enum { WARP_LANES = 32 };

static const char *const WARP_COLOURS[] = {"#d8e6f3", "#dcebd5", "#efe0f5", "#f3ead0"};
/* Every lane's column as wide as three digits, so that lanes line up. */
static const char *const CELL_SIZE = "WIDTH=\"20\" HEIGHT=\"14\" FIXEDSIZE=\"TRUE\"";
static const char *const HEAD_COLOUR = "#f6c28b", *const TAIL_COLOUR = "#e8a0a0";

static void open_table(FILE *out, const char *name, const char *title)
{
    fprintf(out,
            "  %s [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"1\">\n"
            "    <TR><TD BORDER=\"0\" COLSPAN=\"%d\" ALIGN=\"LEFT\"><B>%s</B></TD></TR>\n"
            "    <TR><TD BORDER=\"0\"></TD>",
            name, WARP_LANES + 1, title);
    for (int lane = 0; lane < WARP_LANES; lane++) {
        fprintf(out, "<TD BORDER=\"0\" %s><FONT POINT-SIZE=\"7\">%d</FONT></TD>", CELL_SIZE, lane);
    }
    fprintf(out, "</TR>\n");
}

static void write_cell(FILE *out, int index, const char *colour)
{
    if (index < 0) {
        fprintf(out, "<TD BGCOLOR=\"#ffffff\" %s><FONT COLOR=\"#bbbbbb\">-</FONT></TD>", CELL_SIZE);
    } else {
        fprintf(out, "<TD BGCOLOR=\"%s\" %s>%d</TD>", colour, CELL_SIZE, index);
    }
}

/* Kernel 2: the warp's loop, for (i = lane; i < vocab; i += 32), one line
 * of cells per trip. */
static void write_warp_per_row(FILE *out, int vocab)
{
    open_table(out, "warp", "kernel 2: a warp per row, one logit per lane and step");
    for (int first = 0; first < vocab; first += WARP_LANES) {
        fprintf(out, "    <TR><TD BORDER=\"0\" ALIGN=\"RIGHT\">step %d</TD>", first / WARP_LANES);
        for (int lane = 0; lane < WARP_LANES; lane++) {
            int i = first + lane;
            write_cell(out, i < vocab ? i : -1, WARP_COLOURS[0]);
        }
        fprintf(out, "</TR>\n");
    }
    fprintf(out, "  </TABLE>>];\n");
}

/* The scan: each warp's loop over float4s as warp_scan_float4s runs it,
 * its trips put in the order of the addresses they read (warp `member`
 * starts at float4 32 * member and steps 32 * warps), then the scalars,
 * read by the last warp (float4_reads_scalars). */
static void write_float4_scan(FILE *out, int vocab, int row, int warps)
{
    uintptr_t address = (uintptr_t)row * (uintptr_t)vocab * sizeof(float);
    Float4Split split = float4_split(address, vocab);
    int lines = (split.vectors + WARP_LANES - 1) / WARP_LANES;
    int *line_warp = ALLOC_ARRAY((size_t)lines + 1, int);
    for (int member = 0; member < warps; member++) {
        for (int base = member * WARP_LANES; base < split.vectors; base += warps * WARP_LANES) {
            line_warp[base / WARP_LANES] = member;
        }
    }
    char title[160];
    snprintf(title, sizeof title,
             "the float4 scan (kernels 3, 4 and 6 to 8), %d warps: a float4 per lane and step, "
             "then a head of %d and a tail of %d logits one by one",
             warps, split.head, vocab - split.tail_begin);
    open_table(out, "scan", title);
    for (int line = 0; line < lines; line++) {
        int member = line_warp[line];
        fprintf(out, "    <TR><TD BORDER=\"0\" ALIGN=\"RIGHT\">warp %d</TD>", member);
        for (int lane = 0; lane < WARP_LANES; lane++) {
            int v = line * WARP_LANES + lane;
            write_cell(out, v < split.vectors ? split.head + 4 * v : -1, WARP_COLOURS[member % 4]);
        }
        fprintf(out, "</TR>\n");
    }
    fprintf(out, "    <TR><TD BORDER=\"0\" ALIGN=\"RIGHT\">warp %d, scalars</TD>", warps - 1);
    for (int lane = 0; lane < WARP_LANES; lane++) {
        int local = float4_scalar_index(split, vocab, lane);
        write_cell(out, local, local < split.head ? HEAD_COLOUR : TAIL_COLOUR);
    }
    fprintf(out, "</TR>\n  </TABLE>>];\n");
    array_free(line_warp);
}

void write_lanes_diagram(FILE *out, int vocab, int row, int warps)
{
    fprintf(out, "digraph lanes {\n"
                 "  graph [rankdir=TB, nodesep=0.2, ranksep=0.2];\n"
                 "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=8];\n");
    write_warp_per_row(out, vocab);
    write_float4_scan(out, vocab, row, warps);
    fprintf(out, "  warp -> scan [style=invis];\n}\n");
}
