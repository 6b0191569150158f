// A task: a function pointer and an argument, copied by value into the
// scheduler's queues when it is added.
#pragma once

namespace ftl {

class TaskScheduler;

using TaskFunction = void (*)(TaskScheduler *taskScheduler, void *arg);

struct Task {
    TaskFunction Function;
    void *ArgData;
};

// High-priority tasks are taken before Normal ones on every worker; a task of
// either priority may be stolen by any worker. Low is the lineage's name for
// Normal.
enum class TaskPriority { High, Normal, Low = Normal };

} // namespace ftl
