// TaskScheduler's public face: checks the call, then hands it to the
// scheduler (scheduler/scheduler.h), the waiting code (scheduler/wait.h) or
// the helping loop (scheduler/help.h).
#include "ftl/task_scheduler.h"

#include "ftl/assert.h"
#include "ftl/atomic_counter.h"
#include "ftl/parallel_for.h"
#include "ftl/task_counter.h"
#include "scheduler/counter_ops.h"
#include "scheduler/help.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"

#include <limits>
#include <thread>

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

int InitWithMechanisms(TaskScheduler &taskScheduler, TaskSchedulerInitOptions const &options,
                       Mechanisms const &mechanisms) {
    return Scheduler::Init(taskScheduler, options, mechanisms);
}

} // namespace detail

namespace {

detail::Scheduler *Checked(detail::Scheduler *impl, char const *what) {
    if (impl == nullptr) {
        FTL_FATAL("TaskScheduler::%s called on a scheduler that is not initialized (before Init, or after "
                  "destruction)",
                  what);
    }
    return impl;
}

BaseCounter *NotNull(BaseCounter *counter) {
    if (counter == nullptr) {
        FTL_FATAL("TaskScheduler::WaitForCounter(nullptr): a wait needs a counter");
    }
    return counter;
}

// Waits until `counter` holds `target`, or until `deadline` (0: none).
// `worker`: the calling thread's worker of this scheduler, or nullptr, which
// blocks the thread. Returns whether the target was reached.
// `treeWait`: a TaskCounter wait, most likely for tasks the waiting task
// added (see FiberPressure).
bool WaitForValue(detail::Scheduler *scheduler, detail::Worker *worker, BaseCounter *counter, unsigned target,
                  bool pin, std::uint64_t deadline, bool treeWait = false) {
    detail::CounterOps::CheckAlive(*NotNull(counter), "TaskScheduler::WaitForCounter");
    if (detail::CounterOps::Owner(*counter) != scheduler->Owner()) {
        // Its waiters would be readied into the other scheduler's queues.
        FTL_FATAL("TaskScheduler::WaitForCounter on a counter created for another TaskScheduler");
    }
    if (worker != nullptr) {
        worker->PublishFinished(); // the value may be waiting on them (a wait's Park judges the rest)
    }
    if (detail::CounterOps::Value(*counter) == target) {
        return true;
    }
    detail::WaitNode node;
    node.Target = target;
    node.Object = counter;
    if (deadline != 0) {
        if (detail::NowNs() >= deadline) {
            return false;
        }
        node.Deadline = deadline;
        node.Waitable = counter;
        node.Cancel = &detail::CounterOps::Cancel;
    }
    if (worker == nullptr) {
        return detail::WaitOnThread(node, &detail::CounterOps::Register, counter);
    }
    detail::ParkedWaits *noted =
        treeWait ? worker->Pressure().NoteWait(worker->CurrentFiber(), &node, worker->TaskDepth()) : nullptr;
    detail::Park(worker, node, pin, &detail::CounterOps::Register, counter);
    if (noted != nullptr) {
        noted->Ended();
    }
    return !node.TimedOut;
}

// After a wait on `counter` returned: rethrows the exception a task added
// with it kept, if any. A cancelled counter's wait returns normally (the
// cancellation ends there).
void RethrowKept(TaskCounter &counter) {
    if (detail::CounterOps::EndCancellation(counter)) {
        return;
    }
    if (detail::CounterOps::HasError(counter)) {
        if (std::exception_ptr error = detail::CounterOps::TakeError(counter)) {
            std::rethrow_exception(error);
        }
    }
}

} // namespace

TaskScheduler::TaskScheduler() = default;

TaskScheduler::~TaskScheduler() {
    if (m_impl == nullptr) {
        return;
    }
    detail::Scheduler::Destroy(*this);
    // A volatile store: a plain one to a member in a destructor is a dead
    // store the compiler removes (-flifetime-dse). Kept, it makes a call on
    // the destroyed scheduler (while its storage is still ours) hit the "not
    // initialized" check instead of the freed internals.
    *const_cast<detail::Scheduler *volatile *>(&m_impl) = nullptr;
}

