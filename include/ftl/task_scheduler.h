// TaskScheduler: a fixed set of worker threads running tasks on a pool of
// fibers.
//
// Contract
// - Init() binds the calling thread as worker 0 and starts the others. The
//   calling thread takes part in the work whenever it waits.
// - AddTask/AddTasks copy the tasks; with a counter, the counter is raised by
//   the number of tasks before any of them can run, and lowered by one as each
//   finishes. They may be called from any worker thread, and from other
//   threads too (those tasks go through a global queue).
// - WaitForCounter may only be called from a worker thread of this scheduler
//   (from a task, or from the thread that called Init). When the counter is
//   not yet at its target the calling fiber parks and the thread runs other
//   work; the fiber resumes on any worker, or on the same thread when pinned.
//   The thread that called Init always resumes on its own thread.
// - Memory ordering: everything a task did before its counter reached the
//   target is visible to the fiber that waited for it.
// - Destruction runs every task already added (including tasks those tasks
//   add) before the threads stop; no work is dropped. It must be called from
//   the thread that called Init, outside any task.
#pragma once

#include "ftl/callbacks.h"
#include "ftl/ftl_valgrind.h"
#include "ftl/task.h"

#include <cstddef>
#include <limits>

namespace ftl {

class TaskCounter;
class FullAtomicCounter;
class AtomicFlag;

namespace detail {
class Scheduler;
} // namespace detail

// What a worker does when it finds no work.
enum class EmptyQueueBehavior {
    Spin,  // keep looking, never yield the core: lowest latency, one core busy per worker
    Yield, // keep looking, yielding the core between searches
    Sleep, // look briefly, then park until work arrives: an idle scheduler costs ~0% CPU
};

// What happens when a fiber must be taken from the pool and none is free.
enum class FiberPoolPolicy {
    Grow,  // allocate more fibers and report it through EventCallbacks::OnFiberPoolGrown
    Fatal, // abort with a message naming the pool size
};

// Init's results. Init returns them as int: 0 is success.
enum class InitError : int {
    Success = 0,
    AlreadyInitialized = -1, // Init was called twice on one scheduler
    InvalidOptions = -2,     // e.g. FiberPoolSize == 0 or a stack size too small
    ThreadCreationFailed = -3,
    FiberCreationFailed = -4,
    ThreadAlreadyBound = -5, // the calling thread is already a worker of a live scheduler
};
char const *InitErrorString(int error);

struct TaskSchedulerInitOptions {
    // The fiber pool's size: one fiber per worker thread (the thread that
    // called Init is fiber 0) plus one for each task that waits at once.
    // A fiber's stack is made the first time the pool hands it out.
    unsigned FiberPoolSize = 400;
    // Worker threads, the calling thread included. 0: one per core this process
    // may run on (sched_getaffinity, so a restricted mask or cgroup counts).
    unsigned ThreadPoolSize = 0;
    EmptyQueueBehavior Behavior = EmptyQueueBehavior::Sleep;
    EventCallbacks Callbacks;

    // Not in the lineage.
    // Usable stack of each pool fiber, rounded up to whole pages; a guard page
    // below it turns an overflow into a fault.
    std::size_t FiberStackSize = 256 * 1024;
    FiberPoolPolicy PoolPolicy = FiberPoolPolicy::Grow;
    // Pin worker i to the i-th core of the process's affinity set (wrapping
    // when there are more threads than cores). The thread that called Init gets
    // its original affinity back when the scheduler is destroyed.
    bool PinThreads = true;
    // Report a fiber stack overflow (a fault in a fiber's guard page) with the
    // fiber and its stack size, then abort. Installs a SIGSEGV/SIGBUS handler
    // for the scheduler's lifetime that passes every other fault on to the
    // handler installed before it, and an alternate signal stack on each
    // worker thread.
    bool CatchStackOverflow = true;
};

constexpr unsigned kInvalidIndex = std::numeric_limits<unsigned>::max();

class TaskScheduler {
public:
    TaskScheduler();
    ~TaskScheduler();

    TaskScheduler(TaskScheduler const &) = delete;
    TaskScheduler(TaskScheduler &&) = delete;
    TaskScheduler &operator=(TaskScheduler const &) = delete;
    TaskScheduler &operator=(TaskScheduler &&) = delete;

    // Returns 0 on success, or a negative InitError value.
    int Init(TaskSchedulerInitOptions options = TaskSchedulerInitOptions());

    void AddTask(Task task, TaskPriority priority, TaskCounter *counter = nullptr);
    void AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority,
                  TaskCounter *counter = nullptr);

    // Waits until the counter is 0.
    void WaitForCounter(TaskCounter *counter, bool pinToCurrentThread = false);
    // Waits until the flag is clear.
    void WaitForCounter(AtomicFlag *counter, bool pinToCurrentThread = false);
    // Waits until the counter holds value (equality, checked when the wait
    // starts and at every change the counter's operations make).
    void WaitForCounter(FullAtomicCounter *counter, unsigned value, bool pinToCurrentThread = false);

    // The calling thread's worker index in [0, GetThreadCount()), or
    // kInvalidIndex on a thread that is not one of this scheduler's workers.
    // Correct after a wait that resumed on another thread.
    unsigned GetCurrentThreadIndex() const;
    // The calling fiber's index in [0, GetFiberCount()) on a worker thread
    // (0 on the thread that called Init, outside any task), or kInvalidIndex
    // outside the scheduler. A task run inline by a wait reports the waiting
    // fiber it runs on.
    unsigned GetCurrentFiberIndex() const;
    unsigned GetThreadCount() const;
    // Fibers in the pool now (grows under FiberPoolPolicy::Grow).
    unsigned GetFiberCount() const;

    EmptyQueueBehavior GetEmptyQueueBehavior() const;
    // Takes effect at once: workers parked under Sleep wake to follow it.
    void SetEmptyQueueBehavior(EmptyQueueBehavior behavior);

private:
    friend class detail::Scheduler;
    detail::Scheduler *m_impl = nullptr;
};

} // namespace ftl
