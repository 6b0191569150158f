// A worker: one OS thread's share of the scheduler, and the loop every pool
// fiber runs on it. The worker owns its queues, its tick (the budget and the
// global queue's turn), the find-work order, a task's run and finish, and the
// switch between fibers with its post-switch step.
//
// The find-work order (docs/design.adoc, "The find-work order") is written
// once, in WalkOrder: FindWork takes from its sources in that order, and the
// wait's hand-off (wait.cpp) and the helping loop (help.cpp) ask NextSource
// which source the order would take from now.
//
// Fields the owner alone touches come first; fields other threads read or
// write sit on cache lines of their own.
#pragma once

#include "fiber/fiber.h"
#include "ftl/stats.h"
#include "platform/fault.h"
#include "platform/platform.h"
#include "policy/global_interval.h"
#include "policy/next_wake.h"
#include "policy/steal.h"
#include "queue/fiber_inbox.h"
#include "queue/global_queue.h"
#include "queue/task_item.h"
#include "queue/work_deque.h"
#include "scheduler/counter_ops.h"
#include "scheduler/mechanisms.h"
#include "scheduler/pressure.h"
#include "trace/trace.h"
#include "waitables/lock_thread.h"

#include <atomic>
#include <cstdint>
#include <thread>

namespace ftl {

class TaskScheduler;
struct EventCallbacks;

namespace detail {

class Scheduler;
struct WaitNode;

// Items a tick before its maintenance (the moving average, due timers):
// Tokio's and Volt's BUDGET_PER_TICK.
constexpr unsigned kBudgetPerTick = 128;

using TaskDeque = WorkDeque<TaskItem, TaskCell>;
using FiberDeque = WorkDeque<Fiber *, PointerCell<Fiber *>>;

// High, Normal.
constexpr unsigned kNumPriorities = 2;

// What the fiber switched to does with the fiber switched from.
enum class AfterSwitch : std::uint8_t {
    Started,      // a worker thread's own fiber handed the thread to the worker's first fiber:
                  // the worker is up (Init waits for every worker's)
    ReturnToPool, // the fiber left is idle: back to the free list
    Park,         // the fiber left waits: publish it as a waiter
};

// Everything the other side of a switch needs. It lives on the stack of the
// fiber being left, which stays valid until the post-switch step publishes
// that fiber; the receiving side copies it first.
struct SwitchRecord {
    Fiber *From;
    Fiber *To;
    Worker *OnWorker;
    AfterSwitch Action;
    // Park only: registers Node on Waitable's list unless the condition it
    // waits for already holds (then returns false and the fiber is readied).
    bool (*Register)(void *waitable, WaitNode *node) = nullptr;
    void *Waitable = nullptr;
    WaitNode *Node = nullptr;
};

// Where the find-work order can take an item from.
enum class Source : std::uint8_t {
    Global,     // the global queue (outside threads' tasks and readied fibers)
    Tasks,      // this worker's pinned tasks, then its task deques, High before Normal
    ReadyFiber, // this worker's pinned inbox, then its ready deque
    Yielded,    // this worker's fibers that called Yield, oldest first
    Steal,      // another worker's ready fibers, then its tasks
    None,       // (NextSource) nothing visible
};

class alignas(kPrefetchPairBytes) Worker {
public:
    // globalQueues: the scheduler's kNumPriorities global queues.
    void Init(Scheduler *scheduler, GlobalQueue *globalQueues, unsigned index, int cpu,
              Mechanisms const &mechanisms);

    Scheduler &Owner() const { return *m_scheduler; }
    unsigned Index() const { return m_index; }
    int Cpu() const { return m_cpu; } // pinned to (or -1: worker 0, PinCallingThread off)
    Fiber *CurrentFiber() const { return m_currentFiber; }
    Fiber &ThreadFiber() { return m_threadFiber; }
    // This worker's thread's LockThreadState (valid from EnterThread on).
    LockThreadState *LockThread() const { return m_lockThread; }

