// The two futex calls behind `Locked`'s mutex on Linux, which Swift cannot make itself
// (`syscall` is variadic). Elsewhere this header declares nothing.
#ifndef OPERATIONS_FUTEX_H
#define OPERATIONS_FUTEX_H

#if defined(__linux__)
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Sleeps while `*word` is `expected`; returns at once if it is not, on a wake-up, or on a
/// signal. The caller checks the word again either way.
static inline void operations_futex_wait(uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

/// Wakes one thread sleeping on `word`, if there is one.
static inline void operations_futex_wake_one(uint32_t *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/// Tells the processor this thread is spinning on a word another thread will change.
static inline void operations_spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
#endif

#endif