int TaskScheduler::Init(TaskSchedulerInitOptions options) {
    return detail::Scheduler::Init(*this, options, detail::Mechanisms{});
}

void TaskScheduler::AddTask(Task task, TaskPriority priority, TaskCounter *counter) {
    Checked(m_impl, "AddTask")->AddTasks(1, &task, priority, counter, kAnyThread);
}

void TaskScheduler::AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority,
                             TaskCounter *counter) {
    Checked(m_impl, "AddTasks")->AddTasks(numTasks, tasks, priority, counter, kAnyThread);
}

void TaskScheduler::AddPinnedTask(unsigned threadIndex, Task task, TaskPriority priority,
                                  TaskCounter *counter) {
    detail::Scheduler *scheduler = Checked(m_impl, "AddPinnedTask");
    scheduler->CheckThreadIndex(threadIndex, "AddPinnedTask");
    scheduler->AddTasks(1, &task, priority, counter, threadIndex);
}

void TaskScheduler::AddClosures(unsigned threadIndex, unsigned count,
                                std::pair<detail::ClosureInvoker, void *> closure, TaskPriority priority,
                                TaskCounter *counter) {
    Checked(m_impl, "AddTask")
        ->AddClosures(count, closure.first, closure.second, priority, counter, threadIndex);
}

void TaskScheduler::AddTaskAfter(std::initializer_list<TaskCounter *> prerequisites, Task task,
                                 TaskPriority priority, TaskCounter *counter) {
    if (task.Function == nullptr) {
        FTL_FATAL("AddTaskAfter: the task has no function");
    }
    AddAfter(prerequisites, task.Function, nullptr, task.ArgData, priority, counter);
}

void TaskScheduler::AddAfter(std::initializer_list<TaskCounter *> prerequisites, TaskFunction function,
                             detail::ClosureInvoker invoker, void *arg, TaskPriority priority,
                             TaskCounter *counter) {
    detail::TaskItem const task = invoker != nullptr ? detail::TaskItem::Closure(invoker, arg, counter, 0)
                                                     : detail::TaskItem{function, arg, counter, 0};
    Checked(m_impl, "AddTaskAfter")->AddAfter(prerequisites.begin(), prerequisites.size(), task, priority);
}

void TaskScheduler::CheckThreadIndex(unsigned threadIndex, char const *what) const {
    Checked(m_impl, what)->CheckThreadIndex(threadIndex, what);
}

namespace detail {

void *AllocateClosureSlot(TaskScheduler *taskScheduler) {
    Scheduler *scheduler = Checked(Scheduler::Of(taskScheduler), "AddTask");
    Worker *worker = scheduler->CurrentWorkerOfThis();
    return scheduler->Closures().Allocate(worker != nullptr ? static_cast<int>(worker->Index()) : -1);
}

bool ParallelForWantsSplit(TaskScheduler *taskScheduler) {
    Scheduler *scheduler = Scheduler::Of(taskScheduler);
    Worker *worker = scheduler->CurrentWorkerOfThis();
    if (worker == nullptr || !worker->Tasks(0).LooksEmpty() || !worker->Tasks(1).LooksEmpty()) {
        return false;
    }
    IdleState const &idle = scheduler->Parking();
    return idle.NumSearching() != 0 || idle.AnyLooksParked();
}

void FreeClosureSlot(TaskScheduler *taskScheduler, void *slot) noexcept {
    Scheduler *scheduler = Scheduler::Of(taskScheduler);
    Worker *worker = scheduler->CurrentWorkerOfThis();
    scheduler->Closures().Free(slot, worker != nullptr ? static_cast<int>(worker->Index()) : -1);
}

} // namespace detail

void TaskScheduler::WaitForCounter(TaskCounter *counter, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    NotNull(counter);
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    // Help first, but not in a pinned wait of a pool fiber: an inline task's
    // own wait could move the fiber. (A thread's own fiber always stays put.)
    if (worker != nullptr && detail::CounterOps::Value(*counter) != 0 &&
        detail::CounterOps::Owner(*counter) == this &&
        (!pinToCurrentThread || worker->CurrentFiber()->IsThreadFiber)) {
        worker = detail::HelpWhileWaiting(worker, counter);
    }
    WaitForValue(scheduler, worker, counter, 0, pinToCurrentThread, 0, true);
    RethrowKept(*counter);
}

