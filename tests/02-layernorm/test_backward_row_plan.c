/* Backward 2's row plan (kernels/layernorm.h): forward 3's plan, with the
 * blocks of 8 vectors per thread stopped at the threads whose registers hold
 * what a thread of backward 2 keeps (kernels/layernorm.cu). */
#include <stdbool.h>
#include <stddef.h>

#include "common/testing.h"
#include "kernels/layernorm.h"

static bool same_plan(LnRowPlan a, LnRowPlan b)
{
    return a.width == b.width && a.items == b.items && a.threads == b.threads;
}

/* Every row the backward plan takes, it lays out as forward 3 does; it
 * refuses exactly the rows whose forward plan needs more threads. */
static void test_forward_plan_up_to_the_cap(void)
{
    int bad = 0;
    for (size_t d = 1; d <= 40000; d++) {
        for (int aligned = 0; aligned <= 1; aligned++) {
            LnRowPlan forward = ln_row_plan(d, aligned, STORAGE_FLOAT32),
                      backward = ln_backward_row_plan(d, aligned, STORAGE_FLOAT32);
            bool ok =
                forward.threads <= LN_BACKWARD_PLAN_MAX_THREADS ? same_plan(forward, backward) : backward.threads == 0;
            if (!ok && bad++ < 5)
                EXPECT(false, "d = %zu, aligned %d: backward %d x %d x %d, forward %d x %d x %d", d, aligned,
                       backward.threads, backward.items, backward.width, forward.threads, forward.items, forward.width);
        }
    }
    EXPECT(bad == 0, "%d plans differ from forward 3's below the cap, or are not refused above it", bad);
}

static void test_the_longest_rows(void)
{
    /* chapters/02-layernorm/gpu.c checks 20000 floats: 5000 float4, 8 per
     * thread in 625 threads, rounded up to 640. */
    LnRowPlan checked = ln_backward_row_plan(20000, true, STORAGE_FLOAT32);
    EXPECT(checked.width == 4 && checked.items == 8 && checked.threads == 640, "20000 floats: 640 threads x 8 float4");
    EXPECT(ln_backward_row_plan(20480, true, STORAGE_FLOAT32).threads == 640,
           "20480 floats fill 640 threads x 8 float4");
    EXPECT(ln_backward_row_plan(20484, true, STORAGE_FLOAT32).threads == 0, "20484 floats need 641 threads: refused");
    EXPECT(ln_backward_row_plan(5120, false, STORAGE_FLOAT32).threads == 640,
           "5120 single floats fill 640 threads x 8");
    EXPECT(ln_backward_row_plan(5121, false, STORAGE_FLOAT32).threads == 0, "5121 single floats: refused");
    EXPECT(ln_row_plan(32768, true, STORAGE_FLOAT32).threads == 1024,
           "forward 3 still takes 32768 floats in 1024 threads");
}

int main(void)
{
    test_forward_plan_up_to_the_cap();
    test_the_longest_rows();
    return test_finish();
}
