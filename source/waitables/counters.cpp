// BaseCounter, FullAtomicCounter and AtomicFlag.
//
// Why registering and waking cannot miss each other: the value and the
// waiter count share one atomic word (m_state). A waiter registers with a CAS
// on that word that also checks the value, under the list lock; an operation
// changes the value with one RMW that returns the waiter count it replaced.
// The two RMWs are totally ordered: either the operation sees the waiter
// counted (and takes the list lock to wake it, after the waiter is linked,
// since linking happens under that lock), or the waiter's CAS sees the new
// value and does not wait. An operation that sees no waiters never touches the
// counter again, so a fiber released by it may destroy the counter at once.
#include "ftl/assert.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/wait_group.h"
#include "scheduler/counter_ops.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"

#include <utility>

namespace ftl {

BaseCounter::BaseCounter(TaskScheduler *taskScheduler, unsigned initialValue, unsigned fiberSlots)
    : m_state(std::uint64_t(initialValue) << kValueShift), m_taskScheduler(taskScheduler) {
    (void)fiberSlots; // waiter lists have no fixed capacity
}

BaseCounter::~BaseCounter() {
    // Volatile: a plain store to a dying object is a dead store the compiler
    // removes; this one must stay for the check in CounterOps::CheckAlive.
    *const_cast<std::uint32_t volatile *>(&m_liveTag) = 0;
    // A waker that saw a waiter may still be on its way to the list lock, or
    // hold it, after another operation released the waiter (whose fiber then
    // returned from its wait and destroys the counter): wait that out. A
    // counted waker takes the lock and uncounts itself under it.
    std::uint64_t state = m_state.load(std::memory_order_acquire);
    while (HasWakers(state)) {
        detail::YieldThread(); // the waker may be preempted
        state = m_state.load(std::memory_order_acquire);
    }
    // Neither a registered waiter nor a held lock: no waker is left inside.
    // (A waiter count of 0 read here comes from a waker's decrement made
    // under the lock, so the lock read after it sees that waker's lock or its
    // release.)
    if (!HasWaiters(state) && m_waiters.Lock.load(std::memory_order_acquire) == 0) {
        return;
    }
    detail::WaitListGuard guard(m_waiters);
    state = m_state.load(std::memory_order_acquire);
    if (HasWaiters(state)) {
        FTL_FATAL(
            "a counter was destroyed while %u fiber(s), thread(s) or AddTaskAfter task(s) still wait on "
            "it (value %u)",
            static_cast<unsigned>(state & kWaiterMask), ValueOf(state));
    }
}

void BaseCounter::WakeWaiters(unsigned value, bool counted) {
    detail::WaitNode *chain;
    unsigned count;
    // Read before the lock is released: from then on a released waiter may
    // destroy the counter.
    TaskScheduler *const taskScheduler = m_taskScheduler;
    {
        detail::WaitListGuard guard(m_waiters);
        chain = detail::TakeMatching(m_waiters, value, count);
        std::uint64_t const uncount = count + (counted ? kWakerOne : 0);
        if (uncount != 0) {
            m_state.fetch_sub(uncount, std::memory_order_acq_rel);
        }
    }
    if (chain == nullptr) {
        return;
    }
    detail::Scheduler &scheduler = *detail::Scheduler::Of(taskScheduler);
    // Tasks after tasks this worker queued: one wake for all of them (a
    // thread outside the scheduler wakes for each as it queues it).
    bool started = false;
    bool selfKnown = false;
    detail::Worker *self = nullptr;
    while (chain != nullptr) {
        // Read the node before readying its fiber: the node lives on that
        // fiber's stack and is gone once the fiber runs.
        detail::WaitNode *next = chain->Next;
        if (chain->After != nullptr) {
            if (!selfKnown) {
                self = scheduler.CurrentWorkerOfThis();
                selfKnown = true;
            }
            started |= detail::PrerequisiteDone(scheduler, self, chain);
        } else {
            detail::WakeWaiter(&scheduler, chain, detail::Readier::TaskThatWaits);
        }
        chain = next;
    }
    if (started) {
        scheduler.NotifyStarted();
    }
}

// The value operations below, and FullAtomicCounter::Load and
// AtomicFlag::IsSet, are seq_cst: they are the std::atomic-like API, whose
// callers may ask seq_cst (the default) and build store-then-load handshakes
// over two counters on it. acq_rel would let such a store and a later load of
// another counter reorder (C++; arm64 with RCpc loads, LDAPR), which x86's
// locked RMW happens to forbid. It costs nothing: GCC emits the same
// instructions for both orders on x86-64 and arm64.
//
// Each is one CAS loop that counts the operation as a waker when it sees
// waiters (see the top of this file).
namespace {

std::uint64_t WithWaker(std::uint64_t state, std::uint64_t waiterMask, std::uint64_t wakerOne) {
    return (state & waiterMask) != 0 ? state + wakerOne : state;
}

} // namespace

unsigned BaseCounter::FetchAddValue(unsigned delta) {
    std::uint64_t state = m_state.load(std::memory_order_relaxed);
    while (!m_state.compare_exchange_weak(
        state, WithWaker(state + (std::uint64_t(delta) << kValueShift), kWaiterMask, kWakerOne),
        std::memory_order_seq_cst, std::memory_order_relaxed)) {
    }
    if (HasWaiters(state)) {
        WakeWaiters(ValueOf(state) + delta, true);
    }
    return ValueOf(state);
}

bool BaseCounter::CompareExchangeValue(unsigned expected, unsigned desired) {
    std::uint64_t state = m_state.load(std::memory_order_seq_cst);
    do {
        if (ValueOf(state) != expected) {
            return false;
        }
    } while (!m_state.compare_exchange_weak(
        state,
        WithWaker((std::uint64_t(desired) << kValueShift) | (state & (kValueOne - 1)), kWaiterMask,
                  kWakerOne),
        std::memory_order_seq_cst, std::memory_order_seq_cst));
    if (HasWaiters(state)) {
        WakeWaiters(desired, true);
    }
    return true;
}

void BaseCounter::StoreValue(unsigned value) {
    std::uint64_t state = m_state.load(std::memory_order_relaxed);
    while (!m_state.compare_exchange_weak(
        state,
        WithWaker((std::uint64_t(value) << kValueShift) | (state & (kValueOne - 1)), kWaiterMask, kWakerOne),
        std::memory_order_seq_cst, std::memory_order_relaxed)) {
    }
    if (HasWaiters(state)) {
        WakeWaiters(value, true);
    }
}

unsigned FullAtomicCounter::Load(std::memory_order) const {
    return ValueOf(m_state.load(std::memory_order_seq_cst));
}
void FullAtomicCounter::Store(unsigned x, std::memory_order) {
    StoreValue(x);
}
unsigned FullAtomicCounter::FetchAdd(unsigned x, std::memory_order) {
    return FetchAddValue(x);
}
unsigned FullAtomicCounter::FetchSub(unsigned x, std::memory_order) {
    return FetchAddValue(0u - x);
}
bool FullAtomicCounter::CompareExchange(unsigned expectedValue, unsigned newValue, std::memory_order) {
    return CompareExchangeValue(expectedValue, newValue);
}

void TaskCounter::Underflow(char const *what) {
    FTL_FATAL("%s brought the count below 0 (more Done or Decrement than tasks and Add)", what);
}

void TaskCounter::Overflow(unsigned value, unsigned x) {
    FTL_FATAL("TaskCounter::Add(%u) on a count of %u: the count would pass %u (a negative number passed as "
              "unsigned? lower it with Decrement, or use WaitGroup::Add)",
              x, value, TaskCounter::kMaxCount);
}

bool AtomicFlag::Set(std::memory_order) {
    return CompareExchangeValue(0, 1);
}
bool AtomicFlag::Clear(std::memory_order) {
    return CompareExchangeValue(1, 0);
}
bool AtomicFlag::IsSet(std::memory_order) const {
    return ValueOf(m_state.load(std::memory_order_seq_cst)) != 0;
}

namespace detail {

void CounterOps::Finish(TaskCounter &counter, unsigned n) {
    std::uint64_t const old =
        counter.m_state.fetch_sub(std::uint64_t(n) << BaseCounter::kValueShift, std::memory_order_acq_rel);
    if (BaseCounter::ValueOf(old) <= n) {
        if (BaseCounter::ValueOf(old) < n) {
            TaskCounter::Underflow("a task's finish");
        }
        if (BaseCounter::HasWaiters(old)) {
            counter.WakeWaiters(0);
        }
    }
}

void CounterOps::KeepError(TaskCounter &counter, std::exception_ptr error) {
    WaitListGuard guard(counter.m_waiters);
    if (counter.m_error == nullptr) {
        counter.m_error = std::move(error);
        counter.m_droppedExceptions.store(0, std::memory_order_relaxed);
        // Ordered before the task's finish lowers the counter (a release),
        // so a wait that saw the counter reach 0 sees it.
        counter.m_hasError.store(true, std::memory_order_relaxed);
    } else {
        counter.m_droppedExceptions.fetch_add(1, std::memory_order_relaxed);
    }
}

std::exception_ptr CounterOps::TakeError(TaskCounter &counter) {
    if (!counter.m_hasError.load(std::memory_order_acquire)) {
        return nullptr;
    }
    WaitListGuard guard(counter.m_waiters);
    counter.m_hasError.store(false, std::memory_order_relaxed);
    return std::exchange(counter.m_error, nullptr);
}

bool CounterOps::EndCancellation(TaskCounter &counter) {
    if (!counter.m_cancelled.load(std::memory_order_acquire)) {
        return false;
    }
    // One step under the list's lock: a second wait that finds the flag
    // gone finds the error gone too (TakeError takes the lock), and a Cancel
    // racing this one is either ended here or stays.
    std::exception_ptr dropped; // destroyed once the lock is released
    WaitListGuard guard(counter.m_waiters);
    if (!counter.m_cancelled.exchange(false, std::memory_order_acq_rel)) {
        return false;
    }
    counter.m_hasError.store(false, std::memory_order_relaxed);
    dropped = std::exchange(counter.m_error, nullptr);
    return true;
}

bool CounterOps::Register(void *counterPtr, WaitNode *node) {
    auto *counter = static_cast<BaseCounter *>(counterPtr);
    WaitListGuard guard(counter->m_waiters);
    node->Registered = true;
    std::uint64_t state = counter->m_state.load(std::memory_order_acquire);
    do {
        if (BaseCounter::ValueOf(state) == node->Target) {
            return false; // reached while we were switching away: resume at once
        }
        if (node->Expired) {
            node->TimedOut = true; // the deadline passed while we were switching away
            return false;
        }
        if ((state & BaseCounter::kWaiterMask) == BaseCounter::kWaiterMask) {
            FTL_FATAL("more than %llu fibers, threads and AddTaskAfter tasks wait on one counter",
                      static_cast<unsigned long long>(BaseCounter::kWaiterMask));
        }
    } while (!counter->m_state.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                                     std::memory_order_acquire));
    Append(counter->m_waiters, node);
    return true;
}

bool CounterOps::Cancel(void *counterPtr, WaitNode *node) {
    auto *counter = static_cast<BaseCounter *>(counterPtr);
    WaitListGuard guard(counter->m_waiters);
    if (Remove(counter->m_waiters, node)) {
        counter->m_state.fetch_sub(1, std::memory_order_acq_rel); // one waiter fewer
        node->TimedOut = true;
        return true;
    }
    if (!node->Registered) {
        // The fiber is still switching away: its registration ends the wait.
        node->Expired = true;
    }
    return false; // else a waker already ended it
}

void CounterOps::NotAlive(char const *what) {
    FTL_FATAL("%s on a counter that was destroyed (or never constructed)", what);
}

} // namespace detail
} // namespace ftl
