// TaskScheduler: a fixed set of worker threads running tasks on a pool of
// fibers.
//
// Contract
// - Init() binds the calling thread as worker 0 and starts the others. The
//   calling thread takes part in the work whenever it waits.
// - AddTask/AddTasks copy the tasks (or move the closures); with a counter,
//   the counter is raised by the number of tasks before any of them can run,
//   and lowered by one as each finishes. They may be called from any thread:
//   tasks added by a thread that is not a worker go through a global queue.
// - An exception that escapes a task added with a TaskCounter is kept by the
//   counter, and the next wait on it rethrows it (see TaskCounter). One that
//   escapes a task without a counter ends the process with a report.
// - WaitForCounter parks the calling fiber when called from a worker (a
//   task, or the thread that called Init): the thread runs other work, and
//   the fiber resumes on any worker, or on the same thread when pinned. The
//   thread that called Init always resumes on its own thread. Called from any
//   other thread, it blocks that thread until the target is reached.
// - Memory ordering: everything a task did before its counter reached the
//   target is visible to whoever waited for it.
// - Destruction runs every task already added (including tasks those tasks
//   add) before the threads stop; no work is dropped. It must be called from
//   the thread that called Init, outside any task.
#pragma once

#include "ftl/callbacks.h"
#include "ftl/detail/closure.h"
#include "ftl/ftl_valgrind.h"
#include "ftl/scheduler_options.h"
#include "ftl/stats.h"
#include "ftl/task.h"

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace ftl {

class TaskCounter;
class FullAtomicCounter;
class AtomicFlag;

namespace detail {
class Scheduler;
} // namespace detail

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
    // Usable stack of each pool fiber, rounded up to whole pages: from 16 KiB
    // to 1 GiB (else Init returns InvalidOptions).
    std::size_t FiberStackSize = 256 * 1024;
    // The inaccessible guard below each pool fiber's stack, rounded up to
    // whole pages: from 1 byte (one page) to 1 GiB (else Init returns
    // InvalidOptions). It is reserved address space, not memory. An overflow
    // faults (and CatchStackOverflow reports it) when the first address it
    // touches lies in the guard; the first touch of a frame is often its
    // lowest address (the return address of a call it makes), so a frame
    // larger than the free stack plus the guard can step over the guard and
    // write into whatever lies below it. Raise it above the largest frame a
    // task has (a large local array), or compile with
    // -fstack-clash-protection (GCC, Clang), which touches each page of a
    // large frame in order, so that any frame meets the guard: the two
    // together are the full answer. A page above each stack is kept
    // inaccessible too, so two stacks' memory is never adjacent. Windows
    // fibers use the system's guard, which compilers there always probe
    // (__chkstk), and ignore this size beyond checking it.
    std::size_t FiberStackGuardSize = 64 * 1024;
    FiberPoolPolicy PoolPolicy = FiberPoolPolicy::Grow;
    // Pin worker i to the i-th core of the process's affinity set (wrapping
    // when there are more threads than cores). The thread that called Init gets
    // its original affinity back when the scheduler is destroyed.
    bool PinThreads = true;
    // With PinThreads, whether the thread that calls Init (worker 0) is pinned
    // too. On Linux a new thread starts with the affinity of the thread that
    // creates it: a thread the pinned caller starts while the scheduler lives
    // (an audio or a loader thread) runs on that one core for its whole life,
    // after the scheduler is gone too, unless it sets its own affinity.
    // False leaves the caller's affinity alone: worker 0 runs wherever the OS
    // puts it, and the threads it starts get its own mask.
    bool PinCallingThread = true;
    // Report a fiber stack overflow (a fault in a fiber's guard) with the
    // fiber and its stack size, then abort(), which runs the program's own
    // SIGABRT handler if it has one. Installs a SIGSEGV/SIGBUS handler for the
    // scheduler's lifetime that passes every other fault on to the handler
    // installed before it, and an alternate signal stack on each worker
    // thread. When the scheduler is destroyed, the handler from before Init
    // is put back only if ftl's is still the one installed: a handler the
    // program installed meanwhile stays.
    bool CatchStackOverflow = true;
    // Write a Chrome trace-event file (open it in Perfetto or
    // chrome://tracing) when the scheduler is destroyed: one span per task on
    // the track of the worker that ran it, named after its function, idle
    // stretches and steals. Null: the environment variable FTL_TRACE names
    // the file, if set. The string must outlive Init.
    char const *TraceFile = nullptr;
    // Events each worker can record (32 bytes each, two per task). When a
    // worker's buffer fills, it stops recording; the trace marks where, and
    // stderr says how many events were not recorded. FTL_TRACE_EVENTS
    // overrides it.
    std::size_t TraceBufferEvents = std::size_t{1} << 20;
    // Under EmptyQueueBehavior::Sleep, the longest a worker out of work keeps
    // looking before it sleeps, in microseconds. It looks briefly (64 looks,
    // 10-50 us) each time, and longer only while wakers keep bringing work
    // soon after it ran out: up to 1.5 times those gaps, at most this long,
    // so that batches handed out that close together find it awake and pay
    // no wake-up (2-4 us each on a KVM host). It keeps its core busy meanwhile. 0: never
    // longer than the brief look (fewer CPU-seconds, a wake-up per batch).
    unsigned MaxIdleSpinMicros = 200;
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

    // A closure as a task: f() or f(TaskScheduler *) runs once. A closure that
    // is trivially copyable and no larger than a pointer travels inside the
    // queued task; one of up to 48 bytes is moved into a slot of the
    // scheduler's closure pool (adding it allocates nothing once the pool is
    // warm); a larger one is moved to the heap. A Task argument selects the
    // lineage overload above.
    template <class F, std::enable_if_t<!std::is_convertible<std::decay_t<F>, Task>::value, int> = 0>
    void AddTask(F &&f, TaskPriority priority, TaskCounter *counter = nullptr) {
        static_assert(detail::kIsTaskClosure<std::decay_t<F>>,
                      "AddTask takes a Task, or a closure called as f() or f(TaskScheduler *)");
        AddClosures(kAnyThread, 1, detail::PackClosure(this, std::forward<F>(f)), priority, counter);
    }
    // count tasks of one closure: f(i) or f(TaskScheduler *, i) runs for each
    // i in [0, count), one task each (in any order, possibly at once). The
    // tasks share one copy of f.
    template <class F, std::enable_if_t<!std::is_convertible<F, Task const *>::value, int> = 0>
    void AddTasks(unsigned count, F &&f, TaskPriority priority, TaskCounter *counter = nullptr) {
        static_assert(
            detail::kIsIndexedClosure<std::decay_t<F>>,
            "AddTasks takes an array of Tasks, or a closure called as f(i) or f(TaskScheduler *, i)");
        if (count != 0) {
            AddClosures(kAnyThread, count, detail::PackSharedClosure(this, count, std::forward<F>(f)),
                        priority, counter);
        }
    }

    // A task that runs only on worker thread `threadIndex` (0 is the thread
    // that called Init, which runs its pinned tasks while it is parked in a
    // wait, a SleepFor or a Yield). For APIs bound to one thread (a graphics
    // context, a window's event loop). A thread index beyond the thread count
    // is a fatal error.
    void AddPinnedTask(unsigned threadIndex, Task task, TaskPriority priority,
                       TaskCounter *counter = nullptr);
    template <class F, std::enable_if_t<!std::is_convertible<std::decay_t<F>, Task>::value, int> = 0>
    void AddPinnedTask(unsigned threadIndex, F &&f, TaskPriority priority, TaskCounter *counter = nullptr) {
        static_assert(detail::kIsTaskClosure<std::decay_t<F>>,
                      "AddPinnedTask takes a Task, or a closure called as f() or f(TaskScheduler *)");
        CheckThreadIndex(threadIndex, "AddPinnedTask");
        AddClosures(threadIndex, 1, detail::PackClosure(this, std::forward<F>(f)), priority, counter);
    }

    // A task that starts after others, with no fiber parked for it: queued
    // once every counter in `prerequisites` has reached 0 (at once if all
    // are 0 already; the same counter may appear twice). `counter`, if given,
    // is raised by one now, so a wait on it covers the task from this call
    // on, and the drain at destruction waits for it. Each prerequisite must
    // outlive the task's start: destroying one first is a fatal error, as
    // for a counter a fiber waits on. A chain of such tasks neither recurses
    // nor holds a fiber per link.
    void AddTaskAfter(std::initializer_list<TaskCounter *> prerequisites, Task task, TaskPriority priority,
                      TaskCounter *counter = nullptr);
    template <class F, std::enable_if_t<!std::is_convertible<std::decay_t<F>, Task>::value, int> = 0>
    void AddTaskAfter(std::initializer_list<TaskCounter *> prerequisites, F &&f, TaskPriority priority,
                      TaskCounter *counter = nullptr) {
        static_assert(detail::kIsTaskClosure<std::decay_t<F>>,
                      "AddTaskAfter takes a Task, or a closure called as f() or f(TaskScheduler *)");
        std::pair<detail::ClosureInvoker, void *> const closure =
            detail::PackClosure(this, std::forward<F>(f));
        AddAfter(prerequisites, nullptr, closure.first, closure.second, priority, counter);
    }

    // Waits until the counter is 0. If a task added with it threw, rethrows
    // the first such exception (see TaskCounter).
    void WaitForCounter(TaskCounter *counter, bool pinToCurrentThread = false);
    // Waits until the flag is clear.
    void WaitForCounter(AtomicFlag *counter, bool pinToCurrentThread = false);
    // Waits until the counter holds value (equality, checked when the wait
    // starts and at every change the counter's operations make).
    void WaitForCounter(FullAtomicCounter *counter, unsigned value, bool pinToCurrentThread = false);

    // The same with a timeout: true when the target was reached, false when
    // the timeout passed first. A timed wait does not run the counter's own
    // tasks while it waits (one could outlast the deadline).
    bool WaitForCounter(TaskCounter *counter, std::chrono::nanoseconds timeout,
                        bool pinToCurrentThread = false);
    bool WaitForCounter(AtomicFlag *flag, std::chrono::nanoseconds timeout, bool pinToCurrentThread = false);
    bool WaitForCounter(FullAtomicCounter *counter, unsigned value, std::chrono::nanoseconds timeout,
                        bool pinToCurrentThread = false);

    // Parks the calling fiber for `duration` (its worker runs other work
    // meanwhile); on a thread that is not a worker, sleeps the thread.
    void SleepFor(std::chrono::nanoseconds duration);
    // Lets the work queued on this worker run first (its tasks, ready fibers,
    // pinned tasks, the global queue), then continues on this worker. On a
    // thread that is not a worker, yields the thread.
    void Yield();

    // The calling thread's worker index in [0, GetThreadCount()), or
    // kInvalidIndex on a thread that is not one of this scheduler's workers.
    // Correct after a wait that resumed on another thread.
    unsigned GetCurrentThreadIndex() const;
    // The calling fiber's index in [0, GetFiberCount()) on a worker thread
    // (0 on the thread that called Init, outside any task), or kInvalidIndex
    // outside the scheduler. A task run inline by a wait reports the waiting
    // fiber it runs on.
    unsigned GetCurrentFiberIndex() const;
    // Whether the running task's counter was cancelled (TaskCounter::Cancel)
    // since it started, for a long task to poll and return early. False
    // outside a task, and for a task added without a counter.
    bool IsCurrentTaskCancelled() const;
    unsigned GetThreadCount() const;
    // Fibers in the pool now (grows under FiberPoolPolicy::Grow).
    unsigned GetFiberCount() const;

    // What each worker did since Init, and the fiber pool's use (see
    // ftl/stats.h). Any thread, at any time after Init.
    SchedulerStats GetStats() const;
    // The fibers parked in a wait now, each with what it waits for and the
    // task that waits, by fiber index. Any thread, any time after Init; a
    // snapshot (fibers park and resume meanwhile), exact when nothing moves:
    // the drain at destruction prints it when the tasks left can never
    // finish.
    std::vector<WaitingFiber> GetWaitingFibers() const;

    EmptyQueueBehavior GetEmptyQueueBehavior() const;
    // Takes effect at once: workers parked under Sleep wake to follow it.
    void SetEmptyQueueBehavior(EmptyQueueBehavior behavior);

private:
    friend class detail::Scheduler;
    static constexpr unsigned kAnyThread = std::numeric_limits<unsigned>::max();
    void AddClosures(unsigned threadIndex, unsigned count, std::pair<detail::ClosureInvoker, void *> closure,
                     TaskPriority priority, TaskCounter *counter);
    void CheckThreadIndex(unsigned threadIndex, char const *what) const;
    // AddTaskAfter's: `function` for a Task, or else the packed closure.
    void AddAfter(std::initializer_list<TaskCounter *> prerequisites, TaskFunction function,
                  detail::ClosureInvoker invoker, void *arg, TaskPriority priority, TaskCounter *counter);

    detail::Scheduler *m_impl = nullptr;
};

} // namespace ftl
