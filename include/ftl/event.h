// Event: a Win32-style event for fibers. Wait() returns once the event is
// set: a task parks its fiber, a thread that is not a worker blocks. Safe
// from any thread.
//
// - Manual reset: Set() releases every waiter and keeps the event set, so
//   later waits return at once, until Reset().
// - Auto reset (manualReset = false): each Set() releases one wait. With
//   waiters, one of them returns (or a wait that begins meanwhile, in its
//   place); with none, the event stays set for exactly one later wait, which
//   resets it. Two Set()s with two waiters release
//   both; a Set() on an event already set with no waiter changes nothing.
//
// Destroying an Event something waits on is a fatal error. Memory ordering:
// a Set() happens before the wait it releases returns.
#pragma once

#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"

#include <chrono>
#include <cstdint>

namespace ftl {

class TaskScheduler;

class Event {
public:
    Event(TaskScheduler *taskScheduler, bool manualReset);
    Event(Event const &) = delete;
    Event &operator=(Event const &) = delete;

    void Set();
    void Reset();
    void Wait();
    // Waits at most `timeout`; false if the event was not set for it.
    bool WaitFor(std::chrono::nanoseconds timeout);

private:
    // Under m_lock: a new wait's look (takes the set state if auto reset),
    // and a sleeping wait's, begun in `generation`.
    bool TakeSet();
    bool Released(std::uint64_t generation);

    Fibtex m_lock;
    ConditionVariable m_changed;
    bool const m_manualReset;
    // Under m_lock. Auto reset: m_released counts Set()s handed to sleeping
    // waits that have not returned yet (never more than m_waiting). Manual
    // reset: m_generation counts the Set()s that set it.
    bool m_set = false;
    unsigned m_waiting = 0;
    unsigned m_released = 0;
    std::uint64_t m_generation = 0;
};

} // namespace ftl
