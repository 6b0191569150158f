// The worker loop: what a pool fiber does between tasks, the tick, the
// find-work order's takes, stealing, a task's run and finish, and the switch
// between fibers with its post-switch step.
#include "scheduler/worker.h"

#include "ftl/assert.h"
#include "scheduler/counter_ops.h"
#include "scheduler/observe.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <thread>

namespace ftl {
namespace detail {

namespace {

// What the idle protocol (idle.h) asks of a worker.
class IdleHooks {
public:
    explicit IdleHooks(Worker &worker) : m_worker(worker), m_scheduler(worker.Owner()) {}
    bool WorkVisible() { return m_scheduler.AnyWorkVisible(m_worker) || m_worker.SeesHeldNext(); }
    bool SpinLook() {
        return m_scheduler.AnyWorkVisible(m_worker, m_worker.MayStealTasks()) || m_worker.SeesHeldNext();
    }
    bool StopIdling(EmptyQueueBehavior behavior) {
        return m_scheduler.Quitting() || m_scheduler.Behavior() != behavior;
    }
    // Sleep until woken, or until the next timer or drain check is due.
    std::uint64_t PollNs() {
        std::uint64_t const timer = m_scheduler.TimeToNextTimer();
        std::uint64_t const drain = m_scheduler.Draining() ? kDrainPollNs : 0;
        return timer == 0 ? drain : (drain == 0 || timer < drain ? timer : drain);
    }
    void Poll() {
        m_scheduler.FireDueTimers();
        m_scheduler.CheckDrain(m_worker);
        // A wake from here (the drain's flag) is no task's: the slot is
        // for a running task's worker, and this one is idle.
        m_worker.PublishNext();
    }

private:
    Worker &m_worker;
    Scheduler &m_scheduler;
};

} // namespace

// Opaque to the optimizer on purpose: a fiber may call this, switch, resume
// on another thread and call it again; neither inlining nor treating it as
// pure may let the compiler reuse the first thread's TLS address. The empty
// volatile asm makes the function not pure for GCC's IPA.
__attribute__((noinline)) Worker *CurrentWorker() {
    asm volatile("" ::: "memory");
    return t_worker;
}

__attribute__((noinline)) void SetCurrentWorker(Worker *worker) {
    asm volatile("" ::: "memory");
    t_worker = worker;
}

__attribute__((noinline)) Worker *CurrentWorkerOf(Scheduler const *scheduler) {
    asm volatile("" ::: "memory"); // opaque, like CurrentWorker
    Worker *worker = t_worker;
    return worker != nullptr && &worker->Owner() == scheduler ? worker : nullptr;
}

void Worker::Init(Scheduler *scheduler, GlobalQueue *globalQueues, unsigned index, int cpu,
                  Mechanisms const &mechanisms) {
    m_scheduler = scheduler;
    m_taskScheduler = scheduler->Owner();
    m_global = globalQueues;
    m_index = index;
    m_cpu = cpu;
    m_rng = 0x9e3779b9u * (index + 1);
    m_readyFibersFirst = mechanisms.ReadyFibersFirst;
    m_nextSlot = mechanisms.NextSlot;
    m_interval.Init(mechanisms.AdaptiveGlobalInterval);
    m_steal.Init(mechanisms.StealBackoff, mechanisms.StealBatch);
    m_nextWake.Init(mechanisms.NextSlotWake && scheduler->NumWorkers() > 1);
}

// ---- The thread ----

void Worker::EnterThread(bool reported, bool pin, bool faultStack) {
    SetCurrentWorker(this);
    if (pin) {
        PinCurrentThread(m_cpu);
    }
    AdoptThreadStack(m_threadFiber, m_index, reported);
    m_threadFiber.CurrentWorker = this; // it runs without a switch into it
    m_currentFiber = &m_threadFiber;
    CheckLockThread();
    m_lockThread = &t_lockThread; // this thread's: nothing switched since SetCurrentWorker
    // The thread's own stack keeps its identity and the Fibtexes it holds
    // (the Init thread may hold some from before Init).
    SetTaskIdentity(TaskIdentityOf(&m_threadFiber));
    if (faultStack) {
        m_faultStack.Enter();
    }
    m_tickStartNs = NowNs(); // the first tick's EWMA sample starts here
}

void Worker::LeaveThread() {
    m_faultStack.Leave();
    ReleaseThreadStack(m_threadFiber);
    SetCurrentWorker(nullptr);
    SetTaskIdentity(nullptr);
}

void Worker::RunThread(Fiber *first) {
    first->Transition(FiberState::Free, FiberState::Running);
    SwitchRecord record{&m_threadFiber, first, this, AfterSwitch::Started};
    SwitchTo(record); // returns once the scheduler quits (ExitThread)
}

Worker *Worker::ExitThread(Fiber *self) {
    FTL_ASSERT(m_index != 0, "worker 0 belongs to the thread that called Init; it never exits here");
    // Hand the thread back to its own fiber, which returns from RunThread.
    // Should this pool fiber be handed out again before the scheduler is
    // gone, it simply goes on with the loop.
    SwitchRecord record{self, &m_threadFiber, this, AfterSwitch::ReturnToPool};
    return SwitchTo(record);
}

// ---- The loop ----

void Worker::FiberEntry(void *message) {
    Worker *worker = Arrived(message);
    // A new fiber holds no Fibtex (the thread's counts were the fiber's it
    // left, which keeps them on its stack: SwitchTo).
    worker->m_lockThread->Held = 0;
    worker->Loop(worker->m_currentFiber);
}

void Worker::Loop(Fiber *self) {
    Worker *worker = this;
    TaskItem item;
    self->LoopItem = &item; // this frame lives as long as the fiber
    for (;;) {
        if (worker->FindWork(item)) {
            IdleHooks hooks(*worker);
            worker->m_scheduler->Parking().FoundWork(worker->m_index, hooks);
            worker = worker->RunItem(self, item);
            worker->CountItem();
        } else if (worker->m_passedWork) {
            // Under pressure, only shallower tasks: look again, until the
            // deeper work comes, a wait ends, or the patience runs out.
            worker->AtSchedulingPoint();
            CpuRelax();
        } else if (!worker->AtSchedulingPoint()) { // publishing may ready a fiber: if so, look again
            worker->EndTick();
            worker = worker->Idle(self);
        }
    }
}

Worker *Worker::RunItem(Fiber *self, TaskItem const &item) {
    if (!item.IsReadyFiber()) {
        // No need to restore it after: the loop adds no task, and a fiber
        // that resumes sets its own (Park).
        m_taskDepth = item.Depth();
        return RunTask(item);
    }
    // A ready fiber: run it in our place; this fiber goes back to the pool
    // and continues from here when it is next handed out. It goes on with a
    // task of a counter not known here: the finishes go first (TaskEnded).
    PublishFinished();
    Fiber *fiber = item.AsFiber();
    fiber->Transition(FiberState::Ready, FiberState::Running);
    SwitchRecord record{self, fiber, this, AfterSwitch::ReturnToPool};
    return SwitchTo(record);
}

Worker *Worker::Idle(Fiber *self) {
    Scheduler &scheduler = *m_scheduler;
    // This worker's published finishes (PublishHeld's stores, before Loop
    // calls Idle) before its load of the drain request in CheckDrain. Pairs
    // with the fence in the scheduler's Drain: either this worker sees the
    // drain request, or the drain sees every task this worker finished.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    scheduler.CheckDrain(*this);
    PublishNext(); // see IdleHooks::Poll
    if (scheduler.Quitting()) {
        return ExitThread(self);
    }
    // (No search to count: the steal that found nothing counted it.)
    IdleHooks hooks(*this);
    std::uint64_t const idleFrom = NowNs();
    m_idleSinceNs.store(idleFrom, std::memory_order_relaxed);
    std::uint64_t const idleTicks = m_trace != nullptr ? TraceTicks() : 0;
    std::uint64_t const parks = m_trace != nullptr ? scheduler.Parking().Parks(m_index) : 0;
    std::uint64_t const wakeUps = m_trace != nullptr ? scheduler.Parking().WakeUps(m_index) : 0;
    scheduler.Parking().Idle(m_index, scheduler.Behavior(), hooks);
    m_tickStartNs = NowNs();
    if (m_trace != nullptr) {
        std::uint32_t const how = (scheduler.Parking().Parks(m_index) != parks ? 1u : 0u) |
                                  (scheduler.Parking().WakeUps(m_index) != wakeUps ? 2u : 0u);
        m_trace->Record(TraceKind::Idle, idleTicks, reinterpret_cast<void const *>(TraceTicks()), nullptr,
                        how, m_currentFiber->Index);
    }
    // Ended before the total grows (release; see FillStats).
    m_idleSinceNs.store(0, std::memory_order_relaxed);
    AddOwned(m_idleNs, m_tickStartNs - idleFrom, std::memory_order_release);
    return this;
}

void Worker::FillStats(WorkerStats &stats, std::uint64_t now) const {
    stats.TasksRun = Finished();
    stats.Stolen = m_stolen.load(std::memory_order_relaxed);
    stats.FailedSteals = m_failedSteals.load(std::memory_order_relaxed);
    // The idle time so far, with the stretch going on now. The total first
    // (acquire): a total that includes a stretch comes with that stretch's
    // end, so no stretch counts twice (one that just ended may count not
    // at all, until the next call).
    std::uint64_t idle = m_idleNs.load(std::memory_order_acquire);
    std::uint64_t const since = m_idleSinceNs.load(std::memory_order_relaxed);
    if (since != 0 && now > since) {
        idle += now - since;
    }
    stats.IdleTime = std::chrono::nanoseconds(idle);
}

// ---- Observing ----

void Worker::SetObservers(TraceBuffer *trace, EventCallbacks const &callbacks) {
    m_trace = trace;
    m_callbacks = &callbacks;
    m_observe = trace != nullptr || callbacks.OnTaskBegin != nullptr || callbacks.OnTaskEnd != nullptr ||
                callbacks.OnWaitBegin != nullptr || callbacks.OnWaitEnd != nullptr;
}

namespace {

void const *CodeOf(TaskItem const &item) {
    return reinterpret_cast<void const *>(reinterpret_cast<std::uintptr_t>(item.Function));
}

} // namespace

Worker *Worker::RunObservedTask(TaskItem const &item) {
    if (Cancelled(item)) {
        return SkipTasks(&item, 1);
    }
    BeforeTask(item.Counter);
    Fiber *const self = m_currentFiber;
    ObserveTaskBegin(item);
    Invoke(item);
    Worker *const worker = self->CurrentWorker;
    worker->CheckTaskHoldsNoLock(item);
    worker->ObserveTaskEnd(item);
    worker->TaskEnded(item.Counter);
    return worker;
}

Worker *Worker::SkipTasks(TaskItem const *items, unsigned count) {
    Fiber *const self = m_currentFiber;
    for (unsigned i = 0; i < count; ++i) {
        if (items[i].IsClosure()) {
            // Destroys the closure without calling it.
            items[i].Invoker()(m_taskScheduler, items[i].Arg, items[i].Index() | kSkipTask);
        }
    }
    Worker *const worker = self->CurrentWorker;
    worker->TaskEnded(items[0].Counter, count);
    return worker;
}

void Worker::ObserveTaskBegin(TaskItem const &item) {
    unsigned const fiber = m_currentFiber->Index;
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::TaskBegin, TraceTicks(), CodeOf(item), item.Arg,
                        item.IsClosure() ? 1u : 0u, fiber);
    }
    if (m_callbacks->OnTaskBegin != nullptr) {
        m_callbacks->OnTaskBegin(m_callbacks->Context,
                                 TaskInfo{CodeOf(item), item.Arg, item.Counter, m_index, fiber});
    }
}

