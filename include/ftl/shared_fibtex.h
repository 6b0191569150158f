// SharedFibtex: a reader-writer lock for fibers (std::shared_mutex's names:
// std::unique_lock and std::shared_lock work with it). Readers share it;
// a writer holds it alone. Taking it when it is not free waits: a task parks
// its fiber, a thread that is not a worker blocks. Safe from any thread.
//
// Writers are not starved: once a writer waits, new readers wait behind it.
// An uncontended lock or lock_shared is one atomic operation, and readers
// that overlap do not wait for each other.
//
// Misuse (fatal): unlock() when no writer holds it, unlock_shared() when no
// reader does, destroying a SharedFibtex that is held or waited on. As with
// std::shared_mutex, taking it again on the same fiber deadlocks. Unlike a
// Fibtex, it may be destroyed only once every unlock of it has returned (an
// unlock that wakes sleepers still touches it after another can take it).
// Memory ordering: an unlock (either kind) happens before the lock that
// follows it, as a mutex's.
#pragma once

#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"

#include <atomic>
#include <cstdint>

namespace ftl {

class TaskScheduler;

class SharedFibtex {
public:
    explicit SharedFibtex(TaskScheduler *taskScheduler);
    ~SharedFibtex();
    SharedFibtex(SharedFibtex const &) = delete;
    SharedFibtex &operator=(SharedFibtex const &) = delete;

    void lock();
    bool try_lock();
    void unlock();
    void lock_shared();
    bool try_lock_shared();
    void unlock_shared();

private:
    // m_state: the readers holding it (low bits), and these.
    static constexpr std::uint32_t kWriter = 1u << 31;        // a writer holds it
    static constexpr std::uint32_t kWriterWaiting = 1u << 30; // new readers wait
    static constexpr std::uint32_t kSleepers = 1u << 29;      // someone waits on m_changed
    static constexpr std::uint32_t kReaders = kSleepers - 1;

    void LockSlow();
    void LockSharedSlow();
    void WakeSleepers();

    std::atomic<std::uint32_t> m_state{0};
    Fibtex m_lock; // guards the sleepers' counts, and m_changed's waits
    ConditionVariable m_changed;
    unsigned m_sleepers = 0;       // under m_lock
    unsigned m_writersWaiting = 0; // under m_lock
};

} // namespace ftl
