#include <stdbool.h>
#include <string.h>

#include "common/occupancy.h"
#include "common/testing.h"

/* Compute capability 7.0, for the Best Practices Guide's example. The guide
 * gives its 65,536 registers and 2,048 threads per SM, as on 9.0; so are its
 * 32 blocks, 4 register partitions and 256-register units (cuda_occupancy.h).
 * Only its shared memory differs: 96 KB, in 256-byte units, none reserved. */
static SmLimits sm70_limits(void)
{
    SmLimits sm = SM90_LIMITS;
    sm.shared_bytes_per_sm = sm.max_shared_bytes_per_block = 96 * 1024;
    sm.reserved_shared_bytes_per_block = 0;
    sm.shared_allocation_unit = 256;
    return sm;
}

typedef struct {
    const char *example;
    int threads_per_block, registers_per_thread;
    long shared_bytes_per_block;
    int blocks_per_sm, warps_per_sm; /* expected */
    unsigned bound;
} Example;

static void expect_occupancy(const SmLimits *sm, const Example *examples, int count)
{
    for (const Example *e = examples; e < examples + count; e++) {
        Occupancy got = occupancy_compute(sm, e->threads_per_block, e->registers_per_thread, e->shared_bytes_per_block);
        double fraction = (double)e->warps_per_sm / (sm->max_threads_per_sm / sm->threads_per_warp);
        bool as_expected = got.blocks_per_sm == e->blocks_per_sm && got.warps_per_sm == e->warps_per_sm &&
                           got.fraction == fraction && got.bound == e->bound;
        EXPECT(as_expected,
               "%s: %d threads, %d registers, %ld bytes of shared memory: got %d blocks, %d warps, %.4f, bound %#x; "
               "expected %d blocks, %d warps, %.4f, bound %#x",
               e->example, e->threads_per_block, e->registers_per_thread, e->shared_bytes_per_block, got.blocks_per_sm,
               got.warps_per_sm, got.fraction, got.bound, e->blocks_per_sm, e->warps_per_sm, fraction, e->bound);
    }
}

#define EXAMPLES(array) (array), (int)(sizeof(array) / sizeof((array)[0]))

/* CUDA C++ Best Practices Guide, "Calculating Occupancy" (section 11.1.1 in
 * CUDA 13): "on a device of compute capability 7.0, a kernel with
 * 128-thread blocks using 37 registers per thread results in an occupancy
 * of 75% with 12 active 128-thread blocks per multi-processor, whereas a
 * kernel with 320-thread blocks using the same 37 registers per thread
 * results in an occupancy of 63% because only four 320-thread blocks can
 * reside on a multiprocessor." Dividing 65,536 registers by 37 x 128 gives
 * 13 blocks, and by 37 x 320, 5: the allocation rules make the difference.
 * 37 x 32 = 1,184 registers per warp, rounded up to 1,280; a partition
 * (16,384 registers) holds 12 such warps, the SM 48: 12 blocks of 4 warps
 * (48 of 64 warps, 75%), 4 blocks of 10 warps (40 of 64, 62.5%, the guide's
 * "63%"). */
static const Example BEST_PRACTICES_GUIDE[] = {
    {"128-thread blocks", 128, 37, 0, 12, 48, OCCUPANCY_BOUND_BY_REGISTERS},
    {"320-thread blocks", 320, 37, 0, 4,  40, OCCUPANCY_BOUND_BY_REGISTERS},
};

/* No published sm_90 example was found; these are worked by hand from the
 * rules in common/occupancy.c. Registers per warp = 32 x registers rounded
 * up to 256; a partition holds 16,384 registers, the SM 4 partitions. */
