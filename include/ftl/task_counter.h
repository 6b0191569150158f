// TaskCounter: counts unfinished tasks. AddTasks raises it by the number of
// tasks, each finished task lowers it by one, and
// TaskScheduler::WaitForCounter(&counter) waits for it to reach 0.
//
// Memory ordering: everything a task did before it finished is visible to a
// fiber whose wait on the counter returned.
#pragma once

#include "ftl/base_counter.h"

namespace ftl {

class TaskCounter : public BaseCounter {
public:
    explicit TaskCounter(TaskScheduler *taskScheduler, unsigned initialValue = 0,
                         unsigned fiberSlots = NUM_WAITING_FIBER_SLOTS)
        : BaseCounter(taskScheduler, initialValue, fiberSlots) {}

    // Raises the count by x, e.g. for work tracked by hand.
    void Add(unsigned x) { m_state.fetch_add(std::uint64_t(x) << kValueShift, std::memory_order_acq_rel); }

    // Lowers the count by one, waking waiters when it reaches 0. The task
    // scheduler calls this as each task added with the counter finishes.
    void Decrement() {
        std::uint64_t const old = m_state.fetch_sub(kValueOne, std::memory_order_acq_rel);
        if (ValueOf(old) == 1 && HasWaiters(old)) {
            WakeWaiters(0);
        }
    }
};

} // namespace ftl
