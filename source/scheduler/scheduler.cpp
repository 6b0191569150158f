// The scheduler's lifecycle and what its workers share.
//
//   Start:    validates the options, builds the workers and the fiber pool
//             (fiber 0 is the calling thread's stack: it becomes worker 0),
//             starts the other worker threads, each switching from its own
//             stack to its first pool fiber, and returns once every one of
//             them runs its loop.
//   Drain:    the Init thread waits (parked, pinned) until every task added
//             so far has finished -- no work is dropped.
//   Teardown: sets m_quit; each worker's loop switches back to its thread's
//             own fiber, which returns; the threads are joined and the pool
//             freed. A failed Start takes the same way out.
#include "scheduler/scheduler.h"

#include "ftl/assert.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "platform/fault.h"
#include "scheduler/counter_ops.h"
#include "scheduler/help.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace ftl {
namespace detail {

static_assert(std::uint64_t{TaskSchedulerInitOptions().MaxIdleSpinMicros} * 1000 == kMaxSpinNs,
              "MaxIdleSpinMicros's default is the idle state's default bound");

namespace {

// The least share of parked waits a worker has before it is under pressure
// (a small pool over many workers would otherwise put it there at once).
constexpr unsigned kMinPressureShare = 8;

bool ValidBehavior(EmptyQueueBehavior behavior) {
    return behavior == EmptyQueueBehavior::Spin || behavior == EmptyQueueBehavior::Yield ||
           behavior == EmptyQueueBehavior::Sleep;
}

} // namespace

int Scheduler::Init(TaskScheduler &owner, TaskSchedulerInitOptions const &options,
                    Mechanisms const &mechanisms) {
    if (owner.m_impl != nullptr) {
        return static_cast<int>(InitError::AlreadyInitialized);
    }
    if (CurrentWorker() != nullptr) {
        return static_cast<int>(InitError::ThreadAlreadyBound);
    }
    auto *scheduler = new Scheduler(&owner, options, mechanisms);
    InitError const result = scheduler->Start();
    if (result != InitError::Success) {
        delete scheduler;
        return static_cast<int>(result);
    }
    owner.m_impl = scheduler;
    return static_cast<int>(InitError::Success);
}

void Scheduler::Destroy(TaskScheduler &owner) {
    Scheduler *scheduler = owner.m_impl;
    // Tasks an outside thread is adding now are counted before the drain
    // looks (and so run); an add that begins later is a fatal error.
    scheduler->m_destroying.store(true, std::memory_order_seq_cst);
    scheduler->AwaitOutsideCalls();
    scheduler->Drain();
    // An outside thread that readied the fiber whose finish ended the drain
    // (or this thread's own wait) may still be waking a worker.
    scheduler->AwaitOutsideCalls();
    scheduler->PrintStatsIfAsked();
    scheduler->Teardown(scheduler->m_numWorkers);
    scheduler->m_trace.Write(); // after the workers stopped: nothing records any more
    delete scheduler;
}

Scheduler::Scheduler(TaskScheduler *owner, TaskSchedulerInitOptions const &options,
                     Mechanisms const &mechanisms)
    : m_owner(owner), m_options(options), m_mechanisms(mechanisms) {}

Scheduler::~Scheduler() = default;

InitError Scheduler::Start() {
    std::vector<int> const cpus = AllowedCpus();
    if (InitError const invalid = Validate(cpus); invalid != InitError::Success) {
        return invalid;
    }
    BuildWorkers(cpus);
    if (!m_pool.Init(m_options.FiberPoolSize, m_numWorkers, m_options.FiberStackSize,
                     m_options.FiberStackGuardSize, m_options.PoolPolicy, m_options.Callbacks,
                     &Worker::FiberEntry, &m_workers[0].ThreadFiber())) {
        return InitError::FiberCreationFailed;
    }
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnFibersCreated != nullptr) {
        callbacks.OnFibersCreated(callbacks.Context, m_options.FiberPoolSize);
    }
    m_drainFlag.reset(new AtomicFlag(m_owner));
    if (InitError const started = StartThreads(); started != InitError::Success) {
        return started;
    }
    if (callbacks.OnThreadsCreated != nullptr) {
        callbacks.OnThreadsCreated(callbacks.Context, m_numWorkers);
    }
    return InitError::Success;
}

