/* The waste experiment: the synthetic trace looks like the chat traces it
 * stands for, each reservation scheme reserves what it says, paging wastes
 * at most block_size - 1 slots per sequence, and a paged pool has no
 * external fragmentation. */
#include <math.h>

#include "chapters/04-kv-cache/waste.h"
#include "common/testing.h"

enum { N = 2000, MAX_LEN = 2048, POOL = 32 * MAX_LEN };

static void trace_is_like_sharegpt(const LengthTrace *t)
{
    double prompt = 0, output = 0;
    bool in_range = true;
    for (int i = 0; i < t->n; i++) {
        in_range = in_range && t->prompt_len[i] >= 1 && t->output_len[i] >= 1 &&
                   t->prompt_len[i] + t->output_len[i] <= MAX_LEN;
        prompt += t->prompt_len[i];
        output += t->output_len[i];
    }
    prompt /= t->n;
    output /= t->n;
    EXPECT(in_range, "every request has a prompt, an output, and fits the maximum length");
    /* ShareGPT in the PagedAttention paper: means 161 and 338. The standard
     * error of a mean of 2000 lognormals (sigma 1) is about 3% of it; 25%
     * leaves room for the truncation at the maximum length. */
    EXPECT(fabs(prompt / 161 - 1) < 0.25, "mean prompt %.0f near 161", prompt);
    EXPECT(fabs(output / 338 - 1) < 0.25, "mean output %.0f near 338", output);
}

static void reservations_are_what_they_say(void)
{
    bool ok = true;
    for (int final = 1; final <= MAX_LEN; final++) {
        int pow2 = reserved_slots((Reservation){RESERVE_POW2, 0}, 1, final, MAX_LEN);
        ok = ok && pow2 >= final && pow2 < 2 * final && (pow2 & (pow2 - 1)) == 0;
        ok = ok && reserved_slots((Reservation){RESERVE_EXACT, 0}, 1, final, MAX_LEN) == final;
        ok = ok && reserved_slots((Reservation){RESERVE_MAX_LEN, 0}, 1, final, MAX_LEN) == MAX_LEN;
        for (int bs = 1; bs <= 256; bs *= 2) {
            int paged = reserved_slots((Reservation){RESERVE_PAGED, bs}, final, MAX_LEN, MAX_LEN);
            ok = ok && paged >= final && paged - final <= bs - 1 && paged % bs == 0;
        }
    }
    EXPECT(ok, "power of two: the least power of two >= the final length; paged: whole blocks, "
               "fewer than block_size unused");
}

static void waste_is_measured_right(const LengthTrace *t)
{
    /* Reserving the maximum: the share is the mean held tokens over MAX_LEN. */
    double held = 0, steps = 0;
    for (int i = 0; i < t->n; i++)
        for (int k = 1; k <= t->output_len[i]; k++) {
            held += t->prompt_len[i] + k;
            steps++;
        }
    WasteStats max = measure_waste(t, (Reservation){RESERVE_MAX_LEN, 0}, MAX_LEN);
    EXPECT(fabs(max.used_share - held / (steps * MAX_LEN)) < 1e-12, "maximum length: share %.4f", max.used_share);
    WasteStats one = measure_waste(t, (Reservation){RESERVE_PAGED, 1}, MAX_LEN);
    EXPECT(one.used_share == 1.0 && one.most_unused == 0, "blocks of one position waste nothing");
    double previous = 1.0;
    for (int bs = 8; bs <= 256; bs *= 2) {
        WasteStats w = measure_waste(t, (Reservation){RESERVE_PAGED, bs}, MAX_LEN);
        EXPECT(w.most_unused <= bs - 1, "block %d: at most %d unused slots, got %d", bs, bs - 1, w.most_unused);
        EXPECT(w.used_share < previous, "block %d wastes more than smaller blocks", bs);
        previous = w.used_share;
    }
    WasteStats pow2 = measure_waste(t, (Reservation){RESERVE_POW2, 0}, MAX_LEN);
    WasteStats exact = measure_waste(t, (Reservation){RESERVE_EXACT, 0}, MAX_LEN);
    WasteStats paged16 = measure_waste(t, (Reservation){RESERVE_PAGED, 16}, MAX_LEN);
    EXPECT(max.used_share < pow2.used_share && pow2.used_share < exact.used_share &&
               exact.used_share < paged16.used_share,
           "maximum < power of two < exact < paged: %.3f %.3f %.3f %.3f", max.used_share, pow2.used_share,
           exact.used_share, paged16.used_share);
}

static void pools_serve_the_trace(const LengthTrace *t)
{
    int longest = 0;
    for (int i = 0; i < t->n; i++)
        if (t->output_len[i] > longest)
            longest = t->output_len[i];
    PoolStats max = simulate_pool(t, (Reservation){RESERVE_MAX_LEN, 0}, POOL, MAX_LEN);
    PoolStats exact = simulate_pool(t, (Reservation){RESERVE_EXACT, 0}, POOL, MAX_LEN);
    PoolStats paged = simulate_pool(t, (Reservation){RESERVE_PAGED, 16}, POOL, MAX_LEN);
    EXPECT(max.steps >= longest && paged.steps >= longest, "no request finishes faster than its output");
    EXPECT(max.fragmented_stalls == 0, "equal reservations that tile the pool leave no unusable holes");
    EXPECT(exact.fragmented_stalls > 0, "reservations of every size leave holes too small for the next");
    EXPECT(paged.fragmented_stalls == 0, "any free block will do: no external fragmentation");
    EXPECT(paged.mean_running > exact.mean_running && exact.mean_running > max.mean_running,
           "requests per step: paged %.1f > exact %.1f > maximum %.1f", paged.mean_running, exact.mean_running,
           max.mean_running);
    EXPECT(max.mean_running <= POOL / MAX_LEN, "reserving the maximum, at most %d run at once", POOL / MAX_LEN);
}

int main(void)
{
    LengthTrace t = length_trace_create(N, MAX_LEN, 7);
    trace_is_like_sharegpt(&t);
    reservations_are_what_they_say();
    waste_is_measured_right(&t);
    pools_serve_the_trace(&t);
    length_trace_free(&t);
    return test_finish();
}
