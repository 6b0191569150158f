// BaseCounter: what TaskCounter, FullAtomicCounter and AtomicFlag share: a
// 32-bit value fibers can wait on, and the list of fibers waiting.
//
// Contract
// - Any number of fibers may wait on one counter at once (the lineage's
//   fiberSlots argument and NUM_WAITING_FIBER_SLOTS are accepted and ignored).
// - A counter must outlive every wait on it and every task added with it.
//   Destroying a counter while fibers (or threads) wait on it is a fatal
//   error, and so is waiting on a counter already destroyed (as long as its
//   storage was not reused). It may be
//   destroyed as soon as a wait on it returned, provided no task was added to
//   it after it reached the value that released the wait.
// - An operation that leaves the counter at no waiter's target touches only
//   the one atomic word holding the value and the waiter count; waking takes
//   the waiter list's lock, held only for list surgery.
#pragma once

#include "ftl/detail/wait_list.h"

#include <atomic>
#include <cstdint>

namespace ftl {

class TaskScheduler;

namespace detail {
class Scheduler;
class CounterOps;
} // namespace detail

class BaseCounter {
public:
    explicit BaseCounter(TaskScheduler *taskScheduler, unsigned initialValue = 0,
                         unsigned fiberSlots = NUM_WAITING_FIBER_SLOTS);
    ~BaseCounter();

    BaseCounter(BaseCounter const &) = delete;
    BaseCounter(BaseCounter &&) = delete;
    BaseCounter &operator=(BaseCounter const &) = delete;
    BaseCounter &operator=(BaseCounter &&) = delete;

protected:
    // m_state holds the value in its high 32 bits and the number of registered
    // waiters in its low 32 bits, so one atomic operation both changes the value
    // and tells whether anyone must be woken. Arithmetic on the value wraps
    // modulo 2^32 without disturbing the waiter count: a carry or borrow out of
    // bit 63 is discarded.
    static constexpr unsigned kValueShift = 32;
    static constexpr std::uint64_t kValueOne = std::uint64_t(1) << kValueShift;
    static constexpr std::uint64_t kWaiterMask = kValueOne - 1;

    static unsigned ValueOf(std::uint64_t state) { return static_cast<unsigned>(state >> kValueShift); }
    static bool HasWaiters(std::uint64_t state) { return (state & kWaiterMask) != 0; }

    // Wakes every fiber waiting for `value`. Called after an operation that
    // produced `value` saw a non-zero waiter count.
    void WakeWaiters(unsigned value);

    // Operations on the value; each wakes the fibers waiting for the value it
    // produced.
    unsigned FetchAddValue(unsigned delta); // returns the value before
    bool CompareExchangeValue(unsigned expected, unsigned desired);
    void StoreValue(unsigned value);

    std::atomic<std::uint64_t> m_state;
    detail::WaitList m_waiters;
    TaskScheduler *m_taskScheduler;
    // kLiveTag while the counter exists: a wait on a destroyed counter (its
    // storage not yet reused) is reported instead of reading a dead list.
    static constexpr std::uint32_t kLiveTag = 0x46544c43u;
    std::uint32_t m_liveTag = kLiveTag;

    friend class detail::Scheduler;
    friend class detail::CounterOps;
};

} // namespace ftl
