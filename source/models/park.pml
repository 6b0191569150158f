/*
 * The park/wake protocol of ftl's idle workers, for the SPIN model checker.
 *
 * What each step stands for (source/ paths):
 *   FindWork / AnyWorkVisible   scheduler/worker.cpp Worker::FindWork; scheduler/scheduler.cpp
 *                               Scheduler::AnyWorkVisible (the hooks' WorkVisible)
 *   FoundWork (chain wake-up)   idle/idle.h  IdleState::FoundWork
 *   TryBecomeSearcher           idle/idle.cpp IdleState::TryBecomeSearcher (a load, then an add)
 *   announce                    idle/idle.h  IdleState::Park step 1 (SetParked, then StopSearching)
 *   re-check / take bit back    idle/idle.h  IdleState::Park step 2 (WorkVisible, UnsetParked)
 *   sleep                       idle/idle.h  IdleState::Park step 3 (WakeSeq, IsParked, FutexWait)
 *   publish + NotifyWork        scheduler/scheduler.cpp Scheduler::AddTasks; idle/idle.cpp Notify
 *   ClaimAny / ClaimSpecific    idle/idle.cpp IdleState::ClaimAny, ClaimSpecific
 *   WakeWorker                  idle/idle.cpp IdleState::Wake (bump WakeSeq, futex wake)
 *   pinned ready                scheduler/wait.cpp ReadyFiber (inbox push; Scheduler::NotifyWorker,
 *                               IdleState::NotifyOne: fence, ClaimSpecific)
 *   next slot                   scheduler/worker.cpp Worker::KeepReadied (a task readies a fiber
 *                               into its worker's slot: a wake or none; a second one sends the
 *                               first to the ready deque with NotifyWork), FindWork (the slot first, or
 *                               PublishNext when something else was taken), StealNext (a searcher
 *                               takes a fill it saw twice), Idle and IdleHooks::Poll (a wake made
 *                               while idle is published at once)
 *
 * SPIN explores sequentially consistent interleavings: this is the protocol
 * under the seq_cst fences the code puts between "publish" and "check" on both
 * sides (Notify, NotifyOne, Park).
 *
 * This model found a real bug: the claimer once counted the woken worker as
 * a searcher after clearing its bit, so the woken worker could stop
 * searching before it was counted, underflowing the count; wakers then saw
 * "a searcher" forever and woke no one.
 *
 * Checked: when nothing can move any more (SPIN's `timeout`), all work was
 * consumed, i.e. no worker sleeps while work it could run is queued (docs/design.adoc,
 * invariant 5), and no fiber is left in a next slot; the searcher count never
 * underflows; no invalid end state (deadlock) other than workers asleep with
 * nothing to do.
 *
 * -DLONG_ITEMS makes a worker that takes a queued item keep it for good (a
 * task that waits for every worker to have taken one): then all the items
 * are taken only if the wakes reach every worker they need, and the check
 * above asks exactly that. A worker that leaves its park on its own, for
 * work it saw, leaves as a searcher, so that finding it goes on with the
 * chain (FoundWork); -DBROKEN_LEAVE_UNCOUNTED leaves as a non-searcher, as
 * the code once did, and SPIN must then find items left queued with
 * workers asleep (the waker saw the searcher and woke nobody; the searcher
 * parked, saw the items, took one and woke nobody either).
 *
 * -DBROKEN_NO_RECHECK removes the re-check after the announcement; SPIN must
 * then find a lost wake-up (the test runs both). -DBROKEN_IDLE_SLOT keeps a
 * fiber readied during the idle poll in the idle worker's slot; SPIN must
 * then find it stranded.
 */
#ifndef NW
#define NW 2
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef PINNED
#define PINNED 1
#endif
#ifndef READIED
#define READIED 2
#endif

byte queue = 0;       /* stealable work: task deques, ready deques, global queue */
byte inbox[NW];       /* fibers pinned to each worker (FiberInbox) */
bit parked[NW];       /* IdleState::m_parked bitmap */
byte searching = 0;   /* IdleState::m_numSearching */
byte seq[NW];         /* Worker::m_wakeSeq, the futex word */
bit isSearcher[NW];   /* Worker::m_searching */
bit producerDone = 0;
bit slot[NW];         /* Worker::m_next: a fiber a task on that worker readied */
byte toReady = READIED; /* fibers that items may still ready (each then is work too) */

/* Scheduler::NotifyWork after its fence */
inline notifyWork(idx) {
    if
    :: searching == 0 -> claimAnyAndWake(idx)
    :: else -> skip
    fi
}

/* ReadyFiber from a task on worker `w` (KeepReadied): into the slot; a
   fiber already there goes to the ready deque, with a wake. A fill by an
   unlock or a notify may also wake a parked worker for the slot itself
   (NextSlotWake; the backoff decides, so either may happen): never
   needed for liveness, and it must not break it either. (After a
   displacement the code may notify twice; one more wake is left out.) */
inline keepReadied(w, idx) {
    if
    :: atomic { slot[w] == 0 -> slot[w] = 1 } ->
        if
        :: skip
        :: notifyWork(idx)
        fi
    :: atomic { slot[w] == 1 -> queue++ } -> notifyWork(idx)
    fi
}

/* PublishNext: the slot's fiber to the ready deque, with a wake. */
inline publishNext(w, idx) {
    if
    :: atomic { slot[w] == 1 -> slot[w] = 0; queue++ } -> notifyWork(idx)
    :: else -> skip
    fi
}

inline stopSearching(was_last) {
    atomic { assert(searching > 0); was_last = (searching == 1); searching-- }
}

