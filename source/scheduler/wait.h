// Waiting: parking the running fiber on a waitable, publishing it as a
// waiter once it is off its stack, and making it runnable again.
//
// The protocol (docs/design.adoc, invariants 1, 2 and 4; source/models/waiter.pml):
//   1. Park marks the fiber Waiting, picks the next fiber (a ready one when
//      the find-work order would pick it now, else a fresh one from the pool)
//      and switches to it, carrying a SwitchRecord that names the waitable
//      and a WaitNode on the waiting fiber's stack.
//   2. The fiber switched to runs the post-switch step, which calls
//      PublishWaiter: only now, with the waiter entirely off its stack, is it
//      registered on the waitable's list. The registration re-checks the
//      condition atomically with linking the node; if the condition already
//      holds, the fiber is readied at once.
//   3. A waker unlinks the node under the list's lock, then ReadyFiber puts
//      the fiber where it will run: its pinned worker's inbox, the waker's
//      own ready deque, or the global queue when the waker is not a worker.
#pragma once

namespace ftl {
namespace detail {

class Scheduler;
class Worker;
struct Fiber;
struct SwitchRecord;
struct WaitNode;

// Registers `node` on `waitable` unless the condition it waits for holds
// already (then returns false). Called under no lock; takes the list's.
using RegisterWaiter = bool (*)(void *waitable, WaitNode *node);

// Parks the running fiber of `worker` on `waitable` until it is readied;
// `target` is the value waited for (counters). A pinned wait, and any wait of
// a thread's own fiber, resumes on this worker. Returns the worker the fiber
// resumed on.
Worker *Park(Worker *worker, bool pin, RegisterWaiter registerWaiter, void *waitable, unsigned target);
// The post-switch step of a park (see the protocol above).
void PublishWaiter(Scheduler &scheduler, SwitchRecord const &record);
// Makes a waiting fiber runnable again. Any thread.
void ReadyFiber(Scheduler &scheduler, Fiber *fiber, Worker *pinnedTo);

} // namespace detail
} // namespace ftl
