// TaskScheduler's public face, the scheduler's lifecycle, and AddTask.
//
// Lifecycle
//   Init:     workers and the fiber pool are built, the calling thread becomes
//             worker 0 (its own fiber is a "thread fiber"), the other threads
//             start, each switching from its thread fiber to a pool fiber
//             that runs the worker loop.
//   Shutdown: the Init thread waits (parked, pinned) until every task added
//             so far has finished -- no work is dropped -- then sets m_quit;
//             each worker's loop switches back to its thread fiber, which
//             returns, and the threads are joined.
#include "counter_ops.h"
#include "ftl/assert.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "scheduler.h"

#include <system_error>

namespace ftl {

char const *InitErrorString(int error) {
    switch (static_cast<InitError>(error)) {
    case InitError::Success:
        return "success";
    case InitError::AlreadyInitialized:
        return "TaskScheduler::Init was already called on this scheduler";
    case InitError::InvalidOptions:
        return "invalid TaskSchedulerInitOptions";
    case InitError::ThreadCreationFailed:
        return "a worker thread could not be created";
    case InitError::FiberCreationFailed:
        return "the fiber pool could not be allocated";
    case InitError::ThreadAlreadyBound:
        return "the calling thread is already a worker of a live TaskScheduler";
    }
    return "unknown error";
}

namespace detail {

Scheduler::Scheduler(TaskScheduler *owner, TaskSchedulerInitOptions const &options)
    : m_owner(owner), m_options(options) {}

Scheduler::~Scheduler() = default;

InitError Scheduler::Start() {
    TaskSchedulerInitOptions const &options = m_options;
    std::vector<int> const cpus = AllowedCpus();
    m_numWorkers = options.ThreadPoolSize != 0 ? options.ThreadPoolSize : static_cast<unsigned>(cpus.size());
    if (options.ThreadPoolSize == 0 && m_numWorkers > kMaxWorkers) {
        m_numWorkers = kMaxWorkers;
    }
    if (m_numWorkers == 0 || m_numWorkers > kMaxWorkers || options.FiberPoolSize == 0 ||
        options.FiberStackSize < 16 * 1024 ||
        (options.PoolPolicy == FiberPoolPolicy::Fatal && options.FiberPoolSize < m_numWorkers)) {
        return InitError::InvalidOptions;
    }

    m_inlineStackNeed = options.FiberStackSize / kInlineStackShareDen * kInlineStackShareNum;
    m_workers.reset(new Worker[m_numWorkers]);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        Worker &worker = m_workers[i];
        worker.m_scheduler = this;
        worker.m_index = i;
        worker.m_rng = 0x9e3779b9u * (i + 1);
        worker.m_cpu = cpus[i % cpus.size()];
        worker.m_globalInterval = options.Features.AdaptiveGlobalInterval
                                      ? static_cast<unsigned>(kGlobalQueueLatencyNs / kInitialAvgTaskNs)
                                      : kFixedGlobalInterval;
    }
    m_idle.Init(m_numWorkers, options.Features.SearcherLimit);
    m_behavior.store(options.Behavior, std::memory_order_relaxed);

    Worker &main = m_workers[0];
    if (!m_pool.Init(options.FiberPoolSize, m_numWorkers, options.FiberStackSize, options.PoolPolicy,
                     options.Callbacks, &Scheduler::FiberEntry, &main.m_threadFiber)) {
        return InitError::FiberCreationFailed;
    }
    EventCallbacks const &callbacks = options.Callbacks;
    if (callbacks.OnFibersCreated != nullptr) {
        callbacks.OnFibersCreated(callbacks.Context, options.FiberPoolSize);
    }
    m_drainFlag.reset(new AtomicFlag(m_owner));

    // The calling thread becomes worker 0; its own stack is fiber 0.
    main.m_tickStartNs = NowNs();
    InitThreadFiber(main.m_threadFiber, 0, true);
    main.m_threadFiber.CurrentWorker = &main; // it starts running without a switch into it
    main.m_currentFiber = &main.m_threadFiber;
    SetCurrentWorker(&main);
    if (options.CatchStackOverflow) {
        InstallFaultHandler();
        main.m_altStack.Enter();
    }
    if (options.PinThreads) {
        m_initThreadAffinity = SaveAffinity();
        PinCurrentThread(main.m_cpu);
    }
    if (callbacks.OnFiberAttached != nullptr) {
        callbacks.OnFiberAttached(callbacks.Context, main.m_threadFiber.Index);
    }
    m_started = true;

