#include "idle.h"

namespace ftl {
namespace detail {

int IdleState::ClaimAny(int prefer) {
    if (prefer >= 0 && ClaimSpecific(static_cast<unsigned>(prefer))) {
        return prefer;
    }
    unsigned const words = (m_numWorkers + 63) / 64;
    for (unsigned w = 0; w < words; ++w) {
        std::uint64_t bits = m_parked[w].load(std::memory_order_seq_cst);
        while (bits != 0) {
            unsigned const index = w * 64 + static_cast<unsigned>(__builtin_ctzll(bits));
            std::uint64_t const prev = m_parked[w].fetch_and(~Bit(index), std::memory_order_seq_cst);
            if ((prev & Bit(index)) != 0) {
                return static_cast<int>(index);
            }
            bits = prev & ~Bit(index); // lost the race for that one; try the others
        }
    }
    return -1;
}

bool IdleState::ClaimSpecific(unsigned index) {
    if (!IsParked(index)) {
        return false;
    }
    std::uint64_t const prev = m_parked[index / 64].fetch_and(~Bit(index), std::memory_order_seq_cst);
    return (prev & Bit(index)) != 0;
}

} // namespace detail
} // namespace ftl
