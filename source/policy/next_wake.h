// The next slot's wake policy (docs/design.adoc, "Locality: the next
// slot"): whether a fiber that a running task readies into its worker's next
// slot, while that task goes on running, wakes a parked worker to take it.
//
// The wake pays when the task goes on long after it, and is wasted when the
// task soon waits or ends (a hand-off through a condition variable: the
// notifier waits right after), since the fiber would then have run here
// soon anyway. So each wake is judged at the worker's next scheduling
// point: within kPaysNs it was wasted, and the next 1, 2, 4, ... fills wake
// nobody; later, it paid and the backoff ends. The backoff stays with the
// worker (a pair that moves between workers does not start it over) and
// fades once the latest wasted wake is kFadeNs older than the tick's start.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ftl {
namespace detail {

class NextWakePolicy {
public:
    // About what a woken worker takes to wake and look twice: a task that
    // waits sooner gains little from the wake.
    static constexpr std::uint64_t kPaysNs = 50000;
    static constexpr std::uint64_t kFadeNs = 1000000;
    static constexpr unsigned kMaxBackoff = 1024;

    // on: the NextSlotWake switch, and more than one worker (off: the plain
    // policy, no fill wakes anybody).
    void Init(bool on) { m_on = on; }

    // At a scheduling point of the worker (its task waits or ended): judges
    // the wake made since, if any.
    template <class Clock>
    void AtSchedulingPoint(Clock &&now) {
        if (m_wokeAt != 0) {
            Judge(now());
        }
    }

    // A fill whose task goes on running: whether to look for a worker to
    // wake. `tickStartNs`: the worker's tick start (for the fade, so that
    // the common case reads no clock); `now()` is read only while a wake
    // waits for its judgement.
    template <class Clock>
    bool WantsWake(std::uint64_t tickStartNs, Clock &&now) {
        if (!m_on) {
            return false;
        }
        if (m_wokeAt != 0) {
            // While the woken worker may still be looking, no other wake;
            // after that, the wake paid, and this fill may need its own.
            std::uint64_t const at = now();
            if (at - m_wokeAt < kPaysNs) {
                return false;
            }
            Judge(at);
        } else if (m_skip != 0) {
            if (tickStartNs < m_wastedAt + kFadeNs) {
                --m_skip;
                return false;
            }
            m_skip = 0; // faded: this wake's judgement starts the level over
        }
        return true;
    }

    // The fill woke a worker at `now`.
    void Woke(std::uint64_t now) { m_wokeAt = now == 0 ? 1 : now; }

    // The latest wake's judgement, at `now`.
    void Judge(std::uint64_t now);

    unsigned Skip() const { return m_skip; }

private:
    bool m_on = true;
    std::uint64_t m_wokeAt = 0;   // the wake not judged yet (0: none)
    std::uint64_t m_wastedAt = 0; // the latest wasted wake's judgement
    unsigned m_backoff = 0;
    unsigned m_skip = 0;
};

} // namespace detail
} // namespace ftl
