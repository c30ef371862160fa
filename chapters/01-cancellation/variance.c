/* The variance algorithms of variance_generic.h, made in float and in double. */
#include "chapters/01-cancellation/variance.h"

#include <math.h>

#include "kernels/welford.h"

/* GCC's quadruple precision, done in software: slow, but only the reference
 * uses it. __extension__ keeps -Wpedantic quiet about a type ISO C11 lacks. */
__extension__ typedef _Float128 quad;

#define REAL float
#define TYPED(name) name##_f32
#include "chapters/01-cancellation/variance_generic.h"
#undef REAL
#undef TYPED

#define REAL double
#define TYPED(name) name##_f64
#include "chapters/01-cancellation/variance_generic.h"
#undef REAL
#undef TYPED
