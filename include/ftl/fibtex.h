// Fibtex: a mutex for fibers. A fiber that finds it locked parks (its thread
// runs other work) instead of blocking the thread. It meets the Lockable
// requirements, so std::lock_guard and std::unique_lock work with it.
//
// Contract
// - The owner is the task that locked it (on a thread outside the scheduler's
//   tasks, the thread). Only the owner may unlock it; unlocking a Fibtex the
//   caller does not hold (or twice) is a fatal error.
// - A task may hold a Fibtex across a WaitForCounter; it stays the owner
//   wherever it resumes. Tasks are the owners, not fibers or threads: a task
//   run inline on its waiting parent's fiber does not own the parent's
//   locks, and a task that ends holding a Fibtex is a fatal error (the next
//   task on its fiber is another owner).
// - Outside any task, a thread's own stack is one owner before, while and
//   after the thread is a worker: the thread that calls TaskScheduler::Init
//   may lock a Fibtex before Init and unlock it after, or lock it between
//   its tasks and unlock it after the scheduler is gone.
// - It is not recursive: a lock by its owner is a fatal error (found when the
//   lock sees itself held, so it costs the uncontended lock nothing).
//   try_lock by the owner returns false.
// - Destroying a Fibtex that is locked or has waiters is a fatal error.
// - Memory ordering: unlock releases, a successful lock acquires.
// - Any thread may lock and unlock it: on a thread that is not one of the
//   scheduler's workers, a contended lock blocks that thread until an unlock
//   wakes it to try again.
// - Its last user may destroy it right after unlocking it, while other
//   unlocks may still be returning (as std::mutex allows): an unlock touches
//   the Fibtex no more once it has released it.
// - lock() tries a short spin before it parks: a holder on another core is
//   usually about to unlock, and parking costs two fiber switches and a
//   process-wide memory barrier. An unlock wakes one parked waiter and does
//   not hand it the lock: whoever looks first takes it. But a waiter that
//   runs (spins) and has waited 40 us is handed the lock by the holder's
//   next unlock, so a holder that relocks at once cannot pass a waiter by
//   for longer (a woken waiter asks at its first look that fails). A waiter
//   that is not running at the unlock (its thread preempted) is not handed
//   the lock, which would then sit taken until the OS ran it: a thread that
//   shares one CPU with such a holder waits until the OS preempts the holder
//   between two sections, which on a loaded machine can take seconds.
// - A waiter whose worker's latest run of acquisitions of this Fibtex was
//   8 or more in a row, with nobody else's between (tasks that each lock it
//   again and again), lets a holder that keeps relocking it keep it for up
//   to 150 us, rather than taking it between two of the holder's sections:
//   the lock and the data it guards then cross the cores once per run of
//   sections, not once per section. It takes the lock at its first look
//   after the holder stops relocking. On a worker whose latest run was
//   shorter (a task that locks once, pops and leaves) a waiter is not
//   patient.
#pragma once

#include "ftl/detail/config.h"
#include "ftl/detail/lock_thread.h"
#include "ftl/detail/wait_list.h"

#include <atomic>
#include <cstdint>
#include <mutex> // std::lock_guard and std::unique_lock, which Fibtex is made for

namespace ftl {

class TaskScheduler;

namespace detail {
class FibtexOps;
class Worker;
} // namespace detail

class Fibtex {
public:
    explicit Fibtex(TaskScheduler *taskScheduler, unsigned fiberSlots = NUM_WAITING_FIBER_SLOTS);
    ~Fibtex();

    Fibtex(Fibtex const &) = delete;
    Fibtex(Fibtex &&) = delete;
    Fibtex &operator=(Fibtex const &) = delete;
    Fibtex &operator=(Fibtex &&) = delete;

    // Locks, parking the fiber while another holds it. pinToThread: resume on
    // this thread after a park.
    void lock(bool pinToThread = false) { lock_spin(pinToThread, kLockSpinAttempts); }
    bool try_lock();
    void unlock() {
        detail::LockThreadState *const thread = detail::CurrentLockThread();
        if (m_owner.load(std::memory_order_relaxed) != detail::TaskIdentityOf(thread)) {
            UnlockMisuse();
        }
        thread->Held -= detail::HeldWeight(this);
        Release();
    }

    // Spins up to `iterations` attempts, then parks like lock().
    void lock_spin(bool pinToThread = false, unsigned iterations = 1000) {
        // Uncontended, inlined in the caller: a look, a compare-exchange and
        // the bookkeeping, no call.
        if (LookAndAcquire()) {
            NoteAcquired(detail::CurrentLockThread());
            return;
        }
        LockContended(pinToThread, iterations);
    }
    // Spins until it gets the lock; never parks: the worker spinning in it
    // runs nothing else meanwhile. With a holder that waits while it holds
    // the lock (a WaitForCounter, a park on another Fibtex), the holder
    // needs a worker to resume on and to run what it waits for: when every
    // worker spins here (or every worker the holder may resume on, for a
    // pinned wait or the Init thread's own fiber), nothing unlocks and the
    // workers spin forever. Use it only for locks whose holders never wait
    // while holding them; lock() and lock_spin() park instead.
    void lock_spin_infinite(bool pinToThread = false);

private:
    // 0: unlocked; 1: locked. Parked waiters are not in this word: they are
    // in a table outside the Fibtex, keyed by its address (fibtex.cpp).
    static constexpr std::uint32_t kUnlocked = 0;
    static constexpr std::uint32_t kLocked = 1;
    // Looks lock() makes before it parks (fibtex.cpp).
    static constexpr unsigned kLockSpinAttempts = 24;

