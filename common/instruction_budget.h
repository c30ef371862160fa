/* What a kernel's machine code allows, before it runs: the fraction of the
 * device's copy bandwidth that its instruction issue and its bytes in flight
 * leave within reach.
 *
 * Instructions. Each pass through the steady state (common/sass.h) issues
 * I warp instructions per warp and moves 32 B bytes (B per thread). An SM
 * issues at most one warp instruction per scheduler per clock, so the whole
 * GPU issues SMs x schedulers x clock of them per second, and moves at most
 * that x 32 B / I bytes. Below the copy bandwidth, instructions limit the
 * kernel before memory does. This is the most that issue allows: stalls on
 * dependent instructions lower it further.
 *
 * Little's law. To stream at bandwidth W with a memory latency L, the GPU
 * must have W x L bytes requested and not yet arrived; each SM its share,
 * W x L / SMs. A thread keeps in flight what it loads between two waits for
 * memory (common/sass.h), and an SM holds its resident warps' worth of threads
 * (common/occupancy.h). Fewer bytes in flight than needed lower the
 * bandwidth in proportion.
 *
 * The prediction is the lower of the two, and of 100%: the limiter is
 * instructions, bytes in flight, or memory. */
#ifndef COMMON_INSTRUCTION_BUDGET_H
#define COMMON_INSTRUCTION_BUDGET_H

#include "common/hostdevice.h"
#include "common/sass.h"

COMMON_BEGIN_C

/* The device the prediction is for: numbers assumed, each one said. */
typedef struct {
    const char *name;
    int sms;
    int schedulers_per_sm;   /* each issues one warp instruction per clock */
    double clock_hz;         /* the clock the prediction assumes */
    double copy_bytes_per_s; /* the device-to-device copy rate, reads and writes counted */
    double memory_latency_s; /* from a load's issue to its data, under load */
} GpuModel;

/* H100 SXM, the models' reference GPU (an H200 has the same SMs and more
 * memory bandwidth): see instruction_budget.c. */
extern const GpuModel H100_SXM;

typedef enum {
    LIMITED_BY_MEMORY,
    LIMITED_BY_INSTRUCTIONS,
    LIMITED_BY_BYTES_IN_FLIGHT,
} BudgetLimiter;

typedef struct {
    double instructions_per_16_bytes; /* per thread, loads and stores counted */
    double issue_fraction;            /* of the copy bandwidth that issue allows; 0 when the body moves nothing */
    double bytes_in_flight_per_sm;    /* resident threads x bytes loaded per wait */
    double needed_in_flight_per_sm;   /* copy bandwidth x latency / SMs */
    double in_flight_fraction;        /* their ratio; 1 when the body loads nothing (stores do not wait) */
    double predicted_fraction;        /* the lowest of the two and 1 */
    BudgetLimiter limiter;
} InstructionBudget;

InstructionBudget instruction_budget(const GpuModel *gpu, const SassSteadyState *steady, int warps_per_sm);

/* The same kernel when every byte it loads is also loaded by readers - 1
 * other thread blocks (the query heads of a GQA group, each its own block,
 * reading their kv head's keys): memory delivers a byte once and L2 the
 * other times, so per byte from memory the GPU issues `readers` passes'
 * instructions and holds 1/readers of the bytes in flight that the pass
 * shows. Both fractions fall by the factor; the prediction follows. */
InstructionBudget instruction_budget_shared_reads(InstructionBudget budget, int readers);

/* "memory", "instructions" or "bytes in flight". */
const char *budget_limiter_name(BudgetLimiter limiter);

COMMON_END_C

#endif
