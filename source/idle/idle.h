// Idle workers: who searches for work, who is parked, and how a parked
// worker is woken. The protocol and its code live here together; the worker
// supplies hooks (is any work visible, should it stop idling) and never
// touches the bitmap, the searcher count or the futex words itself.
//
// A worker out of work becomes a searcher (if fewer than half the workers,
// or fewer than two, already search), spins a while looking for work (while such spins pay, for
// as long as its recent short gaps lasted, and while it sees work it holds
// back from), then parks on a futex word of its own. Parked workers are bits
// in a bitmap, so a waker finds one in O(1) (count trailing zeros) and claims
// it by clearing its bit; a claimed worker wakes as a searcher. A waker that
// sees a searcher wakes no one: the searcher finds the work, or re-checks
// after it announces itself parked. The last searcher to find work wakes one
// more parked worker if more work is visible: wake-ups spread as a chain while
// there is work to find, never as a herd, and a lone task starts without
// paying for a second futex wake.
//
// No lost wake-up (docs/design.adoc, invariant 5; source/models/park.pml):
//   parker: set own parked bit (seq_cst RMW); stop searching; fence; re-check
//           every queue; sleep only if all are empty.
//   waker:  publish the work; fence (seq_cst); if no searcher, claim a bit;
//           bump the claimed worker's futex word, then FUTEX_WAKE it.
// With seq_cst on both sides, either the waker sees the parker's bit (and
// wakes it) or the parker's re-check sees the work. The futex compares the
// word atomically with going to sleep, and the waker bumps it after claiming
// the bit, so a claim between the parker's check and its sleep is not lost.
#pragma once

#include "ftl/scheduler_options.h"
#include "platform/platform.h"
#include "policy/spin.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace ftl {
namespace detail {

constexpr unsigned kMaxWorkers = 256;

// Spin before parking: kSpinRounds looks at every queue, kSpinPauses pause
// instructions apart (roughly 10-50 us in all): long enough to catch a
// producer's next task without a futex wake, short enough that an idle
// scheduler parks at once (docs/design.adoc, "Idle workers").
constexpr unsigned kSpinRounds = 64;
constexpr unsigned kSpinPauses = 32;
class IdleState {
public:
    // limitSearchers: a worker becomes a searcher only while fewer than half
    // the workers (or fewer than two) search (a measurement switch can lift it); spinBeforePark:
    // look a while before parking; adaptiveSpin: only while spinning pays,
    // and for as long as its recent gaps, up to maxSpinNs (SpinPolicy).
    void Init(unsigned numWorkers, bool limitSearchers, bool spinBeforePark, bool adaptiveSpin = true,
              std::uint64_t maxSpinNs = kMaxSpinNs);

    // The idle side, called by worker `self` when it found no work. Hooks:
    //   bool WorkVisible()                   any queue `self` could take from
    //   bool SpinLook()                      the look of a spin round: may
    //                                        leave out queues the worker does
    //                                        not mean to take from just now
    //                                        (never the re-check before a park)
    //   bool StopIdling(EmptyQueueBehavior)  quit, or the behaviour changed
    //   std::uint64_t PollNs()               0: sleep until woken; else wake
    //                                        this often and call Poll()
    //   void Poll()                          a periodic check while idle
    // Returns when there may be work (or the hooks say stop).
    template <class Hooks>
    void Idle(unsigned self, EmptyQueueBehavior behavior, Hooks &hooks);
    // Worker `self` found work: if it was the last searcher and more work is
    // visible, wake one more worker (the chain).
    template <class Hooks>
    void FoundWork(unsigned self, Hooks &hooks);

    // The waking side: after publishing work (any thread). `prefer` (if >= 0)
    // is claimed first when more than one worker is parked. Returns the
    // worker woken, or -1 when none was.
    int Notify(int prefer = -1);
    // After publishing work only worker `index` can take: wakes it if parked
    // (true when it did).
    bool NotifyOne(unsigned index);
    // Wakes every parked worker (quit, a behaviour change).
    void WakeAll();
    // Whether every worker but `self` is parked.
    bool AllParkedExcept(unsigned self) const;
    // Whether any worker looks parked (relaxed loads, no fence: a hint for
    // a wake that is best effort, never for one the protocol needs).
    bool AnyLooksParked() const {
        for (unsigned w = 0; w < (m_numWorkers + 63) / 64; ++w) {
            if (m_parked[w].load(std::memory_order_relaxed) != 0) {
                return true;
            }
        }
        return false;
    }