void Worker::ObserveTaskEnd(TaskItem const &item) {
    unsigned const fiber = m_currentFiber->Index;
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::TaskEnd, TraceTicks(), nullptr, nullptr, 0, fiber);
    }
    if (m_callbacks->OnTaskEnd != nullptr) {
        m_callbacks->OnTaskEnd(m_callbacks->Context,
                               TaskInfo{CodeOf(item), item.Arg, item.Counter, m_index, fiber});
    }
}

void Worker::ObserveWaitBegin(WaitNode const &node) {
    unsigned const fiber = m_currentFiber->Index;
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::Suspend, TraceTicks(), node.Object, WaitKindName(node.Kind), node.Target,
                        fiber);
    }
    if (m_callbacks->OnWaitBegin != nullptr) {
        m_callbacks->OnWaitBegin(m_callbacks->Context,
                                 WaitInfo{node.Kind, node.Object, node.Target, m_index, fiber});
    }
}

void Worker::ObserveWaitEnd(WaitNode const &node) {
    unsigned const fiber = m_currentFiber->Index;
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::Resume, TraceTicks(), nullptr, nullptr, 0, fiber);
    }
    if (m_callbacks->OnWaitEnd != nullptr) {
        m_callbacks->OnWaitEnd(m_callbacks->Context,
                               WaitInfo{node.Kind, node.Object, node.Target, m_index, fiber});
    }
}

