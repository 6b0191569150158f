// The logic of detail::WaitList (storage in include/ftl/detail/wait_list.h).
//
// A WaitNode lives on the stack of the fiber that waits. It is linked into a
// list by the post-switch step (after the fiber is fully off its stack,
// docs/design.adoc, invariant 1) and unlinked by whoever wakes it; the waker copies
// what it needs out of the node before it readies the fiber, because the
// node's memory is gone as soon as the fiber runs again.
#pragma once

#include "ftl/detail/wait_list.h"
#include "platform/platform.h"

namespace ftl {
namespace detail {

struct Fiber;
class Worker;

struct WaitNode {
    WaitNode *Next = nullptr;
    Fiber *Waiter = nullptr;
    Worker *PinnedTo = nullptr; // nullptr: resume on any worker
    unsigned Target = 0;        // counters: the value waited for
};

// A test-and-test-and-set spin lock on WaitList::Lock. Held for list surgery
// only (a few pointer writes per node), never across a switch or a callback.
class WaitListGuard {
public:
    explicit WaitListGuard(WaitList &list) : m_list(list) {
        while (m_list.Lock.exchange(1, std::memory_order_acquire) != 0) {
            while (m_list.Lock.load(std::memory_order_relaxed) != 0) {
                CpuRelax();
            }
        }
    }
    ~WaitListGuard() { m_list.Lock.store(0, std::memory_order_release); }
    WaitListGuard(WaitListGuard const &) = delete;
    WaitListGuard &operator=(WaitListGuard const &) = delete;

private:
    WaitList &m_list;
};

// The functions below require the list's lock.
inline void Append(WaitList &list, WaitNode *node) {
    node->Next = nullptr;
    if (list.Tail == nullptr) {
        list.Head = node;
    } else {
        list.Tail->Next = node;
    }
    list.Tail = node;
}

inline WaitNode *PopFront(WaitList &list) {
    WaitNode *node = list.Head;
    if (node != nullptr) {
        list.Head = node->Next;
        if (list.Head == nullptr) {
            list.Tail = nullptr;
        }
        node->Next = nullptr;
    }
    return node;
}

// Unlinks every node waiting for `target`, returning them as a chain (in list
// order) and their number in `count`.
inline WaitNode *TakeMatching(WaitList &list, unsigned target, unsigned &count) {
    WaitNode *taken = nullptr;
    WaitNode **takenTail = &taken;
    WaitNode *prev = nullptr;
    count = 0;
    for (WaitNode *node = list.Head; node != nullptr;) {
        WaitNode *next = node->Next;
        if (node->Target == target) {
            if (prev == nullptr) {
                list.Head = next;
            } else {
                prev->Next = next;
            }
            if (list.Tail == node) {
                list.Tail = prev;
            }
            node->Next = nullptr;
            *takenTail = node;
            takenTail = &node->Next;
            ++count;
        } else {
            prev = node;
        }
        node = next;
    }
    return taken;
}

} // namespace detail
} // namespace ftl
