#include "chapters/04-kv-cache/waste.h"

#include <string.h>

#include "chapters/04-kv-cache/trace.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "kernels/paged_kv.h"

/* Medians chosen so that the means (median * e^(sigma^2 / 2) with sigma 1)
 * are near ShareGPT's in the PagedAttention paper: 161 prompt, 338 output tokens. */
#define PROMPT_MEDIAN 100
#define OUTPUT_MEDIAN 200
#define LENGTH_SIGMA 1.0

LengthTrace length_trace_create(int n, int max_len, uint64_t seed)
{
    LengthTrace trace = {.n = n, .prompt_len = ALLOC_ARRAY(n, int), .output_len = ALLOC_ARRAY(n, int)};
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        trace.prompt_len[i] = lognormal_length(&rng, PROMPT_MEDIAN, LENGTH_SIGMA, 1, max_len / 2);
        trace.output_len[i] = lognormal_length(&rng, OUTPUT_MEDIAN, LENGTH_SIGMA, 1, max_len - trace.prompt_len[i]);
    }
    return trace;
}

void length_trace_free(LengthTrace *trace)
{
    array_free(trace->prompt_len);
    array_free(trace->output_len);
    *trace = (LengthTrace){0};
}

// ANCHOR: reserve_slots_four_ways
int reserved_slots(Reservation r, int held, int final_len, int max_len)
{
    switch (r.scheme) {
    case RESERVE_MAX_LEN:
        return max_len;
    case RESERVE_POW2: {
        int slots = 1;
        while (slots < final_len)
            slots *= 2;
        return slots < max_len ? slots : max_len;
    }
    case RESERVE_EXACT:
        return final_len;
    case RESERVE_PAGED:
        break;
    }
    return paged_kv_blocks_for(held, r.block_size) * r.block_size;
}
// ANCHOR_END: reserve_slots_four_ways

WasteStats measure_waste(const LengthTrace *trace, Reservation reservation, int max_len)
{
    double held_steps = 0, reserved_steps = 0, unused_steps = 0, steps = 0;
    int most_unused = 0;
    for (int i = 0; i < trace->n; i++) {
        int prompt = trace->prompt_len[i], output = trace->output_len[i];
        for (int k = 1; k <= output; k++) {
            int held = prompt + k;
            int reserved = reserved_slots(reservation, held, prompt + output, max_len);
            held_steps += held;
            reserved_steps += reserved;
            unused_steps += reserved - held;
            steps++;
            if (reserved - held > most_unused)
                most_unused = reserved - held;
        }
    }
    return (WasteStats){held_steps / reserved_steps, unused_steps / steps, most_unused};
}

/* A request in the pool simulation. */
typedef struct {
    int id;
    int start; /* first slot (contiguous) */
    int size;  /* slots (contiguous) or blocks (paged) held */
} Running;

typedef struct {
    const LengthTrace *trace;
    Reservation reservation;
    int max_len, capacity, free; /* capacity and free in slots, or blocks when paged */
    int *queue, head, tail;      /* request ids waiting; a preempted one goes back before head */
    int *done;                   /* [request] tokens generated so far */
    Running *running;            /* in admission order */
    int n_running;
    PoolStats stats;
    double running_sum, free_share_sum;
} Pool;

/* First slot of a hole of `size` slots between the running reservations, or -1. */
static int first_fit(const Pool *pool, int size)
{
    /* Reservations sorted by start: few enough to sort each time. */
    int n = pool->n_running;
    int *starts = ALLOC_ARRAY(n + 1, int), *ends = ALLOC_ARRAY(n + 1, int);
    for (int i = 0; i < n; i++) {
        int at = i;
        while (at > 0 && starts[at - 1] > pool->running[i].start) {
            starts[at] = starts[at - 1];
            ends[at] = ends[at - 1];
            at--;
        }
        starts[at] = pool->running[i].start;
        ends[at] = pool->running[i].start + pool->running[i].size;
    }
    int found = -1, hole_start = 0;
    for (int i = 0; i <= n && found < 0; i++) {
        int hole_end = i < n ? starts[i] : pool->capacity;
        if (hole_end - hole_start >= size)
            found = hole_start;
        if (i < n)
            hole_start = ends[i];
    }
    array_free(starts);
    array_free(ends);
    return found;
}

