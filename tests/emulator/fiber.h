/* Fibers: the threads of an emulated block, each on its own stack, switched
 * by hand. swapcontext would do, but it makes a signal-mask system call at
 * every switch: 390 ns a round trip against 21 ns for the six pushes and
 * pops of fiber.cpp on x86-64, and a kernel switches at every barrier and
 * every warp shuffle of every thread. Other architectures use ucontext.
 *
 * Under AddressSanitizer every switch is announced to it
 * (__sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber), or it
 * would take a fiber's stack for a corrupted one. */
#ifndef TESTS_EMULATOR_FIBER_H
#define TESTS_EMULATOR_FIBER_H

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu
{

struct Fiber {
#if defined(__x86_64__)
    void *stack_pointer = nullptr;
#else
    ucontext_t context;
#endif
    char *stack = nullptr; /* lowest address; a guard page below it */
    size_t stack_bytes = 0;
    void *sanitizer_fake_stack = nullptr;
};

/* The context that runs the fibers: the host thread that launched the
 * kernel. */
Fiber &scheduler_fiber();

/* Give `fiber` a stack (once) and make its next resume start entry(). */
void fiber_prepare(Fiber &fiber, void (*entry)());

/* From the scheduler: run `fiber` until it switches back. */
void fiber_resume(Fiber &fiber);

/* From a fiber: back to the scheduler; returns when resumed. */
void fiber_yield(Fiber &self);

/* From a fiber that has finished: back to the scheduler for good (until
 * fiber_prepare starts it again). */
[[noreturn]] void fiber_exit(Fiber &self);

/* The first thing entry() does. */
void fiber_started();

} // namespace emu

#endif
