// Idle workers: who is searching for work and who is parked.
//
// A worker out of work becomes a searcher (if fewer than half the workers
// already search), spins and steals a while, then parks on its own futex
// word. Parked workers are bits in a bitmap, so a waker finds one in O(1)
// (count trailing zeros) and claims it by clearing its bit; a claimed worker
// wakes as a searcher. A waker that sees a searcher wakes no one: the searcher
// finds the work, or re-checks after it announces itself parked. A searcher that finds work stops searching
// and, if it was the last searcher, wakes one more parked worker: wake-ups spread as a chain while there is
// work to find, never as a herd.
//
// No lost wake-up (the park protocol, Scheduler::Park, with the waker's side
// in Scheduler::NotifyWork):
//   parker: set own bit (seq_cst RMW); stop searching; fence; re-check every
//           queue; sleep only if all are empty.
//   waker:  publish the work; fence (seq_cst); if no searcher, claim a bit.
// With seq_cst on both sides, either the waker sees the parker's bit (and
// wakes it) or the parker's re-check sees the work.
#pragma once

#include <atomic>
#include <cstdint>

namespace ftl {
namespace detail {

constexpr unsigned kMaxWorkers = 256;

class IdleState {
public:
    void Init(unsigned numWorkers, bool limitSearchers) {
        m_numWorkers = numWorkers;
        m_limitSearchers = limitSearchers;
    }

    // A worker with no work asks to search. Refused when half the workers
    // already search (checked loosely: a brief overshoot is harmless).
    bool TryBecomeSearcher() {
        if (m_limitSearchers && 2 * m_numSearching.load(std::memory_order_seq_cst) >= m_numWorkers) {
            return false;
        }
        m_numSearching.fetch_add(1, std::memory_order_seq_cst);
        return true;
    }
    // A claimed worker, awake, counts itself as a searcher (uncapped). The
    // claimer does not count it: between the claim and the count the woken
    // worker could otherwise stop searching before it was counted, and the
    // count would underflow (found by source/models/park.pml). So the count
    // always equals the number of workers whose m_searching is set.
    void AddClaimedSearcher() { m_numSearching.fetch_add(1, std::memory_order_seq_cst); }
    // Returns true when the caller was the last searcher.
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
    // Whether every worker but `self` is parked.
    bool AllParkedExcept(unsigned self) const {
        for (unsigned i = 0; i < m_numWorkers; ++i) {
            if (i != self && !IsParked(i)) {
                return false;
            }
        }
        return true;
    }
    // Claims any parked worker, which wakes as a searcher (see
    // AddClaimedSearcher); `prefer` (if >= 0) first. Returns its index, or
    // -1 when none is parked.
    int ClaimAny(int prefer = -1);
    // Claims this worker if it is parked.
    bool ClaimSpecific(unsigned index);

private:
    static std::uint64_t Bit(unsigned index) { return std::uint64_t(1) << (index % 64); }

    std::atomic<std::uint64_t> m_parked[kMaxWorkers / 64] = {};
    alignas(64) std::atomic<unsigned> m_numSearching{0};
    unsigned m_numWorkers = 1;
    bool m_limitSearchers = true;
};

} // namespace detail
} // namespace ftl
