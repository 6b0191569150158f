/*
 * The owner-side batch pop of the Chase-Lev deque against concurrent thieves,
 * for the SPIN model checker.
 *
 * What each step stands for (source/queue/work_deque.h, WorkDeque):
 *   Push       read m_bottom, write the cell, publish m_bottom + 1 (the
 *              buffer never grows here: it holds every item the model pushes,
 *              so Grow and its read of m_top are left out)
 *   Pop        the early empty check, m_bottom - 1, fence, read m_top, the
 *              CAS for the last item, the bottom restore
 *   PopBatch   read both ends, size the batch (half, at least one, at most
 *              MAX), m_bottom = nb, fence, read m_top; then either the range
 *              [nb, b) (top below nb), or the contested path: the cells above
 *              the top read, the CAS on the contested index, m_bottom =
 *              contested + 1; or, when the top read is at or past b, the
 *              bottom back to b
 *   Steal      read m_top, fence, read m_bottom, read the cell, CAS m_top;
 *              retried while it loses and items remain
 *
 * SPIN explores sequentially consistent interleavings: each fence is a point
 * in that single order, and each CAS is an atomic block. The relaxed and
 * acquire accesses of the code are therefore stronger here than in C++; the
 * C++ argument for the fences is the one in the comments of queue/work_deque.h.
 * A cell is a shared byte read or written in one step, so a thief reading a
 * cell that the owner rewrites (with MIXED, a push after a pop reuses the
 * index) is among the interleavings explored. The buffer never wraps around
 * here, so the wrap-around race that the code's atomic cells keep defined is
 * not.
 *
 * One owner pushes N items (values 1..N) and pops with PopBatch(MAX), and
 * with Pop when WITH_POP is set (the choice between them is SPIN's, at each
 * step). With MIXED the owner interleaves its pushes with its pops in every
 * order, as the inline wait does (TakeChildren, then PutBack pushes); without
 * it, it pushes all N first. It stops when every item was pushed and a pop
 * returns nothing. THIEVES thieves call Steal until it returns false.
 *
 * Checked: no item is taken twice (at each take), no unwritten cell is taken;
 * a pop that returns nothing leaves the deque empty (so the owner stops only
 * when nothing is left); when every process has finished, each pushed item
 * was taken exactly once and m_top == m_bottom.
 *
 * Not checked, because it does not hold: "never more than half of what the
 * deque holds" is measured against the ends PopBatch reads before its fence.
 * A thief that steals in between leaves fewer items, of which the batch may
 * take more than half (N=5, MAX=2: b=5, t=1 gives nb=3; a thief takes index 1;
 * the batch takes indices 3 and 4, two of the three left), and the contested
 * path takes all that is left. Only the balance between owner and thieves
 * depends on it.
 *
 * -DBROKEN_NO_CAS takes the contested item without the CAS on m_top; SPIN
 * must then find an item taken by the owner and a thief both.
 * -DBROKEN_NO_FENCE reads m_top before lowering m_bottom (the store-load
 * order the fence enforces); SPIN must then find a range item that a thief
 * took too.
 */
#ifndef N
#define N 5
#endif
#ifndef MAX
#define MAX 2
#endif
#ifndef THIEVES
#define THIEVES 2
#endif
#ifndef WITH_POP
#define WITH_POP 0
#endif
#ifndef MIXED
#define MIXED 0
#endif

byte top = 0;       /* m_top */
byte bottom = 0;    /* m_bottom */
byte cell[N];       /* the buffer; 0 = never written */
byte taken[N + 1];  /* how many times item v was taken */

inline take(v) {
    atomic {
        assert(v >= 1 && v <= N);
        assert(taken[v] == 0);
        taken[v]++
    }
}

/* WorkDeque::Push */
inline push(v) {
    b = bottom;
    assert(b < N);
    cell[b] = v;
    bottom = b + 1;   /* release */
    b = 0
}