void Worker::ObserveSpanBegin(void const *code, char const *name) {
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::SpanBegin, TraceTicks(), code, name, 0, m_currentFiber->Index);
    }
}

void Worker::ObserveSpanEnd() {
    if (m_trace != nullptr) {
        m_trace->Record(TraceKind::SpanEnd, TraceTicks(), nullptr, nullptr, 0, m_currentFiber->Index);
    }
}

bool SpanObserver::Recording(TaskScheduler *taskScheduler) {
    return Scheduler::Of(taskScheduler)->WorkerAt(0).Trace() != nullptr;
}

void SpanObserver::Begin(void const *code, char const *name) {
    CurrentWorker()->ObserveSpanBegin(code, name);
}

void SpanObserver::End() {
    CurrentWorker()->ObserveSpanEnd();
}

void Worker::TraceSteal(unsigned victim) {
    m_trace->Record(TraceKind::Steal, TraceTicks(), nullptr, nullptr, victim, m_currentFiber->Index);
}

// ---- The find-work order's takes ----

bool Worker::FindWork(TaskItem &item) {
    // The task before ended: the wake its fills made is judged now (the
    // finishes wait for a task of another counter, TaskEnded).
    m_nextWake.AtSchedulingPoint(NowNs);
    m_pressure.Floor(m_interval.AvgItemNs());
    m_passedWork = false;
    bool const globalTurn = GlobalTurn();
    if (globalTurn) {
        // The global queue's turn comes about every millisecond of work:
        // the scheduling point where a busy worker fires due timers.
        m_scheduler->FireDueTimers();
    }
    bool const found = WalkOrder([&](Source source) { return Take(source, item); });
    if (globalTurn) {
        GlobalTurnTaken(); // work or not
    }
    if (__builtin_expect(m_passedWork, false)) {
        // The patience runs on whatever else this search took (a fiber that
        // yields, looking for what the passed work would do, must not reset it).
        m_pressure.Passed(NowNs());
    } else if (found) {
        m_pressure.Took();
    }
    // The order took something else first (a tick's first task, the global
    // queue's turn): the slot's fiber must not wait hidden behind it.
    PublishNext();
    return found;
}