    // --- The thread ---
    // The calling thread becomes this worker: its stack is the worker's
    // thread fiber (pool index Index(); `reported` as in Fiber::Reported),
    // pinned to Cpu() when `pin`, with room for the fault handler to report
    // a stack overflow when `faultStack`.
    void EnterThread(bool reported, bool pin, bool faultStack);
    void LeaveThread();
    std::thread &Thread() { return m_thread; }
    // Worker threads 1..n-1: hands the thread to the worker's first pool
    // fiber; returns when the scheduler quits.
    void RunThread(Fiber *first);

    // --- The loop every pool fiber runs ---
    static void FiberEntry(void *message);

    // --- The find-work order ---
    // Calls visit(source) for each source in the order a worker takes its
    // next item from them, until one returns true; returns whether one did.
    // Always inlined, like NextSource: each caller's visit folds into the
    // order's steps (an inline loop asks NextSource before every child; out
    // of line, the order cost a W1 task a fifth more instructions).
    template <class Visit>
    __attribute__((always_inline)) bool WalkOrder(Visit &&visit) const;
    // The first source in the order with visible work (fence-free looks, so
    // the answer may be stale by the time it is used; the take decides).
    // `heldTasks`: the caller holds tasks of this worker's deques (an inline
    // loop's hand), which count as visible Tasks. A global-queue turn that
    // finds the queue empty is over.
    __attribute__((always_inline)) Source NextSource(bool heldTasks);
    bool TakeReadyFiber(Fiber *&fiber);
    // Moves the next slot's fiber, if any, to the ready deque, where every
    // worker may take it, and wakes one for it (a relaxed load when empty).
    void PublishNext();
    bool NextLooksEmpty() const { return m_next.load(std::memory_order_relaxed) == 0; }
    // Whether a task of higher priority than `queue` waits in this worker's
    // deques or pinned tasks.
    bool HigherPriorityWaiting(unsigned queue) const;

    // --- Fiber pressure (scheduler/pressure.h) ---
    // The depth (TaskItem::Depth) of the task running now (0 outside any):
    // set when the loop starts a task, by an inline loop for the children
    // it runs (its own depth + 1, whoever added them), and by a fiber that
    // resumes from a wait.
    unsigned TaskDepth() const { return m_taskDepth; }
    void SetTaskDepth(unsigned depth) { m_taskDepth = depth; }
    FiberPressure &Pressure() { return m_pressure; }
    ParkedWaits *PressureList() { return &m_parkedWaits; }
    // Whether the current search for work is under pressure: inline loops
    // then run their children to the end.
    bool UnderPressure() const { return m_pressure.CurrentFloor() != 0; }

    // --- The tick ---
    // Every item run (task, inline child, resumed fiber) counts.
    void CountItem();

    // --- A task's run and finish ---
    // Runs a task on the current fiber; returns the worker it ends on (the
    // task may wait and resume elsewhere).
    Worker *RunTask(TaskItem const &item);
    // RunTask for a caller that knows whether tasks are observed (the same
    // for every worker of a scheduler, for its whole life): a loop over many
    // tasks looks once.
    Worker *RunPlainTask(TaskItem const &item);
    Worker *RunObservedTask(TaskItem const &item);
    // Whether the task's counter was cancelled (TaskCounter::Cancel): then
    // SkipTasks destroys its closure uncalled and counts it as finished.
    static bool Cancelled(TaskItem const &item) {
        return item.Counter != nullptr && CounterOps::Skips(*item.Counter);
    }
    // Skips `count` tasks of one counter; returns the worker it ends on (a
    // closure's destructor may wait).
    [[gnu::cold, gnu::noinline]] Worker *SkipTasks(TaskItem const *items, unsigned count);
    // A scheduling point: the running task waits, the worker switches to
    // another fiber, or it is out of work. Publishes this worker's finished
    // tasks (a waiter may need them, and what runs next may run long) and
    // judges the next slot's wake (NextWakePolicy). True if there were
    // finishes to publish (they may have readied a fiber).
    bool AtSchedulingPoint() {
        m_nextWake.AtSchedulingPoint(NowNs);
        return PublishFinished();
    }
    // Publishes this worker's finished tasks not yet published; true if there
    // were any. Besides AtSchedulingPoint, only TaskEnded's batching, RunItem
    // and a counter wait's look at the value (which may wait for them, and
    // is no scheduling point when the value is there) call it.
    bool PublishFinished() { return m_doneCount != 0 && PublishHeld(); }
    // This worker's finished tasks of `counter` not yet published.
    unsigned UnpublishedOf(TaskCounter const *counter) const {
        return m_doneCounter == counter ? m_doneCount : 0;
    }