    bool TryAcquire() {
        std::uint32_t expected = kUnlocked;
        return m_state.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                               std::memory_order_relaxed);
    }
    // A look first, and the compare-exchange only when the lock looks free:
    // a waiter's look takes the line shared, not away from the holder.
    bool LookAndAcquire() { return m_state.load(std::memory_order_relaxed) == kUnlocked && TryAcquire(); }
    // lock_spin past its first look: the backoff spin, then LockSlow.
    void LockContended(bool pinToThread, unsigned iterations);
    // The backoff spin: true when it took the lock (the owner is not set).
    // worker: the caller's, whose latest run on this Fibtex may make the
    // wait patient; nullptr: never patient (a thread outside the scheduler,
    // or a waiter that has parked).
    // since: when the wait began (NowNs), or 0 until the spin takes it; a
    // long wait asks the holder's unlock to hand it the lock (LockHandOff).
    bool SpinAcquire(unsigned iterations, detail::Worker const *worker, std::uint64_t &since);
    void AcquiredAfterWait(unsigned looked, unsigned start, std::uint32_t acquisitionsBefore);
    // Parks until an unlock wakes it, then spins again, until it has the lock.
    void LockSlow(bool pinToThread, unsigned iterations, std::uint64_t since);
    // After an acquisition, by the new owner on its thread: the owner, the
    // locks the owner holds, and the thread's run of acquisitions.
    void NoteAcquired(detail::LockThreadState *thread) {
        // A plain increment: only the new owner writes it, on a line it has
        // just written with its compare-exchange.
        std::uint32_t const acquisitions = m_acquisitions.load(std::memory_order_relaxed) + 1;
        m_acquisitions.store(acquisitions, std::memory_order_relaxed);
        m_owner.store(detail::TaskIdentityOf(thread), std::memory_order_relaxed);
        thread->Held += detail::HeldWeight(this);
        if (thread->RunLock != this || thread->RunLast + 1 != acquisitions) {
            thread->RunLock = this;
            thread->RunFirst = acquisitions;
        }
        thread->RunLast = acquisitions;
    }
    // How many acquisitions in a row, with nobody else's between, the calling
    // thread's latest run on this Fibtex was (0: its latest run was on
    // another).
    std::uint32_t RunOnThisThread() const;
    // unlock() by a task that does not hold the lock: a fatal error.
    [[noreturn]] void UnlockMisuse() const;
    // A lock that found the lock held: a fatal error when the caller is the
    // holder (it would wait for itself forever).
    void CheckNotHeldByCaller() const;
    // unlock() after its ownership check. The store of 0 releases the lock,
    // and the Fibtex may be gone right after it (the contract above allows
    // that): from there on only the parking table's count and the address
    // are used. The compiler keeps the read of the count after the store; a
    // parker's process-wide barrier orders them on the CPU (fibtex.cpp).
    void Release() {
        m_owner.store(nullptr, std::memory_order_relaxed);
        std::atomic<std::uint32_t> const &parked =
            detail::g_parkingCounts[detail::ParkingBucketOf(this)].Parked;
        m_state.store(kUnlocked, std::memory_order_release);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (FTL_UNLIKELY(parked.load(std::memory_order_relaxed) != 0)) {
            UnlockSlow(this);
        }
    }
    // A Release that found waiters counted in its bucket: wakes the first
    // parked for `mutex`, which may be gone (or hands it the lock, when it
    // has waited long: LockHandOff in source/policy/lock_wait.h).
    static void UnlockSlow(void const *mutex);

    std::atomic<std::uint32_t> m_state{kUnlocked};
    // Where a contended lock() starts its backoff (log2 of the pauses between
    // looks), learnt from the waits before it; written only by a waiter that
    // has just taken the lock, so the line is already its own.
    std::atomic<std::uint8_t> m_backoffStart{0};
    // Acquisitions so far (wrapping): a waiter that sees it grow by two or
    // more while it waits knows the holder relocks at once.
    std::atomic<std::uint32_t> m_acquisitions{0};
    // The owning fiber's identity, for the unlock-by-non-owner check.
    std::atomic<void const *> m_owner{nullptr};
    TaskScheduler *m_taskScheduler;

    friend class detail::FibtexOps;
};

enum class FibtexLockBehavior {
    Traditional,  // lock(): park when contended
    Spin,         // lock_spin(): spin a while, then park
    SpinInfinite, // lock_spin_infinite(): spin until acquired
};

// Adapts a Fibtex to std::lock_guard / std::unique_lock with a chosen lock
// behaviour.
class LockWrapper {
public:
    LockWrapper(Fibtex &mutex, FibtexLockBehavior behavior, bool pinToThread = false,
                unsigned spinIterations = 1000)
        : m_mutex(mutex), m_behavior(behavior), m_pinToThread(pinToThread), m_spinIterations(spinIterations) {
    }
    // Today's lineage form: lock() is Fibtex::lock(pinToCurrentThread).
    explicit LockWrapper(Fibtex &mutex, bool pinToCurrentThread = false)
        : LockWrapper(mutex, FibtexLockBehavior::Traditional, pinToCurrentThread) {}

    void lock() {
        // Not a switch: the lineage's warning set (-Wswitch-default) wants a
        // default, which would hide a behaviour added later from -Wswitch.
        if (m_behavior == FibtexLockBehavior::Spin) {
            m_mutex.lock_spin(m_pinToThread, m_spinIterations);
        } else if (m_behavior == FibtexLockBehavior::SpinInfinite) {
            m_mutex.lock_spin_infinite(m_pinToThread);
        } else {
            m_mutex.lock(m_pinToThread);
        }
    }
    bool try_lock() { return m_mutex.try_lock(); }
    void unlock() { m_mutex.unlock(); }

private:
    Fibtex &m_mutex;
    FibtexLockBehavior m_behavior;
    bool m_pinToThread;
    unsigned m_spinIterations;
};

} // namespace ftl
