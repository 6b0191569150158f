// Statistics: what each worker did since Init, and how the fiber pool is used.
//
//   ftl::SchedulerStats const stats = taskScheduler.GetStats();
//   std::fputs(ftl::FormatStats(stats).c_str(), stderr);
//
// With the environment variable FTL_STATS=1, a scheduler prints the same
// table to stderr when it is destroyed.
//
// Contract
// - GetStats may be called from any thread while the workers run; it stops
//   nothing. Each figure is exact for its own counter at some moment of the
//   call, so sums over workers may mix moments a few items apart.
// - The counts cost the workers no locked instruction: each worker counts in
//   its own memory, and nothing is counted per task beyond what the
//   scheduler counts anyway.
#pragma once

#include "ftl/callbacks.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ftl {

struct WorkerStats {
    // Tasks that ended on this worker (a task that waited and resumed
    // elsewhere counts where it ended).
    std::uint64_t TasksRun = 0;
    // Items this worker took from another worker's queues: tasks, and ready
    // fibers (a parked task resumed here).
    std::uint64_t Stolen = 0;
    // Looks over every other worker's queues that found nothing to take.
    std::uint64_t FailedSteals = 0;
    // Times the worker went to sleep (EmptyQueueBehavior::Sleep), and times
    // another thread woke it because there was work.
    std::uint64_t Parks = 0;
    std::uint64_t WakeUps = 0;
    // Time spent looking for work (spinning, yielding or asleep), and the
    // rest of the time since Init. For worker 0, the thread that called
    // Init, the rest includes its time outside ftl.
    std::chrono::nanoseconds IdleTime{0};
    std::chrono::nanoseconds BusyTime{0};
};

struct SchedulerStats {
    std::vector<WorkerStats> Workers; // by thread index
    // Fibers the pool may hand out now (GetFiberCount(); grows under
    // FiberPoolPolicy::Grow), and how many times it grew.
    unsigned FiberPoolSize = 0;
    unsigned PoolGrowths = 0;
    // Fibers in use now: running (one per worker) or parked in a wait.
    unsigned FibersInUse = 0;
    // The most fibers in use at once so far: the pool makes a fiber's stack
    // only when no fiber that has one is free, so this is the number of
    // stacks made.
    unsigned FibersPeak = 0;
};

// A table of the figures, one line per worker, for a log or a terminal.
std::string FormatStats(SchedulerStats const &stats);

// A fiber parked in a wait (TaskScheduler::GetWaitingFibers).
struct WaitingFiber {
    unsigned FiberIndex = 0;
    WaitKind Kind = WaitKind::Counter;
    // The counter, Fibtex or condition variable waited on (null for Sleep
    // and Yield), and for a counter the value waited for.
    void const *Object = nullptr;
    unsigned Target = 0;
    // The function of the task that waits (FunctionName names it); null for
    // the thread that called Init, waiting outside any task.
    void const *Function = nullptr;
};

// One line per fiber: its index, what it waits for, and its task's name.
std::string FormatWaitingFibers(std::vector<WaitingFiber> const &fibers);

} // namespace ftl