inline bool Worker::Take(Source source, TaskItem &item) {
    switch (source) {
    case Source::Global:
        return TakeGlobal(item);
    case Source::Tasks:
        return TakeTask(item);
    case Source::ReadyFiber: {
        Fiber *fiber;
        if (TakeReadyFiber(fiber)) {
            item = TaskItem::ReadyFiber(fiber);
            return true;
        }
        return false;
    }
    case Source::Yielded:
        if (m_yieldedHead != nullptr) {
            Fiber *fiber = m_yieldedHead;
            m_yieldedHead = fiber->NextReady;
            if (m_yieldedHead == nullptr) {
                m_yieldedTail = nullptr;
            }
            fiber->NextReady = nullptr;
            item = TaskItem::ReadyFiber(fiber);
            if (m_scheduler->Draining()) {
                // Nothing else is queued here: a task that yields forever
                // would keep the drain's stall check from ever seeing this
                // worker idle, so it is checked here too.
                m_yieldLoopNs.store(NowNs(), std::memory_order_relaxed);
                m_scheduler->CheckDrain(*this, true);
            }
            return true;
        }
        return false;
    case Source::Steal:
        return Steal(item);
    case Source::None:
        break;
    }
    return false;
}

// How often in a row the next slot's fiber may run ahead of older ready
// fibers (Tokio's MAX_LIFO_POLLS_PER_TICK): two fibers that ready each
// other through the slot cannot starve the rest.
constexpr unsigned kMaxNextStreak = 3;

