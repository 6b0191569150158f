// Timers: the deadlines of timed waits and SleepFor, for every worker.
//
// A min-heap of the waiting nodes by deadline, under a mutex (timers are off
// the hot path), and the earliest deadline as an atomic, so that a worker
// looks at one word to know whether any timer is due. Workers fire due
// timers at their scheduling points: every global-queue turn (about every
// millisecond of work), at the end of every tick, and when they idle, where a
// parked worker sleeps on its futex with the earliest deadline as its timeout
// (so an idle scheduler with a pending timer costs nothing until then).
//
// Who ends a timed wait (docs/design.adoc, "Timed waits"): a node is on the
// heap while its fiber waits; the fiber takes it off (Remove) before its
// wait returns, under the timers' lock, so a node the timers pop is alive
// while they hold that lock. For a wait on a waitable, the timers ask the
// waitable (the node's Cancel, under the waitable's list lock) whether the
// wait is still open: only then does it end by timeout, otherwise a waker
// already ended it. Lock order: the timers' lock, then a list lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

namespace ftl {
namespace detail {

struct Fiber;
class Worker;
struct WaitNode;

// A wait's deadline on NowNs()'s clock: `timeout` from now (0 is "none",
// so a deadline is never 0; a timeout too long to represent saturates).
std::uint64_t DeadlineAfter(std::chrono::nanoseconds timeout);

// A waiter whose wait ended by timeout, to ready once the lock is released.
struct TimedOutWaiter {
    Fiber *Waiter;
    Worker *PinnedTo;
};

class Timers {
public:
    static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

    // Adds `node` (its Deadline, Waitable and Cancel set). Returns true when
    // its deadline is now the earliest.
    bool Add(WaitNode *node);
    // Takes `node` off the heap if it is still there.
    void Remove(WaitNode *node);
    std::uint64_t Earliest() const { return m_earliest.load(std::memory_order_acquire); }
    bool Empty() const { return Earliest() == kNever; }
    // Ends the waits due by `now`, at most `max`: their waiters go to `out`
    // for the caller to ready. Returns how many; while it returns `max`, more
    // may be due.
    unsigned TakeDue(std::uint64_t now, TimedOutWaiter *out, unsigned max);

private:
    void Place(unsigned slot, WaitNode *node);
    void SiftUp(unsigned slot);
    void SiftDown(unsigned slot);
    void RemoveAt(unsigned slot);
    void Publish();

    std::mutex m_mutex;
    std::vector<WaitNode *> m_heap;
    std::atomic<std::uint64_t> m_earliest{kNever};
};

} // namespace detail
} // namespace ftl