/* IdleState::ClaimAny + Scheduler::WakeWorker */
inline claimAnyAndWake(idx) {
    atomic {
        idx = 0;
        do
        :: idx < NW && !parked[idx] -> idx++
        :: idx < NW && parked[idx] -> parked[idx] = 0; break
        :: idx == NW -> break
        od
    }
    if
    :: idx < NW -> seq[idx]++
    :: else -> skip
    fi;
    idx = 0   /* dead from here: reset to keep the state space small */
}

/* A claimed worker counts itself as a searcher (IdleState::AddClaimedSearcher). */
inline wakeAsSearcher() {
    searching++;
    isSearcher[me] = 1
}

proctype Worker(byte me) {
    byte s;
    byte t;
    byte idx;
    bit wasLast;
findWork:
    if
    :: atomic { slot[me] == 1 -> slot[me] = 0 } -> goto found
    :: atomic { inbox[me] > 0 -> inbox[me]-- } -> publishNext(me, idx); goto found
    :: atomic { queue > 0 -> queue-- } -> publishNext(me, idx); goto found
    :: else -> goto idle
    fi;
found:
#ifndef LONG_ITEMS
    /* The item runs: it may ready a fiber that waits for it (KeepReadied). */
    if
    :: atomic { toReady > 0 -> toReady-- } -> keepReadied(me, idx)
    :: true -> skip
    fi;
#endif
    /* FoundWork: the last searcher to find work wakes another worker, if it
       sees more work (AnyWorkVisible: the stealable queues, its own inbox) */
    if
    :: isSearcher[me] ->
        isSearcher[me] = 0;
        stopSearching(wasLast);
        if
        :: wasLast && (queue > 0 || inbox[me] > 0) -> claimAnyAndWake(idx)
        :: else -> skip
        fi;
        wasLast = 0
    :: else -> skip
    fi;
#ifdef LONG_ITEMS
    /* The item runs for good: a task that waits for every worker to have
       taken one. What is left reaches the others only through wakes. */
end_running:
    false;
#endif
    goto findWork;
idle:
    /* TryBecomeSearcher: a load, then an increment (loosely capped) */
    if
    :: !isSearcher[me] ->
        t = searching;
        if
        :: 2 * t < NW -> searching++; isSearcher[me] = 1
        :: else -> skip
        fi;
        t = 0
    :: else -> skip
    fi;
    /* The idle poll may ready a fiber (the drain's flag): Idle and Poll
       publish the slot at once. */
    if
    :: atomic { toReady > 0 -> toReady-- } ->
#ifdef BROKEN_IDLE_SLOT
        slot[me] = 1
#else
        slot[me] = 1; publishNext(me, idx)
#endif
    :: true -> skip
    fi;
    /* spinning: any number of looks at the queues before parking; a
       searcher takes a fill of another worker's slot it saw on an earlier
       look (StealNext, a CAS) */
    if
    :: (queue > 0 || inbox[me] > 0) -> goto findWork
    :: atomic { slot[(me + 1) % NW] == 1 -> slot[(me + 1) % NW] = 0 } -> goto found
    :: true -> skip
    fi;
    /* Park step 1: announce */
    parked[me] = 1;
    if
    :: isSearcher[me] -> isSearcher[me] = 0; stopSearching(wasLast); wasLast = 0
    :: else -> skip
    fi;
#ifndef BROKEN_NO_RECHECK
    /* Park step 2: re-check after the announcement */
    if
    :: (queue > 0 || inbox[me] > 0) ->
        atomic {
            if
            :: parked[me] -> parked[me] = 0; wasLast = 0   /* took our own bit back */
            :: else -> wasLast = 1                         /* claimed meanwhile */
            fi
        }
        if
        :: wasLast -> wakeAsSearcher()
        :: else ->
#ifndef BROKEN_LEAVE_UNCOUNTED
            /* LeaveIfWork: leaving on our own, for work we saw, as a
               searcher too (TryBecomeSearcher), so that finding it goes
               on with the chain */
            t = searching;
            if
            :: 2 * t < NW -> searching++; isSearcher[me] = 1
            :: else -> skip
            fi;
            t = 0
#else
            skip
#endif
        fi;
        wasLast = 0;
        goto findWork
    :: else -> skip
    fi;
#endif
sleep:
    /* Park step 3: read the futex word, check the bit, sleep on the word */
    s = seq[me];
    if
    :: !parked[me] -> s = 0; wakeAsSearcher(); goto findWork
    :: else -> skip
    fi;
end_asleep:
    (seq[me] != s);   /* FutexWait returns once the word moved */
    goto sleep
}

proctype Producer() {
    byte i;
    byte idx;
    bit claimed;
    i = 0;
    do
    :: i < ITEMS ->
        queue++;                     /* publish the task */
        if                           /* NotifyWork, after its fence */
        :: searching == 0 -> claimAnyAndWake(idx)
        :: else -> skip
        fi;
        i++
    :: else -> break
    od;
    i = 0;
    do
    :: i < PINNED ->
        inbox[0]++;                  /* ReadyFiber: a fiber pinned to worker 0 */
        atomic {                     /* ClaimSpecific(0), after the fence */
            claimed = parked[0];
            parked[0] = 0
        }
        if
        :: claimed -> seq[0]++
        :: else -> skip
        fi;
        i++
    :: else -> break
    od;
    producerDone = 1
}

init {
    byte w;
    atomic {
        w = 0;
        do
        :: w < NW -> run Worker(w); w++
        :: else -> break
        od;
        run Producer()
    }
    /* Nothing can move: every worker is asleep and the producer is done. */
    timeout -> assert(producerDone && queue == 0 && inbox[0] == 0);
    w = 0;
    do
    :: w < NW -> assert(slot[w] == 0); w++
    :: else -> break
    od
}
