// Waiting: parking the running fiber on a waitable, publishing it as a
// waiter once it is off its stack, and making it runnable again; a thread
// that is not a worker waits on a futex word of its own instead.
//
// The protocol (docs/design.adoc, invariants 1, 2 and 4; source/models/waiter.pml):
//   1. Park marks the fiber Waiting, picks the next fiber (a ready one when
//      the find-work order would pick it now, else a fresh one from the pool)
//      and switches to it, carrying a SwitchRecord that names the waitable
//      and the WaitNode on the waiting fiber's stack. A timed wait's node
//      goes on the timers first (scheduler/timers.h).
//   2. The fiber switched to runs the post-switch step, which calls
//      PublishWaiter: only now, with the waiter entirely off its stack, is it
//      registered on the waitable's list. The registration re-checks the
//      condition atomically with linking the node; if the condition already
//      holds (or the deadline already passed), the fiber is readied at once.
//   3. A waker (or the timers, see Timers) unlinks the node under the list's
//      lock, then WakeWaiter readies the fiber where it will run: its pinned
//      worker's inbox, the waker's own next slot (Worker::KeepReadied), or
//      the global queue when the waker is not a worker; or sets a waiting
//      thread's word.
#pragma once

namespace ftl {
namespace detail {

class Scheduler;
class Worker;
struct Fiber;
struct SwitchRecord;
struct WaitNode;

// Registers `node` on `waitable` unless the condition it waits for holds
// already, or its deadline passed (then returns false, with node->TimedOut
// set in the second case). Takes the list's lock.
using RegisterWaiter = bool (*)(void *waitable, WaitNode *node);

// Parks the running fiber of `worker` on `waitable` until it is readied.
// `node` is the caller's, with Target (and, for a timed wait, Deadline,
// Waitable and Cancel) set; afterwards node.TimedOut tells how the wait
// ended. A pinned wait, and any wait of a thread's own fiber, resumes on this
// worker. Returns the worker the fiber resumed on.
Worker *Park(Worker *worker, WaitNode &node, bool pin, RegisterWaiter registerWaiter, void *waitable);
// The same for a thread that is not a worker: blocks it. Returns true when
// the wait ended by the condition, false by its deadline.
bool WaitOnThread(WaitNode &node, RegisterWaiter registerWaiter, void *waitable);
// The post-switch step of a park (see the protocol above).
void PublishWaiter(Scheduler &scheduler, SwitchRecord const &record);
// What readies a fiber, for ReadyFiber. The waitables' wakes come from a
// task running on the calling worker, so the fiber may wait in that
// worker's next slot; the timers fire between tasks, and a registration
// that found its condition already met is no task's doing.
enum class Readier {
    BetweenTasks,
    // A counter's change: its task usually waits or ends right after (a
    // hand-off), and then runs the fiber itself.
    TaskThatWaits,
    // A Fibtex unlock or a notify: its task usually goes on running, so a
    // parked worker is woken for the slot (Worker::KeepReadied).
    TaskThatGoesOn,
};

// Ends the wait of a node a waker took off a list: readies its fiber, or
// wakes its thread. Any thread; the node may be gone once this returns.
void WakeWaiter(Scheduler *scheduler, WaitNode *node, Readier readier);
// A task's prerequisite reached 0 (AddTaskAfter): `node` is one of its
// AfterTask's, and the task is queued from `self` (the calling thread's
// worker, or nullptr) if that was the last (after.cpp). Returns whether a
// worker queued it: the caller then owes Scheduler::NotifyStarted, once for
// all the nodes it took together.
bool PrerequisiteDone(Scheduler &scheduler, Worker *self, WaitNode *node);
// Makes a waiting fiber runnable again. Any thread.
void ReadyFiber(Scheduler &scheduler, Fiber *fiber, Worker *pinnedTo,
                Readier readier = Readier::BetweenTasks);

// Registrations with no list: a sleep (the timers are its waitable) and a
// yield (the worker is).
bool RegisterSleep(void *scheduler, WaitNode *node);
bool RegisterYield(void *worker, WaitNode *node);

} // namespace detail
} // namespace ftl
