// Fibtex: a word that is 0 (unlocked) or 1 (locked), and a parking table
// outside it for the waiters.
//
//   lock:   look, CAS 0 -> 1; else spin with backoff (looks and CASes); else
//           park: link a node in the table's bucket for this address, count
//           it there, barrier, and stay parked only while the word still
//           reads 1 (an unlock from then on sees the count).
//   unlock: store 0, then read the bucket's count (compiler barrier only in
//           between); when it is not 0, wake the first waiter linked for
//           this address, which tries again.
//
// The unlock is a plain store: one atomic read-modify-write per lock/unlock
// pair, the lock's. What keeps a wake-up from being lost is the pair of a
// process-wide barrier on the parking side and the compiler barrier on the
// unlocking one (platform.h, ProcessBarrier): either the unlocker's store is
// visible to the parker's re-read, or the unlocker's read of the count comes
// after the barrier and sees the parker. Where the OS has no such barrier
// (Windows, see platform.h), every unlock takes the slow path, which puts a
// seq_cst fence between the store and a second read of the count, and the
// parker fences between its count and its re-read: the classic pair of
// fences. source/models/fibtex.pml checks both against store buffers.
//
// The waiters live in the table, not in the Fibtex, because the unlocker
// reads the count after its store released the lock: by then the next owner
// may have unlocked and destroyed the Fibtex, so the unlocker touches only
// the table (static memory) from then on. The price of sharing buckets: while
// waiters of one Fibtex are parked, every unlock of the other Fibtexes that
// hash to its bucket (1 in 256) takes the slow path: it walks the bucket's
// list under its lock, finds nobody of its own and goes on.
//
// The uncontended lock (its first look and compare-exchange, and the owner
// and run bookkeeping) and the unlock, all but UnlockSlow, are inline in
// ftl/fibtex.h: the calls cost more than the rest of the path. They find the
// calling thread's state (ftl/detail/lock_thread.h) from its thread pointer,
// read anew each time, never from a thread_local address the compiler could
// keep across a fiber switch in the caller's code; the bucket's count, which
// every unlock reads, is in the header's g_parkingCounts, the lists here.
//
// The table and g_processBarrier have constant initializers (no dynamic
// initialization), so they are ready before any constructor of a user's
// static Fibtex runs.
#include "ftl/fibtex.h"

#include "ftl/assert.h"
#include "platform/platform.h"
#include "policy/lock_wait.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"
#include "waitables/fibtex_ops.h"

#include <cinttypes>
#include <cstdint>

