/*
 * Publishing a waiting fiber, for the SPIN model checker: docs/design.adoc,
 * invariants 1 (a waiter is published only after the switch away from it
 * completed, by the fiber switched to) and 2 (publishing re-checks the
 * counter, so a counter reaching its target in between is not missed).
 *
 * What each step stands for (source/ paths):
 *   fast path                task_scheduler.cpp WaitForValue (CounterOps::Value)
 *   mark Waiting + switch    scheduler/wait.cpp Park, scheduler/worker.cpp Worker::SwitchTo,
 *                            fiber/fiber.cpp SwitchFiber
 *   switch completes         fiber/fiber.cpp Arrive (From->Context saved)
 *   register                 scheduler/wait.cpp PublishWaiter, called by the post-switch
 *                            step (Worker::AfterSwitchStep); waitables/counters.cpp
 *                            CounterOps::Register: under the list lock, a CAS on m_state
 *                            that checks the value and adds one waiter, then Append
 *   decrement                waitables/counters.cpp CounterOps::Finish (one RMW on m_state
 *                            returning value and waiter count)
 *   wake                     waitables/counters.cpp BaseCounter::WakeWaiters: under the
 *                            lock, TakeMatching and subtract the waiter count
 *   ready                    scheduler/wait.cpp ReadyFiber
 *
 * Checked: a fiber is readied only once its context is saved (never while
 * its registers are still being saved), at most once; and when nothing can
 * move any more, the counter is 0 and the waiter was readied (no lost
 * wake-up).
 *
 * -DBROKEN_EARLY_PUBLISH registers the waiter before the switch completes;
 * SPIN must then find a resume of a fiber still on its way out.
 */
#ifndef TASKS
#define TASKS 2
#endif

#define RUNNING   0
#define SWITCHING 1   /* registers being saved: must not be resumed */
#define SUSPENDED 2   /* context saved */
#define READY     3

byte value = TASKS;   /* m_state high half */
byte waiters = 0;     /* m_state low half */
bit locked = 0;       /* WaitList::Lock */
bit inList = 0;       /* the WaitNode is linked */
byte fiber = RUNNING;
byte readied = 0;

inline lock()   { atomic { locked == 0 -> locked = 1 } }
inline unlock() { locked = 0 }

inline ready() {
    atomic {
        assert(fiber == SUSPENDED);   /* invariant 1 */
        fiber = READY;
        readied++;
        assert(readied == 1)
    }
}

inline register() {
    lock();
    if
    :: atomic { value == 0 -> skip } -> unlock(); ready()   /* reached meanwhile */
    :: atomic { value != 0 -> waiters++ } -> inList = 1; unlock()
    fi
}

proctype Waiter() {
    if
    :: value == 0 -> fiber = READY; readied++; goto done     /* fast path: no wait */
    :: else -> skip
    fi;
    fiber = SWITCHING;
#ifdef BROKEN_EARLY_PUBLISH
    register();
    fiber = SUSPENDED;
#else
    fiber = SUSPENDED;   /* the switch completed: the other fiber runs the step */
    register();
#endif
done:
    skip
}

proctype Decrementer() {
    bit hadWaiters;
    bit take;
    atomic { hadWaiters = (waiters > 0); value-- };
    if
    :: value == 0 && hadWaiters ->   /* ValueOf(old) == 1 && HasWaiters(old) */
        lock();
        take = inList;
        if
        :: take -> inList = 0; waiters--
        :: else -> skip
        fi;
        unlock();
        if
        :: take -> ready()
        :: else -> skip
        fi
    :: else -> skip
    fi
}

init {
    byte i;
    atomic {
        run Waiter();
        i = 0;
        do
        :: i < TASKS -> run Decrementer(); i++
        :: else -> break
        od
    }
    timeout -> assert(value == 0 && fiber == READY && readied == 1 && waiters == 0)
}
