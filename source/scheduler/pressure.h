// Fiber pressure (docs/design.adoc, "Under fiber pressure"): a worker that
// has more fibers parked in TaskCounter waits than its share of the pool
// prefers work that lets those waits end to work that starts new ones.
//
// A wait parks its fiber only when a child cannot run inline (it was
// stolen, it is pinned to another worker, or the inline loop gave way), and
// the worker then starts other work on a fresh fiber, which may park in
// turn. Where children are pinned across workers, that used to pile up
// without bound. Under pressure:
// - the worker starts only tasks deeper than its most recent TaskCounter
//   wait that is still parked (a task added by a task of depth d has depth
//   d + 1; an outside thread's, 0): in a tree of add-and-wait tasks, the
//   descendants of that wait's children, which must end before it can. Its
//   parked waits thus go deeper the more there are, and no deeper than the
//   tree. It still resumes any ready fiber; it steals no task;
// - its inline loops run their children to the end: a ready fiber or another
//   counter's pinned task no longer parks a fiber with children left to run;
// - when nothing deep enough comes within its patience, it takes the next
//   item as usual, so a wait on something shallower (a sibling's counter, a
//   flag) still ends.
#pragma once

#include <atomic>
#include <cstdint>

namespace ftl {
namespace detail {

struct Fiber;
struct WaitNode;

// The waits a worker noted, and the count of those over: what other threads
// touch, and the list a search reads only under pressure, kept apart from the
// worker's hot lines (the worker holds it last, in a block of its own).
class ParkedWaits {
public:
    // Any thread: a noted wait of this worker's is over.
    void Ended() { m_ended.fetch_add(1, std::memory_order_relaxed); }

private:
    friend class FiberPressure;
    struct Wait {
        Fiber const *Waiter;
        WaitNode const *Node;
        unsigned Depth;
    };
    // Oldest first; those over may linger until they reach the end (the
    // floor reads only the latest live one) or the array fills. Enough for
    // any share (FiberPressure::Init caps it below): when it is full of live
    // ones, the oldest go first, as they matter least to the floor.
    static constexpr unsigned kCapacity = 256;
    std::atomic<std::uint64_t> m_ended{0};
    unsigned m_count = 0;
    Wait m_waits[kCapacity];
};

// The owner's state: a few words on its hot lines, which a search reads
// once (Floor) and a take once more (CurrentFloor).
class FiberPressure {
public:
    // share: the parked waits this worker may have before it is under
    // pressure; maxPatienceNs: the longest it waits for deep enough work.
    void Init(ParkedWaits *waits, unsigned share, std::uint64_t maxPatienceNs, bool on);

    // A TaskCounter wait of a task of depth `depth` is about to park `fiber`
    // in `node` on this worker. Returns the list to tell (ParkedWaits::Ended)
    // on whichever worker the fiber resumes, or nullptr: not noted.
    ParkedWaits *NoteWait(Fiber const *fiber, WaitNode const *node, unsigned depth);

    // At the start of a search for work: the least depth a task this worker
    // starts must have (0: any). `avgTaskNs` sets the patience.
    unsigned Floor(std::uint64_t avgTaskNs) {
        // Waits only end: with the count of ended ones as last read, this
        // bounds the live ones from above without touching the list's line.
        if (m_noted - m_endedSeen <= m_share) {
            if (__builtin_expect(m_floor != 0 || m_passedSince != 0, false)) {
                Relieved();
            }
            return 0;
        }
        return m_floor = FloorSlow(avgTaskNs);
    }
    // The Floor of the current search (0: no pressure).
    unsigned CurrentFloor() const { return m_floor; }
    // The search found nothing deep enough while there was shallower work:
    // the patience runs from the first such search.
    void Passed(std::uint64_t now) {
        if (m_passedSince == 0) {
            m_passedSince = now;
        }
    }
    // The search took an item: a deep one (or a ready fiber) if it had a
    // floor, which shows the waits' work flowing, so the patience is reset.
    void Took() {
        if (__builtin_expect(m_floor != 0 || m_passedSince != 0, false)) {
            m_runOuts = m_floor != 0 ? 0 : m_runOuts;
            m_passedSince = 0;
        }
    }

private:
    unsigned FloorSlow(std::uint64_t avgTaskNs);
    void Relieved() {
        m_floor = 0;
        m_passedSince = 0;
        m_runOuts = 0;
    }

    ParkedWaits *m_waits = nullptr;
    std::uint64_t m_noted = 0;       // waits noted
    std::uint64_t m_endedSeen = 0;   // m_waits->m_ended as last read
    std::uint64_t m_passedSince = 0; // 0: not waiting for deep enough work
    std::uint64_t m_maxPatienceNs = 0;
    unsigned m_share = 0;
    unsigned m_floor = 0;
    unsigned m_runOuts = 0; // patiences run out in this pressure
    bool m_on = true;
};

} // namespace detail
} // namespace ftl
