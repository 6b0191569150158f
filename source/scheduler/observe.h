// What a layer above the scheduler (the task graph) reports to the
// scheduler's observers, the trace and the callbacks, without reaching into
// a worker: spans inside the running task.
#pragma once

namespace ftl {

class TaskScheduler;

namespace detail {

class SpanObserver {
public:
    // Whether `taskScheduler` records spans (its trace is on); the same for
    // its whole life.
    static bool Recording(TaskScheduler *taskScheduler);
    // On a task of such a scheduler: a span inside it begins, named `name`,
    // or after the function at `code` when `name` is null; and ends (on
    // whichever worker the task runs then).
    static void Begin(void const *code, char const *name);
    static void End();
};

} // namespace detail
} // namespace ftl
