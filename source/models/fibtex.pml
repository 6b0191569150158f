/*
 * Fibtex's lock, park and plain-store unlock, for the SPIN model checker,
 * with a store buffer per CPU (x86's TSO: a CPU's plain store waits in its
 * buffer while its later loads run; a locked read-modify-write empties the
 * buffer first). The unlock's store of 0 is the one plain store the protocol
 * depends on: the model gives each CPU a buffer that holds it.
 *
 * What each step stands for (source/waitables/fibtex.cpp):
 *   look + CAS       Fibtex::lock_spin / SpinAcquire (the spin: one try here;
 *                    more tries add only states)
 *   link + count     FibtexOps::Register, first block: under the bucket's
 *                    lock, Append and Parked += 1 (a locked add: to memory)
 *   barrier          ProcessBarrier (membarrier: every CPU's buffer empties),
 *                    or, where the OS has none (-DFENCE), the parker's fence
 *                    (its own buffer only)
 *   re-read          the load of m_state after the barrier
 *   register         FibtexOps::Register, second block: unlinked by an
 *                    unlock meanwhile -> try again; lock seen free -> unlink,
 *                    try again; else Registered, and the fiber waits
 *   unlock           Fibtex::Release: store 0 (into the buffer), then read the
 *                    bucket's count; UnlockSlow when it is not 0 (-DFENCE:
 *                    always, kFenceBit; it fences, then reads it again)
 *   wake             UnlockSlow: under the bucket's lock, unlink the first
 *                    node; ready its fiber if it registered (else its
 *                    registration sees it unlinked)
 *
 * Checked: mutual exclusion; every locker finishes its rounds (no invalid
 * end state: a fiber parked while nobody will unlock is a lost wake-up); an
 * unlock readies only a registered fiber that nobody readied yet; the count
 * matches the linked nodes whenever the bucket's lock is let go.
 *
 * -DFOREIGN puts a waiter of another Fibtex in the bucket for good (it shares
 * the bucket and nobody unlocks its Fibtex): every unlock then finds the
 * count above 0 and walks the list, finding nobody or one of its own.
 *
 * -DBROKEN_NO_BARRIER parks with only the parker's own fence against the
 * plain store; SPIN must find the lost wake-up (the test runs both).
 * -DFENCE -DBROKEN_NO_UNLOCK_FENCE drops the unlock's fence where the OS
 * has no barrier; -DBROKEN_NO_LINK_CHECK lets a parker whose node an unlock
 * took before it registered wait anyway (that unlock readied nobody); SPIN
 * must find both.
 */
#ifndef N
#define N 3
#endif
#ifdef BROKEN_NO_LINK_CHECK
#define BROKEN_LINK 1
#else
#define BROKEN_LINK 0
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif

bit state = 0;      /* Fibtex::m_state in memory */
bit buffered[N];    /* a store of 0 to m_state waiting in that CPU's buffer */
byte pending = 0;   /* how many of them */
#ifdef FOREIGN
#define FOREIGN_NODES 1
#else
#define FOREIGN_NODES 0
#endif
byte parked = FOREIGN_NODES; /* the bucket's Parked, without kFenceBit */
bit bucketLock = 0; /* the bucket's WaitList::Lock */
/* Four entries whatever N is (the count's check adds them all); lockers
   beyond N never link. */
bit linked[4];      /* a node of that fiber on the bucket's list */
bit registered[N];  /* WaitNode::Registered */
bit woken[N];       /* the fiber was readied by an unlock */
byte inside = 0;    /* fibers in the critical section */

inline lockBucket()   { atomic { bucketLock == 0 -> bucketLock = 1 } }
inline unlockBucket() {
    atomic {
        assert(parked == FOREIGN_NODES + linked[0] + linked[1] + linked[2] + linked[3]);
        bucketLock = 0
    }
}

/* A buffered store reaches memory, at any moment. */
inline drainOwn(me) {
    atomic {
        if
        :: buffered[me] -> state = 0; buffered[me] = 0; pending--
        :: else -> skip
        fi
    }
}