InitError Scheduler::Validate(std::vector<int> const &cpus) {
    TaskSchedulerInitOptions const &options = m_options;
    m_numWorkers = options.ThreadPoolSize != 0 ? options.ThreadPoolSize : static_cast<unsigned>(cpus.size());
    if (options.ThreadPoolSize == 0 && m_numWorkers > kMaxWorkers) {
        m_numWorkers = kMaxWorkers;
    }
    if (m_numWorkers == 0 || m_numWorkers > kMaxWorkers || options.FiberPoolSize == 0 ||
        !FiberPool::ValidSizes(options.FiberStackSize, options.FiberStackGuardSize) ||
        (options.PoolPolicy == FiberPoolPolicy::Fatal && options.FiberPoolSize < m_numWorkers) ||
        !ValidBehavior(options.Behavior) ||
        (options.PoolPolicy != FiberPoolPolicy::Grow && options.PoolPolicy != FiberPoolPolicy::Fatal)) {
        return InitError::InvalidOptions;
    }
    return InitError::Success;
}

void Scheduler::BuildWorkers(std::vector<int> const &cpus) {
    TaskSchedulerInitOptions const &options = m_options;
    m_startNs = NowNs();
    m_inlineStackNeed = options.FiberStackSize / kInlineStackShareDen * kInlineStackShareNum;
    m_helpsInline = m_mechanisms.InlineChildren && options.Callbacks.OnFiberAttached == nullptr &&
                    options.Callbacks.OnFiberDetached == nullptr;
    m_trace.Start(options.TraceFile, options.TraceBufferEvents, m_numWorkers);
    m_workers.reset(new Worker[m_numWorkers]);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        // An unpinned worker 0 is on no CPU in particular (WorkerOnCallersCpu).
        int const cpu = i == 0 && !PinsCallingThread() ? -1 : cpus[i % cpus.size()];
        m_workers[i].Init(this, m_global, i, cpu, m_mechanisms);
        // Each worker's share of the pool's first fibers, half of it for the
        // waits it parks (the rest: running fibers, other waits, slack).
        m_workers[i].Pressure().Init(m_workers[i].PressureList(),
                                     std::max(kMinPressureShare, options.FiberPoolSize / (2 * m_numWorkers)),
                                     std::uint64_t{options.MaxIdleSpinMicros} * 1000,
                                     m_mechanisms.DeepFirstUnderPressure);
        m_workers[i].SetObservers(m_trace.Buffer(i), options.Callbacks);
    }
    m_idle.Init(m_numWorkers, m_mechanisms.SearcherLimit, m_mechanisms.SpinBeforePark,
                m_mechanisms.AdaptiveSpin, std::uint64_t{options.MaxIdleSpinMicros} * 1000);
    m_closures.Init(m_numWorkers);
    m_afterRecords.Init(m_numWorkers);
    m_fibtexes.Init(m_numWorkers, FibtexSwitches{m_mechanisms.LockPeeks, m_mechanisms.LockWatchesIdle,
                                                 m_mechanisms.LockPatience, m_mechanisms.LockHandOff});
    m_behavior.store(options.Behavior, std::memory_order_relaxed);
    RememberNewFiberFpControl();
}

InitError Scheduler::StartThreads() {
    // The calling thread becomes worker 0; its own stack is fiber 0.
    Worker &main = m_workers[0];
    if (PinsCallingThread()) {
        m_initThreadAffinity = SaveAffinity();
    }
    if (m_options.CatchStackOverflow) {
        InstallFaultHandler(&Scheduler::ExplainFault);
    }
    main.EnterThread(true, PinsCallingThread(), m_options.CatchStackOverflow);
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnFiberAttached != nullptr) {
        callbacks.OnFiberAttached(callbacks.Context, main.ThreadFiber().Index);
    }
    for (unsigned i = 1; i < m_numWorkers; ++i) {
#if defined(__cpp_exceptions)
        try {
            m_workers[i].Thread() = std::thread([this, i] { ThreadMain(&m_workers[i]); });
        } catch (std::system_error const &) {
            Teardown(i); // nothing was added yet
            return InitError::ThreadCreationFailed;
        }
#else
        // Without exceptions, std::thread ends the process when it cannot
        // start a thread.
        m_workers[i].Thread() = std::thread([this, i] { ThreadMain(&m_workers[i]); });
#endif
    }
    // Return only once every worker is ready to take work: otherwise the
    // first tasks after Init run on fewer workers for as long as the threads
    // take to start (1-3 ms measured on a 2-core VM).
    m_trace.Populate(0);
    for (;;) {
        std::uint32_t const up = m_workersUp.load(std::memory_order_acquire);
        if (up == m_numWorkers - 1) {
            break;
        }
        FutexWait(&m_workersUp, up);
    }
    m_trace.MarkOrigin();
    return InitError::Success;
}

