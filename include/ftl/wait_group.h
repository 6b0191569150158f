// WaitGroup: the counter of today's FiberTaskingLib API, beside the
// counter-era TaskCounter it is made from. AddTask/AddTasks take a
// WaitGroup * where they take a TaskCounter * (it is one), and Wait() waits
// for every task added with it, and for every Add not yet matched by a Done.
//
// Contract
// - Add(delta) raises the count (delta < 0 lowers it); Done() is Add(-1).
//   Bringing the count below 0 is a fatal error.
// - Wait() is WaitForCounter(this): it parks a task's fiber, runs the
//   group's own queued tasks while it waits, blocks a thread that is not a
//   worker, and rethrows the first exception that escaped a task of the
//   group (see TaskCounter).
// - As with Go's sync.WaitGroup, reuse the group for a new round only
//   after every Wait of the previous round has returned.
#pragma once

#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstdint>

namespace ftl {

class WaitGroup : public TaskCounter {
public:
    explicit WaitGroup(TaskScheduler *taskScheduler) : TaskCounter(taskScheduler) {}

    void Add(std::int32_t delta) {
        if (delta >= 0) {
            TaskCounter::Add(static_cast<unsigned>(delta));
            return;
        }
        Lower(static_cast<unsigned>(-static_cast<std::int64_t>(delta)), "WaitGroup::Add or Done");
    }
    void Done() { Add(-1); }
    void Wait(bool pinToCurrentThread = false) { m_taskScheduler->WaitForCounter(this, pinToCurrentThread); }

    // Not the group's API: Add(-1) and Done() lower it.
    void Decrement() = delete;
};

} // namespace ftl
