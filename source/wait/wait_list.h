// The logic of detail::WaitList (storage in include/ftl/detail/wait_list.h).
//
// A WaitNode lives on the stack of the fiber (or thread) that waits. A
// fiber's node is linked into a list by the post-switch step (after the fiber
// is fully off its stack, docs/design.adoc, invariant 1); a thread's node is
// linked by the thread itself before it blocks. It is unlinked by whoever
// ends the wait: a waker, or, for a timed wait, the timer (Cancel), each
// under the list's lock, so exactly one of them does. Whoever unlinked it
// copies what it needs out of the node before it lets the waiter run,
// because the node's memory is gone as soon as the waiter returns.
#pragma once

#include "ftl/callbacks.h"
#include "ftl/detail/wait_list.h"
#include "platform/platform.h"

#include <atomic>
#include <cstdint>

namespace ftl {
namespace detail {

struct AfterTask;
struct Fiber;
class Worker;

struct WaitNode {
    WaitNode *Next = nullptr;
    Fiber *Waiter = nullptr;    // nullptr: a thread that is not a worker waits on Woken
    AfterTask *After = nullptr; // or else a task waits (AddTaskAfter; scheduler/after.cpp)
    Worker *PinnedTo = nullptr; // nullptr: resume on any worker
    unsigned Target = 0;        // counters: the value waited for
    // What is waited for, for the trace, the wait callbacks and the list of
    // parked fibers: the user's counter, Fibtex or condition variable.
    WaitKind Kind = WaitKind::Counter;
    void const *Object = nullptr;

    // Under the list's lock.
    bool Linked = false;     // on the list now
    bool Registered = false; // the registration ran (a fiber's: in its post-switch step)
    bool Expired = false;    // the deadline passed before the registration ran
    bool TimedOut = false;   // the wait ends because its deadline passed

    // A thread's wait: set to 1 (release) by whoever ends it, then
    // FUTEX_WAKEd; the thread may be gone the moment it reads the 1.
    std::atomic<std::uint32_t> Woken{0};

    // Timed waits (0: none): the deadline on NowNs()'s clock, the waitable,
    // and how to take the node off its list when the deadline passes
    // (returns true when it did; see the waitables' Cancel functions).
    std::uint64_t Deadline = 0;
    void *Waitable = nullptr;
    bool (*Cancel)(void *waitable, WaitNode *node) = nullptr;
    // Fibtex (fibtex.cpp): a waiter that spins, linked only to ask for a
    // hand-off of the lock (it is never readied), and the mark the unlock
    // that took the lock for it sets (release), its last touch of the node.
    bool Spinning = false;
    std::atomic<bool> Handed{false};
    // A spinning waiter's last sign of running (NowNs), renewed as it looks
    // for the hand-off, and the time between its last two: a waiter
    // preempted since is not handed the lock.
    std::atomic<std::uint64_t> Beat{0};
    std::atomic<std::uint64_t> BeatGap{0};
    // The timers' (under their lock): on the heap now, and where.
    bool InTimers = false;
    unsigned TimerSlot = 0;
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
    node->Linked = true;
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
        node->Linked = false;
    }
    return node;
}

// Unlinks `node` if it is on the list; returns whether it was.
inline bool Remove(WaitList &list, WaitNode *node) {
    if (!node->Linked) {
        return false;
    }
    WaitNode *prev = nullptr;
    for (WaitNode *cur = list.Head; cur != nullptr; prev = cur, cur = cur->Next) {
        if (cur == node) {
            (prev == nullptr ? list.Head : prev->Next) = node->Next;
            if (list.Tail == node) {
                list.Tail = prev;
            }
            node->Next = nullptr;
            node->Linked = false;
            return true;
        }
    }
    return false;
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
            node->Linked = false;
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