    // The parts of the protocol, public for the unit tests of the bitmap and
    // the claims.
    bool TryBecomeSearcher();
    void AddClaimedSearcher() { m_numSearching.fetch_add(1, std::memory_order_seq_cst); }
    bool StopSearching() { return m_numSearching.fetch_sub(1, std::memory_order_seq_cst) == 1; }
    unsigned NumSearching() const { return m_numSearching.load(std::memory_order_seq_cst); }
    void SetParked(unsigned index) { m_parked[index / 64].fetch_or(Bit(index), std::memory_order_seq_cst); }
    // The parker takes its own bit back. False: a waker claimed it first.
    bool UnsetParked(unsigned index) {
        return (m_parked[index / 64].fetch_and(~Bit(index), std::memory_order_seq_cst) & Bit(index)) != 0;
    }
    bool IsParked(unsigned index) const {
        return (m_parked[index / 64].load(std::memory_order_acquire) & Bit(index)) != 0;
    }
    // Claims any parked worker, `prefer` first; its index, or -1 when none is parked.
    int ClaimAny(int prefer = -1);
    // Claims this worker if it is parked.
    bool ClaimSpecific(unsigned index);
    bool Searching(unsigned self) const { return m_slots[self].Searching; }
    // Whether worker `self` spins before its next park (if it searches);
    // read by the owner, or by the tests while it is not idle.
    bool SpinsBeforePark(unsigned self) const { return m_spinBeforePark && m_slots[self].Spin.Spins(); }
    // How long worker `self`'s last full spin took (0 before the first).
    std::uint64_t LastSpinNs(unsigned self) const { return m_slots[self].Spin.LastSpinNs(); }
    // How long worker `self`'s next spin lasts at least, learned from its
    // gaps (up to Init's maxSpinNs); 0: its kSpinRounds rounds only.
    std::uint64_t LearnedSpinNs(unsigned self) const { return m_slots[self].Spin.LearnedNs(); }
    // Times worker `index` went to sleep, and times a waker claimed it.
    std::uint64_t Parks(unsigned index) const { return m_slots[index].Parks.load(std::memory_order_relaxed); }
    std::uint64_t WakeUps(unsigned index) const {
        return m_slots[index].WakeUps.load(std::memory_order_relaxed);
    }

private:
    // One per worker, on a cache line of its own: the futex word a parked
    // worker sleeps on (a waker bumps it after claiming the worker's bit),
    // and, on a line wakers never write, whether the worker searches (the
    // owner's alone, read on every item it finds).
    struct alignas(64) Slot {
        std::atomic<std::uint32_t> WakeSeq{0};
        alignas(64) bool Searching = false;
        // For GetStats: written by the owner only, read by anyone (WakeUps
        // also by a waker on the worker's CPU: has it run since? A claim in
        // Park's re-check, before any sleep, is not counted).
        std::atomic<std::uint64_t> Parks{0};
        std::atomic<std::uint64_t> WakeUps{0};
        SpinPolicy Spin; // the owner's alone
    };

    static std::uint64_t Bit(unsigned index) { return std::uint64_t(1) << (index % 64); }
    void Wake(unsigned index);
    template <class Hooks>
    void Park(unsigned self, Hooks &hooks);
    // A parked worker that sees work (or must stop idling) takes its bit back
    // and leaves; false when it stays parked.
    // `slept`: after a sleep (a claim then counts as a wake-up); `claimed`
    // (if given) tells whether a waker had claimed it.
    template <class Hooks>
    bool LeaveIfWork(unsigned self, Hooks &hooks, bool slept, bool *claimed = nullptr);

