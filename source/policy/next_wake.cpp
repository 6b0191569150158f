#include "policy/next_wake.h"

namespace ftl {
namespace detail {

void NextWakePolicy::Judge(std::uint64_t now) {
    bool const paid = now - m_wokeAt >= kPaysNs;
    m_wokeAt = 0;
    if (paid) {
        m_backoff = 0;
        m_skip = 0;
        return;
    }
    if (now - m_wastedAt >= kFadeNs) {
        m_backoff = 0; // faded: start over from one
    }
    m_wastedAt = now;
    m_backoff = std::min(m_backoff == 0 ? 1u : 2 * m_backoff, kMaxBackoff);
    m_skip = m_backoff;
}

} // namespace detail
} // namespace ftl
