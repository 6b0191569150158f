// What the library needs of a Fibtex beyond its public face: the wait-list
// registration its lock uses, and what a ConditionVariable needs to give the
// lock up on a waiter's behalf.
#pragma once

#include "ftl/fibtex.h"

namespace ftl {
namespace detail {

struct WaitNode;

class FibtexOps {
public:
    // The registration of a fiber parked in Fibtex::lock: false when the
    // lock was released meanwhile (the fiber tries again at once).
    static bool Register(void *mutex, WaitNode *node);
    // Whether the calling task holds `mutex`.
    static bool HeldByCaller(Fibtex const &mutex);
    // Whether fibers or threads are parked on `mutex`.
    static bool HasWaiters(Fibtex const &mutex);
    // Whether a parker issues the OS's process-wide barrier (else the OS has
    // none, and every unlock issues a full barrier of its own).
    static bool ProcessBarrierUsed();
    static TaskScheduler *SchedulerOf(Fibtex const &mutex) { return mutex.m_taskScheduler; }
    // The parking table's bucket for `mutex` (the tests look for Fibtexes
    // that share one).
    static unsigned BucketIndex(Fibtex const &mutex);
    // Unlocks `mutex` for the task that holds it, from wherever the caller
    // runs (a waiter's post-switch step runs on another fiber). The holder
    // has stopped counting it among its locks first (Disown).
    static void ReleaseFor(Fibtex &mutex) { mutex.Release(); }
    // By the task that holds `mutex`, which a ReleaseFor will unlock on its
    // behalf: the task no longer counts it among the locks it holds (a task
    // must end holding none), though it stays the owner until the release.
    static void Disown(Fibtex const &mutex) {
        LockThreadState *const thread = CurrentLockThread();
        thread->Held -= HeldWeight(&mutex);
    }
    // Where the next contended lock_spin() starts its backoff (log2 of the
    // pauses before its first look); the highest a wait climbs to from a
    // start below it, and the highest a start goes after waits on a hot lock.
    static unsigned BackoffStart(Fibtex const &mutex) {
        return mutex.m_backoffStart.load(std::memory_order_relaxed);
    }
    static void SetBackoffStart(Fibtex &mutex, unsigned level) {
        mutex.m_backoffStart.store(static_cast<std::uint8_t>(level), std::memory_order_relaxed);
    }
    // Locks of `taskScheduler`'s Fibtexes taken at a look brought forward
    // because a worker ran out of work of its own (the LockWatchesIdle
    // mechanism, fibtex.cpp).
    static std::uint64_t WatchedLookAcquisitions(TaskScheduler *taskScheduler);
    // Looks at which a waiter on one of them found the lock free and let its
    // holder relock it (the LockPatience mechanism), and the run of
    // acquisitions in a row that makes a worker's waits patient.
    static std::uint64_t PatientLooks(TaskScheduler *taskScheduler);
    static std::uint32_t PatientRun();
    static unsigned MaxBackoffLevel();
    static unsigned MaxHotBackoffLevel();
};

} // namespace detail
} // namespace ftl
