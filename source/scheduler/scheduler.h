// The scheduler behind ftl::TaskScheduler: what the workers share (the fiber
// pool, the idle state, the global queues, the options) and the lifecycle:
// start, adding work, the drain at destruction, and one teardown path.
//
// Where each mechanism lives (source/; docs/design.adoc has the full map):
//   platform/    the OS: futex, affinity, the clock, the fault handler
//   fiber/       stacks, the raw switch, the fiber pool
//   queue/       the work-stealing deque, the global queue, the pinned inbox
//   idle/        searching, parking and waking (the park/wake protocol)
//   policy/      the adaptive heuristics, one class each: steal backoff and
//                batches, the next slot's wake, the global queue's interval,
//                the adaptive spin, a contended Fibtex's wait
//   wait/        waiter lists (nodes on the waiting fibers' stacks)
//   trace/       the trace buffers, the session, the Chrome trace writer
//   scheduler/   worker.*    the worker loop, its tick, the find-work order,
//                            visible work, stealing, the next slot, a task's
//                            run and finish, the switch step
//                help.*      helping while waiting (inline children)
//                pressure.*  fiber pressure
//                wait.*      parking a fiber on a waitable, readying it; a
//                            thread's own wait
//                timers.*    the deadlines of timed waits and sleeps
//                drain.cpp   the drain at destruction and its stall report
//                scheduler.* this: shared state and the lifecycle
//                stats.cpp   GetStats, GetWaitingFibers, FTL_STATS
//                observe.h   spans a layer above reports (the task graph)
//                counter_ops.h  what the scheduler needs of the counters
//                mechanisms.h  measurement switches (tests, ftl_bench)
//   waitables/   the public counters' and Fibtex's code; Fibtex's thread
//                state (lock_thread.*) and per-scheduler context
//   task_scheduler.cpp  the public facade
//
// Lock order: a waitable's WaitList lock is a leaf: nothing else is taken
// while it is held (readying a fiber happens after it is released). The
// global queue's mutex is a leaf too. The pool's mutex is taken only inside
// FiberPool, with no other lock held.
#pragma once

#include "fiber/fiber_pool.h"
#include "ftl/task_scheduler.h"
#include "idle/idle.h"
#include "platform/platform.h"
#include "queue/closure_pool.h"
#include "queue/global_queue.h"
#include "scheduler/mechanisms.h"
#include "scheduler/timers.h"
#include "scheduler/worker.h"
#include "trace/session.h"
#include "waitables/fibtex_context.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ftl {

class AtomicFlag;

namespace detail {

// While the scheduler drains at destruction, parked workers look this often
// for a drain that cannot end.
constexpr std::uint64_t kDrainPollNs = 100u * 1000u * 1000u;
// A drain in which no task has finished for this long, with every worker idle
// and no work queued, can never end: it is reported (see CheckDrain).
constexpr std::uint64_t kDrainStallNs = 2000u * 1000u * 1000u;

class Scheduler {
public:
    // TaskScheduler::Init's work: makes and starts a scheduler for `owner`.
    static int Init(TaskScheduler &owner, TaskSchedulerInitOptions const &options,
                    Mechanisms const &mechanisms);
    static Scheduler *Of(TaskScheduler *taskScheduler) { return taskScheduler->m_impl; }
    // Runs every task already added, then stops the workers and frees
    // everything; then deletes the scheduler. From the Init thread only.
    static void Destroy(TaskScheduler &owner);

    TaskScheduler *Owner() const { return m_owner; }
    unsigned NumWorkers() const { return m_numWorkers; }
    Worker &WorkerAt(unsigned index) { return m_workers[index]; }
    // What the Fibtexes of this scheduler's tasks share (fibtex_context.h).
    FibtexContext &Fibtexes() { return m_fibtexes; }
    FiberPool &Pool() { return m_pool; }
    // GetStats (source/scheduler/stats.cpp).
    SchedulerStats Stats() const;
    // At destruction: prints the statistics to stderr when FTL_STATS is set.
    void PrintStatsIfAsked() const;
    std::vector<WaitingFiber> WaitingFibers() const;
    IdleState &Parking() { return m_idle; }
    GlobalQueue &Global(unsigned queue) { return m_global[queue]; }
    EventCallbacks const &Callbacks() const { return m_options.Callbacks; }
    Mechanisms const &Switches() const { return m_mechanisms; }
    EmptyQueueBehavior Behavior() const { return m_behavior.load(std::memory_order_relaxed); }
    void SetBehavior(EmptyQueueBehavior behavior);
    bool Quitting() const { return m_quit.load(std::memory_order_acquire); }
    bool Draining() const { return m_drainRequested.load(std::memory_order_relaxed); }
    // A task runs inline only while this much of its fiber's stack is free
    // (help.cpp).
    std::uintptr_t InlineStackNeed() const { return m_inlineStackNeed; }
    // Whether a wait runs its counter's tasks inline (help.h): not with the
    // InlineChildren switch off, nor where fiber attach and detach callbacks
    // are installed, which are told of the fibers that really run a task (a
    // wait then parks, and a pool fiber runs the tasks, as in the lineage).
    bool HelpsInline() const { return m_helpsInline; }

