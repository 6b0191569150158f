// The scheduler's internals behind ftl::TaskScheduler.
//
// Files, by concern:
//   task_scheduler.cpp  lifecycle (Init, threads, shutdown) and AddTask
//   worker.cpp          the worker loop: ticks, find-work order, stealing
//   idle.cpp / Park     searching, parking and waking (worker.cpp: Idle, Park, NotifyWork)
//   fiber.cpp           stacks, the switch, the post-switch step
//   wait.cpp            waiting: publishing waiters, readying fibers
//   fiber_pool.cpp      the fiber pool
//   counters.cpp, fibtex.cpp  the waitable primitives
//
// Lock order: a waitable's WaitList lock is a leaf: nothing else is taken
// while it is held (readying a fiber happens after it is released). The
// global queue's mutex is a leaf too. The pool's grow mutex is taken only in
// FiberPool::Acquire, with no other lock held.
#pragma once

#include "fiber.h"
#include "fiber_pool.h"
#include "ftl/task_scheduler.h"
#include "global_queue.h"
#include "idle.h"
#include "platform.h"
#include "wait_list.h"
#include "worker.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace ftl {

class AtomicFlag;

namespace detail {

class Scheduler {
public:
    Scheduler(TaskScheduler *owner, TaskSchedulerInitOptions const &options);
    ~Scheduler();
    Scheduler(Scheduler const &) = delete;
    Scheduler &operator=(Scheduler const &) = delete;

    // Lifecycle (task_scheduler.cpp).
    InitError Start();
    void Shutdown();

    static Scheduler *Of(TaskScheduler *taskScheduler) { return taskScheduler->m_impl; }
    TaskScheduler *Owner() const { return m_owner; }
    unsigned NumWorkers() const { return m_numWorkers; }
    FiberPool &Pool() { return m_pool; }
    EventCallbacks const &Callbacks() const { return m_options.Callbacks; }
    EmptyQueueBehavior Behavior() const { return m_behavior.load(std::memory_order_relaxed); }
    void SetBehavior(EmptyQueueBehavior behavior);

    // The calling thread's worker if it belongs to this scheduler, else nullptr.
    Worker *CurrentWorkerOfThis() const;

    void AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority, TaskCounter *counter);

    // Waiting (wait.cpp). Parks the running fiber of `worker` until Register
    // decides the condition holds; returns the worker it resumed on.
    Worker *Wait(Worker *worker, bool pin, bool (*registerWaiter)(void *, WaitNode *), void *waitable,
                 unsigned target);
    // Before a wait on `counter` parks: runs the counter's own tasks from the
    // bottom of this worker's deques on the waiting fiber itself. Returns the
    // worker it ends on (an inline task may wait and move the fiber).
    Worker *RunChildrenInline(Worker *worker, TaskCounter *counter);
    // Task completion. A finished task's counter decrement and finished count
    // wait on the worker until it is about to do anything but run another
    // task of the same counter: a task of another counter (BeforeTask), a
    // wait, a ready fiber, going idle. Nothing can need the decrement sooner:
    // a waiter on that counter needs the task in between finished too.
    void BeforeTask(Worker *worker, TaskCounter *counter) {
        if (worker->m_doneCount != 0 && counter != worker->m_doneCounter) {
            PublishFinished(worker);
        }
    }
    void FinishTask(Worker *worker, TaskCounter *counter) {
        if (counter != worker->m_doneCounter) {
            PublishFinished(worker);
            worker->m_doneCounter = counter;
        }
        ++worker->m_doneCount;
    }
    void PublishFinished(Worker *worker);
    // This worker's finished tasks of `counter` not yet published.
    static unsigned UnpublishedOf(Worker const *worker, TaskCounter const *counter) {
        return worker->m_doneCounter == counter ? worker->m_doneCount : 0;
    }
    // Whether a task may run inline on `fiber` now: only while at least
    // kInlineStackShareNum/Den of FiberStackSize is free below the caller's frame, so
    // a task run inline starts with at least that much stack, wherever it runs.
    bool InlineStackFree(Fiber const *fiber) const {
        auto const here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
        return fiber->StackFloor != 0 && here > fiber->StackFloor &&
               here - fiber->StackFloor >= m_inlineStackNeed;
    }
    // Makes a waiting fiber runnable again. Any thread.
    void ReadyFiber(Fiber *fiber, Worker *pinnedTo);
    // The post-switch step for record (already copied out by FinishSwitch).
    void AfterSwitchStep(SwitchRecord const &record, Worker *worker);

    // The loop every pool fiber runs (worker.cpp). Never returns.
    [[noreturn]] void FiberLoop(Fiber *self, Worker *worker);
    static void FiberEntry(boost::context::detail::transfer_t transfer);

private:
    friend class ftl::TaskScheduler;

