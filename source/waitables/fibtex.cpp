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

// Fairness. An unlock wakes a parked waiter without handing it the lock, and
// a spinning waiter takes it only at a look that finds it free: against a
// holder that relocks at once, with sections much longer than the moment
// between two, a waiter could wait for milliseconds (a task waiting for one
// lock beside a task that relocked it in 2 us sections: a median of 13 ms,
// up to 150 ms). So a spinning waiter that has waited kFairNs asks for the
// lock: it links a node of its own in the bucket, marked as spinning, which
// sends the holder's unlocks to UnlockSlow. The unlock then takes the lock
// back at once, on the waiter's behalf, and hands it over: the holder's next
// lock finds it taken and waits in turn. Only a waiter that runs is handed
// the lock: one parked is woken without it (a worker could otherwise spin on
// the lock while the fiber that holds it waits in that worker's queue), and
// asks at its first look that fails. A bound on how long a lock may pass a
// waiter by, not a cost of this host: at most one hand-off in kFairNs, each
// costing the holder one crossing of the lock's line.
constexpr std::uint64_t kFairNs = 40000;
// A waiter that asked is handed the lock only while it has shown in the last
// kFairBeatNs that it runs: it renews its beat every 2^kFairLevel pauses
// (under 2 us even where a pause is 140 cycles), and a thread the OS
// preempted stays off its core for milliseconds. Handed to such a waiter,
// the lock would sit taken until the OS ran it again: with more workers than
// cores (8 on 2) and waiters that spin forever, a lock convoy made a test 30
// times slower.
// Where the waiter's own beats come further apart (an emulator, a sanitizer),
// the bound is 4 of its gaps, up to kFairBeatMaxNs (a gap that spans a
// preemption is milliseconds long, and must not make the next one look
// fresh for as long).
constexpr std::uint64_t kFairBeatNs = 5000;
constexpr std::uint64_t kFairBeatMaxNs = 200000;

bool BeatFresh(WaitNode const &node) {
    std::uint64_t const gap = node.BeatGap.load(std::memory_order_relaxed);
    std::uint64_t bound = gap * 4 > kFairBeatNs ? gap * 4 : kFairBeatNs;
    bound = bound < kFairBeatMaxNs ? bound : kFairBeatMaxNs;
    return NowNs() - node.Beat.load(std::memory_order_relaxed) < bound;
}
// A waiter that asked looks for the hand-off this many pauses apart (2^
// kFairLevel).
constexpr unsigned kFairLevel = 4;
constexpr unsigned kFairPauses = 1u << kFairLevel;