void Scheduler::ThreadMain(Worker *worker) {
    // The thread's own stack only starts the worker's first pool fiber and
    // takes the thread back at the end: it runs no task, and callbacks do not
    // hear of it (the fiber attached is the pool fiber, index Index()).
    worker->EnterThread(false, m_options.PinThreads, m_options.CatchStackOverflow);
    m_trace.Populate(worker->Index()); // on its own core, alongside the others
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnWorkerThreadStarted != nullptr) {
        callbacks.OnWorkerThreadStarted(callbacks.Context, worker->Index());
    }
    worker->RunThread(m_pool.AcquireFirst(worker->Index()));
    if (callbacks.OnWorkerThreadEnded != nullptr) {
        callbacks.OnWorkerThreadEnded(callbacks.Context, worker->Index());
    }
    worker->LeaveThread();
}

void Scheduler::WorkerStarted() {
    m_workersUp.fetch_add(1, std::memory_order_release); // Start waits for this
    FutexWake(&m_workersUp, 1);
}

void Scheduler::AwaitOutsideCalls() const {
    // Such a call never blocks: it queues and wakes, a few microseconds.
    while (m_outsideCalls.load(std::memory_order_acquire) != 0) {
        YieldThread();
    }
}

void Scheduler::Teardown(unsigned threadsStarted) {
    m_quit.store(true, std::memory_order_seq_cst);
    m_idle.WakeAll();
    for (unsigned i = 1; i < threadsStarted; ++i) {
        m_workers[i].Thread().join();
    }
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnFiberDetached != nullptr) {
        callbacks.OnFiberDetached(callbacks.Context, m_workers[0].ThreadFiber().Index, false);
    }
    if (PinsCallingThread()) {
        RestoreAffinity(m_initThreadAffinity);
    }
    m_workers[0].LeaveThread();
    if (m_options.CatchStackOverflow) {
        RemoveFaultHandler();
    }
    m_drainFlag.reset();
    m_pool.DestroyAll();
}

bool Scheduler::ExplainFault(std::uintptr_t address) {
    Worker *worker = CurrentWorker();
    Fiber const *fiber = worker != nullptr ? worker->CurrentFiber() : nullptr;
    if (fiber == nullptr) {
        return false;
    }
    switch (ClassifyFault(*fiber, address)) {
    case StackFault::PoolGuard:
        FaultWrite("ftl: fatal error: stack overflow in fiber ");
        FaultWriteNumber(fiber->Index);
        FaultWrite(" on worker thread ");
        FaultWriteNumber(worker->Index());
        FaultWrite(": its stack is ");
        FaultWriteNumber(fiber->StackSize);
        FaultWrite(" bytes (TaskSchedulerInitOptions::FiberStackSize)\n");
        return true;
    case StackFault::ThreadGuard:
        if (fiber->Hand == nullptr) {
            return false; // the thread's own code, not a task of ours
        }
        FaultWrite("ftl: fatal error: stack overflow on worker thread ");
        FaultWriteNumber(worker->Index());
        FaultWrite("'s own stack, in a task it ran while waiting\n");
        return true;
    case StackFault::None:
        break;
    }
    return false;
}

void Scheduler::SetBehavior(EmptyQueueBehavior behavior) {
    if (!ValidBehavior(behavior)) {
        FTL_FATAL("SetEmptyQueueBehavior: EmptyQueueBehavior(%d) is not a behaviour (Spin, Yield or Sleep)",
                  static_cast<int>(behavior));
    }
    m_behavior.store(behavior, std::memory_order_seq_cst);
    if (behavior != EmptyQueueBehavior::Sleep) {
        m_idle.WakeAll(); // parked workers follow the new behaviour at once
    }
}