    // --- Switching ---
    // Switches from record.From (the running fiber) to record.To; this
    // worker's finished tasks are published already (a scheduling point, or
    // RunItem). Returns when record.From is resumed, with the worker it runs
    // on then.
    Worker *SwitchTo(SwitchRecord &record);

    // --- Queues, and the counts the drain at destruction reads ---
    TaskDeque &Tasks(unsigned queue) { return m_tasks[queue]; }
    // Tasks only this worker may run (AddPinnedTask), by priority.
    GlobalQueue &PinnedTasks(unsigned queue) { return m_pinnedTasks[queue]; }
    bool PinnedTasksLookEmpty() const {
        return m_pinnedTasks[0].LooksEmpty() && m_pinnedTasks[1].LooksEmpty();
    }
    FiberDeque &ReadyFibers() { return m_ready; }
    // A fiber that the running task readied (ReadyFiber's keepLocal): it
    // waits in the next slot, which only this worker takes from, and runs
    // as soon as the task waits or ends; nobody is woken for it. Anything
    // else this worker runs first publishes it to the ready deque (see
    // FindWork and TakeReadyFiber). A searching worker that sees the same
    // fill of the slot on two looks takes it (Steal), so a task that goes on
    // running does not hold it forever while another worker looks for work.
    // goesOn: the readying task usually goes on running (an unlock, a
    // notify), so a parked worker is woken to take the fiber when nobody is
    // searching, unless this worker's recent such wakes were wasted (see
    // NextWakePolicy).
    void KeepReadied(Fiber *fiber, bool goesOn);
    // Whether a fiber readied now may wait in the next slot: not when the
    // Init thread readies it from its own code, outside any task (its own
    // fiber, with no inline loop on it). That code may stay out of the
    // scheduler for any length of time, and neither waits nor ends soon
    // the way a task does, so the fiber goes where every worker sees it.
    bool KeepsReadied() const {
        return m_nextSlot && (!m_currentFiber->IsThreadFiber || m_currentFiber->Hand != nullptr);
    }
    // For the idle spin: whether another worker's next slot holds the fill
    // this worker saw there at its previous look (then Steal takes it).
    bool SeesHeldNext();
    FiberInbox &Pinned() { return m_pinned; }
    FiberInbox const &Pinned() const { return m_pinned; }
    // Visible work, the one definition every look uses (fence-free, so the
    // answer may be stale by the time it is used; the take decides).
    // Whether `source` holds work this worker may take; `heldTasks`: the
    // caller holds tasks of this worker's deques (an inline loop's hand),
    // which count as visible Tasks. (Steal: see Stealable.)
    __attribute__((always_inline)) bool Visible(Source source, bool heldTasks = false) const;
    // Whether other workers may steal from this one: its ready deque, and
    // with `tasks` its task deques.
    bool Stealable(bool tasks) const {
        return !m_ready.LooksEmpty() || (tasks && !(m_tasks[0].LooksEmpty() && m_tasks[1].LooksEmpty()));
    }
    // Whether this look (a spin round's, or Steal's) may take in other
    // workers' task deques (StealPolicy). Counts the look.
    bool MayStealTasks() { return m_steal.MayLook(NowNs); }
    // Fibers that called Yield (owner only): they run after everything
    // queued on this worker.
    void PushYielded(Fiber *fiber);
    bool HasYielded() const { return m_yieldedHead != nullptr; }
    // While the scheduler drains: whether this worker resumed a yielded
    // fiber with nothing else queued on it at `since` or later (NowNs).
    bool YieldLoopSince(std::uint64_t since) const {
        std::uint64_t const at = m_yieldLoopNs.load(std::memory_order_relaxed);
        return at != 0 && at >= since;
    }
    void CountAdded(std::uint64_t n) { AddOwned(m_tasksAdded, n, std::memory_order_release); }
    std::uint64_t Added() const { return m_tasksAdded.load(std::memory_order_acquire); }
    std::uint64_t Finished() const { return m_tasksFinished.load(std::memory_order_acquire); }
    // This worker's part of GetStats (its counts; Parks and WakeUps are the
    // idle state's, the busy time the scheduler's).
    void FillStats(WorkerStats &stats, std::uint64_t now) const;

