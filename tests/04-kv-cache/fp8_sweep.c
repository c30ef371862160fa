#include "tests/04-kv-cache/fp8_sweep.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "kernels/float_bits.h"

typedef struct {
    void (*visit)(void *context, float x);
    void *context;
    long count;
} Visitor;

static void visit(Visitor *v, float x)
{
    if (isnan(x))
        return;
    v->visit(v->context, x);
    v->count++;
}

/* x, -x, and their four float neighbours on each side. */
static void visit_around(Visitor *v, float x)
{
    for (int sign = 0; sign < 2; sign++) {
        float centre = sign ? -x : x, below = centre, above = centre;
        visit(v, centre);
        for (int k = 0; k < 4; k++) {
            below = nextafterf(below, -INFINITY);
            above = nextafterf(above, INFINITY);
            visit(v, below);
            visit(v, above);
        }
    }
}

long fp8_sweep(const double *values, int n, void (*visit_one)(void *context, float x), void *context)
{
    Visitor v = {visit_one, context, 0};
    /* Midpoints are exact in float: at most 5 significant bits. */
    for (int code = 0; code < n; code++) {
        visit_around(&v, (float)values[code]);
        if (code + 1 < n)
            visit_around(&v, (float)((values[code] + values[code + 1]) / 2));
    }
    double largest = values[n - 1], step = largest - values[n - 2];
    visit_around(&v, (float)(largest + step / 2));
    visit_around(&v, (float)(largest + step));
    visit_around(&v, FLT_MAX);
    visit_around(&v, INFINITY);
    for (int e = -149; e < 128; e++)
        visit_around(&v, ldexpf(1.0f, e));
    for (uint32_t bits = 0x32800000u; bits < 0x48800000u; bits += 127)
        visit(&v, float_from_bits(bits));
    for (uint64_t bits = 0; bits < 0x100000000u; bits += 65537)
        visit(&v, float_from_bits((uint32_t)bits));
    return v.count;
}
