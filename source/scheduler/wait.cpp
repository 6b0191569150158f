#include "scheduler/wait.h"

#include "scheduler/help.h"
#include "scheduler/scheduler.h"
#include "wait/wait_list.h"

namespace ftl {
namespace detail {

Worker *Park(Worker *worker, WaitNode &node, bool pin, RegisterWaiter registerWaiter, void *waitable) {
    // The condition may depend on this worker's unpublished finishes, or on
    // a child an inline loop on this fiber holds: publish them (first, so a
    // fiber they ready can take the hand-off below), and hand the children
    // back, so a sibling one of them waits for is never hidden.
    worker->AtSchedulingPoint();
    Fiber *self = worker->CurrentFiber();
    ReturnHeldChildren(worker, self->Hand);
    node.Waiter = self;
    // A thread's own fiber runs on its own stack: it can only resume there.
    node.PinnedTo = pin || self->IsThreadFiber ? worker : nullptr;
    Scheduler &scheduler = worker->Owner();
    // A timed wait on a waitable: on the timers before the switch, while
    // this fiber surely still waits (see Timers for who then ends it).
    if (node.Deadline != 0 && node.Cancel != nullptr) {
        scheduler.AddTimer(&node);
    }

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
        next = scheduler.Pool().Acquire(worker->Index());
        next->Transition(FiberState::Free, FiberState::Running);
    }
    self->Transition(FiberState::Running, FiberState::Waiting);
    if (__builtin_expect(worker->Observed(), false)) {
        worker->ObserveWaitBegin(node);
    }
    // For GetWaitingFibers: the node's fields above are set (release).
    self->ParkedOn.store(&node, std::memory_order_release);
    SwitchRecord record{self, next, worker, AfterSwitch::Park, registerWaiter, waitable, &node};
    unsigned const depth = worker->TaskDepth();
    worker = worker->SwitchTo(record);
    worker->SetTaskDepth(depth);
    self->ParkedOn.store(nullptr, std::memory_order_relaxed);
    // The clear before every later store of this fiber (to the node, to the
    // task and the inline hand on its stack, to a next wait's node): arm64
    // may otherwise show a GetWaitingFibers copy those stores while ParkedOn
    // still reads &node. Pairs with the acquire fence in WaitingFibers. One
    // dmb ish per resume on arm64; nothing on x86, where stores stay in order.
    std::atomic_thread_fence(std::memory_order_release);
    if (__builtin_expect(worker->Observed(), false)) {
        worker->ObserveWaitEnd(node);
    }
    if (node.Deadline != 0) {
        // Off the timers before the node (on this stack) goes away.
        worker->Owner().RemoveTimer(&node);
    }
    return worker;
}

bool WaitOnThread(WaitNode &node, RegisterWaiter registerWaiter, void *waitable) {
    node.Waiter = nullptr;
    if (!registerWaiter(waitable, &node)) {
        return !node.TimedOut;
    }
    for (;;) {
        if (node.Woken.load(std::memory_order_acquire) != 0) {
            return true;
        }
        if (node.Deadline == 0) {
            FutexWait(&node.Woken, 0);
            continue;
        }
        std::uint64_t const now = NowNs();
        if (now < node.Deadline) {
            FutexWaitFor(&node.Woken, 0, node.Deadline - now);
            continue;
        }
        if (node.Cancel(node.Waitable, &node)) {
            return false;
        }
        // A waker took the node first: it sets the word soon; the node must
        // outlive that.
        while (node.Woken.load(std::memory_order_acquire) == 0) {
            FutexWait(&node.Woken, 0);
        }
        return true;
    }
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

void WakeWaiter(Scheduler *scheduler, WaitNode *node, Readier readier) {
    if (node->Waiter != nullptr) {
        ReadyFiber(*scheduler, node->Waiter, node->PinnedTo, readier);
        return;
    }
    if (node->After != nullptr) {
        if (PrerequisiteDone(*scheduler, scheduler->CurrentWorkerOfThis(), node)) {
            scheduler->NotifyStarted();
        }
        return;
    }
    // A thread: after the store it may return, and its node with it; the
    // wake below only needs the address (a stale one wakes nobody harmful).
    std::atomic<std::uint32_t> *woken = &node->Woken;
    woken->store(1, std::memory_order_release);
    FutexWake(woken, 1);
}

void ReadyFiber(Scheduler &scheduler, Fiber *fiber, Worker *pinnedTo, Readier readier) {
    fiber->Transition(FiberState::Waiting, FiberState::Ready);
    Worker *current = scheduler.CurrentWorkerOfThis();
    if (current == nullptr) {
        // Counted before the fiber is queued: from then on it may run, end
        // the last task, and the Init thread destroy the scheduler while this
        // thread still wakes a worker. Destroy waits for the count.
        Scheduler::OutsideCall const call(scheduler);
        if (pinnedTo != nullptr) {
            pinnedTo->Pinned().Push(fiber);
            scheduler.NotifyWorker(pinnedTo->Index(), Scheduler::Waker::Outside);
            return;
        }
        scheduler.Global(0).PushBatch(1, [fiber](std::size_t) { return TaskItem::ReadyFiber(fiber); });
        scheduler.NotifyWork(Scheduler::Waker::Outside);
        return;
    }
    if (pinnedTo != nullptr) {
        pinnedTo->Pinned().Push(fiber);
        if (pinnedTo != current) {
            scheduler.NotifyWorker(pinnedTo->Index(), Scheduler::Waker::Worker);
        }
        return;
    }
    if (readier != Readier::BetweenTasks && current->KeepsReadied()) {
        current->KeepReadied(fiber, readier == Readier::TaskThatGoesOn);
        return;
    }
    current->ReadyFibers().Push(fiber);
    scheduler.NotifyWork(Scheduler::Waker::Worker);
}

bool RegisterSleep(void *scheduler, WaitNode *node) {
    // The fiber is off its stack: the timers may ready it right away.
    if (NowNs() >= node->Deadline) {
        return false;
    }
    static_cast<Scheduler *>(scheduler)->AddTimer(node);
    return true;
}

bool RegisterYield(void *worker, WaitNode *node) {
    node->Waiter->Transition(FiberState::Waiting, FiberState::Ready);
    static_cast<Worker *>(worker)->PushYielded(node->Waiter);
    return true;
}

} // namespace detail
} // namespace ftl
