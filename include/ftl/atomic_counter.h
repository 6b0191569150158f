// FullAtomicCounter and AtomicFlag: counters with the atomic operations of
// std::atomic<unsigned>, on which fibers can wait for any value.
//
// Each operation that changes the value wakes every fiber waiting for the
// value it produced. An operation with no waiters costs one atomic
// read-modify-write. The memory_order arguments are accepted for source
// compatibility; every operation is seq_cst, which is never weaker than what
// was asked.
#pragma once

#include "ftl/base_counter.h"

#include <atomic>

namespace ftl {

class FullAtomicCounter : public BaseCounter {
public:
    explicit FullAtomicCounter(TaskScheduler *taskScheduler, unsigned initialValue = 0,
                               unsigned fiberSlots = NUM_WAITING_FIBER_SLOTS)
        : BaseCounter(taskScheduler, initialValue, fiberSlots) {}

    unsigned Load(std::memory_order memoryOrder = std::memory_order_seq_cst) const;
    void Store(unsigned x, std::memory_order memoryOrder = std::memory_order_seq_cst);
    // Return the value before the operation, like std::atomic.
    unsigned FetchAdd(unsigned x, std::memory_order memoryOrder = std::memory_order_seq_cst);
    unsigned FetchSub(unsigned x, std::memory_order memoryOrder = std::memory_order_seq_cst);
    // Sets the value to newValue if it equals expectedValue; returns whether it did.
    bool CompareExchange(unsigned expectedValue, unsigned newValue,
                         std::memory_order memoryOrder = std::memory_order_seq_cst);
};

// A flag fibers can wait on: TaskScheduler::WaitForCounter(&flag) returns once
// the flag is clear.
class AtomicFlag : public BaseCounter {
public:
    explicit AtomicFlag(TaskScheduler *taskScheduler, unsigned initialValue = 0,
                        unsigned fiberSlots = NUM_WAITING_FIBER_SLOTS)
        : BaseCounter(taskScheduler, initialValue != 0 ? 1 : 0, fiberSlots) {}

    // Sets the flag; returns true if it was clear.
    bool Set(std::memory_order memoryOrder = std::memory_order_seq_cst);
    // Clears the flag, waking its waiters; returns true if it was set.
    bool Clear(std::memory_order memoryOrder = std::memory_order_seq_cst);
    bool IsSet(std::memory_order memoryOrder = std::memory_order_seq_cst) const;
};

} // namespace ftl