    // --- Observing: the trace and the task and wait callbacks ---
    // Set before the worker runs anything; `trace` may be null, and so may
    // every callback: then nothing is observed, at the cost of one branch
    // per task.
    void SetObservers(TraceBuffer *trace, EventCallbacks const &callbacks);
    bool Observed() const { return m_observe; } // the same on every worker, from Init on
    TraceBuffer const *Trace() const { return m_trace; }
    // The running fiber parks on `node` (before the switch), and runs again
    // (after it, on the worker it resumed on).
    void ObserveWaitBegin(WaitNode const &node);
    void ObserveWaitEnd(WaitNode const &node);
    // A span inside the running task (a graph node): named `name`, or after
    // the function at `code` when `name` is null.
    void ObserveSpanBegin(void const *code, char const *name);
    void ObserveSpanEnd();

private:
    [[noreturn]] void Loop(Fiber *self);
    bool FindWork(TaskItem &item);
    // Always inlined: every caller passes a constant source (WalkOrder), so
    // the switch folds away and each step of the order costs no call.
    __attribute__((always_inline)) bool Take(Source source, TaskItem &item);
    bool TakeTask(TaskItem &item);
    bool TakeGlobal(TaskItem &item);
    bool Steal(TaskItem &item);
    // Under pressure: takes only what FiberPressure allows; false, and the
    // patience noted, when only shallower tasks are queued here.
    bool TakeDeepTask(TaskItem &item, unsigned floor);
    bool TakeDeepGlobal(TaskItem &item, unsigned floor);
    // After a task steal from `deque` (priority `queue`), which held about
    // `size` tasks: takes more of them into this worker's own deque.
    unsigned StealMore(TaskDeque &deque, unsigned queue, std::int64_t size);
    bool StealNext(Worker &victim, Fiber *&fiber);
    // Whether `word` is the slot fill of worker `victim` seen at the
    // previous look; remembers it when not.
    bool SeenBefore(unsigned victim, std::uintptr_t word);
    // The next slot: a Fiber pointer (64-byte aligned) with a fill count in
    // its low bits, so that a thief tells a fill it saw before from a new
    // fill of the same fiber.
    static constexpr std::uintptr_t kNextFillMask = 63;
    static_assert(alignof(Fiber) > kNextFillMask, "the fill count lives in a Fiber pointer's low bits");
    Fiber *TakeNext();
    // Whether the tick's first item is due (it comes from the source the
    // order otherwise puts second: the task deques when ready fibers go first).
    bool TasksFirst() const { return (m_itemsThisTick == 0) == m_readyFibersFirst; }
    // Whether the global queue's turn is due; its end (taken, or found empty).
    bool GlobalTurn() const { return m_globalCountdown == 0; }
    void GlobalTurnTaken() { m_globalCountdown = m_interval.Interval(); }
    void EndTick();
    Worker *RunItem(Fiber *self, TaskItem const &item);
    // The task's finish: every task that ends, on any path, ends here.
    void TaskEnded(TaskCounter *counter, unsigned count = 1);
    bool PublishHeld(); // PublishFinished when m_doneCount != 0
    // Calls the task's function. Inline: the exception handler costs no
    // instruction until a task throws, and the call is the one the task needs.
    void Invoke(TaskItem const &item);
    void BeforeTask(TaskCounter const *counter);
    void ObserveTaskBegin(TaskItem const &item);
    void ObserveTaskEnd(TaskItem const &item);
    void TraceSteal(unsigned victim);
    // Invoke's handler, out of line and cold: an exception cannot cross the
    // bottom of a fiber's stack (there is no frame to unwind into), so it
    // stops here. With a TaskCounter it goes to whoever waits on the counter
    // next; without one it ends the process with its origin named, rather
    // than in an anonymous std::terminate.
    [[gnu::cold, gnu::noinline]] static void TaskThrew(TaskItem const &item);
    // A task ended while its identity held a Fibtex: a fatal error naming
    // the lock and the task.
    [[noreturn, gnu::cold, gnu::noinline]] void TaskEndedHolding(TaskItem const &item) const;
    // After a task's function returned, on the worker it ended on: the
    // Fibtexes it locked must all be unlocked (the next task on this fiber,
    // or in this inline loop, is another owner).
    void CheckTaskHoldsNoLock(TaskItem const &item) const {
        if (__builtin_expect(m_lockThread->Held != 0, false)) {
            TaskEndedHolding(item);
        }
    }
    static Worker *Arrived(void *message);
    void AfterSwitchStep(SwitchRecord const &record);
    Worker *Idle(Fiber *self);
    Worker *ExitThread(Fiber *self);
    std::uint32_t NextRandom();

