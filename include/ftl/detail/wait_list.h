// Internal: the storage of a waiter list, embedded in counters and Fibtex.
// Its logic lives in source/wait/wait_list.h; nothing here is API.
#pragma once

#include <atomic>

// The lineage's fixed waiter capacity. Counters and Fibtex take it as a
// trailing constructor argument, and users may define it; our waiter lists
// are unbounded, so it is accepted and has no effect.
#ifndef NUM_WAITING_FIBER_SLOTS
#define NUM_WAITING_FIBER_SLOTS 4
#endif

namespace ftl {
namespace detail {

struct WaitNode;

// An intrusive FIFO list of WaitNodes. Each node lives on the stack of the
// fiber that waits, so the list has no capacity limit. A small spin lock
// guards list surgery only; it is never held across a fiber switch.
struct WaitList {
    std::atomic<unsigned> Lock{0};
    WaitNode *Head = nullptr;
    WaitNode *Tail = nullptr;
};

} // namespace detail
} // namespace ftl