bool Worker::TakeReadyFiber(Fiber *&fiber) {
    if (!NextLooksEmpty()) {
        bool const older = !m_pinned.LooksEmpty() || !m_ready.LooksEmpty();
        if (!older || m_nextStreak < kMaxNextStreak) {
            if ((fiber = TakeNext()) != nullptr) {
                m_nextStreak = older ? m_nextStreak + 1 : 0;
                return true;
            }
        } else {
            PublishNext(); // it runs after the older ones, or elsewhere
            m_nextStreak = 0;
        }
    }
    if ((fiber = m_pinned.Pop()) != nullptr) {
        return true;
    }
    // Ready fibers resume oldest first: the owner takes from the top too.
    // The fence-free emptiness check first (see WorkDeque::LooksEmpty).
    return !m_ready.LooksEmpty() && m_ready.Steal(fiber);
}

bool Worker::TakeTask(TaskItem &item) {
    if (unsigned const floor = m_pressure.CurrentFloor(); __builtin_expect(floor != 0, false)) {
        return TakeDeepTask(item, floor);
    }
    // Per priority, pinned tasks first: no other worker can take them off
    // this one.
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        if (m_pinnedTasks[queue].Pop(item) || m_tasks[queue].Pop(item)) {
            return true;
        }
    }
    return false;
}

bool Worker::TakeGlobal(TaskItem &item) {
    if (unsigned const floor = m_pressure.CurrentFloor(); __builtin_expect(floor != 0, false)) {
        return TakeDeepGlobal(item, floor);
    }
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        if (m_global[queue].Pop(item)) {
            return true;
        }
    }
    return false;
}

bool Worker::TakeDeepTask(TaskItem &item, unsigned floor) {
    auto const deep = [floor](TaskItem const &task) { return task.Depth() >= floor; };
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        // Pinned tasks come in from every worker: a shallow one at the head
        // must not hold back a deep one behind it.
        if (m_pinnedTasks[queue].PopFirstIf(item, deep)) {
            return true;
        }
        m_passedWork |= !m_pinnedTasks[queue].LooksEmpty();
        if (m_tasks[queue].Pop(item)) {
            if (deep(item)) {
                return true;
            }
            m_tasks[queue].Push(item); // back where it was; thieves may take it
            m_passedWork = true;
        }
    }
    return false;
}

bool Worker::TakeDeepGlobal(TaskItem &item, unsigned floor) {
    // A fiber readied from outside always comes: it lets a wait end.
    auto const allowed = [floor](TaskItem const &task) {
        return task.IsReadyFiber() || task.Depth() >= floor;
    };
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        if (m_global[queue].PopFirstIf(item, allowed)) {
            return true;
        }
        m_passedWork |= !m_global[queue].LooksEmpty();
    }
    return false;
}

std::uint32_t Worker::NextRandom() {
    // xorshift32: cheap, good enough to pick steal victims.
    std::uint32_t x = m_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    m_rng = x;
    return x;
}