    for (unsigned i = 1; i < m_numWorkers; ++i) {
        try {
            m_workers[i].m_thread = std::thread([this, i] { ThreadMain(&m_workers[i]); });
        } catch (std::system_error const &) {
            // Stop the threads already running; nothing was added yet.
            m_quit.store(true, std::memory_order_seq_cst);
            WakeAllParked();
            for (unsigned j = 1; j < i; ++j) {
                m_workers[j].m_thread.join();
            }
            if (callbacks.OnFiberDetached != nullptr) {
                callbacks.OnFiberDetached(callbacks.Context, main.m_threadFiber.Index, false);
            }
            if (options.PinThreads) {
                RestoreAffinity(m_initThreadAffinity);
            }
            if (options.CatchStackOverflow) {
                main.m_altStack.Leave();
                RemoveFaultHandler();
            }
            SetCurrentWorker(nullptr);
            m_pool.DestroyAll();
            m_started = false;
            return InitError::ThreadCreationFailed;
        }
    }
    // Return only once every worker is ready to take work: otherwise the
    // first tasks after Init run on fewer workers for as long as the threads
    // take to start (1-3 ms measured on a 2-core VM).
    for (;;) {
        std::uint32_t const up = m_workersUp.load(std::memory_order_acquire);
        if (up == m_numWorkers - 1) {
            break;
        }
        FutexWait(&m_workersUp, up);
    }
    if (callbacks.OnThreadsCreated != nullptr) {
        callbacks.OnThreadsCreated(callbacks.Context, m_numWorkers);
    }
    return InitError::Success;
}

void Scheduler::ThreadMain(Worker *worker) {
    SetCurrentWorker(worker);
    if (m_options.PinThreads) {
        PinCurrentThread(worker->m_cpu);
    }
    // The thread's own stack only starts the worker's first pool fiber and
    // takes the thread back at the end: it runs no task, and callbacks do not
    // hear of it (the fiber attached is the pool fiber, index m_index).
    InitThreadFiber(worker->m_threadFiber, worker->m_index, false);
    worker->m_threadFiber.CurrentWorker = worker;
    worker->m_currentFiber = &worker->m_threadFiber;
    if (m_options.CatchStackOverflow) {
        worker->m_altStack.Enter();
    }
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnWorkerThreadStarted != nullptr) {
        callbacks.OnWorkerThreadStarted(callbacks.Context, worker->m_index);
    }
    worker->m_tickStartNs = NowNs(); // the first tick's EWMA sample starts here

    Fiber *first = m_pool.AcquireFirst(worker->m_index);
    first->Transition(FiberState::Free, FiberState::Running);
    SwitchRecord record{
        &worker->m_threadFiber, first, worker, AfterSwitch::Started, nullptr, nullptr, nullptr};
    SwitchFiber(record); // returns once the scheduler quits

    if (callbacks.OnWorkerThreadEnded != nullptr) {
        callbacks.OnWorkerThreadEnded(callbacks.Context, worker->m_index);
    }
    if (m_options.CatchStackOverflow) {
        worker->m_altStack.Leave();
    }
    DestroyThreadFiber(worker->m_threadFiber);
    SetCurrentWorker(nullptr);
}

std::uint64_t Scheduler::FinishedCount() const {
    std::uint64_t finished = 0;
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        finished += m_workers[i].m_tasksFinished.load(std::memory_order_acquire);
    }
    return finished;
}

bool Scheduler::Quiescent() const {
    // Finished counts first, added counts second. Each only grows and a task
    // is counted as added before it can finish, so
    //   finished read <= finished(t) <= added(t) <= added read
    // for the moment t between the two passes: equal sums mean that at t every
    // task added had finished, and nothing was left to add more.
    std::uint64_t const finished = FinishedCount();
    std::uint64_t added = m_externalAdded.load(std::memory_order_acquire);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        added += m_workers[i].m_tasksAdded.load(std::memory_order_acquire);
    }
    return finished == added;
}

