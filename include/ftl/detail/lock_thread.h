// Internal: what Fibtex's uncontended lock and unlock, inlined in the caller,
// read of the calling thread and of the parking table. Nothing here is API.
#pragma once

#include "ftl/detail/config.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

// Where the thread pointer can be read with one instruction, the caller's
// inlined lock finds its thread's state from it; elsewhere through a call.
// (Not Android: its TLS may be emulated, with no fixed offset.)
#if defined(__GNUC__) && defined(__linux__) && !defined(__ANDROID__) &&                                      \
    (defined(__x86_64__) || defined(__aarch64__))
#define FTL_INLINE_LOCK_THREAD 1
#else
#define FTL_INLINE_LOCK_THREAD 0
#endif

namespace ftl {
namespace detail {

// One per thread: t_lockThread (source/waitables/lock_thread.h). One cache line:
// an uncontended lock and unlock touch nothing else of the thread's.
struct alignas(64) LockThreadState {
    // On a worker, the running task's identity: its fiber, or the hand of
    // the inline loop that runs it on its waiting parent's fiber. The
    // scheduler sets it at every switch. nullptr on a thread that is no
    // worker, and while a thread's own stack runs outside any task (before,
    // while and after the thread is a worker): its identity is then this
    // struct.
    void const *Identity = nullptr;
    // The thread's latest run of Fibtex acquisitions with nobody else's
    // between: the Fibtex, and its count of acquisitions at the run's first
    // and last.
    void const *RunLock = nullptr;
    std::uint32_t RunFirst = 0;
    std::uint32_t RunLast = 0;
    // The Fibtexes the running identity holds: the sum of HeldWeight over
    // them, 0 when it holds none. They belong to the identity, not to the
    // thread: the scheduler keeps the sum on the stack of a fiber that
    // switches away and puts it back where the fiber resumes, and an inline
    // loop keeps its waiting parent's while its children run. A task that
    // ends with Held not 0 is a fatal error.
    std::uintptr_t Held = 0;
};

// What a held Fibtex at `mutex` adds to LockThreadState::Held: one word, so
// that the inlined lock and unlock pay one add each (with two fields, g++
// paired their updates into vector loads and stores, measurably slower).
// Where pointers have 64 bits: a count in the top 8 bits over the sum of
// the addresses (user addresses stay below 2^56), so the address itself
// when the count is 1. Elsewhere the count alone.
#if UINTPTR_MAX > 0xFFFFFFFFu
constexpr unsigned kHeldCountShift = 56;
inline std::uintptr_t HeldWeight(void const *mutex) {
    return reinterpret_cast<std::uintptr_t>(mutex) + (std::uintptr_t(1) << kHeldCountShift);
}
#else
constexpr unsigned kHeldCountShift = 0;
inline std::uintptr_t HeldWeight(void const *) {
    return 1;
}
#endif

#if FTL_INLINE_LOCK_THREAD
// The address of a thread's state minus its thread pointer: the same on
// every thread (the state is initial-exec TLS). 0 until the first lock or
// the first worker sets it (a state is never at the thread pointer itself),
// and always 0 in a shared libftl, whose state has the default TLS model:
// every lock then finds the state through FirstLockThread.
extern std::atomic<std::ptrdiff_t> g_lockThreadOffset;

// The calling thread's state, and the offset set, through a call: for the
// first lock in the process (or one made from a static initializer).
LockThreadState *FirstLockThread();

// The thread pointer, read anew at each call: the asm is volatile, so a
// fiber that resumed on another thread never reads the state of the thread
// it left (a thread_local's address may be kept across a call).
inline char *ThreadPointer() {
    char *threadPointer;
#if defined(__x86_64__)
    asm volatile("mov %%fs:0, %0" : "=r"(threadPointer)::"memory");
#else
    asm volatile("mrs %0, tpidr_el0" : "=r"(threadPointer)::"memory");
#endif
    return threadPointer;
}

inline LockThreadState *CurrentLockThread() {
    std::ptrdiff_t const offset = g_lockThreadOffset.load(std::memory_order_relaxed);
    if (FTL_UNLIKELY(offset == 0)) {
        return FirstLockThread();
    }
    return reinterpret_cast<LockThreadState *>(ThreadPointer() + offset);
}
#else
LockThreadState *CurrentLockThread(); // opaque: never kept across a switch
#endif

inline void const *TaskIdentityOf(LockThreadState const *state) {
    return state->Identity != nullptr ? state->Identity : state;
}

// The parking table's waiter counts, one a line: every unlock of a Fibtex
// reads its bucket's (source/waitables/fibtex.cpp).
struct alignas(64) ParkingCount {
    std::atomic<std::uint32_t> Parked{0};
};
constexpr unsigned kParkingBucketBits = 8;
extern ParkingCount g_parkingCounts[1u << kParkingBucketBits];

inline unsigned ParkingBucketOf(void const *mutex) {
    // Fibonacci hashing of the address without its low bits (a Fibtex is
    // at least 8-byte aligned, and neighbours often sit a line apart).
    auto const address = reinterpret_cast<std::uintptr_t>(mutex) >> 4;
    std::uint64_t const mixed = std::uint64_t(address) * 0x9E3779B97F4A7C15ull;
    return static_cast<unsigned>(mixed >> (64 - kParkingBucketBits));
}

} // namespace detail
} // namespace ftl
