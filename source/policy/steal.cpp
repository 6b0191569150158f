#include "policy/steal.h"

namespace ftl {
namespace detail {

void StealPolicy::Judge(std::uint64_t now) {
    std::uint64_t const busy = now - m_stealAt;
    std::uint64_t const taken = m_taken;
    m_stealAt = 0;
    if (busy >= kWorthwhileNs) {
        if (busy >= kLongNs) {
            m_batch = std::min(2 * m_batch, kMaxBatch);
        }
        m_backoff = 0;
        return;
    }
    // The victim's figure, not the thief's: a stolen task's time includes
    // the misses on what it shares with the victim's tasks.
    std::uint64_t const victimNs = m_victimAvgNs->load(std::memory_order_relaxed);
    if (victimNs >= kStealableTaskNs && m_backlog >= kStealableBacklogNs / victimNs) {
        // Too few of tasks worth a core: at once a batch that would have
        // paid (at least twice this one). Only a steal that paid ends the
        // backoff.
        std::uint64_t const perTask = std::max<std::uint64_t>(busy / taken, 1); // a coarse clock may read 0
        std::uint64_t const paying = kWorthwhileNs / perTask + 1;
        if (m_batchOn) {
            m_batch = static_cast<unsigned>(
                std::min<std::uint64_t>(std::max<std::uint64_t>(paying, 2 * taken), kMaxBatch));
        }
        return;
    }
    m_batch = kMinBatch;
    if (!m_backoffOn) {
        m_backoff = 0;
        return;
    }
    m_backoff = std::min(m_backoff == 0 ? 1u : 2 * m_backoff, kMaxBackoff);
    m_skip = m_backoff;
}

} // namespace detail
} // namespace ftl