void Scheduler::CheckDrain(Worker *worker) {
    if (!m_drainRequested.load(std::memory_order_relaxed)) {
        return;
    }
    if (Quiescent()) {
        if (m_drainRequested.exchange(false, std::memory_order_acq_rel)) {
            m_drainFlag->Clear();
        }
        return;
    }
    // Not done. If no task has finished for kDrainStallNs while every other
    // worker is parked and nothing is queued, the unfinished tasks are fibers
    // waiting for counters, flags or Fibtexes that no task will ever change:
    // the drain would hang forever. Say so instead. (A thread outside the
    // scheduler could still release them; a program that relies on that must
    // do it before destroying the scheduler.)
    std::uint64_t const finished = FinishedCount();
    std::uint64_t const now = NowNs();
    if (finished != m_drainProgress.load(std::memory_order_relaxed) ||
        m_drainProgressNs.load(std::memory_order_relaxed) == 0) {
        m_drainProgress.store(finished, std::memory_order_relaxed);
        m_drainProgressNs.store(now, std::memory_order_relaxed);
        return;
    }
    if (now - m_drainProgressNs.load(std::memory_order_relaxed) < kDrainStallNs ||
        !m_idle.AllParkedExcept(worker->m_index) || AnyWorkVisible(worker)) {
        return;
    }
    std::uint64_t added = m_externalAdded.load(std::memory_order_acquire);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        added += m_workers[i].m_tasksAdded.load(std::memory_order_acquire);
    }
    FTL_FATAL(
        "TaskScheduler destroyed while %llu task(s) can never finish: their fibers wait on counters, "
        "flags or Fibtexes that nothing changes any more (no task has finished for %llu ms, every worker "
        "is idle)",
        static_cast<unsigned long long>(added - finished),
        static_cast<unsigned long long>(kDrainStallNs / 1000000u));
}

void Scheduler::Shutdown() {
    Worker *worker = CurrentWorkerOfThis();
    if (worker != &m_workers[0] || worker->m_currentFiber != &worker->m_threadFiber ||
        worker->m_threadFiber.InlineDepth != 0) {
        FTL_FATAL("a TaskScheduler must be destroyed by the thread that called Init, outside any task");
    }
    // Run everything already added. The Init thread parks on m_drainFlag; the
    // first worker to go idle with every task finished clears it.
    m_drainFlag->Set();
    m_drainRequested.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (Quiescent()) {
        m_drainRequested.store(false, std::memory_order_relaxed);
    } else {
        m_owner->WaitForCounter(m_drainFlag.get(), true);
    }

    m_quit.store(true, std::memory_order_seq_cst);
    WakeAllParked();
    for (unsigned i = 1; i < m_numWorkers; ++i) {
        m_workers[i].m_thread.join();
    }
    EventCallbacks const &callbacks = m_options.Callbacks;
    if (callbacks.OnFiberDetached != nullptr) {
        callbacks.OnFiberDetached(callbacks.Context, m_workers[0].m_threadFiber.Index, false);
    }
    if (m_options.PinThreads) {
        RestoreAffinity(m_initThreadAffinity);
    }
    if (m_options.CatchStackOverflow) {
        m_workers[0].m_altStack.Leave();
        RemoveFaultHandler();
    }
    DestroyThreadFiber(m_workers[0].m_threadFiber);
    SetCurrentWorker(nullptr);
    m_drainFlag.reset();
    m_pool.DestroyAll();
}

void Scheduler::SetBehavior(EmptyQueueBehavior behavior) {
    m_behavior.store(behavior, std::memory_order_seq_cst);
    if (behavior != EmptyQueueBehavior::Sleep) {
        WakeAllParked(); // parked workers follow the new behaviour at once
    }
}

void Scheduler::AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority, TaskCounter *counter) {
    if (numTasks == 0) {
        return;
    }
    if (counter != nullptr) {
        counter->Add(numTasks);
    }
    auto make = [tasks, counter](std::size_t i) {
        if (tasks[i].Function == nullptr) {
            FTL_FATAL("AddTasks: task %zu has no function", i);
        }
        return TaskItem{tasks[i].Function, tasks[i].ArgData, counter};
    };
    unsigned const queue = priority == TaskPriority::High ? 0 : 1;
    if (Worker *worker = CurrentWorkerOfThis()) {
        worker->CountAdded(numTasks); // before the tasks can run (see Quiescent)
        worker->m_tasks[queue].PushBatch(numTasks, make);
        NotifyWork(Waker::Worker);
    } else {
        m_externalAdded.fetch_add(numTasks, std::memory_order_seq_cst);
        m_global[queue].PushBatch(numTasks, make);
        NotifyWork(Waker::Outside);
    }
}

} // namespace detail

// ---- TaskScheduler ----

TaskScheduler::TaskScheduler() = default;

