// Waiting: parking the running fiber on a waitable, and readying it again.
//
// The protocol (DESIGN.md invariants 1, 2 and 4):
//   1. Wait() marks the fiber Waiting, picks the next fiber (a ready one, or a
//      fresh one from the pool) and switches to it, carrying a SwitchRecord
//      that names the waitable and a WaitNode on the waiting fiber's stack.
//   2. The fiber switched to runs AfterSwitchStep: only now, with the waiter
//      entirely off its stack, is it registered on the waitable's list. The
//      registration re-checks the condition atomically with linking the node;
//      if the condition already holds, the fiber is readied at once.
//   3. A waker unlinks the node under the list's lock, then ReadyFiber puts
//      the fiber where it will run: its pinned worker's inbox, this worker's
//      LIFO slot, or the global queue when the waker is not a worker.
#include "counter_ops.h"
#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "scheduler.h"

namespace ftl {
namespace detail {

Worker *Scheduler::Wait(Worker *worker, bool pin, bool (*registerWaiter)(void *, WaitNode *), void *waitable,
                        unsigned target) {
    Fiber *self = worker->m_currentFiber;
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
    if (!QueuedWorkDue(worker) && TakeReadyFiber(worker, next)) {
        next->Transition(FiberState::Ready, FiberState::Running);
        CountItem(worker);
    } else {
        next = m_pool.Acquire(worker->m_index);
        next->Transition(FiberState::Free, FiberState::Running);
    }
    self->Transition(FiberState::Running, FiberState::Waiting);
    SwitchRecord record{self, next, worker, AfterSwitch::Park, registerWaiter, waitable, &node};
    return SwitchFiber(record);
}

bool Scheduler::TakeChild(Worker *worker, TaskCounter const *counter, TaskItem &item) {
    for (auto &deque : worker->m_tasks) {
        if (deque.Pop(item)) {
            if (item.Counter == counter) {
                return true;
            }
            deque.Push(item); // not one of ours: back where it was
        }
    }
    return false;
}

bool Scheduler::ReadyFiberWaiting(Worker const *worker) const {
    return worker->m_lifoSlot != nullptr || !worker->m_pinned.LooksEmpty() || !worker->m_ready.LooksEmpty();
}

Worker *Scheduler::RunChildrenInline(Worker *worker, TaskCounter *counter) {
    // Every task added with `counter` must finish before this wait returns,
    // so running one here, on the waiting fiber's own stack, cannot deadlock
    // the wait: if it waits in turn, the whole fiber waits, which the outer
    // wait had to do anyway. It saves the switch to a pool fiber and back
    // (the most common wait: a task waiting for the children it just added).
    // Only our own children, only from the bottom of our deques (the newest,
    // cache-warm ones; thieves take the oldest), at most kMaxInlineDepth waits
    // deep on one fiber, and never ahead of a ready fiber or of queued work
    // whose turn has come (ready fibers first, the tick's task poll, the
    // global queue's interval).
    Fiber *self = worker->m_currentFiber;
    if (!m_options.Features.InlineChildren || self->InlineDepth >= kMaxInlineDepth) {
        return worker;
    }
    ++self->InlineDepth;
    TaskItem item;
    while (CounterOps::Value(*counter) != 0 && !ReadyFiberWaiting(worker) && !QueuedWorkDue(worker) &&
           TakeChild(worker, counter, item)) {
        RunTaskFunction(item);
        worker = self->CurrentWorker;
        item.Counter->Decrement();
        worker->CountFinished();
        CountItem(worker);
    }
    --self->InlineDepth;
    return worker;
}

void Scheduler::AfterSwitchStep(SwitchRecord const &record, Worker *worker) {
    switch (record.Action) {
    case AfterSwitch::Nothing:
        break;
    case AfterSwitch::ReturnToPool:
        record.From->Transition(FiberState::Running, FiberState::Free);
        m_pool.Release(record.From, worker->m_index);
        break;
    case AfterSwitch::Park: {
        // Copy what readying needs before registering: once registered, a
        // waker on another thread may resume the fiber and its node is gone.
        Fiber *fiber = record.From;
        Worker *pinnedTo = record.Node->PinnedTo;
        if (!record.Register(record.Waitable, record.Node)) {
            ReadyFiber(fiber, pinnedTo);
        }
        break;
    }
    }
}

void Scheduler::ReadyFiber(Fiber *fiber, Worker *pinnedTo) {
    fiber->Transition(FiberState::Waiting, FiberState::Ready);
    Worker *current = CurrentWorkerOfThis();
    if (pinnedTo != nullptr) {
        pinnedTo->m_pinned.Push(fiber);
        if (pinnedTo != current) {
            // Publish, then look for the parked bit (pairs with Park's fence).
            std::atomic_thread_fence(std::memory_order_seq_cst);
            if (m_idle.ClaimSpecific(pinnedTo->m_index)) {
                WakeWorker(pinnedTo->m_index);
            }
        }
        return;
    }
    if (current != nullptr) {
        if (m_options.Features.LifoSlot) {
            // This worker runs it next; no one needs waking for it. A fiber
            // already in the slot moves to the ready deque, where others can
            // take it.
            Fiber *displaced = current->m_lifoSlot;
            current->m_lifoSlot = fiber;
            if (displaced == nullptr) {
                return;
            }
            fiber = displaced;
        }
        current->m_ready.Push(fiber);
        NotifyWork();
        return;
    }
    m_global[0].PushBatch(1, [fiber](std::size_t) { return TaskItem{nullptr, fiber, nullptr}; });
    NotifyWork();
}

} // namespace detail
} // namespace ftl
