#include "tests/emulator/fiber.h"

#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu
{

namespace
{

/* Kernels keep small arrays on their stack; the sanitizers make frames
 * several times larger. Untouched pages cost nothing. */
constexpr size_t kStackBytes = 256 * 1024;

Fiber scheduler;

/* AddressSanitizer must hear of every switch: `fake_stack` keeps the
 * leaving context's fake stack (nullptr: the leaving fiber has ended). */
void before_switch(void **fake_stack, const Fiber &to)
{
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_start_switch_fiber(fake_stack, to.stack, to.stack_bytes);
#else
    (void)fake_stack, (void)to;
#endif
}

void after_switch(void *fake_stack)
{
#ifdef __SANITIZE_ADDRESS__
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
    (void)fake_stack;
#endif
}

} // namespace

#if defined(__x86_64__)
/* Save the callee-saved registers of the System V ABI on the current stack,
 * store the stack pointer in *from, load `to` and pop its registers; `ret`
 * continues where that fiber left off (or at its entry, fiber_prepare). */
extern "C" void emu_switch_stacks(void **from, void *to);
asm(R"(
    .text
    .globl emu_switch_stacks
    .type emu_switch_stacks, @function
emu_switch_stacks:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch_stacks, .-emu_switch_stacks
    .section .note.GNU-stack, "", @progbits
    .text
)");

static void switch_fibers(Fiber &from, Fiber &to)
{
    emu_switch_stacks(&from.stack_pointer, to.stack_pointer);
}
#else
static void switch_fibers(Fiber &from, Fiber &to)
{
    swapcontext(&from.context, &to.context);
}
#endif

Fiber &scheduler_fiber()
{
    return scheduler;
}

void fiber_prepare(Fiber &fiber, void (*entry)())
{
    if (fiber.stack == nullptr) {
        size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void *memory = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED || mprotect(memory, page, PROT_NONE) != 0) {
            perror("cuda emulator: a thread's stack");
            exit(1);
        }
        fiber.stack = static_cast<char *>(memory) + page;
        fiber.stack_bytes = kStackBytes;
    }
#ifdef __SANITIZE_ADDRESS__
    /* A previous run of the fiber may have left its frames' redzones marked. */
    ASAN_UNPOISON_MEMORY_REGION(fiber.stack, fiber.stack_bytes);
#endif
#if defined(__x86_64__)
    /* The frame emu_switch_stacks pops: six registers, then the address
     * `ret` jumps to. At a function's entry the stack pointer is 8 below a
     * multiple of 16, as if `call` had pushed a return address. */
    void **top = reinterpret_cast<void **>(fiber.stack + fiber.stack_bytes);
    *--top = nullptr;
    *--top = reinterpret_cast<void *>(entry);
    for (int i = 0; i < 6; i++) {
        *--top = nullptr;
    }
    fiber.stack_pointer = top;
#else
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = fiber.stack;
    fiber.context.uc_stack.ss_size = fiber.stack_bytes;
    fiber.context.uc_link = nullptr;
    makecontext(&fiber.context, entry, 0);
#endif
}

void fiber_resume(Fiber &fiber)
{
    before_switch(&scheduler.sanitizer_fake_stack, fiber);
    switch_fibers(scheduler, fiber);
    after_switch(scheduler.sanitizer_fake_stack);
}

void fiber_yield(Fiber &self)
{
    before_switch(&self.sanitizer_fake_stack, scheduler);
    switch_fibers(self, scheduler);
    after_switch(self.sanitizer_fake_stack);
}

void fiber_exit(Fiber &self)
{
    before_switch(nullptr, scheduler);
    switch_fibers(self, scheduler);
    __builtin_unreachable();
}

void fiber_started()
{
#ifdef __SANITIZE_ADDRESS__
    /* Where we came from is the scheduler's stack: remember it, to return. */
    const void *bottom = nullptr;
    __sanitizer_finish_switch_fiber(nullptr, &bottom, &scheduler.stack_bytes);
    scheduler.stack = static_cast<char *>(const_cast<void *>(bottom));
#endif
}

} // namespace emu