    // The calling thread's worker if it belongs to this scheduler, else nullptr.
    Worker *CurrentWorkerOfThis() const { return CurrentWorkerOf(this); }

    // Queues tasks (closures) for any worker, or only for worker
    // `threadIndex` when it is below NumWorkers().
    void AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority, TaskCounter *counter,
                  unsigned threadIndex);
    void AddClosures(unsigned count, ClosureInvoker invoker, void *arg, TaskPriority priority,
                     TaskCounter *counter, unsigned threadIndex);
    void CheckThreadIndex(unsigned threadIndex, char const *what) const;
    // A task that starts once every counter in [prerequisites, +count) is 0
    // (after.cpp), and its start, when the last of them got there: `task`,
    // counted as added when AddAfter was called, is queued as a task added
    // by the calling thread.
    void AddAfter(TaskCounter *const *prerequisites, std::size_t count, TaskItem const &task,
                  TaskPriority priority);
    // Queues a task whose prerequisites all reached 0, from `self`, the
    // calling thread's worker. A worker's caller then wakes a worker for it,
    // once for all it queued together (NotifyStarted); from a thread outside
    // the scheduler (nullptr) StartAfter wakes one itself.
    void StartAfter(Worker *self, TaskItem const &task, unsigned queue);
    void NotifyStarted();
    // The slots of AddTaskAfter's records, and their size (after.cpp).
    ClosurePool &AfterRecords() { return m_afterRecords; }
    static std::size_t AfterRecordBytes();
    ClosurePool &Closures() { return m_closures; }
    // After work was published: wakes a worker if none is searching. Work
    // from a thread outside the scheduler wakes the worker pinned to the
    // caller's CPU first, and the caller then yields (YieldToWoken).
    enum class Waker { Worker, Outside };
    void NotifyWork(Waker waker);
    // After work was published that only worker `index` can take, by any
    // thread but that worker: wakes it if it is parked (a thread outside the
    // scheduler on its CPU then yields to it, as in NotifyWork).
    void NotifyWorker(unsigned index, Waker waker);
    // Whether `worker` could find work anywhere now (Worker::Visible and
    // Stealable). othersTasks: also other workers' task deques (the ready
    // deques and every queue `worker` owns or shares are always looked at);
    // yielded: its yielded fibers count as work.
    bool AnyWorkVisible(Worker const &worker, bool othersTasks = true, bool yielded = true) const;
    // A call from a thread that is not one of this scheduler's workers (an
    // outside thread, or a task of another scheduler) that readies a fiber or
    // adds tasks. Once it has readied a fiber, that fiber may finish the last
    // task and let the Init thread destroy the scheduler while the call still
    // wakes a worker: Destroy waits until no such call is inside (the count
    // goes up before the fiber is queued, and down, release, as the call's
    // last touch of the scheduler).
    class OutsideCall {
    public:
        explicit OutsideCall(Scheduler &scheduler) : m_scheduler(scheduler) {
            m_scheduler.m_outsideCalls.fetch_add(1, std::memory_order_seq_cst);
        }
        ~OutsideCall() { m_scheduler.m_outsideCalls.fetch_sub(1, std::memory_order_release); }
        OutsideCall(OutsideCall const &) = delete;
        OutsideCall &operator=(OutsideCall const &) = delete;

