#include "scheduler/help.h"

#include "ftl/task_counter.h"
#include "scheduler/counter_ops.h"
#include "scheduler/scheduler.h"

namespace ftl {
namespace detail {

namespace {

// Puts the held items back at the bottom of `deque`, in the order they were
// taken from it (Items[Next], the newest, ends at the bottom).
void PutBack(TaskDeque &deque, InlineHand &hand) {
    for (unsigned i = hand.Count; i > hand.Next; --i) {
        deque.Push(hand.Items()[i - 1]);
    }
    hand.Count = hand.Next;
}

// Takes the next children of `counter` into `hand`, in the order the
// worker's own next takes would (TakeTask: per priority, pinned tasks, then
// the deque), so a child never jumps ahead of anything: the counter's task
// first in this worker's pinned tasks, alone, or else a batch from the bottom
// of the deque, giving back anything not the counter's. False: none.
// `toTheEnd`: under fiber pressure, another counter's pinned task waits.
__attribute__((noinline)) bool TakeChildren(Worker *worker, TaskCounter const *counter, InlineHand &hand,
                                            bool toTheEnd) {
    hand.Next = 0;
    hand.Count = 0;
    for (unsigned queue = 0; queue < kNumPriorities; ++queue) {
        GlobalQueue &pinned = worker->PinnedTasks(queue);
        if (!pinned.LooksEmpty()) {
            // Run at once (RunChildren checks nothing between a take and its
            // first item), so it is never handed back to the deque, where a
            // thief could take it off its thread.
            hand.Queue = queue;
            if (pinned.PopIf(hand.Items()[0],
                             [counter](TaskItem const &item) { return item.Counter == counter; })) {
                hand.Count = 1;
                return true;
            }
            if (!toTheEnd || queue == 0) {
                return false; // the loop takes it next (under pressure, if High)
            }
        }
        TaskDeque &deque = worker->Tasks(queue);
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

// Whether a task may start inline on `fiber` now (see help.h).
bool InlineStackFree(Fiber const *fiber, std::uintptr_t need) {
    auto const here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    return fiber->StackFloor != 0 && here > fiber->StackFloor && here - fiber->StackFloor >= need;
}

} // namespace

void ReturnHands(Worker *worker, InlineHand *hand) {
    // Outermost first, so the innermost loop's items end at the bottom.
    ReturnHeldChildren(worker, hand->Outer);
    if (hand->Holds()) {
        PutBack(worker->Tasks(hand->Queue), *hand);
        worker->Owner().NotifyWork(Scheduler::Waker::Worker);
    }
}

namespace {

// The loop of HelpWhileWaiting, for observed tasks or not, and to the end
// or not (decided once). To the end, under fiber pressure (see
// FiberPressure): a fiber parked with children left to run would only add
// to it, so neither the find-work order nor another counter's pinned task
// ends the loop; a task of higher priority still does.
template <bool kObserved, bool kToTheEnd>
Worker *RunChildren(Worker *worker, TaskCounter *counter, InlineHand &hand) {
    for (;;) {
        if (!hand.Holds()) {
            // Every child has run once the counter's value is only this
            // worker's unpublished finishes. (While the hand holds children,
            // they have not run: looked at only between batches.) Another
            // counter's pinned task ends the loop (TakeChildren): the fiber
            // parks, so the worker's loop gets to it. Looked at once per
            // batch, so it waits at most kInlineBatch children.
            if (CounterOps::Value(*counter) == worker->UnpublishedOf(counter) ||
                (!kToTheEnd && worker->NextSource(false) != Source::Tasks) ||
                !TakeChildren(worker, counter, hand, kToTheEnd)) {
                break;
            }
            if (__builtin_expect(CounterOps::Skips(*counter), false)) {
                // Cancelled (TaskCounter::Cancel): the whole batch at once.
                // (A cancel during a batch: RunTask skips the rest.)
                hand.Next = hand.Count;
                worker = worker->SkipTasks(hand.Items(), hand.Count);
                worker->CountItem();
                continue;
            }
        } else if ((!kToTheEnd && worker->NextSource(true) != Source::Tasks) ||
                   worker->HigherPriorityWaiting(hand.Queue)) {
            break;
        }
        // Run in place: nothing writes the slot before the next batch.
        TaskItem const &item = hand.Items()[hand.Next++];
        worker = kObserved ? worker->RunObservedTask(item) : worker->RunPlainTask(item);
        worker->CountItem();
    }
    return worker;
}

} // namespace

Worker *HelpWhileWaiting(Worker *worker, TaskCounter *counter) {
    Fiber *self = worker->CurrentFiber();
    if (!worker->Owner().HelpsInline() || !InlineStackFree(self, worker->Owner().InlineStackNeed())) {
        return worker;
    }
    InlineHand hand;
    hand.Outer = self->Hand;
    self->Hand = &hand;
    SetTaskIdentity(&hand);
    // The children are owners of their own: they start holding no Fibtex,
    // and the parent's count waits here (the fiber may move meanwhile).
    LockThreadState *lockThread = worker->LockThread();
    std::uintptr_t const held = lockThread->Held;
    lockThread->Held = 0;
    // The children's depth, set once for all of them (see Worker::TaskDepth).
    unsigned const depth = worker->TaskDepth();
    worker->SetTaskDepth(depth + 1);
    if (__builtin_expect(worker->UnderPressure(), false)) {
        worker = worker->Observed() ? RunChildren<true, true>(worker, counter, hand)
                                    : RunChildren<false, true>(worker, counter, hand);
    } else {
        worker = worker->Observed() ? RunChildren<true, false>(worker, counter, hand)
                                    : RunChildren<false, false>(worker, counter, hand);
    }
    worker->SetTaskDepth(depth);
    if (hand.Holds()) {
        PutBack(worker->Tasks(hand.Queue), hand);
    }
    self->Hand = hand.Outer;
    SetTaskIdentity(TaskIdentityOf(self));
    lockThread = worker->LockThread();
    lockThread->Held = held;
    return worker;
}

} // namespace detail
} // namespace ftl