namespace ftl {

namespace detail {

namespace {

// The scheduler behind a Fibtex's TaskScheduler, or nullptr: one not
// initialized, or none (a Fibtex made with a null TaskScheduler serves
// threads, which block when it is contended).
Scheduler *SchedulerOfFibtex(TaskScheduler *taskScheduler) {
    return taskScheduler != nullptr ? Scheduler::Of(taskScheduler) : nullptr;
}

// What the Fibtexes of that scheduler share, or nullptr.
FibtexContext *ContextOf(TaskScheduler *taskScheduler) {
    Scheduler *scheduler = SchedulerOfFibtex(taskScheduler);
    return scheduler != nullptr ? &scheduler->Fibtexes() : nullptr;
}

// The switches of a Fibtex's mechanisms: every one on without a scheduler.
FibtexSwitches SwitchesOf(TaskScheduler *taskScheduler) {
    FibtexContext const *context = ContextOf(taskScheduler);
    return context != nullptr ? context->Switches() : FibtexSwitches{};
}

// A bucket's waiters, a line apart from its count (ftl/detail/lock_thread.h)
// and from the other buckets'.
struct alignas(64) ParkingWaiters {
    WaitList Waiters;
};
ParkingWaiters g_parkingWaiters[1u << kParkingBucketBits];

// A bucket: the count of nodes linked there, of any Fibtex (an unlock reads
// it after its store), and the list of them.
struct ParkingBucket {
    std::atomic<std::uint32_t> &Parked;
    WaitList &Waiters;
};

ParkingBucket BucketOf(void const *mutex) {
    unsigned const index = ParkingBucketOf(mutex);
    return {g_parkingCounts[index].Parked, g_parkingWaiters[index].Waiters};
}

// Whether the parker issues ProcessBarrier (the OS has one), decided once,
// before the first Fibtex exists. Where it has none, every bucket's count
// carries kFenceBit for good: each unlock then finds a count that is not 0
// and goes to UnlockSlow, which issues the full barrier the plain store
// lacked before it reads the count again. The fast path thus reads no flag.
std::atomic<bool> g_processBarrier{false};
constexpr std::uint32_t kFenceBit = 1u << 31;

void DecideUnlock() {
    static bool const decided = [] {
        bool const barrier = EnableProcessBarrier();
        if (!barrier) {
            for (ParkingCount &count : g_parkingCounts) {
                count.Parked.fetch_or(kFenceBit, std::memory_order_relaxed);
            }
        }
        g_processBarrier.store(barrier, std::memory_order_relaxed);
        return true;
    }();
    (void)decided;
}

// The first node linked in `bucket` for `mutex` of a waiter that spins (it
// asked for a hand-off) or is parked, or nullptr. Requires the bucket's
// lock.
WaitNode *FirstWaiterOf(ParkingBucket const &bucket, void const *mutex, bool spinning) {
    WaitNode *node = bucket.Waiters.Head;
    while (node != nullptr && (node->Object != mutex || node->Spinning != spinning)) {
        node = node->Next;
    }
    return node;
}

// Whether a waiter that asked for a hand-off runs (LockHandOff).
bool BeatFresh(WaitNode const &node) {
    return LockHandOff::BeatFresh(NowNs(), node.Beat.load(std::memory_order_relaxed),
                                  node.BeatGap.load(std::memory_order_relaxed));
}

} // namespace

// Every unlock reads its bucket's count: constant-initialized, like the rest
// of the table.
ParkingCount g_parkingCounts[1u << kParkingBucketBits];

} // namespace detail

// An unlock that found its bucket's count not 0, after its store of 0: takes
// the first node linked for `mutex` off the bucket and readies its waiter,
// which then tries again. Touches only the table and the node:
// `mutex` may be gone (see the top of the file), and then its address may
// even name a newer Fibtex, whose waiter this wakes for nothing: it finds the
// lock taken and parks again.
__attribute__((noinline)) void Fibtex::UnlockSlow(void const *mutex) {
    using namespace detail;
    ParkingBucket const bucket = BucketOf(mutex);
    if (!g_processBarrier.load(std::memory_order_relaxed)) {
        // The store of 0 before the read of the count, against the parker's
        // increment and fence before its read of the lock.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if ((bucket.Parked.load(std::memory_order_relaxed) & ~kFenceBit) == 0) {
            return;
        }
    }
    WaitNode *node = nullptr;
    Scheduler *scheduler = nullptr;
    {
        WaitListGuard guard(bucket.Waiters);
        // A waiter that spins and asked for the lock is handed it (a waiter
        // linked here keeps a Fibtex alive at `mutex`: one with waiters may
        // not be destroyed, so the lock word may be touched). A parked one
        // is woken without it, as the lock cannot wait for its fiber to be
        // run (a worker may spin on the lock meanwhile): it asks as soon as
        // it spins again.
        if (WaitNode *spinner = FirstWaiterOf(bucket, mutex, true);
            spinner != nullptr && BeatFresh(*spinner) &&
            static_cast<Fibtex *>(const_cast<void *>(mutex))->TryAcquire()) {
            Remove(bucket.Waiters, spinner);
            bucket.Parked.fetch_sub(1, std::memory_order_relaxed);
            spinner->Handed.store(true, std::memory_order_release); // the node may be gone after this
            return;
        }
        node = FirstWaiterOf(bucket, mutex, false);
        if (node == nullptr) {
            return;
        }
        Remove(bucket.Waiters, node);
        bucket.Parked.fetch_sub(1, std::memory_order_relaxed);
        if (!node->Registered) {
            // Its registration is still on its way and will find the node
            // unlinked: it readies the waiter itself (FibtexOps::Register).
            return;
        }
        // The Fibtex the node waits for lives: a Fibtex with waiters may not
        // be destroyed. Its scheduler, not the caller's, readies the fiber.
        scheduler = SchedulerOfFibtex(FibtexOps::SchedulerOf(*static_cast<Fibtex const *>(node->Object)));
    }
    // The node outlives this: its fiber (or thread) waits until woken.
    WakeWaiter(scheduler, node, Readier::TaskThatGoesOn);
}

