// Fibtex: Drepper's three-state mutex ("Futexes Are Tricky", mutex 2), with a
// fiber wait list in place of the futex.
//
//   lock:   CAS 0 -> 1; else loop { exchange(2); if it was 0 we own it;
//           else park until an unlock, registering only while the state is 2 }
//   unlock: CAS 1 -> 0 (nobody parked); else, under the list lock, store 0
//           and wake one parked fiber.
// The slow unlock releases the state while holding the list lock, so a
// Fibtex destroyed right after its last unlock (the destructor takes that
// lock) is never touched by an unlocker still on its way out.
#include "ftl/fibtex.h"

#include "ftl/assert.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"
#include "waitables/fibtex_ops.h"

namespace ftl {

namespace detail {

bool FibtexOps::Register(void *mutexPtr, WaitNode *node) {
    auto *mutex = static_cast<Fibtex *>(mutexPtr);
    WaitListGuard guard(mutex->m_waiters);
    if (mutex->m_state.load(std::memory_order_relaxed) != Fibtex::kContended) {
        return false; // unlocked while we were switching away: try again
    }
    Append(mutex->m_waiters, node);
    return true;
}

bool FibtexOps::HeldByCaller(Fibtex const &mutex) {
    return mutex.m_owner.load(std::memory_order_relaxed) == CurrentTaskIdentity();
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
// Looks lock() makes before it parks (parking costs two switches). From
// level 0, 24 looks pause 4,351 times in all, close to the 3,775 of 64 looks
// under a cap of 64 pauses: about 0.1 ms at 25 ns a pause (6,144 at most
// from a start at kMaxBackoffLevel, 24,576 from one at kMaxHotBackoffLevel).
constexpr unsigned kLockSpinAttempts = 24;
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

void Backoff(unsigned &level, unsigned maxLevel) {
    for (unsigned i = 0; i < (1u << level); ++i) {
        detail::CpuRelax();
    }
    if (level < maxLevel) {
        ++level;
    }
}

} // namespace

unsigned detail::FibtexOps::MaxBackoffLevel() {
    return kMaxBackoffLevel;
}

unsigned detail::FibtexOps::MaxHotBackoffLevel() {
    return kMaxHotBackoffLevel;
}

Fibtex::Fibtex(TaskScheduler *taskScheduler, unsigned fiberSlots) : m_taskScheduler(taskScheduler) {
    (void)fiberSlots; // waiter lists have no fixed capacity
}

Fibtex::~Fibtex() {
    detail::WaitListGuard guard(m_waiters);
    if (m_waiters.Head != nullptr) {
        FTL_FATAL("a Fibtex was destroyed while fibers wait for it");
    }
    if (m_state.load(std::memory_order_acquire) != kUnlocked) {
        FTL_FATAL("a Fibtex was destroyed while locked");
    }
}

inline void Fibtex::SetOwner(void const *owner) {
    // A plain increment: only the new owner writes it, on a line it has just
    // written with its compare-exchange.
    m_acquisitions.store(m_acquisitions.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    m_owner.store(owner, std::memory_order_relaxed);
}

bool Fibtex::try_lock() {
    if (TryAcquire()) {
        SetOwner(detail::CurrentTaskIdentityNoSwitch());
        return true;
    }
    return false;
}

// lock, lock_spin, LockContended, lock_spin_infinite, try_lock and unlock
// read the owner identity inline: none of them switches fibers. LockSlow
// parks, so it must not be inlined into them, and it reads the identity
// through the opaque call. The uncontended lock_spin (which lock jumps to)
// and unlock make no call.
// The look before the first compare-exchange stays: trying the exchange
// first saved a quarter of a nanosecond at 1 worker (W5 4.82 ns a lock
// against 5.10) but made W5 at 2 workers bimodal (5.1-10.0 ns over 10 runs,
// median 6.7, against 5.2-5.8).
void Fibtex::lock(bool pinToThread) {
    lock_spin(pinToThread, kLockSpinAttempts);
}

void Fibtex::lock_spin(bool pinToThread, unsigned iterations) {
    if (m_state.load(std::memory_order_relaxed) == kUnlocked && TryAcquire()) {
        SetOwner(detail::CurrentTaskIdentityNoSwitch());
        return;
    }
    LockContended(pinToThread, iterations);
}

__attribute__((noinline)) void Fibtex::LockContended(bool pinToThread, unsigned iterations) {
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
            if (now == seen && m_state.load(std::memory_order_relaxed) == kUnlocked && TryAcquire()) {
                AcquiredAfterWait(start, start, acquisitionsBefore);
                return;
            }
            seen = now;
        }
    }
    unsigned level = start;
    for (; i < iterations; ++i) {
        unsigned const looked = level;
        Backoff(level, maxLevel);
        if (m_state.load(std::memory_order_relaxed) == kUnlocked && TryAcquire()) {
            AcquiredAfterWait(looked, start, acquisitionsBefore);
            return;
        }
    }
    LockSlow(pinToThread);
}

bool Fibtex::PeeksOn() const {
    detail::Scheduler const *scheduler = detail::Scheduler::Of(m_taskScheduler);
    return scheduler == nullptr || scheduler->Switches().LockPeeks;
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
    SetOwner(detail::CurrentTaskIdentityNoSwitch());
}

void Fibtex::lock_spin_infinite(bool pinToThread) {
    (void)pinToThread; // never parks, so never resumes anywhere
    unsigned level = 0;
    for (;;) {
        if (m_state.load(std::memory_order_relaxed) == kUnlocked && TryAcquire()) {
            SetOwner(detail::CurrentTaskIdentityNoSwitch());
            return;
        }
        Backoff(level, kMaxBackoffLevel);
    }
}

__attribute__((noinline)) void Fibtex::LockSlow(bool pinToThread) {
    std::uint32_t state = m_state.exchange(kContended, std::memory_order_acquire);
    while (state != kUnlocked) {
        detail::Scheduler *scheduler = detail::Scheduler::Of(m_taskScheduler);
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
        state = m_state.exchange(kContended, std::memory_order_acquire);
    }
    SetOwner(detail::CurrentTaskIdentity());
}

void Fibtex::unlock() {
    void const *const self = detail::CurrentTaskIdentityNoSwitch();
    void const *const owner = m_owner.load(std::memory_order_relaxed);
    if (owner != self) {
        if (owner == nullptr) {
            FTL_FATAL("Fibtex::unlock on a Fibtex that is not locked (unlocked twice?)");
        }
        FTL_FATAL("Fibtex::unlock by a fiber that does not hold the lock");
    }
    Release();
}

void Fibtex::Release() {
    m_owner.store(nullptr, std::memory_order_relaxed);
    std::uint32_t expected = kLocked;
    if (m_state.compare_exchange_strong(expected, kUnlocked, std::memory_order_release,
                                        std::memory_order_relaxed)) {
        return;
    }
    ReleaseContended();
}

__attribute__((noinline)) void Fibtex::ReleaseContended() {
    detail::WaitNode *node = nullptr;
    // Read before the state is released: after that `this` may be destroyed.
    TaskScheduler *const taskScheduler = m_taskScheduler;
    {
        detail::WaitListGuard guard(m_waiters);
        m_state.store(kUnlocked, std::memory_order_release);
        node = detail::PopFront(m_waiters);
    }
    if (node != nullptr) {
        // The node outlives this: its fiber (or thread) waits until woken.
        detail::WakeWaiter(detail::Scheduler::Of(taskScheduler), node);
    }
}

} // namespace ftl
