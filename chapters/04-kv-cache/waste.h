/* How much reserved KV-cache memory holds real tokens, under different ways
 * of reserving it, on a seeded synthetic trace of chat requests (lognormal
 * prompt and output lengths, like ShareGPT conversations).
 *
 * Internal fragmentation: slots reserved for a request but not (yet) filled.
 * External fragmentation: free memory in holes too small for the next
 * request. A paged cache has no external fragmentation (any free block will
 * do) and at most block_size - 1 unfilled slots per request. */
#ifndef CHAPTERS_04_KV_CACHE_WASTE_H
#define CHAPTERS_04_KV_CACHE_WASTE_H

#include <stdint.h>
#include <stdio.h>

#include "common/table.h"

typedef struct {
    int n;
    int *prompt_len, *output_len;
} LengthTrace;

LengthTrace length_trace_create(int n, int max_len, uint64_t seed);
void length_trace_free(LengthTrace *trace);

typedef enum {
    RESERVE_MAX_LEN, /* the model's maximum length, for every request */
    RESERVE_POW2,    /* the final length rounded up to a power of two */
    RESERVE_EXACT,   /* exactly the final length (an oracle that knows it) */
    RESERVE_PAGED    /* block by block as the sequence grows */
} ReservationScheme;

typedef struct {
    ReservationScheme scheme;
    int block_size; /* for RESERVE_PAGED */
} Reservation;

/* Slots reserved for a request that holds `held` tokens and will end at
 * final_len tokens. */
int reserved_slots(Reservation reservation, int held, int final_len, int max_len);

typedef struct {
    double used_share;  /* token-steps held over slot-steps reserved */
    double mean_unused; /* unfilled reserved slots per request, averaged over its steps */
    int most_unused;    /* unfilled reserved slots of one request at one step, at most */
} WasteStats;

/* Each request is prefilled in one step and generates one token per step;
 * after its step k it holds prompt + k tokens. */
WasteStats measure_waste(const LengthTrace *trace, Reservation reservation, int max_len);

typedef struct {
    int steps;                              /* to serve the whole trace */
    double mean_running;                    /* requests in a step, on average */
    int stalls;                             /* steps where the next request did not fit... */
    int fragmented_stalls;                  /* ...although the free memory would have held it */
    double free_share_at_fragmented_stalls; /* mean share of the pool free then */
    int preemptions;                        /* paged: requests restarted when blocks ran out */
} PoolStats;

/* Serve the trace from a pool of pool_slots slots: contiguous reservations
 * placed first-fit, or blocks (preempting the newest request when a growing
 * one finds none free). Requests are admitted in order, as soon as they fit. */
PoolStats simulate_pool(const LengthTrace *trace, Reservation reservation, int pool_slots, int max_len);

/* The tables of the waste experiment. */
void waste_report(int n_requests, int max_len, int pool_slots, uint64_t seed, FILE *out, TableFormat format);
/* Block size and used share, one line each, for the figure. */
void waste_figure_data(int n_requests, int max_len, uint64_t seed, FILE *out);

#endif
