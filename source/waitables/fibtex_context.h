// What a scheduler keeps for the Fibtexes its tasks use: which of the
// contended lock's mechanisms are on, each worker's count of the times it
// ran out of work of its own (what a waiter on a hot lock watches), and the
// counts of two mechanisms' effects. The scheduler only reports through
// RanOutOfWork; everything else belongs to the Fibtex (fibtex.cpp).
#pragma once

#include "platform/platform.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace ftl {
namespace detail {

// The Fibtex's measurement switches (scheduler/mechanisms.h, Lock*).
struct FibtexSwitches {
    bool Peeks = true;
    bool WatchesIdle = true;
    bool Patience = true;
    bool HandOff = true;
};

class FibtexContext {
public:
    void Init(unsigned numWorkers, FibtexSwitches const &switches) {
        m_numWorkers = numWorkers;
        m_switches = switches;
        m_ranOut.reset(new RanOut[numWorkers]);
    }
    FibtexSwitches const &Switches() const { return m_switches; }

    // The scheduler's hook: worker `index` ran out of work of its own and
    // goes to steal (it goes idle only after a steal that found nothing, so
    // that counts going idle too). By that worker only: a plain increment,
    // on a block of its own, so the watching costs a worker that runs its
    // own tasks nothing.
    void RanOutOfWork(unsigned index) {
        std::atomic<std::uint32_t> &count = m_ranOut[index].Count;
        count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // Whether a waiter on a hot lock watches the workers: more than one,
    // and the switch on.
    bool Watched() const { return m_numWorkers > 1 && m_switches.WatchesIdle; }
    // The sum of the counts: it changes whenever a worker runs out of work.
    std::uint32_t RanOutCount() const {
        std::uint32_t sum = 0;
        for (unsigned i = 0; i < m_numWorkers; ++i) {
            sum += m_ranOut[i].Count.load(std::memory_order_relaxed);
        }
        return sum;
    }

    // Locks taken at a look the watch brought forward, and looks at which a
    // patient waiter let a free lock be (for the tests of those mechanisms).
    void CountWatchedAcquisition() { m_watchedAcquisitions.fetch_add(1, std::memory_order_relaxed); }
    void CountPatientLook() { m_patientLooks.fetch_add(1, std::memory_order_relaxed); }
    std::uint64_t WatchedAcquisitions() const {
        return m_watchedAcquisitions.load(std::memory_order_relaxed);
    }
    std::uint64_t PatientLooks() const { return m_patientLooks.load(std::memory_order_relaxed); }

private:
    // A read of a line brings its pair into the reader's cache too (the
    // adjacent-line prefetchers of x86 cores): each count has a pair of
    // its own, away from every line its worker's tasks write.
    struct alignas(kPrefetchPairBytes) RanOut {
        std::atomic<std::uint32_t> Count{0};
    };
    std::unique_ptr<RanOut[]> m_ranOut;
    unsigned m_numWorkers = 1;
    FibtexSwitches m_switches;
    alignas(64) std::atomic<std::uint64_t> m_watchedAcquisitions{0};
    std::atomic<std::uint64_t> m_patientLooks{0};
};

} // namespace detail
} // namespace ftl