static int final_len(const Pool *pool, int id)
{
    return pool->trace->prompt_len[id] + pool->trace->output_len[id];
}

/* Blocks a paged request needs for its next step: prompt + done + 1 tokens
 * (after a preemption, all of them are computed again in one step). */
static int blocks_for_next_step(const Pool *pool, const Running *r)
{
    int held = pool->trace->prompt_len[r->id] + pool->done[r->id] + 1;
    return paged_kv_blocks_for(held, pool->reservation.block_size) - r->size;
}

static bool paged(const Pool *pool)
{
    return pool->reservation.scheme == RESERVE_PAGED;
}

/* Admit the next waiting request if it fits; false when it does not. */
static bool admit_next(Pool *pool)
{
    int id = pool->queue[pool->head];
    Running r = {.id = id};
    int size;
    if (paged(pool)) {
        size = blocks_for_next_step(pool, &r);
        if (size > pool->free)
            return false;
    } else {
        size = reserved_slots(pool->reservation, 0, final_len(pool, id), pool->max_len);
        r.start = first_fit(pool, size);
        if (r.start < 0) {
            if (size <= pool->free) {
                pool->stats.fragmented_stalls++;
                pool->free_share_sum += (double)pool->free / pool->capacity;
            }
            return false;
        }
    }
    r.size = size;
    pool->free -= size;
    pool->head++;
    pool->running[pool->n_running++] = r;
    return true;
}

/* Paged: every running request gets its next step's blocks, oldest first;
 * when none are free the newest request is preempted and will start over. */
static bool grow_paged(Pool *pool)
{
    bool preempted = false;
    for (int i = 0; i < pool->n_running; i++) {
        int need;
        while ((need = blocks_for_next_step(pool, &pool->running[i])) > pool->free) {
            Running *newest = &pool->running[--pool->n_running];
            pool->free += newest->size;
            pool->queue[--pool->head] = newest->id;
            pool->stats.preemptions++;
            preempted = true;
            if (pool->n_running == i)
                break;
        }
        if (i < pool->n_running) {
            pool->running[i].size += need;
            pool->free -= need;
        }
    }
    return preempted;
}

PoolStats simulate_pool(const LengthTrace *trace, Reservation reservation, int pool_slots, int max_len)
{
    Pool pool = {.trace = trace, .reservation = reservation, .max_len = max_len};
    pool.capacity = paged(&pool) ? pool_slots / reservation.block_size : pool_slots;
    pool.free = pool.capacity;
    pool.queue = ALLOC_ARRAY(trace->n, int);
    pool.done = ALLOC_ARRAY(trace->n, int);
    pool.running = ALLOC_ARRAY(trace->n, Running);
    for (int i = 0; i < trace->n; i++)
        pool.queue[pool.tail++] = i;
    while (pool.head < pool.tail || pool.n_running > 0) {
        bool preempted = paged(&pool) && grow_paged(&pool);
        while (!preempted && pool.head < pool.tail) {
            if (!admit_next(&pool)) {
                pool.stats.stalls++;
                break;
            }
        }
        pool.stats.steps++;
        pool.running_sum += pool.n_running;
        int still = 0;
        for (int i = 0; i < pool.n_running; i++) {
            Running *r = &pool.running[i];
            if (++pool.done[r->id] == trace->output_len[r->id])
                pool.free += r->size;
            else
                pool.running[still++] = *r;
        }
        pool.n_running = still;
    }
    pool.stats.mean_running = pool.running_sum / pool.stats.steps;
    if (pool.stats.fragmented_stalls > 0)
        pool.stats.free_share_at_fragmented_stalls = pool.free_share_sum / pool.stats.fragmented_stalls;
    array_free(pool.queue);
    array_free(pool.done);
    array_free(pool.running);
    return pool.stats;
}

static const int block_sizes[] = {1, 8, 16, 32, 64, 128, 256};
#define N_BLOCK_SIZES (int)(sizeof block_sizes / sizeof block_sizes[0])

typedef struct {
    char name[32];
    Reservation reservation;
} Scheme;

