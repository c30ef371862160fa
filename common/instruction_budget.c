#include "common/instruction_budget.h"

#include <stdbool.h>

const GpuModel H100_SXM = {
    .name = "H100 SXM",
    /* NVIDIA H100 Tensor Core GPU Architecture whitepaper: 132 SMs in the SXM
     * part, four warp schedulers per SM, each issuing one warp instruction
     * per clock. */
    .sms = 132,
    .schedulers_per_sm = 4,
    /* 1.755 GHz, below the 1.98 GHz maximum boost: a streaming kernel keeps
     * the memory system busy and the card near its power limit, where the
     * clock drops. An assumption until a GPU run records the real clock. */
    .clock_hz = 1.755e9,
    /* 90% of the 3.35 TB/s peak of HBM3, about what a device-to-device copy
     * reaches. The GPU runs measure it, and replace this. */
    .copy_bytes_per_s = 0.9 * 3.35e12,
    /* A DRAM load takes about 500 ns on an idle H100 and more under load,
     * when requests queue: 600 ns is assumed. */
    .memory_latency_s = 600e-9,
};

/* The prediction: the lowest of what issue allows (when the pass moves
 * bytes), what the bytes in flight allow, and 100%; and which it was. */
static void choose_limit(InstructionBudget *b, bool moves_bytes)
{
    b->predicted_fraction = 1.0;
    b->limiter = LIMITED_BY_MEMORY;
    if (moves_bytes && b->issue_fraction < b->predicted_fraction) {
        b->predicted_fraction = b->issue_fraction;
        b->limiter = LIMITED_BY_INSTRUCTIONS;
    }
    if (b->in_flight_fraction < b->predicted_fraction) {
        b->predicted_fraction = b->in_flight_fraction;
        b->limiter = LIMITED_BY_BYTES_IN_FLIGHT;
    }
}

InstructionBudget instruction_budget(const GpuModel *gpu, const SassSteadyState *steady, int warps_per_sm)
{
    InstructionBudget b = {0};
    double bytes_per_thread = (double)(steady->global_load_bytes + steady->global_store_bytes);
    if (bytes_per_thread > 0) {
        b.instructions_per_16_bytes = 16.0 * steady->instructions / bytes_per_thread;
        double warp_instructions_per_s = (double)gpu->sms * gpu->schedulers_per_sm * gpu->clock_hz;
        double bytes_per_warp_instruction = 32.0 * bytes_per_thread / steady->instructions;
        b.issue_fraction = warp_instructions_per_s * bytes_per_warp_instruction / gpu->copy_bytes_per_s;
    }
    b.needed_in_flight_per_sm = gpu->copy_bytes_per_s * gpu->memory_latency_s / gpu->sms;
    double bytes_per_wait = steady->memory_waits > 0 ? (double)steady->global_load_bytes / steady->memory_waits : 0.0;
    b.bytes_in_flight_per_sm = (double)warps_per_sm * 32 * bytes_per_wait;
    b.in_flight_fraction = steady->global_load_bytes > 0 ? b.bytes_in_flight_per_sm / b.needed_in_flight_per_sm : 1.0;
    choose_limit(&b, bytes_per_thread > 0);
    return b;
}

InstructionBudget instruction_budget_shared_reads(InstructionBudget b, int readers)
{
    bool moves_bytes = b.instructions_per_16_bytes > 0;
    b.instructions_per_16_bytes *= readers;
    b.issue_fraction /= readers;
    b.bytes_in_flight_per_sm /= readers;
    b.in_flight_fraction /= readers;
    choose_limit(&b, moves_bytes);
    return b;
}

const char *budget_limiter_name(BudgetLimiter limiter)
{
    switch (limiter) {
    case LIMITED_BY_INSTRUCTIONS:
        return "instructions";
    case LIMITED_BY_BYTES_IN_FLIGHT:
        return "bytes in flight";
    case LIMITED_BY_MEMORY:
        break;
    }
    return "memory";
}
