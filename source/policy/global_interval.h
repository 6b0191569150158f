// The global queue's interval (docs/design.adoc, "Budget and the
// global-queue interval"): a worker busy with its own work gives the global
// queue (outside threads' tasks, fibers readied from outside) a turn every
// N items, N derived from a moving average of its item time so that the
// turn comes about every kLatencyNs of work, from Volt. The average is
// also what a thief judges a steal from this worker by (StealPolicy).
#pragma once

#include <algorithm>
#include <cstdint>

namespace ftl {
namespace detail {

class GlobalIntervalPolicy {
public:
    static constexpr std::uint64_t kLatencyNs = 1000000;
    static constexpr unsigned kMinInterval = 8;
    static constexpr unsigned kMaxInterval = 255;
    // The average's start: a guess, corrected within a few ticks.
    static constexpr std::uint64_t kInitialAvgNs = 50000;
    // The plain policy's fixed interval, in the same range.
    static constexpr unsigned kFixedInterval = 31;

    // adaptive: the AdaptiveGlobalInterval switch (off: kFixedInterval).
    void Init(bool adaptive) {
        m_adaptive = adaptive;
        m_interval = adaptive ? static_cast<unsigned>(kLatencyNs / kInitialAvgNs) : kFixedInterval;
    }

    // Items between two turns of the global queue.
    unsigned Interval() const { return m_interval; }
    // The moving average of an item's time.
    std::uint64_t AvgItemNs() const { return m_avgNs; }

    // A tick of `items` items (at least one) took `elapsedNs`. Returns the
    // figure a thief judges by: the lower of the tick's own and the
    // average, so that neither the average's start nor one long item among
    // tiny ones makes tiny tasks look worth stealing.
    std::uint64_t TickEnded(std::uint64_t elapsedNs, unsigned items) {
        std::uint64_t const sample = elapsedNs / items;
        std::uint64_t const avg = (sample + 9 * m_avgNs) / 10; // alpha = 0.1, as in Volt
        m_avgNs = avg == 0 ? 1 : avg;
        if (m_adaptive) {
            m_interval = static_cast<unsigned>(std::min<std::uint64_t>(
                std::max<std::uint64_t>(kLatencyNs / m_avgNs, kMinInterval), kMaxInterval));
        }
        return std::min(sample, m_avgNs);
    }

private:
    std::uint64_t m_avgNs = kInitialAvgNs;
    unsigned m_interval = kFixedInterval;
    bool m_adaptive = true;
};

} // namespace detail
} // namespace ftl
