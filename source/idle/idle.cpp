#include "idle/idle.h"

namespace ftl {
namespace detail {

void IdleState::Init(unsigned numWorkers, bool limitSearchers, bool spinBeforePark, bool adaptiveSpin,
                     std::uint64_t maxSpinNs) {
    m_numWorkers = numWorkers;
    m_limitSearchers = limitSearchers;
    m_spinBeforePark = spinBeforePark;
    m_slots.reset(new Slot[numWorkers]);
    for (unsigned i = 0; i < numWorkers; ++i) {
        m_slots[i].Spin.Init(adaptiveSpin, maxSpinNs);
    }
}

bool IdleState::TryBecomeSearcher() {
    // Refused when half the workers, and at least two, already search
    // (checked loosely: a brief overshoot is harmless). Two at least: at a
    // join, the worker whose fiber waits searches until the fiber is ready,
    // and with the only slot taken the worker that ran the last task would
    // park, so a pool of two paid a futex wake at every fork after a join.
    unsigned const limit = std::max(2u, (m_numWorkers + 1) / 2);
    if (m_limitSearchers && m_numSearching.load(std::memory_order_seq_cst) >= limit) {
        return false;
    }
    m_numSearching.fetch_add(1, std::memory_order_seq_cst);
    return true;
}

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

bool IdleState::AllParkedExcept(unsigned self) const {
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (i != self && !IsParked(i)) {
            return false;
        }
    }
    return true;
}

void IdleState::Wake(unsigned index) {
    Slot &slot = m_slots[index];
    slot.WakeSeq.fetch_add(1, std::memory_order_release);
    FutexWake(&slot.WakeSeq, 1);
}

int IdleState::Notify(int prefer) {
    // The stores that published the work before the loads of the searcher
    // count and the parked bits below (a store-then-load order neither x86
    // nor arm64 keeps without a fence). Pairs with the fence in Park (and
    // FoundWork): either we see the parker's bit or its searcher count not
    // yet lowered, or its re-check sees the work.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (NumSearching() != 0) {
        return -1; // a searcher will find it, or re-check before it parks
    }
    int const index = ClaimAny(prefer);
    if (index >= 0) {
        Wake(static_cast<unsigned>(index));
    }
    return index;
}

bool IdleState::NotifyOne(unsigned index) {
    // The stores that published the work before the load of the parked bit
    // (pairs with Park's fence, as in Notify).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!ClaimSpecific(index)) {
        return false;
    }
    Wake(index);
    return true;
}

void IdleState::WakeAll() {
    // The caller's store (m_quit, or the new behaviour) before the loads of
    // the parked bits. Pairs with Park's fence: a parker either is claimed
    // here or sees StopIdling in its re-check.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (ClaimSpecific(i)) {
            Wake(i);
        }
    }
}

} // namespace detail
} // namespace ftl