    // worker.cpp
    bool FindWork(Worker *worker, TaskItem &item);
    // The find-work order's turns, checked on every item (defined below, so
    // that wait.cpp's inline loop inlines them too).
    bool GlobalQueueDue(Worker const *worker) const;
    bool TasksDue(Worker const *worker) const;
    bool QueuedWorkDue(Worker *worker);
    bool GlobalWorkDue(Worker *worker);
    void CountItem(Worker *worker);
    bool TakeReadyFiber(Worker *worker, Fiber *&fiber);
    bool TakeTask(Worker *worker, TaskItem &item);
    bool TakeChildren(Worker *worker, TaskCounter const *counter, InlineHand &hand);
    bool HigherPriorityWaiting(Worker const *worker, unsigned queue) const;
    void ReturnHands(Worker *worker, InlineHand *hand);
    bool ReadyFiberWaiting(Worker const *worker) const;
    bool StealWork(Worker *worker, TaskItem &item);
    bool TakeGlobal(Worker *worker, TaskItem &item);
    void EndTick(Worker *worker);
    Worker *RunItem(Fiber *self, Worker *worker, TaskItem const &item);
    void RunTaskFunction(TaskItem const &item);
    Worker *Idle(Fiber *self, Worker *worker);
    void Park(Worker *worker);
    bool AnyWorkVisible(Worker *worker) const;
    // Who publishes the work: a worker of this scheduler, or a thread outside.
    enum class Waker { Worker, Outside };
    void NotifyWork(Waker waker);
    void WakeWorker(unsigned index);
    int WorkerOnCallersCpu() const;
    void WakeAllParked();
    Worker *ExitWorkerThread(Fiber *self, Worker *worker);
    void FoundWork(Worker *worker);

    // Destruction's wait for every added task to finish.
    bool Quiescent() const;
    std::uint64_t FinishedCount() const;
    void CheckDrain(Worker *worker);

    void ThreadMain(Worker *worker);

    TaskScheduler *m_owner;
    TaskSchedulerInitOptions m_options;
    unsigned m_numWorkers = 0;
    std::unique_ptr<Worker[]> m_workers;
    FiberPool m_pool;
    IdleState m_idle;
    // High, Normal; ready fibers readied outside the workers go to High.
    GlobalQueue m_global[kNumPriorities];

    std::atomic<EmptyQueueBehavior> m_behavior{EmptyQueueBehavior::Sleep};
    alignas(64) std::atomic<bool> m_quit{false};
    std::atomic<bool> m_drainRequested{false};
    std::unique_ptr<AtomicFlag> m_drainFlag;
    std::atomic<std::uint64_t> m_externalAdded{0};
    std::atomic<std::uint32_t> m_workersUp{0}; // worker threads started (Start waits for all)
    // Stall detection while draining: the finished count last seen changing,
    // and when.
    std::atomic<std::uint64_t> m_drainProgress{0};
    std::atomic<std::uint64_t> m_drainProgressNs{0};
    std::uintptr_t m_inlineStackNeed = 0; // see InlineStackFree
    SavedAffinity m_initThreadAffinity;
    bool m_started = false;
};

inline void Scheduler::CountItem(Worker *worker) {
    if (worker->m_globalCountdown != 0) {
        --worker->m_globalCountdown;
    }
    ++worker->m_itemsThisTick;
    if (m_options.Features.Budget && --worker->m_budget == 0) {
        EndTick(worker);
    }
}

inline bool Scheduler::GlobalQueueDue(Worker const *worker) const {
    return worker->m_globalCountdown == 0;
}

inline bool Scheduler::TasksDue(Worker const *worker) const {
    SchedulerFeatures const &features = m_options.Features;
    return !features.ReadyFibersFirst || (features.Budget && worker->m_itemsThisTick == 0);
}

// Whether the global queue's turn has come and it has work. A turn that finds
// it empty is over: the next comes m_globalInterval items later.
inline bool Scheduler::GlobalWorkDue(Worker *worker) {
    if (!GlobalQueueDue(worker)) {
        return false;
    }
    for (auto const &queue : m_global) {
        if (!queue.LooksEmpty()) {
            return true;
        }
    }
    worker->m_globalCountdown = worker->m_globalInterval;
    return false;
}

inline bool Scheduler::QueuedWorkDue(Worker *worker) {
    if (TasksDue(worker)) {
        for (auto const &deque : worker->m_tasks) {
            if (!deque.LooksEmpty()) {
                return true;
            }
        }
    }
    return GlobalWorkDue(worker);
}

inline bool Scheduler::ReadyFiberWaiting(Worker const *worker) const {
    return !worker->m_pinned.LooksEmpty() || !worker->m_ready.LooksEmpty();
}

inline bool Scheduler::HigherPriorityWaiting(Worker const *worker, unsigned queue) const {
    for (unsigned higher = 0; higher < queue; ++higher) {
        if (!worker->m_tasks[higher].LooksEmpty()) {
            return true;
        }
    }
    return false;
}

} // namespace detail
} // namespace ftl