// Whether waiters on a Fibtex of `taskScheduler` ask for hand-offs (a
// Fibtex with no scheduler: always).
bool HandOffOn(TaskScheduler *taskScheduler) {
    Scheduler const *scheduler = SchedulerOfFibtex(taskScheduler);
    return scheduler == nullptr || scheduler->Switches().LockHandOff;
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

// Spinning backs off exponentially, up to 2^kMaxBackoffLevel pauses between
// looks: a waiter that looks at the lock's cache line all the time takes it
// away from the holder's core, and every hand-off then crosses the cores.
// When cross-core hand-offs are slow, a move costs more, and looking at most
// every 256 pauses instead of 64 made W5 about 14% faster (no change when
// they are fast).
constexpr unsigned kMaxBackoffLevel = 8;
// A hot lock: its holder took it again, more than once, while a waiter
// waited (it unlocks and relocks at once, section after section). A waiter
// that looks catches the moment between two sections about two looks in five
// (the holder's core answers the look between its two atomic operations),
// so there the number of looks, not the length of the sections, sets how
// often the lock and its data cross the cores. After such a wait the next
// waiter starts one level higher, up to 2^kMaxHotBackoffLevel pauses (about
// 25 us) between looks: W5 with 2 long tasks went from 1.05-1.41 times its
// 1-worker time to 1.01-1.05.
constexpr unsigned kMaxHotBackoffLevel = 10;
// Fibtex::kLockSpinAttempts, the looks lock() makes before it parks (parking
// costs two switches and a process-wide barrier, see the top of the file).
// From level 0, 24 looks pause 4,351 times in all, close to the 3,775 of 64 looks
// under a cap of 64 pauses: about 0.1 ms at 25 ns a pause (6,144 at most
// from a start at kMaxBackoffLevel, 24,576 from one at kMaxHotBackoffLevel).
// A hot lock's holder may stop relocking at any moment (its task ends, its
// worker goes on to other work), and the lock then sits free until the
// waiter's next look, up to 1,024 pauses later. W5 with tasks of 20 sections
// at 2 workers: a thief took one task, held the lock for its 20 sections and
// left, and the worker it took the lock from waited out its rare looks with
// the lock free, steal after steal: 1.38-1.48 times the 1-worker time. So a
// wait that starts above kPeekLevel first peeks kPeeks times,
// 2^kPeekLevel pauses apart, and takes the lock at a peek that finds it free
// with no acquisition since the one before: the holder has left. A holder
// still at work has relocked in between, and keeps the lock. Peeks 16
// pauses apart took W5 with 10-, 20- and 50-section tasks to 1.02-1.09
// times the 1-worker time (32 pauses: 1.15-1.36; W5's own 100-section
// tasks: 1.03 either way).
constexpr unsigned kPeekLevel = 4;
constexpr unsigned kPeeks = 3;

// A holder that leaves a hot lock (its task ends, and its worker has no task
// of its own left) leaves it free until the waiter's next rare look, up to
// 1,024 pauses later. Between looks from 2^kWatchLevel pauses apart, the
// waiter also reads every worker's count of searches, each kWatchPauses
// pauses: a worker that ran out of work of its own (it goes to steal, and
// then perhaps idle) may be the holder, gone, and the waiter looks at once
// (once an interval: a search elsewhere costs the holder at most one more
// look). The counts sit in 128-byte blocks of their own (a read brings the
// line's pair too), written by their workers only then, so reading them
// costs a holder that runs its own tasks nothing. W5 at 2 workers: the
// thief steals a task, takes the lock between two of the other worker's
// sections, runs its task and goes idle, and the other worker's fiber waited
// out its look with the lock free, again and again: 1.15 times the 1-worker
// time; 1.03 with the watch of idle starts (W5s: 1.14 and 1.08). A thief
// whose stolen batch runs out steals the next one with the lock free (a
// compare-exchange on the victim's deque per task): on the Intel host W5s at
// 2 workers read 1.058-1.071 times its 1-worker time watching idle starts
// only, and 1.031-1.040 watching steals too (two runs of 16 rounds each).
constexpr unsigned kWatchLevel = 7;
constexpr unsigned kWatchPauses = 32;
static_assert((1u << kWatchLevel) % kWatchPauses == 0, "a watched interval is whole watches");

// Patience. Two workers that each run tasks of many sections on one lock
// (W5) take it from each other at their looks, between two of the other's
// sections: each crossing moves the lock and its data to the other core and
// stalls the worker it was taken from mid-task. Tasks of 20 sections (W5s)
// at 2 workers crossed 400-540 times a million sections. So a waiter whose
// own worker's latest run on this lock was at least kPatientRun
// acquisitions in a row, at a look that finds the lock free but taken since
// its previous look (the holder is between two sections, and relocks), lets
// it be, for up to kPatienceNs from the first chance it let go: the
// holder's run usually ends first (its task ends, or its worker steals: the
// watch above). It takes the lock at a look that finds it free and not
// taken since the one before (the holder stopped), at a watched look, and
// at any look once the time is over. Such a look is not one of lock_spin's
// attempts, and a waiter that has parked once is not patient again:
// counted, the attempts ran out during the patience and waiters parked, and
// beside a task that relocked for 200 ms, a task that relocked too waited
// up to 3-31 ms for one lock (under 2 ms uncounted). W5s then crossed
// 94-126 times a million sections (W5's 100-section tasks: 330 -> 70), and
// with patience off its 2-worker time read 1.027 times that with it on
// (median of 12 interleaved --features runs; the control column 0.995; W5
// 1.014 against 1.000). A waiter that takes the lock once and leaves (a
// queue's consumer) is never patient: with every waiter patient, a task
// that locked once between 1 us spells of other work got the lock 550-770
// times in 200 ms instead of 8,400-11,900 beside a task that relocked all
// along.
constexpr std::uint32_t kPatientRun = 8;
constexpr std::uint64_t kPatienceNs = 150000;
// A bound that needs no clock: looks 2^kMaxBackoffLevel pauses apart (6 us
// here) come to about 25 in kPatienceNs; with 1-cycle pauses (arm64's
// yield) to some 1,500, and there this ends the patience first, at about
// 100 us.
constexpr unsigned kMaxPatientLooks = 1024;

// Acquisitions made at a look the watch brought forward (the tests' window
// on the mechanism).
std::atomic<std::uint64_t> g_watchedLookAcquisitions{0};
// Looks at which a patient waiter found the lock free and let it be (the
// tests' window on patience).
std::atomic<std::uint64_t> g_patientLooks{0};

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

// The scheduler whose workers a waiter on a Fibtex of `taskScheduler`
// watches, or nullptr: none, a single worker, or the watch switched off.
detail::Scheduler const *SearchesWatched(TaskScheduler *taskScheduler) {
    detail::Scheduler const *scheduler = detail::SchedulerOfFibtex(taskScheduler);
    if (scheduler == nullptr || scheduler->NumWorkers() < 2 || !scheduler->Switches().LockWatchesIdle) {
        return nullptr;
    }
    return scheduler;
}

// Pauses `pauses` times, reading the workers' searches every kWatchPauses;
// returns early, with the pauses made, when they differ from `seen` (which
// then takes the new sum).
unsigned PauseUntilSearch(unsigned pauses, detail::Scheduler const &scheduler, std::uint32_t &seen) {
    unsigned paused = 0;
    while (paused < pauses) {
        Pause(kWatchPauses);
        paused += kWatchPauses;
        std::uint32_t const now = scheduler.Searches();
        if (now != seen) {
            seen = now;
            break;
        }
    }
    return paused;
}

} // namespace