// One Steal per task, each safe on its own against the owner's pops (a single
// compare-exchange on the top for several tasks is not: the owner takes tasks
// above the top without one).
unsigned Worker::StealMore(TaskDeque &deque, unsigned queue, std::int64_t size) {
    unsigned const want = m_steal.MoreToTake(size);
    unsigned n = 0;
    TaskItem item;
    while (n < want && deque.Steal(item)) {
        m_tasks[queue].Push(item);
        ++n;
    }
    if (n > 0) {
        AddOwned(m_stolen, n);
        m_scheduler->NotifyWork(Scheduler::Waker::Worker);
    }
    return n;
}

bool Worker::Steal(TaskItem &item) {
    unsigned const n = m_scheduler->NumWorkers();
    if (n == 1) {
        return false;
    }
    // Before the steal: a thief that just ended a task holding a Fibtex
    // leaves the lock free while it steals (and, finding nothing, goes
    // idle); the lock's waiter watches for this (FibtexContext).
    m_scheduler->Fibtexes().RanOutOfWork(m_index);
    // Always, with the backoff off; under pressure, ready fibers only (a
    // stolen task starts another tree: FiberPressure), and a victim's tasks
    // count as work passed by, for the patience.
    bool const pressed = m_pressure.CurrentFloor() != 0;
    bool const tasks = MayStealTasks() && !pressed;
    unsigned const start = NextRandom() % n;
    for (unsigned i = 0; i < n; ++i) {
        unsigned const victimIndex = (start + i) % n;
        if (victimIndex == m_index) {
            continue;
        }
        Worker &victim = m_scheduler->WorkerAt(victimIndex);
        Fiber *fiber;
        if (StealNext(victim, fiber) || (!victim.m_ready.LooksEmpty() && victim.m_ready.Steal(fiber))) {
            AddOwned(m_stolen, 1);
            if (m_trace != nullptr) {
                TraceSteal(victimIndex);
            }
            item = TaskItem::ReadyFiber(fiber);
            return true;
        }
        if (!tasks) {
            m_passedWork |= pressed && !(victim.m_tasks[0].LooksEmpty() && victim.m_tasks[1].LooksEmpty());
            continue;
        }
        for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
            TaskDeque &deque = victim.m_tasks[queue];
            std::int64_t const size = deque.SizeHint();
            if (size > 0 && deque.Steal(item)) {
                unsigned const more = StealMore(deque, queue, size);
                // Judged at the next look (MayStealTasks).
                m_steal.Stole(NowNs(), 1 + more, size, &victim.m_sharedAvgTaskNs);
                AddOwned(m_stolen, 1);
                if (m_trace != nullptr) {
                    TraceSteal(victimIndex);
                }
                return true;
            }
        }
    }
    AddOwned(m_failedSteals, 1);
    return false;
}

// ---- The next slot ----

void Worker::KeepReadied(Fiber *fiber, bool goesOn) {
    auto const word = reinterpret_cast<std::uintptr_t>(fiber) | (++m_nextFills & kNextFillMask);
    // Release: a thief that takes the word sees the fiber readied. Only the
    // owner fills the slot and thieves only empty it, so an empty slot read
    // here stays empty until this store.
    if (NextLooksEmpty()) {
        m_next.store(word, std::memory_order_release);
    } else if (std::uintptr_t const old = m_next.exchange(word, std::memory_order_acq_rel); old != 0) {
        // The older one goes where every worker sees it.
        m_ready.Push(reinterpret_cast<Fiber *>(old & ~kNextFillMask));
        m_scheduler->NotifyWork(Scheduler::Waker::Worker);
    }
    if (!goesOn || !m_nextWake.WantsWake(m_tickStartNs, NowNs)) {
        return;
    }
    // A worker already searching sees the fill on its looks; a parked one
    // is woken as for queued work (none under Spin or Yield, where workers
    // never park). Best effort: a searcher about to park does not count a
    // fill seen once in its last check, and then the fiber waits for this
    // worker as before; so are the looks at the parked bits and the
    // searchers first, which spare Notify's fence when it would wake nobody.
    IdleState &idle = m_scheduler->Parking();
    if (m_scheduler->Behavior() == EmptyQueueBehavior::Sleep && idle.AnyLooksParked() &&
        idle.NumSearching() == 0 && idle.Notify() >= 0) {
        m_nextWake.Woke(NowNs());
    }
}