namespace detail {

bool FibtexOps::Register(void *mutexPtr, WaitNode *node) {
    auto *mutex = static_cast<Fibtex *>(mutexPtr);
    ParkingBucket const bucket = BucketOf(mutex);
    {
        WaitListGuard guard(bucket.Waiters);
        node->Registered = false;
        Append(bucket.Waiters, node);
        bucket.Parked.fetch_add(1, std::memory_order_relaxed);
    }
    // The count before the re-read of the lock, against the unlock's store of
    // 0 before its read of the count: a barrier on every thread of the
    // process, which orders the unlocker's pair too; where the OS has none,
    // a fence here and one in UnlockSlow.
    if (g_processBarrier.load(std::memory_order_relaxed)) {
        if (!ProcessBarrier()) {
            // Unlocks are plain stores by now: without the barrier a wake-up
            // could be lost, silently.
            FTL_FATAL("the OS refused the process-wide memory barrier (membarrier) that parking on a "
                      "Fibtex needs, after it had accepted its registration");
        }
    } else {
        std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    // The node is linked but not registered: no unlock readies this fiber
    // until the block below, so the Fibtex, which it still waits for, lives.
    bool const released = mutex->m_state.load(std::memory_order_relaxed) == Fibtex::kUnlocked;
    WaitListGuard guard(bucket.Waiters);
    if (!node->Linked) {
        return false; // an unlock took the node meanwhile: try again now
    }
    if (released) {
        Remove(bucket.Waiters, node);
        bucket.Parked.fetch_sub(1, std::memory_order_relaxed);
        return false; // unlocked before the count was seen: try again now
    }
    node->Registered = true;
    return true;
}

bool FibtexOps::HeldByCaller(Fibtex const &mutex) {
    return mutex.m_owner.load(std::memory_order_relaxed) == CurrentTaskIdentity();
}

bool FibtexOps::HasWaiters(Fibtex const &mutex) {
    ParkingBucket const bucket = BucketOf(&mutex);
    WaitListGuard guard(bucket.Waiters);
    return FirstWaiterOf(bucket, &mutex, false) != nullptr || FirstWaiterOf(bucket, &mutex, true) != nullptr;
}

unsigned FibtexOps::BucketIndex(Fibtex const &mutex) {
    return ParkingBucketOf(&mutex);
}

bool FibtexOps::ProcessBarrierUsed() {
    return g_processBarrier.load(std::memory_order_relaxed);
}

} // namespace detail

namespace {

using detail::LockBackoff;
using detail::LockHandOff;
using detail::LockPatience;

// A run of pauses, ended so that the look after it cannot run ahead of it
// (detail::EndSpin). Every look at the lock follows one, and so does every
// read of the search counts in PauseUntilSearch.
void Pause(unsigned pauses) {
    for (unsigned i = 0; i < pauses; ++i) {
        detail::CpuRelax();
    }
    detail::EndSpin();
}

void Backoff(unsigned &level, unsigned maxLevel) {
    Pause(1u << level);
    if (level < maxLevel) {
        ++level;
    }
}

// Pauses `pauses` times, reading the workers' counts of running out of
// work every LockBackoff::kWatchPauses; returns early, with the pauses made, when they
// differ from `seen` (which then takes the new sum).
unsigned PauseUntilSearch(unsigned pauses, detail::FibtexContext const &context, std::uint32_t &seen) {
    unsigned paused = 0;
    while (paused < pauses) {
        Pause(LockBackoff::kWatchPauses);
        paused += LockBackoff::kWatchPauses;
        std::uint32_t const now = context.RanOutCount();
        if (now != seen) {
            seen = now;
            break;
        }
    }
    return paused;
}

} // namespace

std::uint64_t detail::FibtexOps::WatchedLookAcquisitions(TaskScheduler *taskScheduler) {
    return ContextOf(taskScheduler)->WatchedAcquisitions();
}

std::uint64_t detail::FibtexOps::PatientLooks(TaskScheduler *taskScheduler) {
    return ContextOf(taskScheduler)->PatientLooks();
}

std::uint32_t detail::FibtexOps::PatientRun() {
    return LockPatience::kPatientRun;
}

unsigned detail::FibtexOps::MaxBackoffLevel() {
    return LockBackoff::kMaxLevel;
}

unsigned detail::FibtexOps::MaxHotBackoffLevel() {
    return LockBackoff::kMaxHotLevel;
}

Fibtex::Fibtex(TaskScheduler *taskScheduler, unsigned fiberSlots) : m_taskScheduler(taskScheduler) {
    (void)fiberSlots; // waiter lists have no fixed capacity
    // Before any unlock: every unlock and park of this Fibtex happens after
    // its construction, so they all see the same choice.
    detail::DecideUnlock();
}

Fibtex::~Fibtex() {
    if (detail::FibtexOps::HasWaiters(*this)) {
        FTL_FATAL("a Fibtex was destroyed while fibers wait for it");
    }
    if (m_state.load(std::memory_order_acquire) != kUnlocked) {
        FTL_FATAL("a Fibtex was destroyed while locked");
    }
}

bool Fibtex::try_lock() {
    if (TryAcquire()) {
        NoteAcquired(detail::CurrentLockThread());
        return true;
    }
    return false;
}

// lock_spin and unlock (in the header), LockContended, lock_spin_infinite and
// try_lock make no switch between their acquisition and its bookkeeping;
// LockSlow parks, and the thread it resumes on is the one
// CurrentLockThread() reads (it reads the thread pointer anew, or calls).
// The look before the first compare-exchange stays: trying the exchange
// first made two workers on one lock slower (docs/design.adoc, "Fibtex").
__attribute__((noinline)) void Fibtex::LockContended(bool pinToThread, unsigned iterations) {
    CheckNotHeldByCaller();
    std::uint64_t since = 0;
    if (SpinAcquire(iterations, detail::CurrentWorkerNoSwitch(), since)) {
        NoteAcquired(detail::CurrentLockThread());
        return;
    }
    LockSlow(pinToThread, iterations, since);
}

namespace detail {

// A spinning waiter's request for a hand-off (LockHandOff): its node, linked
// in the bucket and counted there, sends the holder's unlocks to UnlockSlow.
// No barrier: a waiter that spins cannot miss a wake-up, it looks on.
class FairRequest {
public:
    explicit FairRequest(Fibtex const *mutex) : m_mutex(mutex) {
        m_node.Kind = WaitKind::Fibtex;
        m_node.Object = mutex;
        m_node.Spinning = true;
    }
    ~FairRequest() { Withdraw(); }
    FairRequest(FairRequest const &) = delete;
    FairRequest &operator=(FairRequest const &) = delete;

