#include "common/occupancy.h"

#include <limits.h>
#include <stddef.h>

const SmLimits SM90_LIMITS = {
    /* The CUDA Programming Guide's table of compute capabilities, column 9.0. */
    .threads_per_warp = 32,
    .max_threads_per_sm = 2048,
    .max_threads_per_block = 1024,
    .max_blocks_per_sm = 32,
    .registers_per_sm = 64 * 1024,
    .max_registers_per_thread = 255,
    .shared_bytes_per_sm = 228 * 1024,
    .max_shared_bytes_per_block = 227 * 1024,
    /* How they are allocated: cuda_occupancy.h for compute capability 9, and
     * the device attribute cudaDevAttrReservedSharedMemoryPerBlock. */
    .register_partitions = 4,
    .register_allocation_unit = 256,
    .reserved_shared_bytes_per_block = 1024,
    .shared_allocation_unit = 128,
};

static long round_up(long value, long unit)
{
    return (value + unit - 1) / unit * unit;
}

static int warps_per_block(const SmLimits *sm, int threads_per_block)
{
    return (int)round_up(threads_per_block, sm->threads_per_warp) / sm->threads_per_warp;
}

static int max_warps_per_sm(const SmLimits *sm)
{
    return sm->max_threads_per_sm / sm->threads_per_warp;
}

static int blocks_by_warps(const SmLimits *sm, int threads_per_block)
{
    if (threads_per_block < 1 || threads_per_block > sm->max_threads_per_block)
        return 0;
    return max_warps_per_sm(sm) / warps_per_block(sm, threads_per_block);
}

/* Each partition of the register file holds whole warps, each warp's
 * registers rounded up to the allocation unit: the warps one partition
 * holds, times the partitions, is what the SM holds. A block's warps are
 * spread over the partitions; the launch checks that its warp count,
 * rounded up to a multiple of the partitions (the spreadsheet calculator's
 * "warp allocation granularity" of 4), fits, which every block that fits
 * here does. A block that does not gets 0 blocks: its launch fails. */
static int blocks_by_registers(const SmLimits *sm, int threads_per_block, int registers_per_thread)
{
    if (threads_per_block < 1 || registers_per_thread > sm->max_registers_per_thread)
        return 0;
    if (registers_per_thread == 0)
        return INT_MAX;
    long per_warp = round_up((long)registers_per_thread * sm->threads_per_warp, sm->register_allocation_unit);
    long warps_per_partition = sm->registers_per_sm / sm->register_partitions / per_warp;
    return (int)(warps_per_partition * sm->register_partitions / warps_per_block(sm, threads_per_block));
}

/* A block takes its shared memory plus the runtime's reserve, rounded up
 * to the allocation unit. */
static int blocks_by_shared_memory(const SmLimits *sm, long shared_bytes_per_block)
{
    if (shared_bytes_per_block > sm->max_shared_bytes_per_block)
        return 0;
    long allocated = round_up(shared_bytes_per_block + sm->reserved_shared_bytes_per_block, sm->shared_allocation_unit);
    return allocated == 0 ? INT_MAX : (int)(sm->shared_bytes_per_sm / allocated);
}

static int fewest(const int *blocks, int count)
{
    int least = INT_MAX;
    for (int i = 0; i < count; i++)
        if (blocks[i] < least)
            least = blocks[i];
    return least;
}

Occupancy occupancy_compute(const SmLimits *sm, int threads_per_block, int registers_per_thread,
                            long shared_bytes_per_block)
{
    const OccupancyBound bounds[] = {OCCUPANCY_BOUND_BY_WARPS, OCCUPANCY_BOUND_BY_REGISTERS,
                                     OCCUPANCY_BOUND_BY_SHARED_MEMORY, OCCUPANCY_BOUND_BY_BLOCKS};
    int blocks[] = {
        blocks_by_warps(sm, threads_per_block),
        blocks_by_registers(sm, threads_per_block, registers_per_thread),
        blocks_by_shared_memory(sm, shared_bytes_per_block),
        sm->max_blocks_per_sm,
    };
    int limits = (int)(sizeof blocks / sizeof blocks[0]);
    Occupancy result = {.blocks_per_sm = fewest(blocks, limits)};
    for (int i = 0; i < limits; i++)
        if (blocks[i] == result.blocks_per_sm)
            result.bound |= bounds[i];
    if (result.blocks_per_sm > 0)
        result.warps_per_sm = result.blocks_per_sm * warps_per_block(sm, threads_per_block);
    result.fraction = (double)result.warps_per_sm / max_warps_per_sm(sm);
    return result;
}

const char *occupancy_bound_name(OccupancyBound bound)
{
    static const struct {
        OccupancyBound bound;
        const char *name;
    } names[] = {
        {OCCUPANCY_BOUND_BY_WARPS,         "warps"        },
        {OCCUPANCY_BOUND_BY_REGISTERS,     "registers"    },
        {OCCUPANCY_BOUND_BY_SHARED_MEMORY, "shared memory"},
        {OCCUPANCY_BOUND_BY_BLOCKS,        "blocks"       },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].bound == bound)
            return names[i].name;
    return "?";
}
