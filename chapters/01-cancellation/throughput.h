/* The double-precision variance functions whose speed the chapter measures,
 * with the reads of memory each one makes: the benchmark reports bytes read
 * per second, counting every pass over the data. */
#ifndef CHAPTERS_01_CANCELLATION_THROUGHPUT_H
#define CHAPTERS_01_CANCELLATION_THROUGHPUT_H

#include <stddef.h>

typedef struct {
    const char *name;
    double (*variance)(const double *x, size_t n);
    int passes; /* reads of the data: passes * 8n bytes */
} TimedMethod;

/* The four textbook methods in the order of the accuracy tables, then the
 * blocked one; the first, naive, is the baseline of the speed-ups. */
/* At most TIMED_METHOD_MAX methods, so a caller may keep their results in an array. */
enum { TIMED_METHOD_MAX = 8 };
extern const TimedMethod timed_methods[];
extern const int timed_method_count;

#endif