Fiber *Worker::TakeNext() {
    std::uintptr_t const word = m_next.exchange(0, std::memory_order_acquire);
    return reinterpret_cast<Fiber *>(word & ~kNextFillMask);
}

void Worker::PublishNext() {
    if (NextLooksEmpty()) {
        return; // the common case: no exchange
    }
    if (Fiber *fiber = TakeNext(); fiber != nullptr) {
        m_ready.Push(fiber);
        m_scheduler->NotifyWork(Scheduler::Waker::Worker);
    }
}

bool Worker::SeenBefore(unsigned victim, std::uintptr_t word) {
    if (word == m_seenNext && victim == m_seenNextVictim) {
        return true;
    }
    m_seenNext = word;
    m_seenNextVictim = victim;
    return false;
}

bool Worker::SeesHeldNext() {
    // One relaxed load per other worker per look; a slot word seen on two
    // looks in a row has been held for at least the time between them.
    unsigned const n = m_scheduler->NumWorkers();
    for (unsigned i = 0; i < n; ++i) {
        if (i == m_index) {
            continue;
        }
        std::uintptr_t const word = m_scheduler->WorkerAt(i).m_next.load(std::memory_order_relaxed);
        if (word != 0 && SeenBefore(i, word)) {
            return true;
        }
    }
    return false;
}

