#include "scheduler/pressure.h"

#include "fiber/fiber.h"
#include "platform/platform.h"
#include "queue/task_item.h"

#include <algorithm>

namespace ftl {
namespace detail {

namespace {

// The patience: this many average tasks, so that the children's children of
// the latest wait have time to come, within these bounds. The lower one is
// a few cross-core hand-offs on any host; the upper one, MaxIdleSpinMicros,
// is as long as an idle worker looks before it sleeps.
constexpr std::uint64_t kPatienceTasks = 16;
constexpr std::uint64_t kMinPatienceNs = 2000;
// 2^7: from the least patience to beyond MaxIdleSpinMicros's default.
constexpr unsigned kMaxRunOutShift = 7;

} // namespace

void FiberPressure::Init(ParkedWaits *waits, unsigned share, std::uint64_t maxPatienceNs, bool on) {
    m_waits = waits;
    m_share = std::min(share, ParkedWaits::kCapacity / 2);
    m_maxPatienceNs = std::max(maxPatienceNs, kMinPatienceNs);
    m_on = on;
}

namespace {

// A noted wait is still parked while its fiber's ParkedOn names its node
// (the fiber clears it when it runs again). Relaxed: a stale answer only
// moves the floor for one search.
bool StillParked(Fiber const *fiber, WaitNode const *node) {
    return fiber->ParkedOn.load(std::memory_order_relaxed) == node;
}

} // namespace

ParkedWaits *FiberPressure::NoteWait(Fiber const *fiber, WaitNode const *node, unsigned depth) {
    if (!m_on) {
        return nullptr;
    }
    ParkedWaits &list = *m_waits;
    if (list.m_count == ParkedWaits::kCapacity) {
        unsigned live = 0;
        for (unsigned i = 0; i < list.m_count; ++i) {
            if (StillParked(list.m_waits[i].Waiter, list.m_waits[i].Node)) {
                list.m_waits[live++] = list.m_waits[i];
            }
        }
        list.m_count = live;
        if (list.m_count == ParkedWaits::kCapacity) {
            std::copy(list.m_waits + 1, list.m_waits + ParkedWaits::kCapacity, list.m_waits);
            --list.m_count;
        }
    }
    list.m_waits[list.m_count++] = ParkedWaits::Wait{fiber, node, depth};
    ++m_noted;
    return &list;
}

unsigned FiberPressure::FloorSlow(std::uint64_t avgTaskNs) {
    ParkedWaits &list = *m_waits;
    m_endedSeen = list.m_ended.load(std::memory_order_relaxed);
    if (m_noted - m_endedSeen <= m_share) {
        Relieved();
        return 0;
    }
    while (list.m_count != 0 &&
           !StillParked(list.m_waits[list.m_count - 1].Waiter, list.m_waits[list.m_count - 1].Node)) {
        --list.m_count;
    }
    if (list.m_count == 0) {
        return 0; // (the count of ended waits will catch up)
    }
    if (m_passedSince != 0) {
        // Doubled at each run-out until deep work comes again: where the
        // work that ends the waits is slow to come (another worker's thread
        // lost its core, say), shallow takes get rarer rather than pile up.
        std::uint64_t const patience =
            std::min(std::clamp(kPatienceTasks * avgTaskNs, kMinPatienceNs, m_maxPatienceNs) << m_runOuts,
                     m_maxPatienceNs);
        if (NowNs() - m_passedSince >= patience) {
            m_runOuts = std::min(m_runOuts + 1, kMaxRunOutShift);
            return 0; // this search takes what comes next
        }
    }
    // (At most the deepest a task can be: a floor above it would pass by all.)
    return std::min(list.m_waits[list.m_count - 1].Depth + 1, TaskItem::kMaxDepth);
}

} // namespace detail
} // namespace ftl