    // Set at Init, read on every item a worker finds (FoundWork): on a line
    // no other thread writes (beside the searcher count, every searcher's
    // update would take the line away).
    alignas(64) std::unique_ptr<Slot[]> m_slots;
    unsigned m_numWorkers = 1;
    bool m_limitSearchers = true;
    bool m_spinBeforePark = true;
    alignas(64) std::atomic<std::uint64_t> m_parked[kMaxWorkers / 64] = {};
    // Always equal to the number of workers whose Searching is set: a claimed
    // worker counts itself once awake (AddClaimedSearcher), never its claimer
    // (between the claim and the count the woken worker could otherwise stop
    // searching first and underflow the count; found by park.pml). Last, so
    // that nothing else shares its line.
    alignas(64) std::atomic<unsigned> m_numSearching{0};
};

template <class Hooks>
void IdleState::Idle(unsigned self, EmptyQueueBehavior behavior, Hooks &hooks) {
    Slot &slot = m_slots[self];
    if (!slot.Searching) {
        slot.Searching = TryBecomeSearcher();
    }
    if (behavior != EmptyQueueBehavior::Sleep) {
        // Spin and Yield never park: look until there is work (or a change).
        while (!hooks.SpinLook() && !hooks.StopIdling(behavior)) {
            if (behavior == EmptyQueueBehavior::Yield) {
                YieldThread();
            } else {
                for (unsigned i = 0; i < kSpinPauses; ++i) {
                    CpuRelax();
                }
                EndSpin();
            }
            hooks.Poll();
        }
        return;
    }
    bool spin = slot.Searching && SpinsBeforePark(self);
    bool heldBack = false;
    if (!spin && m_spinBeforePark) {
        // No spin: the adaptive spin is off for this worker (it judges
        // sleeps, not work in sight), or the worker is not a searcher. Work
        // it can take now, it takes. Work it holds back from (the tasks its
        // steal backoff skips for now) would end the park at its re-check,
        // which leaves for any work at once: park, leave, look, park again,
        // with no pause between the looks, each a read of the victim's
        // queue and a write of the bitmap's line. It spins instead, so that
        // its looks keep the spin's pace (W1f: docs/design.adoc, "Idle
        // workers"). Such a spin says nothing of whether spinning catches
        // new work, so the adaptive spin's count stays as it is.
        if (hooks.SpinLook()) {
            return;
        }
        spin = heldBack = hooks.WorkVisible();
    }
    std::uint64_t const from = NowNs();
    slot.Spin.IdleBegan(from);
    if (spin) {
        // Past its rounds, a spin goes on for its learned length, unless a
        // timer or a drain check falls due before it ends (the spin does not
        // poll) or the hooks say stop.
        auto const goOn = [&] {
            std::uint64_t const spunNs = NowNs() - from;
            std::uint64_t const spinNs = slot.Spin.LearnedNs();
            if (spunNs >= spinNs) {
                return false;
            }
            std::uint64_t const pollNs = hooks.PollNs();
            return (pollNs == 0 || pollNs > spinNs - spunNs) && !hooks.StopIdling(behavior);
        };
        for (unsigned round = 0; round < kSpinRounds || goOn(); ++round) {
            for (unsigned i = 0; i < kSpinPauses; ++i) {
                CpuRelax();
            }
            EndSpin();
            if (hooks.SpinLook()) {
                if (!heldBack) {
                    slot.Spin.SpinCaught();
                }
                return;
            }
        }
        slot.Spin.SpinMissed(NowNs() - from);
    }
    Park(self, hooks);
}

template <class Hooks>
void IdleState::Park(unsigned self, Hooks &hooks) {
    Slot &slot = m_slots[self];
    // 1. Announce: from here on a waker may claim us.
    SetParked(self);
    if (slot.Searching) {
        slot.Searching = false;
        StopSearching();
    }
    // 2. Re-check every queue after the announcement. The fence orders the
    //    announcement's RMWs (parked bit, searcher count) before the re-check's
    //    loads: a seq_cst RMW alone does not keep later acquire loads after
    //    it in C++ (nor on arm64 with RCpc loads). Pairs with the fence in
    //    Notify / NotifyOne / WakeAll: either they see our bit (or our
    //    searcher count) or we see their work (or StopIdling).
    //    The poll may make work itself (a timer readies a fiber pinned to
    //    this very worker, which no waker claims us for), so it comes first.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    hooks.Poll();
    if (LeaveIfWork(self, hooks, false)) {
        return;
    }
    // 3. Sleep until claimed (see the top of this file for why no claim is
    //    lost), or until the next poll is due; a poll is followed by the same
    //    look as step 2.
    AddOwned(slot.Parks, 1);
    std::uint64_t const sleptFrom = NowNs();
    for (;;) {
        std::uint32_t const seq = slot.WakeSeq.load(std::memory_order_acquire);
        if (!IsParked(self)) {
            break;
        }
        std::uint64_t const pollNs = hooks.PollNs();
        if (pollNs == 0) {
            FutexWait(&slot.WakeSeq, seq);
            continue;
        }
        FutexWaitFor(&slot.WakeSeq, seq, pollNs);
        hooks.Poll();
        bool claimed = false;
        if (LeaveIfWork(self, hooks, true, &claimed)) {
            std::uint64_t const now = NowNs();
            slot.Spin.SleptFor(now, now - sleptFrom, claimed);
            return;
        }
    }
    AddClaimedSearcher(); // claimed: we wake as a searcher
    slot.Searching = true;
    AddOwned(slot.WakeUps, 1);
    std::uint64_t const now = NowNs();
    slot.Spin.SleptFor(now, now - sleptFrom, true);
}

template <class Hooks>
bool IdleState::LeaveIfWork(unsigned self, Hooks &hooks, bool slept, bool *claimed) {
    bool const work = hooks.WorkVisible();
    if (!work && !hooks.StopIdling(EmptyQueueBehavior::Sleep)) {
        return false;
    }
    if (!UnsetParked(self)) {
        // A waker claimed us first: we wake as a searcher.
        if (claimed != nullptr) {
            *claimed = true;
        }
        AddClaimedSearcher();
        m_slots[self].Searching = true;
        if (slept) {
            AddOwned(m_slots[self].WakeUps, 1);
        }
    } else if (work) {
        // Leaving on our own, for work we saw: as a searcher too (unless
        // half the workers search), so that finding it goes on with the
        // chain (FoundWork): the waker of that work may have seen us
        // searching and woken nobody (docs/design.adoc; park.pml,
        // LONG_ITEMS).
        m_slots[self].Searching = TryBecomeSearcher();
    }
    return true;
}

template <class Hooks>
void IdleState::FoundWork(unsigned self, Hooks &hooks) {
    Slot &slot = m_slots[self];
    if (!slot.Searching) {
        return;
    }
    slot.Searching = false;
    // The wake only adds parallelism (this worker comes back for anything
    // left). The fence orders the searcher count's decrement before the look
    // at the queues; it pairs with Notify's: work published after the look
    // finds no searcher and wakes a worker itself.
    if (StopSearching()) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (!hooks.WorkVisible()) {
            return;
        }
        int const index = ClaimAny();
        if (index >= 0) {
            Wake(static_cast<unsigned>(index));
        }
    }
}

} // namespace detail
} // namespace ftl
