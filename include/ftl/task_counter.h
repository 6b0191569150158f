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
//
// Cancellation (Cancel): the counter's tasks that have not started never run
// (a closure is destroyed uncalled; a lineage Task's function is not
// called, so what its argument owns stays with whoever made it), and each
// counts as finished, so the count still reaches 0. A task that already runs goes on; it can ask
// TaskScheduler::IsCurrentTaskCancelled() and return early. Tasks added after
// Cancel are skipped too, until a wait on the counter returns: that wait
// returns normally, drops any exception a task kept, and leaves the counter
// usable again. A task added with AddTaskAfter a cancelled counter still
// runs: cancellation belongs to a task's own counter.
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

    // The most a count may reach: a count above it is a negative number
    // passed as unsigned (Add(-1)), or a wrap on its way.
    static constexpr unsigned kMaxCount = 0x7fffffffu;

    // Raises the count by x, e.g. for work tracked by hand. A count above
    // kMaxCount is a fatal error (lower it with Decrement, or use WaitGroup,
    // whose Add takes a signed delta).
    void Add(unsigned x) {
        std::uint64_t const old =
            m_state.fetch_add(std::uint64_t(x) << kValueShift, std::memory_order_acq_rel);
        if (std::uint64_t{ValueOf(old)} + x > kMaxCount) {
            Overflow(ValueOf(old), x);
        }
    }
    // Lowers the count by one, waking waiters when it reaches 0. The task
    // scheduler calls this as each task added with the counter finishes.
    // Lowering it below 0 is a fatal error.
    void Decrement() { Lower(1, "TaskCounter::Decrement"); }
    // How many exceptions were dropped because one was already kept: since
    // the kept one was stored, until the next one is.
    unsigned DroppedExceptions() const { return m_droppedExceptions.load(std::memory_order_acquire); }
    // Skips every task of this counter that has not started (see above).
    // Returns at once; the skipping happens as workers reach the tasks.
    void Cancel() { m_cancelled.store(true, std::memory_order_seq_cst); }
    // Whether Cancel was called since a wait on the counter last returned.
    bool IsCancelled() const { return m_cancelled.load(std::memory_order_acquire); }

protected:
    // Lowers the count by `down`, waking the waiters when it reaches 0.
    // Only the operation that brings it to 0 wakes: the waiters of a
    // TaskCounter wait for 0, so another has nothing to wake, and touching
    // the counter's list after its last task finished could touch a counter
    // already destroyed by the waiter that finish released.
    void Lower(unsigned down, char const *what) {
        std::uint64_t const old =
            m_state.fetch_sub(std::uint64_t(down) << kValueShift, std::memory_order_acq_rel);
        if (ValueOf(old) <= down) {
            if (ValueOf(old) < down) {
                Underflow(what);
            }
            if (HasWaiters(old)) {
                WakeWaiters(0);
            }
        }
    }
    [[noreturn]] static void Underflow(char const *what);
    [[noreturn]] static void Overflow(unsigned value, unsigned x);

private:
    friend class detail::CounterOps;
    // Guarded by the waiter list's lock; m_hasError lets a wait skip the lock
    // when there is nothing to rethrow.
    std::exception_ptr m_error;
    std::atomic<unsigned> m_droppedExceptions{0};
    std::atomic<bool> m_hasError{false};
    std::atomic<bool> m_cancelled{false};
};

} // namespace ftl