std::uint64_t detail::FibtexOps::WatchedLookAcquisitions() {
    return g_watchedLookAcquisitions.load(std::memory_order_relaxed);
}

std::uint64_t detail::FibtexOps::PatientLooks() {
    return g_patientLooks.load(std::memory_order_relaxed);
}

std::uint32_t detail::FibtexOps::PatientRun() {
    return kPatientRun;
}

unsigned detail::FibtexOps::MaxBackoffLevel() {
    return kMaxBackoffLevel;
}

unsigned detail::FibtexOps::MaxHotBackoffLevel() {
    return kMaxHotBackoffLevel;
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
// first saved a quarter of a nanosecond at 1 worker (W5 4.82 ns a lock
// against 5.10) but made W5 at 2 workers bimodal (5.1-10.0 ns over 10 runs,
// median 6.7, against 5.2-5.8).
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

// A spinning waiter's request for a hand-off (see kFairNs): its node, linked
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
    // A sign that the waiter runs (see kFairBeatNs).
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
    // Contended. A holder that unlocks and relocks at once leaves the lock
    // free for a moment between its sections; a waiter that looks often
    // catches those moments and the lock (with the data it guards) crosses
    // the cores every few sections. So the backoff starts where the last
    // contended lock() found the lock free, one level lower: quick looks while
    // waits are short, rare ones while a holder keeps the lock busy. After a
    // wait on a hot lock (see kMaxHotBackoffLevel) it starts one level higher.
    unsigned const start = m_backoffStart.load(std::memory_order_relaxed);
    unsigned const maxLevel = start > kMaxBackoffLevel ? start : kMaxBackoffLevel;
    std::uint32_t const acquisitionsBefore = m_acquisitions.load(std::memory_order_relaxed);
    unsigned i = 0;
    if (start > kPeekLevel && PeeksOn()) {
        std::uint32_t seen = acquisitionsBefore;
        for (; i < iterations && i < kPeeks; ++i) {
            unsigned peekLevel = kPeekLevel;
            Backoff(peekLevel, kPeekLevel);
            std::uint32_t const now = m_acquisitions.load(std::memory_order_relaxed);
            if (now == seen && LookAndAcquire()) {
                AcquiredAfterWait(start, start, acquisitionsBefore);
                return true;
            }
            seen = now;
        }
    }
    unsigned level = start;
    detail::Scheduler const *const watched = SearchesWatched(m_taskScheduler);
    std::uint32_t searchesSeen = watched != nullptr ? watched->Searches() : 0;
    bool const patient = worker != nullptr && RunOnThisThread() >= kPatientRun && PatienceOn();
    Patience patience{m_acquisitions.load(std::memory_order_relaxed)};
    detail::FairRequest fair(this);
    // A patient waiter asks only once its patience is over.
    std::uint64_t const askAfter = !detail::HandOffOn(m_taskScheduler) ? ~std::uint64_t{0}
                                   : patient                           ? kPatienceNs + detail::kFairNs
                                                                       : detail::kFairNs;
    while (i < iterations) {
        unsigned const looked = level;
        unsigned const pauses = 1u << level;
        if (fair.Asked()) {
            // The hand-off comes at the holder's next unlock: watch for it
            // on the request's own line, looking at the lock as often as before.
            for (unsigned paused = 0; paused < pauses; paused += detail::kFairPauses) {
                Pause(detail::kFairPauses);
                fair.Beat();
                if (fair.Handed()) {
                    AcquiredAfterWait(looked, start, acquisitionsBefore);
                    return true;
                }
            }
        } else if (watched != nullptr && level >= kWatchLevel) {
            unsigned const paused = PauseUntilSearch(pauses, *watched, searchesSeen);
            if (paused < pauses) {
                if (LookAndAcquire()) {
                    g_watchedLookAcquisitions.fetch_add(1, std::memory_order_relaxed);
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
        if (patient && LetHolderRelock(patience)) {
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
        // Waited kFairNs: ask the holder's next unlock to hand the lock over.
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

bool Fibtex::LetHolderRelock(Patience &patience) const {
    // The count shares the lock's line: this look costs the holder no more
    // than the plain one.
    std::uint32_t const acquisitions = m_acquisitions.load(std::memory_order_relaxed);
    bool const relocked = acquisitions != patience.AcquisitionsSeen;
    patience.AcquisitionsSeen = acquisitions;
    if (!relocked || m_state.load(std::memory_order_relaxed) != kUnlocked) {
        return false; // the holder stopped, or the look would fail anyway
    }
    std::uint64_t const now = detail::NowNs();
    if (patience.Looks == 0) {
        patience.Since = now;
    }
    if (now - patience.Since >= kPatienceNs || patience.Looks >= kMaxPatientLooks) {
        return false;
    }
    ++patience.Looks;
    g_patientLooks.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool Fibtex::PeeksOn() const {
    detail::Scheduler const *scheduler = detail::SchedulerOfFibtex(m_taskScheduler);
    return scheduler == nullptr || scheduler->Switches().LockPeeks;
}

bool Fibtex::PatienceOn() const {
    detail::Scheduler const *scheduler = detail::SchedulerOfFibtex(m_taskScheduler);
    return scheduler == nullptr || scheduler->Switches().LockPatience;
}

void Fibtex::AcquiredAfterWait(unsigned looked, unsigned start, std::uint32_t acquisitionsBefore) {
    // Acquisitions by others since the wait began (ours is not counted yet):
    // the first may be the section we met. A peek that took the lock counts
    // as a look at the start level.
    bool const hot = m_acquisitions.load(std::memory_order_relaxed) - acquisitionsBefore >= 2;
    unsigned next = looked > 0 ? looked - 1 : 0;
    if (hot) {
        next = looked < kMaxHotBackoffLevel ? looked + 1 : kMaxHotBackoffLevel;
    }
    if (next != start) {
        m_backoffStart.store(static_cast<std::uint8_t>(next), std::memory_order_relaxed);
    }
}

void Fibtex::lock_spin_infinite(bool pinToThread) {
    (void)pinToThread; // never parks, so never resumes anywhere
    unsigned level = 0;
    // Never parks, so it may be handed the lock (see kFairNs); asked, it
    // looks often enough to see the hand-off at once.
    detail::FairRequest fair(this);
    bool const handOff = detail::HandOffOn(m_taskScheduler);
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
            } else if (now - since >= detail::kFairNs) {
                fair.Ask();
                level = 0;
            }
        }
        if (fair.Asked()) {
            fair.Beat();
        }
        Backoff(level, fair.Asked() ? detail::kFairLevel : kMaxBackoffLevel);
    }
}

__attribute__((noinline)) void Fibtex::LockSlow(bool pinToThread, unsigned iterations, std::uint64_t since) {
    // An unlock wakes one waiter and does not hand it the lock: another may
    // take it first. The woken waiter then spins as a new one would before
    // it parks again, so a lock that is busy but never held long costs it
    // no second park (and no second barrier); having waited kFairNs since
    // `since`, it asks for a hand-off at once.
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
