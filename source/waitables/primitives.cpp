// Semaphore, Event, Barrier and SharedFibtex. The first three keep their
// state under a Fibtex and wait on a ConditionVariable, so they park fibers
// and block other threads exactly as those do, and take their hand-off and
// wake-up rules from them. They notify with the Fibtex held: a waiter that
// returns must take the Fibtex first, so the object outlives the notify even
// when that waiter destroys it at once (a Fibtex may be destroyed right
// after its unlock). SharedFibtex keeps its readers and writer in one
// atomic word, so an uncontended lock of either kind is one atomic
// operation; only a lock that must wait takes the Fibtex and sleeps on the
// condition variable.
//
// SharedFibtex's sleep without a lost wake-up: a sleeper sets kSleepers (under
// the Fibtex), then tries the word once more, then waits on the condition
// variable, which gives the Fibtex up in the same step. A releaser changes
// the word first; if it saw kSleepers it takes and drops the Fibtex before
// it notifies, so a sleeper is either before its last try (and sees the
// release) or in its wait (and is notified). The word's operations are
// sequentially consistent where one side sets a bit and the other reads it.
#include "ftl/assert.h"
#include "ftl/barrier.h"
#include "ftl/event.h"
#include "ftl/semaphore.h"
#include "ftl/shared_fibtex.h"

#include <mutex>