    private:
        Scheduler &m_scheduler;
    };
    // Whether the scheduler's destruction has begun: adding tasks from an
    // outside thread is then a fatal error (see AddItems).
    bool Destroying() const { return m_destroying.load(std::memory_order_seq_cst); }
    // Timers (timers.h): a timed wait's or a sleep's node on the heap, and
    // off it; a parked worker is woken when the node's deadline is the new
    // earliest, so that it sleeps until then at most.
    void AddTimer(WaitNode *node);
    void RemoveTimer(WaitNode *node);
    // Ends the timed waits that are due (cheap when none is: one load).
    void FireDueTimers();
    // How long an idle worker may sleep before a timer is due: 0 when none
    // is pending, at least 1 ns.
    std::uint64_t TimeToNextTimer() const;
    // Worker threads count themselves up (Init waits for all of them).
    void WorkerStarted();
    // While draining: ends the drain when every task has finished, and
    // reports a drain that can never end. `yielding`: `worker` is about to
    // resume a fiber that called Yield, with nothing else queued on it (its
    // yielded fibers then count as no work).
    void CheckDrain(Worker const &worker, bool yielding = false);

private:
    Scheduler(TaskScheduler *owner, TaskSchedulerInitOptions const &options, Mechanisms const &mechanisms);
    ~Scheduler();
    Scheduler(Scheduler const &) = delete;
    Scheduler &operator=(Scheduler const &) = delete;

    template <class Make>
    void AddItems(unsigned count, Make &&make, TaskPriority priority, TaskCounter *counter,
                  unsigned threadIndex);
    // AddItems's other paths, pinned tasks and an outside thread's: `worker`
    // is the calling thread's, or nullptr for an outside thread.
    template <class Make>
    void PushItems(Worker *worker, unsigned count, Make &make, TaskPriority priority, TaskCounter *counter,
                   unsigned threadIndex);
    // Init's steps: Start validates the options, builds the workers and the
    // shared state, makes the fiber pool and starts the threads.
    InitError Start();
    InitError Validate(std::vector<int> const &cpus);
    void BuildWorkers(std::vector<int> const &cpus);
    InitError StartThreads();
    void ThreadMain(Worker *worker);
    void Drain();
    // Destroy's: until no OutsideCall is inside.
    void AwaitOutsideCalls() const;
    // Stops the worker threads started so far and frees what Start made:
    // the one way out, for a failed Start and for destruction alike.
    void Teardown(unsigned threadsStarted);
    int WorkerOnCallersCpu() const;
    // Whether worker `index` is pinned to the calling thread's CPU.
    bool OnCallersCpu(unsigned index) const;
    // After waking worker `index` on the caller's CPU from outside: yields
    // unless the worker has run since (its wake-up count moved on).
    void YieldToWoken(unsigned index, std::uint64_t wakeUpsBefore);
    bool PinsCallingThread() const { return m_options.PinThreads && m_options.PinCallingThread; }
    std::uint64_t AddedCount() const;
    std::uint64_t FinishedCount() const;
    bool Quiescent() const;
    // For CheckDrain: whether every worker but `self` is parked or, when
    // `yielding` (self resumes a yielded fiber), has resumed only fibers
    // that call Yield since `now - kDrainPollNs`. (A parked worker leaves
    // the report to a yielding one, which names the yields.)
    bool OthersStalled(unsigned self, std::uint64_t now, bool yielding) const;
    static bool ExplainFault(std::uintptr_t address);

    TaskScheduler *m_owner;
    TaskSchedulerInitOptions m_options;
    Mechanisms m_mechanisms;
    unsigned m_numWorkers = 0;
    std::uint64_t m_startNs = 0; // NowNs() at Start, for the busy times
    std::unique_ptr<Worker[]> m_workers;
    FiberPool m_pool;
    ClosurePool m_closures;
    ClosurePool m_afterRecords{AfterRecordBytes()};
    Timers m_timers;
    IdleState m_idle;
    FibtexContext m_fibtexes;
    // High, Normal; fibers readied outside the workers go to High.
    GlobalQueue m_global[kNumPriorities];

    std::atomic<EmptyQueueBehavior> m_behavior{EmptyQueueBehavior::Sleep};
    alignas(64) std::atomic<bool> m_quit{false};
    std::atomic<bool> m_drainRequested{false};
    std::unique_ptr<AtomicFlag> m_drainFlag;
    std::atomic<std::uint64_t> m_externalAdded{0};
    std::atomic<std::uint32_t> m_outsideCalls{0}; // OutsideCall
    std::atomic<bool> m_destroying{false};
    std::atomic<std::uint32_t> m_workersUp{0}; // worker threads started (Start waits for all)
    // Stall detection while draining: the finished count last seen changing,
    // and when.
    std::atomic<std::uint64_t> m_drainProgress{0};
    std::atomic<std::uint64_t> m_drainProgressNs{0};
    std::atomic<bool> m_stallReported{false};
    std::uintptr_t m_inlineStackNeed = 0;
    bool m_helpsInline = true;
    SavedAffinity m_initThreadAffinity;
    TraceSession m_trace;
};

} // namespace detail
} // namespace ftl