/* The look and the CAS: the look reads the CPU's own buffer first; the CAS,
   a locked instruction, empties the buffer, then works on memory. */
inline tryAcquire(me, got) {
    if
    :: buffered[me] || state == 0 ->
        atomic {
            drainOwn(me);
            if
            :: state == 0 -> state = 1; got = 1
            :: else -> got = 0
            fi
        }
    :: else -> got = 0
    fi
}

/* Buffered stores reach memory at any moment, one at a time. */
proctype Drainer() {
    byte i;
end:
    do
    :: atomic {
           pending > 0 ->
           i = 0;
           do
           :: !buffered[i] -> i++
           :: buffered[i] -> state = 0; buffered[i] = 0; pending--; break
           od;
           i = 0
       }
    od
}

proctype Locker(byte me) {
    byte round = 0;
    bit got = 0;
    bit seen = 0;
    byte q = 0;
    bit found = 0;
    do
    :: round == ROUNDS -> break
    :: round < ROUNDS ->
acquire:
        tryAcquire(me, got);
        if
        :: got -> goto holding
        :: else -> skip
        fi;
        /* Park: link and count, under the bucket's lock */
        lockBucket();
        registered[me] = 0;
        linked[me] = 1;
        parked++;
        unlockBucket();
        /* the barrier */
#if defined(FENCE) || defined(BROKEN_NO_BARRIER)
        drainOwn(me);
#else
        atomic {
            q = 0;
            do
            :: q < N -> if
                        :: buffered[q] -> state = 0; buffered[q] = 0; pending--
                        :: else -> skip
                        fi;
                        q++
            :: q == N -> break
            od;
            q = 0
        }
#endif
        /* the re-read (the parker's own buffer is empty: the fence drained it) */
        seen = state;
        lockBucket();
        if
#ifndef BROKEN_NO_LINK_CHECK
        :: !linked[me] ->                 /* an unlock took the node: try again */
            unlockBucket(); seen = 0; goto acquire
#endif
        :: linked[me] && seen == 0 ->     /* released meanwhile: unlink, try again */
            linked[me] = 0; parked--; unlockBucket(); goto acquire
        :: (linked[me] || BROKEN_LINK) && seen == 1 ->
            registered[me] = 1; unlockBucket()
        fi;
        seen = 0;
        /* parked until an unlock readies the fiber */
        atomic { woken[me] == 1 -> woken[me] = 0 };
        goto acquire;
holding:
        got = 0;
        inside++;
        assert(inside == 1);
        inside--;
        /* Release: the store of 0 goes into this CPU's buffer; the read of
           the count may run before it reaches memory. */
        atomic { buffered[me] = 1; pending++ };
#ifdef FENCE
        /* kFenceBit: every unlock goes to UnlockSlow, which fences first */
#ifndef BROKEN_NO_UNLOCK_FENCE
        drainOwn(me);
#endif
#endif
        if
        :: parked == 0 -> skip
        :: parked > 0 ->
            /* UnlockSlow: the first linked node (by fiber, not by the
               list's order: which waiter wakes does not matter here) */
            lockBucket();
            atomic {
                found = 0;
                q = 0;
                do
                :: q < N && !linked[q] -> q++
                :: q < N && linked[q] -> found = 1; break
                :: q == N -> break
                od
            };
            if
            :: found ->
                linked[q] = 0;
                parked--;
                if
                :: registered[q] ->
                    unlockBucket();
                    assert(!woken[q]);
                    woken[q] = 1
                :: else -> unlockBucket()   /* its registration readies it */
                fi
            :: else -> unlockBucket()
            fi;
            q = 0;
            found = 0
        fi;
        round++
    od
}

init {
    byte i;
    atomic {
        run Drainer();
        i = 0;
        do
        :: i < N -> run Locker(i); i++
        :: i == N -> break
        od
    }
}