// ---- Adding work ----

namespace {

// The items `make` builds, at the depth `depthBits` (TaskItem::DepthBits).
// A copy of `make` (two words), so that its captures stay in registers
// across the queue's atomic stores.
template <class Make>
auto WithDepth(Make const &make, std::uint64_t depthBits) {
    return [make, depthBits](std::size_t i) {
        TaskItem item = make(i);
        item.Extra |= depthBits;
        return item;
    };
}

} // namespace

void Scheduler::AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority, TaskCounter *counter,
                         unsigned threadIndex) {
    if (tasks == nullptr && numTasks != 0) {
        FTL_FATAL("AddTasks: %u task(s) but no array of them (nullptr)", numTasks);
    }
    AddItems(
        numTasks,
        [tasks, counter](std::size_t i) {
            if (tasks[i].Function == nullptr) {
                FTL_FATAL("AddTasks: task %zu has no function", i);
            }
            return TaskItem{tasks[i].Function, tasks[i].ArgData, counter, 0};
        },
        priority, counter, threadIndex);
}

void Scheduler::AddClosures(unsigned count, ClosureInvoker invoker, void *arg, TaskPriority priority,
                            TaskCounter *counter, unsigned threadIndex) {
    AddItems(
        count,
        [invoker, arg, counter](std::size_t i) {
            return TaskItem::Closure(invoker, arg, counter, static_cast<unsigned>(i));
        },
        priority, counter, threadIndex);
}

template <class Make>
void Scheduler::AddItems(unsigned count, Make &&make, TaskPriority priority, TaskCounter *counter,
                         unsigned threadIndex) {
    if (priority != TaskPriority::High && priority != TaskPriority::Normal) {
        FTL_FATAL("AddTask: TaskPriority(%d) is not a priority (High or Normal)", static_cast<int>(priority));
    }
    if (count == 0) {
        return;
    }
    Worker *worker = CurrentWorkerOfThis();
    if (worker != nullptr && threadIndex >= m_numWorkers) {
        // The common case, a task adding to its own worker's deque, inline.
        unsigned const queue = priority == TaskPriority::High ? 0 : 1;
        std::uint64_t const depthBits = TaskItem::DepthBits(worker->TaskDepth() + 1);
        worker->Tasks(queue).PushBatch(count, WithDepth(make, depthBits),
                                       // Counted once nothing can throw, and before any can run (see
                                       // Quiescent).
                                       [counter, count, worker] {
                                           if (counter != nullptr) {
                                               counter->Add(count);
                                           }
                                           worker->CountAdded(count);
                                       });
        NotifyWork(Waker::Worker);
        return;
    }
    if (worker != nullptr) {
        PushItems(worker, count, make, priority, counter, threadIndex);
        return;
    }
    OutsideCall const call(*this);
    if (Destroying()) {
        FTL_FATAL("AddTask: tasks added by a thread outside the scheduler while the TaskScheduler is being "
                  "destroyed (its destructor runs the tasks added before it began; add nothing after)");
    }
    PushItems(nullptr, count, make, priority, counter, threadIndex);
}

template <class Make>
void Scheduler::PushItems(Worker *worker, unsigned count, Make &make, TaskPriority priority,
                          TaskCounter *counter, unsigned threadIndex) {
    if (counter != nullptr) {
        counter->Add(count);
    }
    unsigned const queue = priority == TaskPriority::High ? 0 : 1;
    // One deeper than the adding task (an outside thread's tasks: 0).
    std::uint64_t const depthBits = worker != nullptr ? TaskItem::DepthBits(worker->TaskDepth() + 1) : 0;
    auto deeper = WithDepth(make, depthBits);
    // Counted as added before they can run (see Quiescent).
    if (worker != nullptr) {
        worker->CountAdded(count);
    } else {
        m_externalAdded.fetch_add(count, std::memory_order_seq_cst);
    }
#if defined(__cpp_exceptions)
    try {
#endif
        if (threadIndex < m_numWorkers) {
            // Only that worker takes them: wake it if it is parked.
            Worker &target = m_workers[threadIndex];
            target.PinnedTasks(queue).PushBatch(count, deeper);
            if (&target != worker) {
                NotifyWorker(threadIndex, worker == nullptr ? Waker::Outside : Waker::Worker);
            }
        } else {
            m_global[queue].PushBatch(count, deeper);
            NotifyWork(Waker::Outside);
        }
#if defined(__cpp_exceptions)
    } catch (...) {
        // A queue could not grow (std::bad_alloc): nothing was queued. Take
        // back the counts, so that the counter's waits and the drain do not
        // wait for tasks that do not exist. Lowering an added count is safe
        // for Quiescent: what it takes back never finishes.
        if (worker != nullptr) {
            worker->CountAdded(0 - std::uint64_t{count});
        } else {
            m_externalAdded.fetch_sub(count, std::memory_order_seq_cst);
        }
        if (counter != nullptr) {
            CounterOps::Finish(*counter, count);
        }
        throw;
    }
#endif
}

