// The two futex calls behind `Locked`'s mutex on Linux, which Swift cannot make itself
// (`syscall` is variadic). Elsewhere this header declares nothing.
#ifndef OPERATIONS_FUTEX_H
#define OPERATIONS_FUTEX_H

#if defined(__linux__)
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Sleeps while the 32-bit word at `word` holds `expected`; returns at once if it does not, on a
/// wake-up, or on a signal. The caller checks the word again either way. `errno` is left as it
/// was, as taking a lock never changed it.
static inline void operations_futex_wait(void *word, uint32_t expected) {
    int saved = errno;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
    errno = saved;
}

/// Wakes one thread sleeping on the word at `word`, if there is one. `errno` is left as it was.
static inline void operations_futex_wake_one(void *word) {
    int saved = errno;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
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