    Scheduler *m_scheduler = nullptr;
    TaskScheduler *m_taskScheduler = nullptr; // m_scheduler->Owner(), what a task is called with
    GlobalQueue *m_global = nullptr;          // High, Normal; fibers readied outside the workers go to High
    unsigned m_index = 0;

    // --- owner only ---
    Fiber m_threadFiber;
    Fiber *m_currentFiber = nullptr;
    // The worker's thread's LockThreadState (t_lockThread), set by
    // EnterThread: what a task's end and a switch read without the TLS.
    LockThreadState *m_lockThread = nullptr;
    // Tick state: it belongs to the worker, not to the fiber running the loop,
    // since several fibers take turns running the loop on one worker.
    unsigned m_budget = kBudgetPerTick;
    unsigned m_itemsThisTick = 0;
    std::uint64_t m_tickStartNs = 0;
    // Items left before the global queue's turn comes (0: it is due now).
    unsigned m_globalCountdown = 0;
    bool m_readyFibersFirst = true;
    bool m_nextSlot = true;
    // Next-slot fiber taken this many times in a row while older ready
    // fibers waited (see TakeReadyFiber).
    unsigned m_nextStreak = 0;
    std::uintptr_t m_nextFills = 0;
    // The adaptive policies: each owns its state and constants.
    GlobalIntervalPolicy m_interval;
    StealPolicy m_steal;
    NextWakePolicy m_nextWake;
    // Steal's memory of the last slot fill it saw: the victim and the word.
    unsigned m_seenNextVictim = 0;
    std::uintptr_t m_seenNext = 0;
    bool m_observe = false; // m_trace, or a task or wait callback
    // Whether the last search found nothing it could take under pressure
    // while shallower work was queued (then the loop looks again).
    bool m_passedWork = false;
    unsigned m_taskDepth = 0; // TaskDepth
    FiberPressure m_pressure;
    // Finished tasks not yet published: the tasks of one counter that finish
    // one after another on this worker lower it with a single atomic
    // operation (TaskEnded / PublishFinished).
    TaskCounter *m_doneCounter = nullptr;
    unsigned m_doneCount = 0;
    // Yielded fibers, a FIFO through Fiber::NextReady.
    Fiber *m_yieldedHead = nullptr;
    Fiber *m_yieldedTail = nullptr;
    std::uint32_t m_rng = 1;
    int m_cpu = -1;
    std::thread m_thread;
    FaultHandlerStack m_faultStack;
    TraceBuffer *m_trace = nullptr;
    EventCallbacks const *m_callbacks = nullptr;

