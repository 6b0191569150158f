// Waiting: parking the running fiber on a waitable, and readying it again.
//
// The protocol (docs/design.adoc, invariants 1, 2 and 4):
//   1. Wait() marks the fiber Waiting, picks the next fiber (a ready one, or a
//      fresh one from the pool) and switches to it, carrying a SwitchRecord
//      that names the waitable and a WaitNode on the waiting fiber's stack.
//   2. The fiber switched to runs AfterSwitchStep: only now, with the waiter
//      entirely off its stack, is it registered on the waitable's list. The
//      registration re-checks the condition atomically with linking the node;
//      if the condition already holds, the fiber is readied at once.
//   3. A waker unlinks the node under the list's lock, then ReadyFiber puts
//      the fiber where it will run: its pinned worker's inbox, this worker's
//      ready deque, or the global queue when the waker is not a worker.
#include "counter_ops.h"
#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "scheduler.h"

namespace ftl {
namespace detail {

Worker *Scheduler::Wait(Worker *worker, bool pin, bool (*registerWaiter)(void *, WaitNode *), void *waitable,
                        unsigned target) {
    // The condition may depend on this worker's unpublished finishes, or on a
    // child an inline loop on this fiber holds: publish them, hand those back.
    PublishFinished(worker);
    Fiber *self = worker->m_currentFiber;
    ReturnHands(worker, self->Hand);
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

// Children an inline loop took from its worker's deque in one batch and has
// not run yet. It lives on the waiting fiber's stack; the fiber points at the
// innermost one, and each points at the loop it is nested in.
struct InlineHand {
    // Filled by PopBatch before they are read; left uninitialized (a
    // TaskItem array would zero 192 bytes on every wait).
    alignas(TaskItem) unsigned char Storage[kInlineBatch * sizeof(TaskItem)];
    TaskItem *Items() { return reinterpret_cast<TaskItem *>(Storage); }
    unsigned Next = 0;  // Items[Next] runs next
    unsigned Count = 0; // Items[Next..Count) are held
    unsigned Queue = 0; // the deque they came from
    InlineHand *Outer = nullptr;
};

namespace {

// Puts the held items back at the bottom of `deque`, in the order they were
// taken from it (Items[Next], the newest, ends at the bottom).
void PutBack(TaskDeque &deque, InlineHand &hand) {
    for (unsigned i = hand.Count; i > hand.Next; --i) {
        deque.Push(hand.Items()[i - 1]);
    }
    hand.Count = hand.Next;
}

} // namespace

void Scheduler::ReturnHands(Worker *worker, InlineHand *hand) {
    // Outermost first, so the innermost loop's items end at the bottom.
    if (hand == nullptr) {
        return;
    }
    ReturnHands(worker, hand->Outer);
    if (hand->Next != hand->Count) {
        PutBack(worker->m_tasks[hand->Queue], *hand);
        NotifyWork(Waker::Worker);
    }
}

bool Scheduler::TakeChildren(Worker *worker, TaskCounter const *counter, InlineHand &hand) {
    // Only what TakeTask would take next: a child never jumps ahead of a
    // higher-priority task.
    hand.Next = 0;
    hand.Count = 0;
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        TaskDeque &deque = worker->m_tasks[queue];
        std::size_t const n = deque.PopBatch(hand.Items(), kInlineBatch);
        if (n == 0) {
            continue;
        }
        hand.Queue = queue;
        hand.Count = static_cast<unsigned>(n);
        unsigned ours = 0;
        while (ours < hand.Count && hand.Items()[ours].Counter == counter) {
            ++ours;
        }
        if (ours != hand.Count) {
            hand.Next = ours; // not ours from here on: back where they were
            PutBack(deque, hand);
            hand.Next = 0;
        }
        return hand.Count != 0;
    }
    return false;
}

Worker *Scheduler::RunChildrenInline(Worker *worker, TaskCounter *counter) {
    // Every task added with `counter` must finish before this wait returns,
    // so running one here, on the waiting fiber's own stack, cannot deadlock
    // the wait: if it waits in turn, the whole fiber waits, which the outer
    // wait had to do anyway. It saves the switch to a pool fiber and back
    // (the most common wait: a task waiting for the children it just added).
    // Only our own children, only from the bottom of our deques (the newest,
    // cache-warm ones; thieves take the oldest), taken up to kInlineBatch at
    // a time (one fence for the batch; about half the deque at most), never
    // ahead of a higher-priority task, and never ahead of a ready fiber or of
    // the global queue once its turn has come. (The tick's task poll is what
    // taking a child does anyway.) Children held in the hand go back to the
    // deque before the fiber waits on anything else, so a sibling that one of
    // them waits for is never hidden (see Wait). Stack: see InlineStackFree.
    Fiber *self = worker->m_currentFiber;
    if (!m_options.Features.InlineChildren || !InlineStackFree(self)) {
        return worker;
    }
    ++self->InlineDepth;
    InlineHand hand;
    hand.Outer = self->Hand;
    self->Hand = &hand;
    while (CounterOps::Value(*counter) != UnpublishedOf(worker, counter) && !ReadyFiberWaiting(worker) &&
           !GlobalWorkDue(worker)) {
        if (hand.Next == hand.Count) {
            if (!TakeChildren(worker, counter, hand)) {
                break;
            }
        } else if (HigherPriorityWaiting(worker, hand.Queue)) {
            break;
        }
        TaskItem const item = hand.Items()[hand.Next++];
        BeforeTask(worker, item.Counter);
        RunTaskFunction(item);
        worker = self->CurrentWorker;
        FinishTask(worker, item.Counter);
        CountItem(worker);
    }
    if (hand.Next != hand.Count) {
        PutBack(worker->m_tasks[hand.Queue], hand);
    }
    self->Hand = hand.Outer;
    --self->InlineDepth;
    PublishFinished(worker);
    return worker;
}

void Scheduler::AfterSwitchStep(SwitchRecord const &record, Worker *worker) {
    switch (record.Action) {
    case AfterSwitch::Started:
        m_workersUp.fetch_add(1, std::memory_order_release); // Start waits for this
        FutexWake(&m_workersUp, 1);
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
        current->m_ready.Push(fiber);
        NotifyWork(Waker::Worker);
        return;
    }
    m_global[0].PushBatch(1, [fiber](std::size_t) { return TaskItem{nullptr, fiber, nullptr}; });
    NotifyWork(Waker::Outside);
}

} // namespace detail
} // namespace ftl
