// How a contended Fibtex lock waits before it parks (docs/design.adoc,
// "Fibtex"): the backoff between its looks and where the next wait starts
// it, the peeks and the watch that catch a holder that left, a patient
// waiter that lets a holder between two sections relock, and the hand-off
// to a waiter that has waited long. The Fibtex spins, looks and parks; these
// decide when.
#pragma once

#include <cstdint>

namespace ftl {
namespace detail {

// The backoff: 2^level pauses between looks. A waiter that looks often
// pulls the lock's line from the holder's core, so a wait starts where the
// last one found the lock free, one level lower, or, after a hot lock (its
// holder relocked twice or more during the wait), one level higher.
struct LockBackoff {
    // The climb's top from a start below it: rare enough that a move of the
    // line costs little where cross-core hand-offs are slow.
    static constexpr unsigned kMaxLevel = 8;
    // The highest start after waits on a hot lock (about 25 us of pauses).
    static constexpr unsigned kMaxHotLevel = 10;
    // A wait that starts above kPeekLevel first peeks kPeeks times,
    // 2^kPeekLevel pauses apart, for a holder that left soon after.
    static constexpr unsigned kPeekLevel = 4;
    static constexpr unsigned kPeeks = 3;
    // From kWatchLevel up, the waiter also reads the workers' counts of
    // running out of work every kWatchPauses pauses, for a holder that left
    // later (FibtexContext).
    static constexpr unsigned kWatchLevel = 7;
    static constexpr unsigned kWatchPauses = 32;
    static_assert((1u << kWatchLevel) % kWatchPauses == 0, "a watched interval is whole watches");

    // The next wait's start after one that took the lock at a look from
    // level `looked`; `hot`: others took the lock twice or more meanwhile.
    static unsigned NextStart(unsigned looked, bool hot) {
        if (hot) {
            return looked < kMaxHotLevel ? looked + 1 : kMaxHotLevel;
        }
        return looked > 0 ? looked - 1 : 0;
    }
    // The top of a wait's climb from `start`.
    static unsigned MaxLevelFrom(unsigned start) { return start > kMaxLevel ? start : kMaxLevel; }
};

// Patience: two workers that each run tasks of many sections on one lock
// take it from each other between sections, and every crossing stalls the
// holder mid-task. A waiter whose own worker's latest run on the lock was
// kPatientRun acquisitions or more lets a lock be that it finds free but
// retaken since its previous look, for up to kPatienceNs (or kMaxLooks
// such looks, a bound that needs no clock): the holder's run usually ends
// first. A waiter that takes the lock once and leaves is never patient.
class LockPatience {
public:
    static constexpr std::uint32_t kPatientRun = 8;
    static constexpr std::uint64_t kPatienceNs = 150000;
    static constexpr unsigned kMaxLooks = 1024;

    explicit LockPatience(std::uint32_t acquisitions) : m_acquisitionsSeen(acquisitions) {}

    // A look that read `acquisitions` so far and found the lock `free`:
    // whether to let the holder relock it. `now()` is read only then.
    template <class Clock>
    bool LetsBe(std::uint32_t acquisitions, bool free, Clock &&now) {
        bool const relocked = acquisitions != m_acquisitionsSeen;
        m_acquisitionsSeen = acquisitions;
        if (!relocked || !free) {
            return false; // the holder stopped, or the look would fail anyway
        }
        std::uint64_t const at = now();
        if (m_looks == 0) {
            m_since = at;
        }
        if (at - m_since >= kPatienceNs || m_looks >= kMaxLooks) {
            return false;
        }
        ++m_looks;
        return true;
    }

private:
    std::uint32_t m_acquisitionsSeen;
    unsigned m_looks = 0;
    std::uint64_t m_since = 0;
};

// Fairness: an unlock wakes a parked waiter without the lock, and a
// spinning waiter takes it only at a look that finds it free, so a holder
// that relocks at once could pass a waiter by for milliseconds. A spinning
// waiter that has waited kFairNs asks for the lock; the holder's next
// unlock hands it over, but only to a waiter that has shown it runs
// (a preempted one would leave the lock taken for milliseconds).
struct LockHandOff {
    // A bound on how long a lock may pass a waiter by: at most one
    // hand-off, one crossing of the lock's line, in that time.
    static constexpr std::uint64_t kFairNs = 40000;
    // A waiter that asked renews its beat every 2^kBeatLevel pauses; it runs
    // while its latest beat is fresher than kBeatNs, or 4 of its own gaps
    // where they come further apart (an emulator, a sanitizer), up to
    // kBeatMaxNs (a gap that spans a preemption must not count).
    static constexpr unsigned kBeatLevel = 4;
    static constexpr unsigned kBeatPauses = 1u << kBeatLevel;
    static constexpr std::uint64_t kBeatNs = 5000;
    static constexpr std::uint64_t kBeatMaxNs = 200000;

    // Whether a waiter whose latest beat was at `beat`, `gap` after the one
    // before, runs at `now`.
    static bool BeatFresh(std::uint64_t now, std::uint64_t beat, std::uint64_t gap) {
        std::uint64_t bound = gap * 4 > kBeatNs ? gap * 4 : kBeatNs;
        bound = bound < kBeatMaxNs ? bound : kBeatMaxNs;
        return now - beat < bound;
    }
};

} // namespace detail
} // namespace ftl
