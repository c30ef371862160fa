/* The split of a slice for float4 loads (float4_split and
 * float4_scalar_index, kernels/softmax_topk.h), which warp_scan_float4s
 * runs on the GPU and lanes_diagram.c draws: for every start address
 * (floats 0 to 3 past a 16-byte boundary) and length, the float4s start at
 * 16-byte aligned addresses, the head and the tail hold at most 3 logits,
 * and the float4s and the lanes' scalars read every logit of the slice
 * exactly once. */
#include <stdint.h>
#include <string.h>

#include "common/testing.h"
#include "kernels/softmax_topk.h"

enum { WARP_LANES = 32, MAX_LENGTH = 300 };

static void check_split(uintptr_t address, int length)
{
    Float4Split split = float4_split(address, length);
    int reads[MAX_LENGTH];
    memset(reads, 0, sizeof reads);
    bool aligned = true;
    for (int v = 0; v < split.vectors; v++) {
        int first = split.head + 4 * v;
        aligned &= (address + 4 * (uintptr_t)first) % 16 == 0;
        for (int e = 0; e < 4; e++) {
            reads[first + e]++;
        }
    }
    for (int lane = 0; lane < WARP_LANES; lane++) {
        int local = float4_scalar_index(split, length, lane);
        if (local >= 0 && local < length) {
            reads[local]++;
        }
        EXPECT(local >= -1 && local < length, "address %% 16 = %u, length %d: lane %d reads %d",
               (unsigned)(address % 16), length, lane, local);
    }
    int once = 0;
    for (int i = 0; i < length; i++) {
        once += reads[i] == 1;
    }
    EXPECT(aligned && split.head <= 3 && length - split.tail_begin <= 3 && once == length,
           "address %% 16 = %u, length %d: head %d, %d float4s (aligned: %d), tail %d; %d of %d logits read once",
           (unsigned)(address % 16), length, split.head, split.vectors, aligned, length - split.tail_begin, once,
           length);
}

int main(void)
{
    for (uintptr_t address = 4096; address < 4096 + 16; address += 4) {
        for (int length = 0; length <= MAX_LENGTH; length++) {
            check_split(address, length);
        }
    }
    return test_finish();
}