/* WorkDeque::Pop; n = 1 if it took an item */
inline pop() {
    n = 0;
    t = top;
    if
    :: t >= bottom -> goto popDone   /* empty, without the fence */
    :: else -> skip
    fi;
    b = bottom - 1;
    bottom = b;
    /* fence */
    t = top;
    if
    :: t > b -> bottom = b + 1
    :: else ->
        last = cell[b];
        if
        :: t == b ->
            atomic {
                if
                :: top == t -> top = t + 1; n = 1
                :: else -> skip
                fi
            }
            if
            :: n == 1 -> take(last)
            :: else -> skip
            fi;
            bottom = b + 1
        :: else -> take(last); n = 1
        fi
    fi;
popDone:
    b = 0; t = 0; last = 0
}

/* WorkDeque::PopBatch(out, MAX); n = how many it took */
inline popBatch() {
    n = 0;
    b = bottom;
    t = top;
    if
    :: t >= b -> goto batchDone
    :: else -> skip
    fi;
    k = (b - t) / 2;
    if
    :: k < 1 -> k = 1
    :: else -> skip
    fi;
    if
    :: k > MAX -> k = MAX
    :: else -> skip
    fi;
    nb = b - k;
#ifdef BROKEN_NO_FENCE
    t = top;
    bottom = nb;
#else
    bottom = nb;
    /* fence */
    t = top;
#endif
    if
    :: t < nb ->
        /* the whole range [nb, b) is ours */
        i = b;
        do
        :: i > nb -> i--; take(cell[i]); n++
        :: else -> break
        od
    :: else ->
        if
        :: t < b ->
            /* [t, b) is left; the item at t is contested */
            i = b;
            do
            :: i > t + 1 -> i--; take(cell[i]); n++
            :: else -> break
            od;
            last = cell[t];
#ifdef BROKEN_NO_CAS
            take(last); n++;
#else
            atomic {
                if
                :: top == t -> top = t + 1; won = 1
                :: else -> won = 0
                fi
            }
            if
            :: won -> take(last); n++
            :: else -> skip
            fi;
#endif
            bottom = t + 1
        :: else -> bottom = b
        fi
    fi;
batchDone:
    b = 0; t = 0; k = 0; nb = 0; i = 0; last = 0; won = 0
}

proctype Owner() {
    byte pushed = 0;
    byte n, b, t, k, nb, i, last;
    bit won;
    do
    :: pushed < N -> push(pushed + 1); pushed++
    :: (MIXED || pushed == N) ->
        if
        :: popBatch()
        :: WITH_POP -> pop()
        fi;
        if
        :: n == 0 ->
            /* Nothing taken: the deque is empty (a thief may have taken the
             * last item), and the owner stops once it pushed everything. */
            assert(top >= bottom);
            if
            :: pushed == N -> break
            :: else -> skip
            fi
        :: else -> skip
        fi;
        n = 0
    od
}

proctype Thief() {
    byte t, b, item;
    bit won;
steal:
    t = top;          /* acquire */
    /* fence */
    b = bottom;       /* acquire */
    if
    :: t >= b -> goto done
    :: else -> skip
    fi;
    item = cell[t];
    atomic {
        if
        :: top == t -> top = t + 1; won = 1
        :: else -> won = 0
        fi
    }
    if
    :: won -> take(item)
    :: else -> skip
    fi;
    t = 0; b = 0; item = 0; won = 0;
    goto steal;   /* a lost CAS retries; a won one steals again */
done:
    skip
}

init {
    byte v;
    atomic {
        run Owner();
        v = 0;
        do
        :: v < THIEVES -> run Thief(); v++
        :: else -> break
        od
    }
    /* every other process has finished */
    _nr_pr == 1;
    assert(top == bottom);
    v = 1;
    do
    :: v <= N -> assert(taken[v] == 1); v++
    :: else -> break
    od
}
