// Helping while waiting (docs/design.adoc, "Helping while waiting"): before
// a TaskCounter wait parks, the waiting fiber runs that counter's own queued
// tasks itself.
//
// Every task added with the counter must finish before the wait returns, so
// running one on the waiting fiber cannot deadlock the wait: if it waits in
// turn, the whole fiber waits, which the outer wait had to do anyway. It
// saves the switch to a pool fiber and back, on the most common wait of all:
// a task waiting for the children it just added. The rules:
// - only the counter's own tasks, from the bottom of this worker's deques
//   (the newest, cache-warm ones; thieves take the oldest), and only while
//   the find-work order would take this worker's tasks next: never ahead of
//   a higher-priority task, a ready fiber, or the global queue's turn;
// - the counter's tasks pinned to this worker (AddPinnedTask) too, when one
//   is the next pinned task here: it starts on its own thread, as it would
//   from the loop, with no park and no fiber; another counter's pinned task
//   ends the loop (the fiber parks and the worker's loop gets to it);
// - under fiber pressure (scheduler/pressure.h) neither that nor the order
//   ends the loop, only a task of higher priority: the children run to the
//   end;
// - up to kInlineBatch at a time with one fence (WorkDeque::PopBatch), at
//   most half of the deque, so thieves still find the rest;
// - children taken but not run go back to the deque before the fiber waits
//   on anything else (Park calls ReturnHeldChildren), so a sibling that one
//   of them waits for is never hidden;
// - a child runs inline only while kInlineStackShareNum/Den of FiberStackSize
//   is free below the waiting frame, so every task starts with that much
//   stack, wherever it runs.
#pragma once

#include "queue/task_item.h"

#include <cstdint>

namespace ftl {

class TaskCounter;

namespace detail {

class Worker;

// Children an inline loop takes from its deque at once: one fence for up to
// 8 tasks, and at most 8 tasks' worth of work hidden from thieves.
constexpr unsigned kInlineBatch = 8;
// A wait runs its children inline only while at least 3/4 of FiberStackSize
// is free on the waiting fiber: every task starts with that much stack or
// more (a task on a fresh fiber has all of it, less the worker loop's frames),
// however deep the inline loops nest.
constexpr unsigned kInlineStackShareNum = 3;
constexpr unsigned kInlineStackShareDen = 4;

// Children an inline loop took from its worker's deque in one batch and has
// not run yet. It lives on the waiting fiber's stack; the fiber points at the
// innermost one (Fiber::Hand), and each points at the loop it is nested in.
struct InlineHand {
    // Filled by PopBatch before they are read; left uninitialized (a
    // TaskItem array would zero 192 bytes on every wait).
    alignas(TaskItem) unsigned char Storage[kInlineBatch * sizeof(TaskItem)];
    TaskItem *Items() { return reinterpret_cast<TaskItem *>(Storage); }
    TaskItem const *Items() const { return reinterpret_cast<TaskItem const *>(Storage); }
    unsigned Next = 0;  // Items[Next] runs next
    unsigned Count = 0; // Items[Next..Count) are held
    unsigned Queue = 0; // the deque they came from
    InlineHand *Outer = nullptr;
    bool Holds() const { return Next != Count; }
};

// Runs `counter`'s own queued tasks on the waiting fiber, as the rules above
// allow. Returns the worker it ends on (an inline task may wait and move the
// fiber).
Worker *HelpWhileWaiting(Worker *worker, TaskCounter *counter);
// ReturnHeldChildren when `hand` is not null.
void ReturnHands(Worker *worker, InlineHand *hand);
// Puts back every child the inline loops on the running fiber hold,
// outermost first (called before the fiber waits on anything).
inline void ReturnHeldChildren(Worker *worker, InlineHand *hand) {
    if (hand != nullptr) {
        ReturnHands(worker, hand);
    }
}

} // namespace detail
} // namespace ftl