void TaskScheduler::WaitForCounter(AtomicFlag *counter, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, 0, pinToCurrentThread, 0);
}

void TaskScheduler::WaitForCounter(FullAtomicCounter *counter, unsigned value, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, value, pinToCurrentThread, 0);
}

bool TaskScheduler::WaitForCounter(TaskCounter *counter, std::chrono::nanoseconds timeout,
                                   bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    // No helping: a child run inline could outlast the deadline.
    if (!WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, 0, pinToCurrentThread,
                      detail::DeadlineAfter(timeout))) {
        return false;
    }
    RethrowKept(*counter);
    return true;
}

bool TaskScheduler::WaitForCounter(AtomicFlag *flag, std::chrono::nanoseconds timeout,
                                   bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    return WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), flag, 0, pinToCurrentThread,
                        detail::DeadlineAfter(timeout));
}

bool TaskScheduler::WaitForCounter(FullAtomicCounter *counter, unsigned value,
                                   std::chrono::nanoseconds timeout, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    return WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, value, pinToCurrentThread,
                        detail::DeadlineAfter(timeout));
}

void TaskScheduler::SleepFor(std::chrono::nanoseconds duration) {
    detail::Scheduler *scheduler = Checked(m_impl, "SleepFor");
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    if (worker == nullptr) {
        std::this_thread::sleep_for(duration);
        return;
    }
    detail::WaitNode node;
    node.Deadline = detail::DeadlineAfter(duration);
    node.Kind = WaitKind::Sleep;
    detail::Park(worker, node, false, &detail::RegisterSleep, scheduler);
}

void TaskScheduler::Yield() {
    detail::Scheduler *scheduler = Checked(m_impl, "Yield");
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    if (worker == nullptr) {
        std::this_thread::yield();
        return;
    }
    detail::WaitNode node;
    node.Kind = WaitKind::Yield;
    detail::Park(worker, node, false, &detail::RegisterYield, worker);
}

unsigned TaskScheduler::GetCurrentThreadIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->Index() : kInvalidIndex;
}

unsigned TaskScheduler::GetCurrentFiberIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->CurrentFiber()->Index : kInvalidIndex;
}

bool TaskScheduler::IsCurrentTaskCancelled() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    if (worker == nullptr) {
        return false;
    }
    // The task the fiber runs: the innermost inline loop's (the item it
    // took last), else its worker loop's.
    detail::Fiber const *fiber = worker->CurrentFiber();
    auto const *task = static_cast<detail::TaskItem const *>(fiber->LoopItem);
    if (detail::InlineHand const *hand = fiber->Hand; hand != nullptr && hand->Next != 0) {
        task = &hand->Items()[hand->Next - 1];
    }
    return task != nullptr && task->Counter != nullptr && task->Counter->IsCancelled();
}

unsigned TaskScheduler::GetThreadCount() const {
    return m_impl != nullptr ? m_impl->NumWorkers() : 0;
}

unsigned TaskScheduler::GetFiberCount() const {
    return m_impl != nullptr ? m_impl->Pool().Size() : 0;
}

SchedulerStats TaskScheduler::GetStats() const {
    return Checked(m_impl, "GetStats")->Stats();
}

std::vector<WaitingFiber> TaskScheduler::GetWaitingFibers() const {
    return Checked(m_impl, "GetWaitingFibers")->WaitingFibers();
}

EmptyQueueBehavior TaskScheduler::GetEmptyQueueBehavior() const {
    return m_impl != nullptr ? m_impl->Behavior() : EmptyQueueBehavior::Sleep;
}

void TaskScheduler::SetEmptyQueueBehavior(EmptyQueueBehavior behavior) {
    Checked(m_impl, "SetEmptyQueueBehavior")->SetBehavior(behavior);
}

} // namespace ftl
