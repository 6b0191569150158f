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
// - An operation on a counter nobody waits on touches only the one atomic
//   word holding the value and the waiter count; one that sees waiters takes
//   the waiter list's lock, held only for list surgery, and the destructor
//   waits until such an operation is done with the counter.
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
    // m_state holds the value in its high 32 bits; below it, the number of
    // wakers still inside WakeWaiters (bits 20-31) and of registered waiters
    // (bits 0-19). One atomic operation both changes the value and tells
    // whether anyone must be woken. Arithmetic on the value wraps modulo 2^32
    // without disturbing the counts: a carry or borrow out of bit 63 is
    // discarded.
    //
    // An operation that sees waiters but produces a value none of them may
    // wait for still takes the list's lock to look: it counts itself as a
    // waker in the same atomic operation, so that the counter is not
    // destroyed under it by a waiter another operation released meanwhile
    // (the destructor waits for the wakers). TaskCounter and WaitGroup wake
    // only at 0, which only the operation that released the waiters produced,
    // and do not count themselves.
    static constexpr unsigned kValueShift = 32;
    static constexpr std::uint64_t kValueOne = std::uint64_t(1) << kValueShift;
    static constexpr unsigned kWakerShift = 20;
    static constexpr std::uint64_t kWakerOne = std::uint64_t(1) << kWakerShift;
    static constexpr std::uint64_t kWaiterMask = kWakerOne - 1;
    static constexpr std::uint64_t kWakerMask = (kValueOne - 1) & ~kWaiterMask;

    static unsigned ValueOf(std::uint64_t state) { return static_cast<unsigned>(state >> kValueShift); }
    static bool HasWaiters(std::uint64_t state) { return (state & kWaiterMask) != 0; }
    static bool HasWakers(std::uint64_t state) { return (state & kWakerMask) != 0; }

    // Wakes every fiber waiting for `value`. Called after an operation that
    // produced `value` saw a non-zero waiter count; `counted`: that operation
    // also counted itself as a waker (kWakerOne), which this takes back.
    void WakeWaiters(unsigned value, bool counted = false);

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
