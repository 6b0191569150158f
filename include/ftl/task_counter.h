// TaskCounter: counts unfinished tasks. AddTasks raises it by the number of
// tasks, each finished task lowers it by one, and
// TaskScheduler::WaitForCounter(&counter) waits for it to reach 0.
//
// Memory ordering: everything a task did before it finished is visible to
// whoever's wait on the counter returned.
//
// Errors at the waiter: an exception that escapes a task added with the
// counter is kept by the counter, and the next WaitForCounter on it (or
// WaitGroup::Wait) rethrows it once the counter reaches 0. Only the first is
// kept; exceptions from other tasks while one is kept are dropped and
// counted (DroppedExceptions). After the rethrow the counter is usable again.
#pragma once

#include "ftl/base_counter.h"

#include <atomic>
#include <exception>

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

    // How many exceptions were dropped because one was already kept: since
    // the kept one was stored, until the next one is.
    unsigned DroppedExceptions() const { return m_droppedExceptions.load(std::memory_order_acquire); }

private:
    friend class detail::CounterOps;
    // Guarded by the waiter list's lock; m_hasError lets a wait skip the lock
    // when there is nothing to rethrow.
    std::exception_ptr m_error;
    std::atomic<unsigned> m_droppedExceptions{0};
    std::atomic<bool> m_hasError{false};
};

} // namespace ftl