TaskScheduler::~TaskScheduler() {
    if (m_impl == nullptr) {
        return;
    }
    m_impl->Shutdown();
    delete m_impl;
    // A volatile store: a plain one to a member in a destructor is a dead
    // store the compiler removes (-flifetime-dse). Kept, it makes a call on
    // the destroyed scheduler (while its storage is still ours) hit the "not
    // initialized" check instead of the freed internals.
    *const_cast<detail::Scheduler *volatile *>(&m_impl) = nullptr;
}

int TaskScheduler::Init(TaskSchedulerInitOptions options) {
    if (m_impl != nullptr) {
        return static_cast<int>(InitError::AlreadyInitialized);
    }
    if (detail::CurrentWorker() != nullptr) {
        return static_cast<int>(InitError::ThreadAlreadyBound);
    }
    m_impl = new detail::Scheduler(this, options);
    InitError const result = m_impl->Start();
    if (result != InitError::Success) {
        delete m_impl;
        m_impl = nullptr;
    }
    return static_cast<int>(result);
}

namespace {

detail::Scheduler *Checked(detail::Scheduler *impl, char const *what) {
    if (impl == nullptr) {
        FTL_FATAL("TaskScheduler::%s called on a scheduler that is not initialized (before Init, or after "
                  "destruction)",
                  what);
    }
    return impl;
}

void WaitForValue(detail::Scheduler *scheduler, detail::Worker *worker, BaseCounter *counter, unsigned target,
                  bool pin) {
    if (detail::CounterOps::Owner(*counter) != scheduler->Owner()) {
        // Its waiters would be readied into the other scheduler's queues.
        FTL_FATAL("TaskScheduler::WaitForCounter on a counter created for another TaskScheduler");
    }
    if (worker != nullptr) {
        scheduler->PublishFinished(worker); // the value may be waiting on them
    }
    if (detail::CounterOps::Value(*counter) == target) {
        return;
    }
    if (worker == nullptr) {
        FTL_FATAL("TaskScheduler::WaitForCounter called from a thread that is not a worker of this "
                  "TaskScheduler");
    }
    scheduler->Wait(worker, pin, &detail::CounterOps::Register, counter, target);
}

void WaitForValue(detail::Scheduler *scheduler, BaseCounter *counter, unsigned target, bool pin) {
    WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, target, pin);
}

} // namespace

void TaskScheduler::AddTask(Task task, TaskPriority priority, TaskCounter *counter) {
    Checked(m_impl, "AddTask")->AddTasks(1, &task, priority, counter);
}

void TaskScheduler::AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority,
                             TaskCounter *counter) {
    Checked(m_impl, "AddTasks")->AddTasks(numTasks, tasks, priority, counter);
}

void TaskScheduler::WaitForCounter(TaskCounter *counter, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    if (detail::CounterOps::Value(*counter) != 0) {
        // Not for a pinned wait of a pool fiber: an inline task's own wait
        // could move the fiber. (A thread's own fiber always stays put.)
        if (worker != nullptr && detail::CounterOps::Owner(*counter) == this &&
            (!pinToCurrentThread || worker->m_currentFiber->IsThreadFiber)) {
            worker = scheduler->RunChildrenInline(worker, counter);
        }
    }
    WaitForValue(scheduler, worker, counter, 0, pinToCurrentThread);
}

void TaskScheduler::WaitForCounter(AtomicFlag *counter, bool pinToCurrentThread) {
    WaitForValue(Checked(m_impl, "WaitForCounter"), counter, 0, pinToCurrentThread);
}

void TaskScheduler::WaitForCounter(FullAtomicCounter *counter, unsigned value, bool pinToCurrentThread) {
    WaitForValue(Checked(m_impl, "WaitForCounter"), counter, value, pinToCurrentThread);
}

unsigned TaskScheduler::GetCurrentThreadIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->m_index : kInvalidIndex;
}

unsigned TaskScheduler::GetCurrentFiberIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->m_currentFiber->Index : kInvalidIndex;
}

unsigned TaskScheduler::GetThreadCount() const {
    return m_impl != nullptr ? m_impl->NumWorkers() : 0;
}

unsigned TaskScheduler::GetFiberCount() const {
    return m_impl != nullptr ? m_impl->Pool().Size() : 0;
}

EmptyQueueBehavior TaskScheduler::GetEmptyQueueBehavior() const {
    return m_impl != nullptr ? m_impl->Behavior() : EmptyQueueBehavior::Sleep;
}

void TaskScheduler::SetEmptyQueueBehavior(EmptyQueueBehavior behavior) {
    Checked(m_impl, "SetEmptyQueueBehavior")->SetBehavior(behavior);
}

} // namespace ftl
