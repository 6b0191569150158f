// Semaphore: a counting semaphore for fibers (std::counting_semaphore's
// names). acquire() takes one unit, waiting while there is none: a task
// parks its fiber, a thread that is not a worker blocks. Safe from any
// thread. A unit released while others wait goes to one of them, or to an
// acquire that comes meanwhile: there is no first-come order.
//
// Misuse (fatal): a negative initial count or release(n) with n < 0, a count
// that would pass kMax, destroying a Semaphore something waits on.
// Memory ordering: a release happens before the acquire that takes its unit.
#pragma once

#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"

#include <chrono>
#include <cstddef>

namespace ftl {

class TaskScheduler;

class Semaphore {
public:
    static constexpr std::ptrdiff_t kMax = 0x7fffffff;

    Semaphore(TaskScheduler *taskScheduler, std::ptrdiff_t initial);
    Semaphore(Semaphore const &) = delete;
    Semaphore &operator=(Semaphore const &) = delete;

    void acquire();
    bool try_acquire();
    // Waits at most `timeout` for a unit; false if none came.
    bool try_acquire_for(std::chrono::nanoseconds timeout);
    void release(std::ptrdiff_t n = 1);

private:
    Fibtex m_lock;
    ConditionVariable m_available;
    std::ptrdiff_t m_count; // under m_lock
};

} // namespace ftl