namespace ftl {

// ---- Semaphore ----

Semaphore::Semaphore(TaskScheduler *taskScheduler, std::ptrdiff_t initial)
    : m_lock(taskScheduler), m_available(taskScheduler), m_count(initial) {
    if (initial < 0 || initial > kMax) {
        FTL_FATAL("Semaphore: an initial count of %td (it must be in 0..%td)", initial, kMax);
    }
}

void Semaphore::acquire() {
    std::unique_lock<Fibtex> lock(m_lock);
    m_available.wait(lock, [this] { return m_count > 0; });
    --m_count;
}

bool Semaphore::try_acquire() {
    std::lock_guard<Fibtex> const lock(m_lock);
    if (m_count == 0) {
        return false;
    }
    --m_count;
    return true;
}

bool Semaphore::try_acquire_for(std::chrono::nanoseconds timeout) {
    std::unique_lock<Fibtex> lock(m_lock);
    if (!m_available.wait_for(lock, timeout, [this] { return m_count > 0; })) {
        return false;
    }
    --m_count;
    return true;
}

void Semaphore::release(std::ptrdiff_t n) {
    if (n < 0) {
        FTL_FATAL("Semaphore::release(%td): a negative count", n);
    }
    if (n == 0) {
        return;
    }
    std::lock_guard<Fibtex> const lock(m_lock);
    if (m_count > kMax - n) {
        FTL_FATAL("Semaphore::release(%td) on a count of %td: the count would pass %td", n, m_count, kMax);
    }
    m_count += n;
    if (n == 1) {
        m_available.notify_one();
    } else {
        m_available.notify_all();
    }
}

// ---- Event ----

Event::Event(TaskScheduler *taskScheduler, bool manualReset)
    : m_lock(taskScheduler), m_changed(taskScheduler), m_manualReset(manualReset) {}

void Event::Set() {
    std::lock_guard<Fibtex> const lock(m_lock);
    if (m_manualReset) {
        if (!m_set) {
            m_set = true;
            ++m_generation; // releases every current waiter, even if Reset comes first
            if (m_waiting != 0) {
                m_changed.notify_all();
            }
        }
    } else if (m_waiting > m_released) {
        ++m_released; // handed to a waiter: the event stays reset
        m_changed.notify_one();
    } else {
        m_set = true;
    }
}

void Event::Reset() {
    std::lock_guard<Fibtex> const lock(m_lock);
    m_set = false;
}

bool Event::TakeSet() {
    if (!m_set) {
        return false;
    }
    if (!m_manualReset) {
        m_set = false;
    }
    return true;
}

bool Event::Released(std::uint64_t generation) {
    if (m_manualReset) {
        return m_set || m_generation != generation;
    }
    if (m_released == 0) {
        return false;
    }
    --m_released;
    return true;
}

void Event::Wait() {
    std::unique_lock<Fibtex> lock(m_lock);
    if (TakeSet()) {
        return;
    }
    ++m_waiting;
    std::uint64_t const generation = m_generation;
    m_changed.wait(lock, [this, generation] { return Released(generation); });
    --m_waiting;
}

bool Event::WaitFor(std::chrono::nanoseconds timeout) {
    std::unique_lock<Fibtex> lock(m_lock);
    if (TakeSet()) {
        return true;
    }
    ++m_waiting;
    std::uint64_t const generation = m_generation;
    bool const released =
        m_changed.wait_for(lock, timeout, [this, generation] { return Released(generation); });
    --m_waiting;
    return released;
}

// ---- Barrier ----

Barrier::Barrier(TaskScheduler *taskScheduler, std::ptrdiff_t count)
    : m_lock(taskScheduler), m_phaseEnded(taskScheduler), m_expected(count), m_remaining(count) {
    if (count < 1 || count > kMax) {
        FTL_FATAL("Barrier: a count of %td (it must be in 1..%td)", count, kMax);
    }
}

bool Barrier::Arrive(char const *what) {
    if (m_remaining == 0) {
        FTL_FATAL("Barrier::%s on a barrier whose count dropped to 0 (every participant dropped out)", what);
    }
    if (--m_remaining != 0) {
        return false;
    }
    m_remaining = m_expected;
    ++m_phase;
    return true;
}

void Barrier::arrive_and_wait() {
    std::unique_lock<Fibtex> lock(m_lock);
    std::uint64_t const phase = m_phase;
    if (Arrive("arrive_and_wait")) {
        m_phaseEnded.notify_all();
        return;
    }
    m_phaseEnded.wait(lock, [this, phase] { return m_phase != phase; });
}

void Barrier::arrive_and_drop() {
    std::lock_guard<Fibtex> const lock(m_lock);
    if (m_expected == 0) {
        FTL_FATAL("Barrier::arrive_and_drop on a barrier whose count dropped to 0 (every participant "
                  "dropped out)");
    }
    --m_expected; // for the later phases; this one still counts the arrival
    if (Arrive("arrive_and_drop")) {
        m_phaseEnded.notify_all();
    }
}

// ---- SharedFibtex ----

SharedFibtex::SharedFibtex(TaskScheduler *taskScheduler) : m_lock(taskScheduler), m_changed(taskScheduler) {}

SharedFibtex::~SharedFibtex() {
    std::uint32_t const state = m_state.load(std::memory_order_acquire);
    if ((state & (kWriter | kReaders)) != 0) {
        FTL_FATAL("a SharedFibtex was destroyed while held (%s)",
                  (state & kWriter) != 0 ? "by a writer" : "by readers");
    }
}

bool SharedFibtex::try_lock() {
    std::uint32_t state = m_state.load(std::memory_order_relaxed);
    while ((state & (kWriter | kReaders)) == 0) {
        if (m_state.compare_exchange_weak(state, state | kWriter, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

bool SharedFibtex::try_lock_shared() {
    std::uint32_t state = m_state.load(std::memory_order_relaxed);
    while ((state & (kWriter | kWriterWaiting)) == 0) {
        if ((state & kReaders) == kReaders) {
            FTL_FATAL("more than %u readers hold one SharedFibtex", kReaders);
        }
        if (m_state.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
            return true;
        }
    }
    return false;
}

void SharedFibtex::lock() {
    if (!try_lock()) {
        LockSlow();
    }
}

void SharedFibtex::lock_shared() {
    if (!try_lock_shared()) {
        LockSharedSlow();
    }
}

void SharedFibtex::LockSlow() {
    std::unique_lock<Fibtex> lock(m_lock);
    ++m_sleepers;
    ++m_writersWaiting;
    m_state.fetch_or(kSleepers | kWriterWaiting, std::memory_order_seq_cst);
    for (;;) {
        std::uint32_t state = m_state.load(std::memory_order_seq_cst);
        if ((state & (kWriter | kReaders)) == 0) {
            // The last waiting writer takes kWriterWaiting off with it.
            std::uint32_t const taken = (state | kWriter) & (m_writersWaiting == 1 ? ~kWriterWaiting : ~0u);
            if (m_state.compare_exchange_strong(state, taken, std::memory_order_seq_cst)) {
                break;
            }
            continue;
        }
        m_changed.wait(lock);
    }
    --m_writersWaiting;
    if (--m_sleepers == 0) {
        m_state.fetch_and(~kSleepers, std::memory_order_relaxed);
    }
}

void SharedFibtex::LockSharedSlow() {
    std::unique_lock<Fibtex> lock(m_lock);
    ++m_sleepers;
    m_state.fetch_or(kSleepers, std::memory_order_seq_cst);
    while (!try_lock_shared()) {
        m_changed.wait(lock);
    }
    if (--m_sleepers == 0) {
        m_state.fetch_and(~kSleepers, std::memory_order_relaxed);
    }
}

void SharedFibtex::unlock() {
    std::uint32_t state = m_state.load(std::memory_order_relaxed);
    do {
        if ((state & kWriter) == 0) {
            FTL_FATAL("SharedFibtex::unlock, but no writer holds it (%u reader(s) do)", state & kReaders);
        }
    } while (!m_state.compare_exchange_weak(state, state & ~kWriter, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    if ((state & kSleepers) != 0) {
        WakeSleepers();
    }
}

void SharedFibtex::unlock_shared() {
    std::uint32_t state = m_state.load(std::memory_order_relaxed);
    do {
        if ((state & kReaders) == 0) {
            FTL_FATAL("SharedFibtex::unlock_shared, but no reader holds it%s",
                      (state & kWriter) != 0 ? " (a writer does)" : "");
        }
    } while (!m_state.compare_exchange_weak(state, state - 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
    // The last reader out wakes whoever sleeps (a writer waits for it).
    if ((state & kReaders) == 1 && (state & kSleepers) != 0) {
        WakeSleepers();
    }
}

void SharedFibtex::WakeSleepers() {
    // A sleeper is past its last try, or waiting.
    std::lock_guard<Fibtex> const lock(m_lock);
    m_changed.notify_all();
}

} // namespace ftl
