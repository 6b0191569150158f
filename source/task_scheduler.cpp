// TaskScheduler's public face: checks the call, then hands it to the
// scheduler (scheduler/scheduler.h), the waiting code (scheduler/wait.h) or
// the helping loop (scheduler/help.h).
#include "ftl/task_scheduler.h"

#include "ftl/assert.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "scheduler/help.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "waitables/counter_ops.h"

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

// Waits until `counter` holds `target`. `worker`: the calling thread's worker
// of this scheduler, or nullptr.
void WaitForValue(detail::Scheduler *scheduler, detail::Worker *worker, BaseCounter *counter, unsigned target,
                  bool pin) {
    if (detail::CounterOps::Owner(*counter) != scheduler->Owner()) {
        // Its waiters would be readied into the other scheduler's queues.
        FTL_FATAL("TaskScheduler::WaitForCounter on a counter created for another TaskScheduler");
    }
    if (worker != nullptr) {
        worker->PublishFinished(); // the value may be waiting on them
    }
    if (detail::CounterOps::Value(*counter) == target) {
        return;
    }
    if (worker == nullptr) {
        FTL_FATAL("TaskScheduler::WaitForCounter called from a thread that is not a worker of this "
                  "TaskScheduler");
    }
    detail::Park(worker, pin, &detail::CounterOps::Register, counter, target);
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
    Checked(m_impl, "AddTask")->AddTasks(1, &task, priority, counter);
}

void TaskScheduler::AddTasks(unsigned numTasks, Task const *tasks, TaskPriority priority,
                             TaskCounter *counter) {
    Checked(m_impl, "AddTasks")->AddTasks(numTasks, tasks, priority, counter);
}

void TaskScheduler::WaitForCounter(TaskCounter *counter, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    detail::Worker *worker = scheduler->CurrentWorkerOfThis();
    // Help first, but not in a pinned wait of a pool fiber: an inline task's
    // own wait could move the fiber. (A thread's own fiber always stays put.)
    if (worker != nullptr && detail::CounterOps::Value(*counter) != 0 &&
        detail::CounterOps::Owner(*counter) == this &&
        (!pinToCurrentThread || worker->CurrentFiber()->IsThreadFiber)) {
        worker = detail::HelpWhileWaiting(worker, counter);
    }
    WaitForValue(scheduler, worker, counter, 0, pinToCurrentThread);
}

void TaskScheduler::WaitForCounter(AtomicFlag *counter, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, 0, pinToCurrentThread);
}

void TaskScheduler::WaitForCounter(FullAtomicCounter *counter, unsigned value, bool pinToCurrentThread) {
    detail::Scheduler *scheduler = Checked(m_impl, "WaitForCounter");
    WaitForValue(scheduler, scheduler->CurrentWorkerOfThis(), counter, value, pinToCurrentThread);
}

unsigned TaskScheduler::GetCurrentThreadIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->Index() : kInvalidIndex;
}

unsigned TaskScheduler::GetCurrentFiberIndex() const {
    detail::Worker *worker = m_impl != nullptr ? m_impl->CurrentWorkerOfThis() : nullptr;
    return worker != nullptr ? worker->CurrentFiber()->Index : kInvalidIndex;
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
