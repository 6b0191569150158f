// The adaptive spin (docs/design.adoc, "Idle workers"): whether a searching
// worker spins before it parks, and for how long past its fixed rounds.
//
// A spin that misses costs CPU time and the next wake-up (after spinning, a
// worker woken by a thread on its own CPU no longer preempts that thread),
// so a worker whose spins keep missing, each followed by a sleep longer than
// the spin, parks at once until a sleep short enough for a spin to have
// caught its end. And a worker a waker claims soon after it began idling
// spins 1.5 times that gap the next time, up to a bound, so that a producer
// with short gaps finds it still searching and pays no futex wake.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ftl {
namespace detail {

// The default bound of a learned spin: the one Linux's haltpoll idle
// governor uses for a guest's CPUs (TaskSchedulerInitOptions::MaxIdleSpinMicros).
constexpr std::uint64_t kMaxSpinNs = 200000;

// One worker's; the owner's alone.
class SpinPolicy {
public:
    // Spins in a row that missed before the worker parks without one.
    static constexpr unsigned kMissLimit = 2;

    // adaptive: the AdaptiveSpin switch (off: the plain policy, always the
    // fixed rounds); maxSpinNs: the bound of a learned spin.
    void Init(bool adaptive, std::uint64_t maxSpinNs) {
        m_adaptive = adaptive;
        m_maxSpinNs = maxSpinNs;
    }

    // Whether the next idling spins (when the worker searches).
    bool Spins() const { return !m_adaptive || m_misses < kMissLimit; }
    // How long the next spin lasts at least (0: its fixed rounds only).
    std::uint64_t LearnedNs() const { return m_spinForNs; }
    // How long the latest full spin took (0 before the first).
    std::uint64_t LastSpinNs() const { return m_spinNs; }

    // The idling (a spin, or a park without one) begins at `now`.
    void IdleBegan(std::uint64_t now) { m_idleFromNs = now; }
    // A spin found work (one for work the worker saw and held back from
    // says nothing of whether spinning catches new work: not counted).
    void SpinCaught() { m_misses = 0; }
    // A spin ran its full length, `spunNs`, and found nothing.
    void SpinMissed(std::uint64_t spunNs) { m_spinNs = spunNs; }

    // The park that followed ended at `now` after a sleep of `sleptNs`;
    // `claimed`: a waker ended it (not a timer's poll, which teaches
    // nothing: the timed wait is on time without a spin).
    void SleptFor(std::uint64_t now, std::uint64_t sleptNs, bool claimed) {
        std::uint64_t const gapNs = now - m_idleFromNs;
        if (claimed && m_adaptive && gapNs <= m_maxSpinNs) {
            m_misses = 0;
            m_spinForNs = std::min(m_maxSpinNs, gapNs + gapNs / 2);
            return;
        }
        if (gapNs > m_maxSpinNs || sleptNs > m_spinNs) {
            // Also after a sleep shorter than a learned spin: the gaps have
            // grown past the bound, and spinning through most of each would
            // waste it.
            m_spinForNs = 0;
        }
        if (sleptNs <= m_spinNs) {
            m_misses = 0; // a spin would have caught it
        } else if (m_misses < kMissLimit) {
            ++m_misses;
        }
    }

private:
    bool m_adaptive = true;
    unsigned m_misses = 0;
    std::uint64_t m_maxSpinNs = kMaxSpinNs;
    std::uint64_t m_spinNs = 0;
    std::uint64_t m_idleFromNs = 0;
    std::uint64_t m_spinForNs = 0;
};

} // namespace detail
} // namespace ftl
