// ConditionVariable: std::condition_variable for fibers, used with a Fibtex.
// A task that waits parks its fiber (its thread runs other work); a thread
// that is not one of the scheduler's workers blocks instead.
//
// Contract
// - wait(lock): the caller must hold lock's Fibtex (fatal otherwise). It
//   gives the Fibtex up and waits in one step: a notify made by anyone who
//   took the Fibtex after it (or made after it returned) wakes this waiter
//   or a later one. On return the caller holds the Fibtex again.
// - No spurious wake-ups: a plain wait returns only after a notify chose
//   it. Use the predicate forms all the same: another task may have taken
//   the Fibtex and changed the state between the notify and the return.
// - notify_one wakes the longest-waiting waiter, notify_all every current
//   one. Either may be called from any thread, with or without the Fibtex.
// - wait_for returns pred() once the timeout has passed; a timed-out waiter
//   holds the Fibtex again before it looks at pred.
// - Destroying a ConditionVariable that has waiters is a fatal error.
// - Memory ordering: the Fibtex's (unlock releases, lock acquires).
#pragma once

#include "ftl/detail/wait_list.h"
#include "ftl/fibtex.h"

#include <chrono>
#include <cstdint>
#include <mutex>

namespace ftl {

class TaskScheduler;

namespace detail {
class ConditionVariableOps;
} // namespace detail

class ConditionVariable {
public:
    explicit ConditionVariable(TaskScheduler *taskScheduler);
    ~ConditionVariable();
    ConditionVariable(ConditionVariable const &) = delete;
    ConditionVariable &operator=(ConditionVariable const &) = delete;

    void notify_one();
    void notify_all();

    void wait(std::unique_lock<Fibtex> &lock);
    template <class Pred>
    void wait(std::unique_lock<Fibtex> &lock, Pred pred) {
        while (!pred()) {
            wait(lock);
        }
    }
    template <class Pred>
    bool wait_for(std::unique_lock<Fibtex> &lock, std::chrono::nanoseconds timeout, Pred pred) {
        std::uint64_t const deadline = DeadlineAfter(timeout);
        while (!pred()) {
            if (!WaitUntil(lock, deadline)) {
                return pred();
            }
        }
        return true;
    }

private:
    static std::uint64_t DeadlineAfter(std::chrono::nanoseconds timeout);
    // Waits until notified (true) or the deadline (false; 0: none).
    bool WaitUntil(std::unique_lock<Fibtex> &lock, std::uint64_t deadline);

    detail::WaitList m_waiters;
    TaskScheduler *m_taskScheduler;
    friend class detail::ConditionVariableOps;
};

} // namespace ftl
