// Measurement switches: each turns one scheduling mechanism off, so that the
// benchmark suite can show what the mechanism earns and the tests can check
// that the scheduler stays correct without it. They are not options: this
// header is internal (not installed), and the only way to use them is
// InitWithMechanisms below, which tests and ftl_bench call. No switch turns
// off a liveness rule: every tick's first item still comes from the queue
// the find-work order would otherwise put last, and the global queue's turn
// still comes (docs/design.adoc, invariants 8 and 9).
#pragma once

#include "ftl/task_scheduler.h"

namespace ftl {
namespace detail {

struct Mechanisms {
    // The global queue's turn every N items, N from an EWMA of the item time
    // (off: a fixed N).
    bool AdaptiveGlobalInterval = true;
    // At most half the workers (or two) search for work at once.
    bool SearcherLimit = true;
    // An idle worker looks for work a short while before it parks.
    bool SpinBeforePark = true;
    // A worker whose spins keep missing (each followed by a sleep longer
    // than the spin) parks at once, until a sleep short enough for a spin to
    // have caught its end; it still spins while it sees tasks its steal
    // backoff skips for now, and so does a worker that is not a searcher.
    // A worker a waker claims soon after it began idling (up to 200 us)
    // spins that long and half again the next time (off: it always spins its
    // 64 rounds).
    bool AdaptiveSpin = true;
    // Ready fibers before new tasks (off: new tasks first; the tick's first
    // item then comes from the ready fibers).
    bool ReadyFibersFirst = true;
    // A TaskCounter wait first runs the counter's own queued tasks itself.
    bool InlineChildren = true;
    // A fiber that a running task readies waits in that worker's next slot,
    // where it runs as soon as the task waits or ends, with no other worker
    // woken for it (off: it goes to the worker's ready deque, in every
    // thief's sight, and a parked worker is woken).
    bool NextSlot = true;
    // A fiber that an unlock or a notify readies into the next slot (its
    // task usually goes on running) wakes a parked worker when nobody is
    // searching, which takes it from the slot; fewer such wakes after ones
    // whose task reached a scheduling point soon after (off: nobody is
    // woken, and unless a worker is already searching the fiber waits until
    // the task reaches a scheduling point).
    bool NextSlotWake = true;
    // A worker whose task steals keep it busy for less than a microsecond
    // looks at other workers' task deques less and less often, unless the
    // victim's items take 150 ns or more and its deque held 50 us of them
    // (then its next steal takes a batch that pays at once) (off: it looks,
    // and steals, on every spin round).
    bool StealBackoff = true;
    // A task steal takes several tasks (at most half of the victim's deque;
    // 1 to 64, more after steals that kept the thief busy long, and after
    // short steals of tasks worth a core as many as would have paid) into
    // the thief's own deque (off: one task a steal).
    bool StealBatch = true;
    // A contended Fibtex lock that starts with rare looks (a hot lock) first
    // peeks a few times at short intervals, and takes the lock at once when
    // nobody took it between two peeks (off: only the rare looks).
    bool LockPeeks = true;
    // A contended Fibtex lock that looks rarely (a hot lock) also watches the
    // workers between its looks, and looks at once when one of them has run
    // out of work of its own since (gone to steal, or idle): it may be the
    // holder, done with the lock (off: only the rare looks).
    bool LockWatchesIdle = true;
    // A contended Fibtex lock whose worker's latest run on that lock was
    // several acquisitions in a row lets a holder that keeps relocking it
    // keep it, for up to 150 us, until the holder stops (off: it takes the
    // lock at any look that finds it free).
    bool LockPatience = true;
    // A Fibtex waiter that has waited 40 us (a patient one: 40 us past its
    // patience) is handed the lock by the holder's next unlock, which takes
    // it back at once on the waiter's behalf (off: a waiter gets the lock
    // only at a look that finds it free, and a holder that relocks at once
    // can pass it by for milliseconds).
    bool LockHandOff = true;
    // A thread outside the scheduler that wakes the worker pinned to its own
    // CPU then yields (sched_yield), unless the worker has run since (the
    // kernel let it preempt the thread), so that the kernel can run it now
    // (off: a thread that stays busy sometimes holds the work back until
    // its time slice ends).
    bool YieldToWokenWorker = true;
    // A worker with more TaskCounter waits parked than its share of the
    // pool starts only tasks deeper than its latest, runs its inline loops
    // to the end, and steals no task, for as long as its patience (off: it
    // starts whatever comes next, and parked fibers can pile up without
    // bound when children are pinned across workers). See FiberPressure.
    bool DeepFirstUnderPressure = true;
};

// Every switch, by name, for the benchmark's columns and the tests' loops.
struct MechanismSwitch {
    char const *Name;
    bool Mechanisms::*Flag;
};
constexpr MechanismSwitch kMechanismSwitches[] = {
    {"AdaptiveGlobalInterval", &Mechanisms::AdaptiveGlobalInterval},
    {"SearcherLimit", &Mechanisms::SearcherLimit},
    {"SpinBeforePark", &Mechanisms::SpinBeforePark},
    {"AdaptiveSpin", &Mechanisms::AdaptiveSpin},
    {"ReadyFibersFirst", &Mechanisms::ReadyFibersFirst},
    {"InlineChildren", &Mechanisms::InlineChildren},
    {"NextSlot", &Mechanisms::NextSlot},
    {"NextSlotWake", &Mechanisms::NextSlotWake},
    {"StealBackoff", &Mechanisms::StealBackoff},
    {"StealBatch", &Mechanisms::StealBatch},
    {"LockPeeks", &Mechanisms::LockPeeks},
    {"LockWatchesIdle", &Mechanisms::LockWatchesIdle},
    {"LockPatience", &Mechanisms::LockPatience},
    {"LockHandOff", &Mechanisms::LockHandOff},
    {"YieldToWokenWorker", &Mechanisms::YieldToWokenWorker},
    {"DeepFirstUnderPressure", &Mechanisms::DeepFirstUnderPressure},
};
constexpr unsigned kNumMechanismSwitches = sizeof(kMechanismSwitches) / sizeof(kMechanismSwitches[0]);
// Mechanisms is a plain set of bools: a switch added there and not here
// would silently miss its column and its tests.
static_assert(sizeof(Mechanisms) == kNumMechanismSwitches * sizeof(bool),
              "every Mechanisms switch needs its entry in kMechanismSwitches");

// TaskScheduler::Init with some mechanisms off.
int InitWithMechanisms(TaskScheduler &taskScheduler, TaskSchedulerInitOptions const &options,
                       Mechanisms const &mechanisms);

} // namespace detail
} // namespace ftl
