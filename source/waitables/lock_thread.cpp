// Fibtex's thread state (lock_thread.h): the offset the inlined lock uses,
// and the calls behind it where it cannot be inlined.
#include "waitables/lock_thread.h"

#include "ftl/assert.h"
#include "platform/platform.h"

#include <thread>

namespace ftl {
namespace detail {

__attribute__((noinline)) void const *CurrentTaskIdentity() {
    asm volatile("" ::: "memory");
    return TaskIdentityOf(&t_lockThread);
}

__attribute__((noinline)) void SetTaskIdentity(void const *identity) {
    asm volatile("" ::: "memory");
    t_lockThread.Identity = identity;
}

#if FTL_INLINE_LOCK_THREAD
// Constant-initialized: 0 until the first lock or worker thread sets it.
std::atomic<std::ptrdiff_t> g_lockThreadOffset{0};

namespace {
std::ptrdiff_t LockThreadOffsetHere() {
    return reinterpret_cast<char *>(&t_lockThread) - ThreadPointer();
}

// Sets g_lockThreadOffset, once, where the state is initial-exec TLS.
void SetLockThreadOffset() {
#if FTL_LOCK_THREAD_AT_OFFSET
    static bool const set = [] {
        g_lockThreadOffset.store(LockThreadOffsetHere(), std::memory_order_relaxed);
        return true;
    }();
    (void)set;
#endif
}
} // namespace

__attribute__((noinline)) LockThreadState *FirstLockThread() {
    asm volatile("" ::: "memory");
    SetLockThreadOffset();
    return &t_lockThread;
}

void CheckLockThread() {
    SetLockThreadOffset();
#if !FTL_LOCK_THREAD_AT_OFFSET
    // A shared library, its state of the default TLS model: static TLS
    // when the library was loaded with the program (or the loader found
    // room for it), else a block on the heap. A thread the thread library
    // started keeps its static TLS in its own stack block, which no heap
    // block is in: a state found there is at one offset from the thread
    // pointer on every thread, and the inlined lock may use it. The first
    // worker asks a thread of its own (the Init thread may be the process's
    // first, whose static TLS is not in its stack); when the state is not
    // static TLS, every lock calls in.
    static std::ptrdiff_t const staticOffset = [] {
        std::ptrdiff_t offset = 0;
        std::thread probe([&offset] {
            if (InThreadStack(&t_lockThread)) {
                offset = LockThreadOffsetHere();
            }
        });
        probe.join();
        return offset;
    }();
    if (staticOffset == 0) {
        return;
    }
    g_lockThreadOffset.store(staticOffset, std::memory_order_relaxed);
#endif
    if (LockThreadOffsetHere() != g_lockThreadOffset.load(std::memory_order_relaxed)) {
        FTL_FATAL("this thread's thread-local storage is not at the offset from its thread pointer that "
                  "Fibtex's inlined lock uses (was the library loaded with its TLS model changed?)");
    }
}
#else
__attribute__((noinline)) LockThreadState *CurrentLockThread() {
    asm volatile("" ::: "memory");
    return &t_lockThread;
}

void CheckLockThread() {}
#endif

} // namespace detail
} // namespace ftl