bool Worker::StealNext(Worker &victim, Fiber *&fiber) {
    std::uintptr_t word = victim.m_next.load(std::memory_order_relaxed);
    if (word == 0) {
        return false;
    }
    if (!SeenBefore(victim.m_index, word)) {
        // The first look at this fill: its owner will likely run it sooner
        // than it could cross to this core.
        return false;
    }
    // Acquire: pairs with KeepReadied's release.
    if (!victim.m_next.compare_exchange_strong(word, 0, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
        return false;
    }
    m_seenNext = 0;
    fiber = reinterpret_cast<Fiber *>(word & ~kNextFillMask);
    return true;
}

void Worker::PushYielded(Fiber *fiber) {
    fiber->NextReady = nullptr;
    if (m_yieldedTail == nullptr) {
        m_yieldedHead = fiber;
    } else {
        m_yieldedTail->NextReady = fiber;
    }
    m_yieldedTail = fiber;
}

// ---- The tick ----

void Worker::EndTick() {
    if (m_itemsThisTick != 0) {
        std::uint64_t const now = NowNs();
        m_sharedAvgTaskNs.store(m_interval.TickEnded(now - m_tickStartNs, m_itemsThisTick),
                                std::memory_order_relaxed);
        m_tickStartNs = now;
    }
    m_budget = kBudgetPerTick;
    m_itemsThisTick = 0;
    m_scheduler->FireDueTimers();
}

// ---- A task's run and finish ----

#if defined(__cpp_exceptions)
void Worker::TaskThrew(TaskItem const &item) {
    // Called inside Invoke's handler: `throw;` rethrows the task's exception.
    char const *what = nullptr;
    try {
        throw;
    } catch (std::exception const &e) {
        what = e.what();
    } catch (...) {
    }
    if (item.Counter == nullptr) {
        FTL_FATAL("an exception escaped a task without a TaskCounter (function 0x%" PRIxPTR
                  ", argument 0x%" PRIxPTR ")%s%s",
                  reinterpret_cast<std::uintptr_t>(item.Function), reinterpret_cast<std::uintptr_t>(item.Arg),
                  what != nullptr ? ": " : "", what != nullptr ? what : "");
    }
    CounterOps::KeepError(*item.Counter, std::current_exception());
}
#endif

void Worker::TaskEndedHolding(TaskItem const &item) const {
    std::uintptr_t const held = m_lockThread->Held;
    std::uintptr_t const count = kHeldCountShift != 0 ? held >> kHeldCountShift : held;
    char which[64];
    if (count == 1 && kHeldCountShift != 0) {
        std::uintptr_t const address = held & ((std::uintptr_t(1) << kHeldCountShift) - 1);
        std::snprintf(which, sizeof which, "a Fibtex (0x%" PRIxPTR ")", address);
    } else if (count == 1) {
        std::snprintf(which, sizeof which, "a Fibtex");
    } else {
        std::snprintf(which, sizeof which, "%" PRIuPTR " Fibtexes", count);
    }
    FTL_FATAL("a task ended holding %s: task function 0x%" PRIxPTR ", argument 0x%" PRIxPTR
              ", on fiber %u of worker %u%s (a Fibtex belongs to the task that locked it; unlock it before "
              "the task returns)",
              which, reinterpret_cast<std::uintptr_t>(CodeOf(item)),
              reinterpret_cast<std::uintptr_t>(item.Arg), m_currentFiber->Index, m_index,
              m_currentFiber->Hand != nullptr ? ", run inline" : "");
}

bool Worker::PublishHeld() {
    unsigned const n = m_doneCount;
    TaskCounter *counter = m_doneCounter;
    m_doneCount = 0;
    m_doneCounter = nullptr;
    // The decrement first: a finished count the drain check sees is a task
    // whose counter already says so.
    if (counter != nullptr) {
        CounterOps::Finish(*counter, n);
    }
    AddOwned(m_tasksFinished, n, std::memory_order_release);
    return true;
}

// ---- Switching ----

Worker *Worker::SwitchTo(SwitchRecord &record) {
    FTL_ASSERT(m_doneCount == 0, "a switch with finished tasks not published (every caller publishes first)");
    EventCallbacks const &callbacks = m_scheduler->Callbacks();
    if (callbacks.OnFiberDetached != nullptr && record.From->Reported) {
        callbacks.OnFiberDetached(callbacks.Context, record.From->Index, record.Action == AfterSwitch::Park);
    }
    // The Fibtexes the fiber left holds are its own, not the thread's: they
    // wait on its stack and come back with it, on whichever thread it
    // resumes (a fiber switched to sets its own: here, or in FiberEntry).
    std::uintptr_t const held = m_lockThread->Held;
    Worker *const worker = Arrived(SwitchFiber(record.From, record.To, &record));
    worker->m_lockThread->Held = held;
    return worker;
}

Worker *Worker::Arrived(void *message) {
    // Copy the record: it lives on the stack of the fiber we left, which may
    // run again (elsewhere) as soon as the post-switch step publishes it.
    SwitchRecord const record = *static_cast<SwitchRecord *>(message);
    Fiber *const self = record.To;
    Worker *const worker = record.OnWorker;
    self->CurrentWorker = worker;
    worker->m_currentFiber = self;
    SetTaskIdentity(TaskIdentityOf(self));
    // The attach first: the post-switch step may make this worker count as
    // started, and Init must not return before its first attach is reported.
    EventCallbacks const &callbacks = worker->m_scheduler->Callbacks();
    if (callbacks.OnFiberAttached != nullptr && self->Reported) {
        callbacks.OnFiberAttached(callbacks.Context, self->Index);
    }
    worker->AfterSwitchStep(record);
    return worker;
}

void Worker::AfterSwitchStep(SwitchRecord const &record) {
    switch (record.Action) {
    case AfterSwitch::Started:
        m_scheduler->WorkerStarted();
        break;
    case AfterSwitch::ReturnToPool:
        record.From->Transition(FiberState::Running, FiberState::Free);
        m_scheduler->Pool().Release(record.From, m_index);
        break;
    case AfterSwitch::Park:
        PublishWaiter(*m_scheduler, record);
        break;
    }
}

} // namespace detail
} // namespace ftl