static const Example EACH_LIMIT_ON_SM90[] = {
  /* 1 warp per block. Warps: 64 / 1 = 64 blocks. Registers: 16 x 32 = 512
     * per warp, 16,384 / 512 = 32 warps per partition, 128 in all, 128
     * blocks. Shared memory: none but the 1 KB reserve, 228 KB / 1 KB = 228.
     * The 32 block slots bind: 32 warps, 50%. */
    {"one-warp blocks",                    32,   16, 0,      32, 32, OCCUPANCY_BOUND_BY_BLOCKS                              },
 /* 32 warps per block. Warps: 64 / 32 = 2 blocks. Registers: 64 x 32 =
     * 2,048 per warp, 8 warps per partition, 32 in all: 1 block, 50%. */
    {"1024 threads at 64 registers",       1024, 64, 256,    1,  32, OCCUPANCY_BOUND_BY_REGISTERS                           },
 /* At 32 registers: 1,024 per warp, 16 per partition, 64 in all, 2
     * blocks, as many as the warps allow: both bind, 100%. */
    {"1024 threads at 32 registers",       1024, 32, 0,      2,  64, OCCUPANCY_BOUND_BY_WARPS | OCCUPANCY_BOUND_BY_REGISTERS},
 /* 8 warps per block; warps allow 8 blocks, registers (32 x 32 = 1,024
     * per warp, 64 warps) 8. Shared memory: 115,712 bytes (113 KB) + 1,024
     * reserved = 116,736, a multiple of 128; 233,472 / 116,736 = 2 blocks:
     * 16 warps, 25%. One byte more rounds up to 116,864 bytes, and only 1
     * block fits (without the reserve and the rounding, 2 still would). */
    {"113 KB of shared memory",            256,  32, 115712, 2,  16, OCCUPANCY_BOUND_BY_SHARED_MEMORY                       },
    {"113 KB and a byte of shared memory", 256,  32, 115713, 1,  8,  OCCUPANCY_BOUND_BY_SHARED_MEMORY                       },
 /* Warps are placed on the register partitions one by one, not a block
     * at a time. 40 x 32 = 1,280 registers per warp: 12 warps per
     * partition, 48 per SM, 8 blocks of 6 warps (75%). This is what
     * cuda_occupancy.h computes (cudaOccMaxBlocksPerSMRegsLimit); the older
     * spreadsheet calculator, which rounded a block's warps up to a
     * multiple of 4 (8 x 1,280 = 10,240 registers per block), gave 6 blocks.
     * The GPU check against cudaOccupancyMaxActiveBlocksPerMultiprocessor
     * settles it on hardware. */
    {"6-warp blocks at 40 registers",      192,  40, 0,      8,  48, OCCUPANCY_BOUND_BY_REGISTERS                           },
};

/* Blocks at and past the limits: 0 blocks, bound by the limit they exceed. */
static const Example AT_THE_LIMITS_OF_SM90[] = {
  /* 227 KB + 1 KB reserved fill the 228 KB of an SM exactly; a byte more
     * is over the per-block limit. */
    {"the largest block of shared memory",             128,  32,  227 * 1024,     1, 4, OCCUPANCY_BOUND_BY_SHARED_MEMORY},
    {"a byte past the largest block of shared memory", 128,  32,  227 * 1024 + 1, 0, 0, OCCUPANCY_BOUND_BY_SHARED_MEMORY},
 /* 255 x 32 = 8,160 registers per warp, allocated 8,192: 2 warps per
     * partition, 8 per SM. A block of 8 warps fits, alone (12.5%); one of 9
     * warps never does. */
    {"255 registers, 8 warps",                         256,  255, 0,              1, 8, OCCUPANCY_BOUND_BY_REGISTERS    },
    {"255 registers, 9 warps",                         288,  255, 0,              0, 0, OCCUPANCY_BOUND_BY_REGISTERS    },
    {"more registers than a thread may have",          64,   256, 0,              0, 0, OCCUPANCY_BOUND_BY_REGISTERS    },
    {"more threads than a block may have",             1056, 16,  0,              0, 0, OCCUPANCY_BOUND_BY_WARPS        },
};

static void test_bound_names(void)
{
    EXPECT(strcmp(occupancy_bound_name(OCCUPANCY_BOUND_BY_WARPS), "warps") == 0 &&
               strcmp(occupancy_bound_name(OCCUPANCY_BOUND_BY_REGISTERS), "registers") == 0 &&
               strcmp(occupancy_bound_name(OCCUPANCY_BOUND_BY_SHARED_MEMORY), "shared memory") == 0 &&
               strcmp(occupancy_bound_name(OCCUPANCY_BOUND_BY_BLOCKS), "blocks") == 0,
           "each limit has its name");
}

int main(void)
{
    SmLimits sm70 = sm70_limits();
    expect_occupancy(&sm70, EXAMPLES(BEST_PRACTICES_GUIDE));
    expect_occupancy(&SM90_LIMITS, EXAMPLES(EACH_LIMIT_ON_SM90));
    expect_occupancy(&SM90_LIMITS, EXAMPLES(AT_THE_LIMITS_OF_SM90));
    test_bound_names();
    return test_finish();
}