void Scheduler::CheckThreadIndex(unsigned threadIndex, char const *what) const {
    if (threadIndex >= m_numWorkers) {
        FTL_FATAL("%s: thread index %u, but the scheduler has %u thread(s) (indices 0..%u)", what,
                  threadIndex, m_numWorkers, m_numWorkers - 1);
    }
}

void Scheduler::NotifyWork(Waker waker) {
    int const local = waker == Waker::Outside ? WorkerOnCallersCpu() : -1;
    if (local < 0) {
        m_idle.Notify();
        return;
    }
    std::uint64_t const wakeUps = m_idle.WakeUps(static_cast<unsigned>(local));
    if (m_idle.Notify(local) == local) {
        YieldToWoken(static_cast<unsigned>(local), wakeUps);
    }
}

void Scheduler::NotifyWorker(unsigned index, Waker waker) {
    if (waker == Waker::Worker || !OnCallersCpu(index)) {
        m_idle.NotifyOne(index);
        return;
    }
    std::uint64_t const wakeUps = m_idle.WakeUps(index);
    if (m_idle.NotifyOne(index)) {
        YieldToWoken(index, wakeUps);
    }
}

void Scheduler::YieldToWoken(unsigned index, std::uint64_t wakeUpsBefore) {
    // The caller, a thread outside the scheduler, has just woken worker
    // `index`, pinned to the caller's own CPU. The kernel usually lets the
    // worker preempt the caller at once, and then the worker has counted its
    // wake-up by the time the caller runs again. When it has not, the caller
    // yields (a hint: the kernel picks what runs): a caller that stays busy
    // would otherwise hold the work back until its time slice ends
    // (docs/design.adoc, "Idle workers").
    // A worker claimed in its re-check before it slept does not count a
    // wake-up: then the yield is one too many, to a worker that is runnable.
    if (m_mechanisms.YieldToWokenWorker && m_idle.WakeUps(index) == wakeUpsBefore) {
        YieldThread();
    }
}

bool Scheduler::OnCallersCpu(unsigned index) const {
    return m_options.PinThreads && m_workers[index].Cpu() >= 0 && m_workers[index].Cpu() == CurrentCpu();
}

int Scheduler::WorkerOnCallersCpu() const {
    // A thread outside the scheduler wakes the worker pinned to its own CPU
    // first: that CPU is awake, and the waker usually blocks soon after,
    // while another CPU may be idle in a power-saving (or, on a VM, a
    // descheduled) state that takes tens of microseconds to leave. (A worker
    // calling this is running, so it is not parked anyway; docs/design.adoc,
    // "Idle workers".) An unpinned worker 0 has no CPU (-1), and matches none.
    if (!m_options.PinThreads) {
        return -1;
    }
    int const cpu = CurrentCpu();
    if (cpu < 0) {
        return -1;
    }
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (m_workers[i].Cpu() == cpu) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

bool Scheduler::AnyWorkVisible(Worker const &worker, bool othersTasks, bool yielded) const {
    // Every source of its find-work order, then what it may steal.
    if (worker.Visible(Source::Global) || worker.Visible(Source::Tasks) ||
        worker.Visible(Source::ReadyFiber) || (yielded && worker.Visible(Source::Yielded))) {
        return true;
    }
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (i != worker.Index() && m_workers[i].Stealable(othersTasks)) {
            return true;
        }
    }
    return false;
}

} // namespace detail
} // namespace ftl
