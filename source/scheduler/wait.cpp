#include "scheduler/wait.h"

#include "scheduler/help.h"
#include "scheduler/scheduler.h"
#include "wait/wait_list.h"

namespace ftl {
namespace detail {

Worker *Park(Worker *worker, bool pin, RegisterWaiter registerWaiter, void *waitable, unsigned target) {
    // The condition may depend on this worker's unpublished finishes, or on
    // a child an inline loop on this fiber holds: publish them (first, so a
    // fiber they ready can take the hand-off below), and hand the children
    // back, so a sibling one of them waits for is never hidden.
    worker->PublishFinished();
    Fiber *self = worker->CurrentFiber();
    ReturnHeldChildren(worker, self->Hand);
    WaitNode node;
    node.Waiter = self;
    // A thread's own fiber runs on its own stack: it can only resume there.
    node.PinnedTo = pin || self->IsThreadFiber ? worker : nullptr;
    node.Target = target;

    // Hand the thread to a ready fiber directly when the find-work order
    // would pick one now; that hand-off is an item of the current tick, like
    // any the loop runs. Otherwise a pool fiber runs the loop, which takes the
    // queued work that is due first (a tick's first item, the global queue's
    // turn) -- without this, two fibers waking each other would hand the
    // thread back and forth forever and starve queued tasks.
    Fiber *next = nullptr;
    if (worker->NextSource(false) == Source::ReadyFiber && worker->TakeReadyFiber(next)) {
        next->Transition(FiberState::Ready, FiberState::Running);
        worker->CountItem();
    } else {
        next = worker->Owner().Pool().Acquire(worker->Index());
        next->Transition(FiberState::Free, FiberState::Running);
    }
    self->Transition(FiberState::Running, FiberState::Waiting);
    SwitchRecord record{self, next, worker, AfterSwitch::Park, registerWaiter, waitable, &node};
    return worker->SwitchTo(record);
}

void PublishWaiter(Scheduler &scheduler, SwitchRecord const &record) {
    // Copy what readying needs before registering: once registered, a waker
    // on another thread may resume the fiber, and its node is gone.
    Fiber *fiber = record.From;
    Worker *pinnedTo = record.Node->PinnedTo;
    if (!record.Register(record.Waitable, record.Node)) {
        ReadyFiber(scheduler, fiber, pinnedTo);
    }
}

void ReadyFiber(Scheduler &scheduler, Fiber *fiber, Worker *pinnedTo) {
    fiber->Transition(FiberState::Waiting, FiberState::Ready);
    Worker *current = scheduler.CurrentWorkerOfThis();
    if (pinnedTo != nullptr) {
        pinnedTo->Pinned().Push(fiber);
        if (pinnedTo != current) {
            scheduler.Idle().NotifyOne(pinnedTo->Index());
        }
        return;
    }
    if (current != nullptr) {
        current->ReadyFibers().Push(fiber);
        scheduler.NotifyWork(Scheduler::Waker::Worker);
        return;
    }
    scheduler.Global(0).PushBatch(1, [fiber](std::size_t) { return TaskItem::ReadyFiber(fiber); });
    scheduler.NotifyWork(Scheduler::Waker::Outside);
}

} // namespace detail
} // namespace ftl