    // --- shared: stolen from, pushed to, or read by other threads ---
    TaskDeque m_tasks[kNumPriorities];
    FiberDeque m_ready;
    // Written by the owner on every fill and take; other workers read it
    // only while they search, and take from it with a CAS (StealNext).
    alignas(64) std::atomic<std::uintptr_t> m_next{0};
    alignas(64) FiberInbox m_pinned;
    GlobalQueue m_pinnedTasks[kNumPriorities];
    // Tasks this worker added and finished, for the quiescence check at
    // destruction. Only the owner writes them (so no RMW is needed); others
    // read them.
    alignas(64) std::atomic<std::uint64_t> m_tasksAdded{0};
    std::atomic<std::uint64_t> m_tasksFinished{0};
    // The time an item takes on this worker as of its latest tick (EndTick;
    // 0 before the first), for a thief's judgement of a steal from it
    // (StealPolicy).
    std::atomic<std::uint64_t> m_sharedAvgTaskNs{0};
    // For GetStats, the same way: the owner counts, anyone reads.
    std::atomic<std::uint64_t> m_stolen{0};
    std::atomic<std::uint64_t> m_failedSteals{0};
    std::atomic<std::uint64_t> m_idleNs{0};
    std::atomic<std::uint64_t> m_idleSinceNs{0}; // 0: not idle now
    // While draining: when this worker last took a yielded fiber, the only
    // work it had (0: never). The drain's stall check reads it.
    std::atomic<std::uint64_t> m_yieldLoopNs{0};
    // Last, in a block of its own: the waits FiberPressure noted, which a
    // search reads only under pressure, and their count of ended ones,
    // which other workers write.
    alignas(kPrefetchPairBytes) ParkedWaits m_parkedWaits;
};

static_assert(alignof(Worker) == kPrefetchPairBytes, "per-worker data must start a prefetch pair");

// The worker the calling thread is, or nullptr. Never cached across a fiber
// switch: the function is opaque to the optimizer (see worker.cpp).
Worker *CurrentWorker();
void SetCurrentWorker(Worker *worker);
// The calling thread's worker if it belongs to `scheduler`, else nullptr
// (opaque, like CurrentWorker).
Worker *CurrentWorkerOf(Scheduler const *scheduler);
// The identity (LockThreadState::Identity) of what runs on `fiber`: the hand
// of the inline loop that runs a task on it, or else the fiber; nullptr on a
// thread's own fiber outside any inline loop: that stack keeps the identity
// of its thread (the thread's LockThreadState) before, while and after the
// thread is a worker, and it only ever runs on its own thread.
inline void const *TaskIdentityOf(Fiber const *fiber) {
    if (fiber->Hand != nullptr) {
        return fiber->Hand;
    }
    return fiber->IsThreadFiber ? nullptr : fiber;
}
// The thread's variable behind CurrentWorker, defined here so that every
// user knows it needs no dynamic initialization.
inline thread_local Worker *t_worker = nullptr;

// CurrentWorker, inlined: for a hot path that uses the result before
// anything can switch fibers, in a function that itself never switches (so
// the compiler has no later read to serve from this thread's TLS address).
inline Worker *CurrentWorkerNoSwitch() {
    return t_worker;
}

// ---- Inline: the order and the tick sit on every item's path ----

template <class Visit>
inline bool Worker::WalkOrder(Visit &&visit) const {
    bool const globalFirst = GlobalTurn();
    bool const tasksFirst = TasksFirst();
    // 1. The global queue's turn, every m_interval.Interval() items (invariant 9).
    if (globalFirst && visit(Source::Global)) {
        return true;
    }
    // 2. The tick's first item (invariant 8).
    if (tasksFirst && visit(Source::Tasks)) {
        return true;
    }
    // 3. Ready fibers before new tasks (invariant 3).
    if (visit(Source::ReadyFiber)) {
        return true;
    }
    // 4. Own tasks, High before Normal (LIFO: depth first, cache warm).
    if (!tasksFirst && visit(Source::Tasks)) {
        return true;
    }
    // 5. The global queue.
    if (!globalFirst && visit(Source::Global)) {
        return true;
    }
    // 6. Fibers that yielded: after everything queued here.
    if (visit(Source::Yielded)) {
        return true;
    }
    // 7. Another worker's ready fibers, then its tasks.
    return visit(Source::Steal);
}

inline Source Worker::NextSource(bool heldTasks) {
    bool const globalTurn = GlobalTurn();
    Source next = Source::None;
    WalkOrder([&](Source source) {
        if (source != Source::Steal && Visible(source, heldTasks)) {
            next = source;
            return true;
        }
        return false;
    });
    if (globalTurn && next != Source::Global) {
        GlobalTurnTaken(); // the queue is empty: its turn is over
    }
    return next;
}

inline bool Worker::Visible(Source source, bool heldTasks) const {
    static_assert(kNumPriorities == 2, "two queues a kind");
    switch (source) {
    case Source::Global:
        return !m_global[0].LooksEmpty() || !m_global[1].LooksEmpty();
    case Source::Tasks:
        return heldTasks || !m_tasks[0].LooksEmpty() || !m_tasks[1].LooksEmpty() || !PinnedTasksLookEmpty();
    case Source::ReadyFiber:
        return !NextLooksEmpty() || !m_pinned.LooksEmpty() || !m_ready.LooksEmpty();
    case Source::Yielded:
        return HasYielded();
    default:
        return false;
    }
}

inline bool Worker::HigherPriorityWaiting(unsigned queue) const {
    static_assert(kNumPriorities == 2, "only Normal has a higher priority to look at");
    return queue != 0 && (!m_tasks[0].LooksEmpty() || !m_pinnedTasks[0].LooksEmpty());
}

inline void Worker::CountItem() {
    if (m_globalCountdown != 0) {
        --m_globalCountdown;
    }
    ++m_itemsThisTick;
    if (--m_budget == 0) {
        EndTick();
    }
}

inline void Worker::TaskEnded(TaskCounter *counter, unsigned count) {
    // Batched (docs/design.adoc, "A task's finish"): the finish waits on the
    // worker until it is about to do anything but run another task of the
    // same counter. Nothing can need it sooner: a waiter on that counter
    // needs the task in between finished too.
    if (counter != m_doneCounter) {
        PublishFinished();
        m_doneCounter = counter;
    }
    m_doneCount += count;
}

inline void Worker::Invoke(TaskItem const &item) {
#if defined(__cpp_exceptions)
    try {
#endif
        if (item.IsClosure()) {
            item.Invoker()(m_taskScheduler, item.Arg, item.Index());
        } else {
            item.Function(m_taskScheduler, item.Arg);
        }
#if defined(__cpp_exceptions)
    } catch (...) {
        TaskThrew(item);
    }
#endif
}

inline void Worker::BeforeTask(TaskCounter const *counter) {
    // A task of another counter first publishes the finishes held: it may
    // run long, or wait on them.
    if (m_doneCount != 0 && counter != m_doneCounter) {
        PublishFinished();
    }
}

inline Worker *Worker::RunTask(TaskItem const &item) {
    if (__builtin_expect(m_observe, false)) {
        return RunObservedTask(item); // one branch when nothing is observed
    }
    return RunPlainTask(item);
}

inline Worker *Worker::RunPlainTask(TaskItem const &item) {
    if (__builtin_expect(Cancelled(item), false)) {
        return SkipTasks(&item, 1);
    }
    BeforeTask(item.Counter);
    Fiber *const self = m_currentFiber;
    Invoke(item);
    // The task may have waited and resumed on another worker.
    Worker *const worker = self->CurrentWorker;
    worker->CheckTaskHoldsNoLock(item);
    worker->TaskEnded(item.Counter);
    return worker;
}

} // namespace detail
} // namespace ftl
