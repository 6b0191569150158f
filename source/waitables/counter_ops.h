// Scheduler-side access to counters: reading the value, a batch of finished
// tasks, and publishing a waiter on a counter's list.
#pragma once

#include "ftl/base_counter.h"
#include "ftl/task_counter.h"
#include "wait/wait_list.h"

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
    // The post-switch registration of a waiter (docs/design.adoc, invariants 1 and 2).
    static bool Register(void *counter, WaitNode *node);
};

} // namespace detail
} // namespace ftl
