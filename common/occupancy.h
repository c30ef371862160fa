/* Occupancy, computed: how many blocks of a kernel one multiprocessor (SM)
 * holds at once, from the registers per thread ptxas reports, the threads per
 * block of the launch and the shared memory per block.
 *
 * A block starts on an SM only when the SM has room for all of it: its
 * warps, its registers, its shared memory, and a block slot. The fewest
 * blocks any of the four allows is the number resident; occupancy is their
 * warps over the most warps an SM can hold. The rules are those of the CUDA
 * toolkit's own calculator (cuda_occupancy.h, beside cuda_runtime.h), which
 * the CUDA Best Practices Guide ("Calculating Occupancy") and Nsight
 * Compute's occupancy calculator also follow. */
#ifndef COMMON_OCCUPANCY_H
#define COMMON_OCCUPANCY_H

#include "common/hostdevice.h"

COMMON_BEGIN_C

/* One SM of an architecture. */
typedef struct {
    int threads_per_warp;
    int max_threads_per_sm;
    int max_threads_per_block;
    int max_blocks_per_sm;
    int registers_per_sm;
    int register_partitions;      /* the register file is split among the warp schedulers; a warp's
                                        registers all lie in one part */
    int register_allocation_unit; /* a warp's registers are allocated in multiples of this */
    int max_registers_per_thread;
    long shared_bytes_per_sm;             /* the largest carve-out of the SM's L1 for shared memory */
    long max_shared_bytes_per_block;      /* above 48 KB only if the launcher opts in
                                        (cudaFuncAttributeMaxDynamicSharedMemorySize) */
    long reserved_shared_bytes_per_block; /* taken by the CUDA runtime from every block */
    long shared_allocation_unit;
} SmLimits;

/* Compute capability 9.0: H100 and H200. */
extern const SmLimits SM90_LIMITS;

/* The limits that allow no more blocks than are resident (several may tie). */
typedef enum {
    OCCUPANCY_BOUND_BY_WARPS = 1,
    OCCUPANCY_BOUND_BY_REGISTERS = 2,
    OCCUPANCY_BOUND_BY_SHARED_MEMORY = 4,
    OCCUPANCY_BOUND_BY_BLOCKS = 8,
} OccupancyBound;

typedef struct {
    int blocks_per_sm; /* 0: such a block cannot launch at all */
    int warps_per_sm;
    double fraction; /* warps_per_sm over the most warps an SM holds */
    unsigned bound;  /* OccupancyBound flags */
} Occupancy;

Occupancy occupancy_compute(const SmLimits *sm, int threads_per_block, int registers_per_thread,
                            long shared_bytes_per_block);

/* "warps", "registers", "shared memory" or "blocks", for one flag. */
const char *occupancy_bound_name(OccupancyBound bound);

COMMON_END_C

#endif
