// Barrier: std::barrier for fibers (without a completion function).
// arrive_and_wait() waits until `count` participants have arrived in the
// current phase: a task parks its fiber, a thread that is not a worker
// blocks. The last arrival starts the next phase and releases the others.
// arrive_and_drop() arrives without waiting and lowers the count for every
// later phase. Safe from any thread.
//
// As with std::barrier, an arrival beyond the count of a phase belongs to the
// next one. Misuse (fatal): a count below 1 or above kMax, an arrival at a
// barrier whose count dropped to 0, destroying a Barrier something waits on.
// Memory ordering: every arrival of a phase happens before any of its waits
// returns.
#pragma once

#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"

#include <cstddef>
#include <cstdint>

namespace ftl {

class TaskScheduler;

class Barrier {
public:
    static constexpr std::ptrdiff_t kMax = 0x7fffffff;

    Barrier(TaskScheduler *taskScheduler, std::ptrdiff_t count);
    Barrier(Barrier const &) = delete;
    Barrier &operator=(Barrier const &) = delete;

    void arrive_and_wait();
    void arrive_and_drop();

private:
    // Under m_lock: one arrival; the last of the phase starts the next one
    // and returns true.
    bool Arrive(char const *what);

    Fibtex m_lock;
    ConditionVariable m_phaseEnded;
    // Under m_lock.
    std::ptrdiff_t m_expected;  // participants of each phase
    std::ptrdiff_t m_remaining; // arrivals the current phase still needs
    std::uint64_t m_phase = 0;
};

} // namespace ftl
