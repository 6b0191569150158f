// The steal policy: when a searching worker looks at other workers' task
// deques, and how many tasks a task steal takes (docs/design.adoc, "The
// steal backoff" and "Steals in batches"). The Worker steals; this decides.
//
// Each task steal is judged at the thief's next look for work, by how long
// the stolen tasks kept it busy. One that did not pay for its cache-line
// transfers makes the next 1, 2, 4, ... looks skip other workers' task
// deques, unless the victim's tasks are worth a second core and only the
// batch was too small; then the next batch is sized to pay. A long steal
// doubles the next batch.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ftl {
namespace detail {

class StealPolicy {
public:
    // A steal that kept the thief busy for less did not pay: about twice a
    // slow cross-core round trip.
    static constexpr std::uint64_t kWorthwhileNs = 1000;
    // Victim tasks this long, with this much of them queued, are worth a
    // second core even when one steal of them did not pay (where a second
    // core starts to pay, with a margin).
    static constexpr std::uint64_t kStealableTaskNs = 150;
    static constexpr std::uint64_t kStealableBacklogNs = 50000;
    // The most looks skipped in a row: bounds how late a long task behind
    // tiny ones is stolen.
    static constexpr unsigned kMaxBackoff = 64;
    // Batch bounds: tiny tasks go one at a time; a steal that kept the
    // thief busy kLongNs or more doubles the next batch.
    static constexpr unsigned kMinBatch = 1;
    static constexpr unsigned kMaxBatch = 64;
    static constexpr std::uint64_t kLongNs = 16 * kWorthwhileNs;

    // backoff, batch: the StealBackoff and StealBatch switches (both off:
    // the plain policy, every look steals, one task a steal).
    void Init(bool backoff, bool batch) {
        m_backoffOn = backoff;
        m_batchOn = batch;
    }

    // Whether this look may take in other workers' task deques; counts the
    // look. Judges the latest steal first, at `now()` (read only then).
    template <class Clock>
    bool MayLook(Clock &&now) {
        if (m_stealAt != 0) {
            Judge(now());
        }
        if (m_skip == 0) {
            return true;
        }
        --m_skip;
        return false;
    }

    // After the first task of a steal from a deque that held about `size`:
    // how many more to take into the thief's own deque.
    unsigned MoreToTake(std::int64_t size) const {
        if (!m_batchOn) {
            return 0;
        }
        std::int64_t const want = std::min<std::int64_t>(size / 2, m_batch) - 1;
        return want > 0 ? static_cast<unsigned>(want) : 0;
    }

    // A steal of `taken` tasks at `now` from a deque that held `size`, of a
    // victim whose item time (Worker::AvgTaskNs) `victimAvgNs` holds.
    void Stole(std::uint64_t now, unsigned taken, std::int64_t size,
               std::atomic<std::uint64_t> const *victimAvgNs) {
        if (!m_backoffOn && !m_batchOn) {
            return;
        }
        m_stealAt = now == 0 ? 1 : now;
        m_taken = taken;
        m_victimAvgNs = victimAvgNs;
        m_backlog = static_cast<std::uint32_t>(std::min<std::int64_t>(size, std::int64_t{1} << 30));
    }

    // The latest steal's judgement, at `now`.
    void Judge(std::uint64_t now);

    unsigned Batch() const { return m_batch; }
    unsigned Skip() const { return m_skip; }

private:
    bool m_backoffOn = true;
    bool m_batchOn = true;
    std::uint64_t m_stealAt = 0; // the latest steal not judged yet (0: none)
    unsigned m_taken = 1;
    std::uint32_t m_backlog = 0; // the tasks the victim's deque held
    std::atomic<std::uint64_t> const *m_victimAvgNs = nullptr;
    unsigned m_backoff = 0; // looks the next worthless steal skips
    unsigned m_skip = 0;    // looks left to skip now
    unsigned m_batch = kMinBatch;
};

} // namespace detail
} // namespace ftl
