// What the scheduler needs of the public counters: reading the value, a
// batch of finished tasks, a task's error, and publishing a waiter on a
// counter's list. Declared in the layer that calls it; the counters'
// code (waitables/counters.cpp) implements it.
#pragma once

#include "ftl/base_counter.h"
#include "ftl/task_counter.h"
#include "wait/wait_list.h"

#include <exception>

namespace ftl {
namespace detail {

class CounterOps {
public:
    static TaskScheduler *Owner(BaseCounter const &counter) { return counter.m_taskScheduler; }
    static unsigned Value(BaseCounter const &counter) {
        return BaseCounter::ValueOf(counter.m_state.load(std::memory_order_acquire));
    }
    // Lowers a TaskCounter by n finished tasks at once, waking its waiters if
    // that brings it to 0.
    static void Finish(TaskCounter &counter, unsigned n);
    // An exception escaped a task added with `counter`: keep it (the first
    // one) for the next wait, or count it as dropped.
    static void KeepError(TaskCounter &counter, std::exception_ptr error);
    // The kept exception, if any, taken out of the counter.
    static std::exception_ptr TakeError(TaskCounter &counter);
    // Whether TakeError may find one (acquire: pairs with the finish that
    // follows KeepError).
    static bool HasError(TaskCounter const &counter) {
        return counter.m_hasError.load(std::memory_order_acquire);
    }
    // Whether the counter's tasks are skipped (TaskCounter::Cancel). Relaxed:
    // read before every task; a task whose check comes before the Cancel's
    // store started before it.
    static bool Skips(TaskCounter const &counter) {
        return counter.m_cancelled.load(std::memory_order_relaxed);
    }
    // A wait on the counter returned: ends its cancellation, if any, and
    // drops the exception a task kept. Returns whether it was cancelled.
    static bool EndCancellation(TaskCounter &counter);
    // The registration of a waiter (a fiber's in its post-switch step:
    // docs/design.adoc, invariants 1 and 2). False when the value already
    // holds the target, or the node's deadline passed meanwhile.
    static bool Register(void *counter, WaitNode *node);
    // A timed wait's deadline passed: takes the node off the list if it is
    // still there (true: the wait ends by timeout).
    static bool Cancel(void *counter, WaitNode *node);
    // Fatal when `counter` is not a live counter.
    static void CheckAlive(BaseCounter const &counter, char const *what) {
        if (*const_cast<std::uint32_t const volatile *>(&counter.m_liveTag) != BaseCounter::kLiveTag) {
            NotAlive(what);
        }
    }
    [[noreturn, gnu::cold]] static void NotAlive(char const *what);
};

} // namespace detail
} // namespace ftl
