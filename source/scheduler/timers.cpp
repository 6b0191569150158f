#include "scheduler/timers.h"

#include "platform/platform.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "wait/wait_list.h"

#include <limits>

namespace ftl {
namespace detail {

std::uint64_t DeadlineAfter(std::chrono::nanoseconds timeout) {
    std::uint64_t const now = NowNs();
    if (timeout.count() <= 0) {
        return now;
    }
    auto const wait = static_cast<std::uint64_t>(timeout.count());
    return wait > std::numeric_limits<std::uint64_t>::max() - 1 - now
               ? std::numeric_limits<std::uint64_t>::max() - 1
               : now + wait;
}

void Timers::Place(unsigned slot, WaitNode *node) {
    m_heap[slot] = node;
    node->TimerSlot = slot;
}

void Timers::SiftUp(unsigned slot) {
    WaitNode *node = m_heap[slot];
    while (slot > 0) {
        unsigned const parent = (slot - 1) / 2;
        if (m_heap[parent]->Deadline <= node->Deadline) {
            break;
        }
        Place(slot, m_heap[parent]);
        slot = parent;
    }
    Place(slot, node);
}

void Timers::SiftDown(unsigned slot) {
    WaitNode *node = m_heap[slot];
    auto const size = static_cast<unsigned>(m_heap.size());
    for (;;) {
        unsigned child = 2 * slot + 1;
        if (child >= size) {
            break;
        }
        if (child + 1 < size && m_heap[child + 1]->Deadline < m_heap[child]->Deadline) {
            ++child;
        }
        if (node->Deadline <= m_heap[child]->Deadline) {
            break;
        }
        Place(slot, m_heap[child]);
        slot = child;
    }
    Place(slot, node);
}

void Timers::RemoveAt(unsigned slot) {
    m_heap[slot]->InTimers = false;
    WaitNode *last = m_heap.back();
    m_heap.pop_back();
    if (slot < m_heap.size()) {
        Place(slot, last);
        SiftDown(slot);
        SiftUp(last->TimerSlot);
    }
}

void Timers::Publish() {
    m_earliest.store(m_heap.empty() ? kNever : m_heap.front()->Deadline, std::memory_order_release);
}

bool Timers::Add(WaitNode *node) {
    std::lock_guard<std::mutex> lock(m_mutex);
    node->InTimers = true;
    m_heap.push_back(node);
    SiftUp(static_cast<unsigned>(m_heap.size() - 1));
    Publish();
    return m_heap.front() == node;
}

void Timers::Remove(WaitNode *node) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (node->InTimers) {
        RemoveAt(node->TimerSlot);
        Publish();
    }
}

unsigned Timers::TakeDue(std::uint64_t now, TimedOutWaiter *out, unsigned max) {
    std::lock_guard<std::mutex> lock(m_mutex);
    unsigned taken = 0;
    while (taken < max && !m_heap.empty() && m_heap.front()->Deadline <= now) {
        WaitNode *node = m_heap.front();
        RemoveAt(0);
        // A sleep has no waitable: its deadline is all it waits for. A wait
        // on a waitable ends by timeout only if the waitable still holds it.
        bool ends = true;
        if (node->Cancel != nullptr) {
            ends = node->Cancel(node->Waitable, node);
        } else {
            node->TimedOut = true;
        }
        if (ends) {
            out[taken++] = TimedOutWaiter{node->Waiter, node->PinnedTo};
        }
    }
    Publish();
    return taken;
}

// ---- The scheduler's side: the heap, and readying what falls due ----

void Scheduler::AddTimer(WaitNode *node) {
    if (m_timers.Add(node)) {
        // The new earliest deadline: a parked worker sleeps with the old one
        // as its timeout. Wake one, which parks again with this one.
        m_idle.Notify();
    }
}

void Scheduler::RemoveTimer(WaitNode *node) {
    m_timers.Remove(node);
}

void Scheduler::FireDueTimers() {
    if (m_timers.Empty()) {
        return;
    }
    std::uint64_t const now = NowNs();
    if (m_timers.Earliest() > now) {
        return;
    }
    constexpr unsigned kBatch = 16;
    TimedOutWaiter due[kBatch];
    unsigned taken;
    do {
        taken = m_timers.TakeDue(now, due, kBatch);
        for (unsigned i = 0; i < taken; ++i) {
            ReadyFiber(*this, due[i].Waiter, due[i].PinnedTo);
        }
    } while (taken == kBatch);
}

std::uint64_t Scheduler::TimeToNextTimer() const {
    std::uint64_t const earliest = m_timers.Earliest();
    if (earliest == Timers::kNever) {
        return 0;
    }
    std::uint64_t const now = NowNs();
    return earliest > now ? earliest - now : 1;
}

} // namespace detail
} // namespace ftl