    bool Asked() const { return m_asked; }
    void Ask() {
        Beat();
        ParkingBucket const bucket = BucketOf(m_mutex);
        WaitListGuard guard(bucket.Waiters);
        Append(bucket.Waiters, &m_node);
        bucket.Parked.fetch_add(1, std::memory_order_relaxed);
        m_asked = true;
    }
    // A sign that the waiter runs (LockHandOff::BeatFresh).
    void Beat() {
        std::uint64_t const now = NowNs();
        std::uint64_t const last = m_node.Beat.load(std::memory_order_relaxed);
        m_node.BeatGap.store(last != 0 ? now - last : 0, std::memory_order_relaxed);
        m_node.Beat.store(now, std::memory_order_relaxed);
    }
    // Whether an unlock handed the lock over (acquire: what its holders
    // did is visible).
    bool Handed() const { return m_asked && m_node.Handed.load(std::memory_order_acquire); }
    // Takes the request back; returns whether the lock was handed over
    // meanwhile (then the caller holds it).
    bool Withdraw() {
        if (!m_asked) {
            return false;
        }
        m_asked = false;
        ParkingBucket const bucket = BucketOf(m_mutex);
        {
            WaitListGuard guard(bucket.Waiters);
            if (m_node.Linked) {
                Remove(bucket.Waiters, &m_node);
                bucket.Parked.fetch_sub(1, std::memory_order_relaxed);
                return false;
            }
        }
        // Only a hand-off unlinks a spinning node, and it stores Handed
        // under the bucket's lock: it is set by now.
        return m_node.Handed.load(std::memory_order_acquire);
    }

private:
    Fibtex const *m_mutex;
    WaitNode m_node;
    bool m_asked = false;
};

} // namespace detail

bool Fibtex::SpinAcquire(unsigned iterations, detail::Worker const *worker, std::uint64_t &since) {
    // The backoff starts where the last contended lock() left it
    // (LockBackoff::NextStart).
    unsigned const start = m_backoffStart.load(std::memory_order_relaxed);
    unsigned const maxLevel = LockBackoff::MaxLevelFrom(start);
    std::uint32_t const acquisitionsBefore = m_acquisitions.load(std::memory_order_relaxed);
    unsigned i = 0;
    detail::FibtexContext *const context = detail::ContextOf(m_taskScheduler);
    detail::FibtexSwitches const switches =
        context != nullptr ? context->Switches() : detail::FibtexSwitches{};
    if (start > LockBackoff::kPeekLevel && switches.Peeks) {
        // Peeks: a free lock with no acquisition since the peek before
        // means its holder has left.
        std::uint32_t seen = acquisitionsBefore;
        for (; i < iterations && i < LockBackoff::kPeeks; ++i) {
            Pause(1u << LockBackoff::kPeekLevel);
            std::uint32_t const now = m_acquisitions.load(std::memory_order_relaxed);
            if (now == seen && LookAndAcquire()) {
                AcquiredAfterWait(start, start, acquisitionsBefore);
                return true;
            }
            seen = now;
        }
    }
    unsigned level = start;
    detail::FibtexContext const *const watched = context != nullptr && context->Watched() ? context : nullptr;
    std::uint32_t searchesSeen = watched != nullptr ? watched->RanOutCount() : 0;
    bool const patient =
        worker != nullptr && RunOnThisThread() >= LockPatience::kPatientRun && switches.Patience;
    LockPatience patience(m_acquisitions.load(std::memory_order_relaxed));
    detail::FairRequest fair(this);
    // A patient waiter asks only once its patience is over.
    std::uint64_t const askAfter = !switches.HandOff ? ~std::uint64_t{0}
                                   : patient         ? LockPatience::kPatienceNs + LockHandOff::kFairNs
                                                     : LockHandOff::kFairNs;
    while (i < iterations) {
        unsigned const looked = level;
        unsigned const pauses = 1u << level;
        if (fair.Asked()) {
            // The hand-off comes at the holder's next unlock: watch for it
            // on the request's own line, looking at the lock as often as before.
            for (unsigned paused = 0; paused < pauses; paused += LockHandOff::kBeatPauses) {
                Pause(LockHandOff::kBeatPauses);
                fair.Beat();
                if (fair.Handed()) {
                    AcquiredAfterWait(looked, start, acquisitionsBefore);
                    return true;
                }
            }
        } else if (watched != nullptr && level >= LockBackoff::kWatchLevel) {
            unsigned const paused = PauseUntilSearch(pauses, *watched, searchesSeen);
            if (paused < pauses) {
                if (LookAndAcquire()) {
                    context->CountWatchedAcquisition();
                    AcquiredAfterWait(looked, start, acquisitionsBefore);
                    return true;
                }
                Pause(pauses - paused);
            }
        } else {
            Pause(pauses);
        }
        if (level < maxLevel) {
            ++level;
        }
        // A look that lets the lock be is not one of the attempts: patience
        // does not bring the park closer.
        if (patient && patience.LetsBe(m_acquisitions.load(std::memory_order_relaxed),
                                       m_state.load(std::memory_order_relaxed) == kUnlocked, detail::NowNs)) {
            if (context != nullptr) {
                context->CountPatientLook();
            }
            continue;
        }
        ++i;
        // Handed over, or taken at this look (then the request, if any, is
        // taken back as `fair` goes: a hand-off's compare-exchange failed
        // against ours).
        if (fair.Handed() || LookAndAcquire()) {
            AcquiredAfterWait(looked, start, acquisitionsBefore);
            return true;
        }
        // Waited long enough: ask the holder's next unlock to hand the lock over.
        if (!fair.Asked()) {
            std::uint64_t const now = detail::NowNs();
            if (since == 0) {
                since = now;
            } else if (now - since >= askAfter) {
                fair.Ask();
            }
        }
    }
    return fair.Withdraw();
}

void Fibtex::AcquiredAfterWait(unsigned looked, unsigned start, std::uint32_t acquisitionsBefore) {
    // Acquisitions by others since the wait began (ours is not counted yet):
    // the first may be the section we met. A peek that took the lock counts
    // as a look at the start level.
    bool const hot = m_acquisitions.load(std::memory_order_relaxed) - acquisitionsBefore >= 2;
    unsigned const next = LockBackoff::NextStart(looked, hot);
    if (next != start) {
        m_backoffStart.store(static_cast<std::uint8_t>(next), std::memory_order_relaxed);
    }
}

void Fibtex::lock_spin_infinite(bool pinToThread) {
    (void)pinToThread; // never parks, so never resumes anywhere
    unsigned level = 0;
    // Never parks, so it may be handed the lock (LockHandOff); asked, it
    // looks often enough to see the hand-off at once.
    detail::FairRequest fair(this);
    bool const handOff = detail::SwitchesOf(m_taskScheduler).HandOff;
    std::uint64_t since = 0;
    for (;;) {
        if (fair.Handed() || LookAndAcquire()) {
            NoteAcquired(detail::CurrentLockThread());
            return;
        }
        if (level == 0) {
            CheckNotHeldByCaller();
        }
        if (handOff && !fair.Asked()) {
            std::uint64_t const now = detail::NowNs();
            if (since == 0) {
                since = now;
            } else if (now - since >= LockHandOff::kFairNs) {
                fair.Ask();
                level = 0;
            }
        }
        if (fair.Asked()) {
            fair.Beat();
        }
        Backoff(level, fair.Asked() ? LockHandOff::kBeatLevel : LockBackoff::kMaxLevel);
    }
}

__attribute__((noinline)) void Fibtex::LockSlow(bool pinToThread, unsigned iterations, std::uint64_t since) {
    // An unlock wakes one waiter and does not hand it the lock: another may
    // take it first. The woken waiter then spins as a new one would before
    // it parks again, so a lock that is busy but never held long costs it
    // no second park (and no second barrier); having waited
    // LockHandOff::kFairNs since `since`, it asks for a hand-off at once.
    if (since == 0) {
        since = detail::NowNs();
    }
    for (;;) {
        detail::Scheduler *scheduler = detail::SchedulerOfFibtex(m_taskScheduler);
        detail::Worker *worker = scheduler != nullptr ? scheduler->CurrentWorkerOfThis() : nullptr;
        detail::WaitNode node;
        node.Kind = WaitKind::Fibtex;
        node.Object = this;
        if (worker != nullptr) {
            detail::Park(worker, node, pinToThread, &detail::FibtexOps::Register, this);
        } else {
            // A thread that is not a worker blocks until an unlock wakes it.
            detail::WaitOnThread(node, &detail::FibtexOps::Register, this);
        }
        // Woken without the lock: it asks for it at its first look that
        // fails, having waited since `since`.
        if (LookAndAcquire() || SpinAcquire(iterations, nullptr, since)) { // parked once: not patient again
            break;
        }
    }
    NoteAcquired(detail::CurrentLockThread());
}

// The owner is read after the lock was seen held. The caller's own last
// store to it, if it ever held the lock, was its unlock's nullptr (or its
// lock's identity, when it holds it still), and no earlier task with the
// caller's identity (the same fiber, or an inline loop's hand at the same
// address) still holds it: a task that ends holding a Fibtex is a fatal
// error. So an identity of its own read here is never stale.
void Fibtex::CheckNotHeldByCaller() const {
    if (m_owner.load(std::memory_order_relaxed) == detail::TaskIdentityOf(detail::CurrentLockThread())) {
        FTL_FATAL("Fibtex::lock by the task or thread that already holds it (a recursive lock): Fibtex "
                  "0x%" PRIxPTR,
                  reinterpret_cast<std::uintptr_t>(this));
    }
}

void Fibtex::UnlockMisuse() const {
    if (m_owner.load(std::memory_order_relaxed) == nullptr) {
        FTL_FATAL("Fibtex::unlock on a Fibtex that is not locked (unlocked twice?)");
    }
    FTL_FATAL("Fibtex::unlock by a task or thread that does not hold the lock");
}

std::uint32_t Fibtex::RunOnThisThread() const {
    detail::LockThreadState const *thread = detail::CurrentLockThread();
    return thread->RunLock == this ? thread->RunLast - thread->RunFirst + 1 : 0;
}

} // namespace ftl