/* Every way of reserving the experiment compares, in the order of the table. */
static int all_schemes(Scheme *schemes)
{
    int n = 0;
    schemes[n++] = (Scheme){
        "(a) maximum length", {RESERVE_MAX_LEN, 0}
    };
    schemes[n++] = (Scheme){
        "(b) power of two", {RESERVE_POW2, 0}
    };
    schemes[n++] = (Scheme){
        "exact final length", {RESERVE_EXACT, 0}
    };
    for (int i = 0; i < N_BLOCK_SIZES; i++) {
        schemes[n] = (Scheme){
            "", {RESERVE_PAGED, block_sizes[i]}
        };
        snprintf(schemes[n].name, sizeof schemes[n].name, "(c) paged, block %d", block_sizes[i]);
        n++;
    }
    return n;
}

static void print_trace_summary(const LengthTrace *trace, int max_len, FILE *out)
{
    double prompt = 0, output = 0;
    for (int i = 0; i < trace->n; i++) {
        prompt += trace->prompt_len[i];
        output += trace->output_len[i];
    }
    fprintf(out,
            "trace: %d requests, mean prompt %.0f tokens, mean output %.0f tokens, "
            "maximum length %d\n\n",
            trace->n, prompt / trace->n, output / trace->n, max_len);
}

void waste_report(int n_requests, int max_len, int pool_slots, uint64_t seed, FILE *out, TableFormat format)
{
    LengthTrace trace = length_trace_create(n_requests, max_len, seed);
    Scheme schemes[3 + N_BLOCK_SIZES];
    int n_schemes = all_schemes(schemes);
    print_trace_summary(&trace, max_len, out);

    const char *waste_headers[] = {"reservation", "reserved slots holding tokens", "unused slots per request",
                                   "most unused in one request"};
    Table *waste = TABLE_NEW(waste_headers, "lrrr");
    for (int s = 0; s < n_schemes; s++) {
        WasteStats w = measure_waste(&trace, schemes[s].reservation, max_len);
        table_cell(waste, "%s", schemes[s].name);
        table_cell(waste, "%.1f%%", 100 * w.used_share);
        table_cell(waste, "%.1f", w.mean_unused);
        table_cell(waste, "%d", w.most_unused);
    }
    table_print(waste, out, format);
    table_free(waste);

    fprintf(out, "\nserving the trace from a pool of %d slots (%d sequences of maximum length):\n\n", pool_slots,
            pool_slots / max_len);
    const char *pool_headers[] = {
        "reservation",      "steps",      "requests per step", "next did not fit", "...though enough was free",
        "free memory then", "preemptions"};
    Table *pool = TABLE_NEW(pool_headers, "lrrrrrr");
    for (int s = 0; s < n_schemes; s++) {
        if (schemes[s].reservation.scheme == RESERVE_PAGED && schemes[s].reservation.block_size != 16)
            continue;
        PoolStats p = simulate_pool(&trace, schemes[s].reservation, pool_slots, max_len);
        table_cell(pool, "%s", schemes[s].name);
        table_cell(pool, "%d", p.steps);
        table_cell(pool, "%.1f", p.mean_running);
        table_cell(pool, "%d", p.stalls);
        table_cell(pool, "%d", p.fragmented_stalls);
        if (p.fragmented_stalls > 0)
            table_cell(pool, "%.1f%%", 100 * p.free_share_at_fragmented_stalls);
        else
            table_cell(pool, "-");
        table_cell(pool, "%d", p.preemptions);
    }
    table_print(pool, out, format);
    table_free(pool);
    length_trace_free(&trace);
}

void waste_figure_data(int n_requests, int max_len, uint64_t seed, FILE *out)
{
    LengthTrace trace = length_trace_create(n_requests, max_len, seed);
    Scheme schemes[3 + N_BLOCK_SIZES];
    int n_schemes = all_schemes(schemes);
    fprintf(out, "# reservation  share of reserved slots holding tokens (%%)\n");
    for (int s = 0; s < n_schemes; s++) {
        WasteStats w = measure_waste(&trace, schemes[s].reservation, max_len);
        fprintf(out, "\"%s\" %.2f\n", schemes[s].name, 100 * w.used_share);
    }
    length_trace_free(&trace);
}
