// The global injection queue: tasks added from threads that are not workers,
// and fibers readied by such threads. It is off the hot path (workers push to
// their own deques), so a mutex guards it; an atomic size lets workers skip it
// without taking the lock. The items sit in a ring that only grows, so a
// queue that has seen its peak allocates nothing more (a pinned task, a graph
// node pinned to a thread, or an outside thread's tasks, frame after frame).
#pragma once

#include "queue/task_item.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace ftl {
namespace detail {

class GlobalQueue {
public:
    template <class Make>
    void PushBatch(std::size_t count, Make &&make) {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_count + count > m_ring.size()) {
            Grow(m_count + count);
        }
        std::size_t const mask = m_ring.size() - 1;
        for (std::size_t i = 0; i < count; ++i) {
            m_ring[(m_head + m_count + i) & mask] = make(i);
        }
        m_count += count;
        // Ordered before the pusher's look for parked workers by the seq_cst
        // fence in IdleState::Notify / NotifyOne, which the pusher calls next
        // (the RMW's own order does not do that; the mutex guards the items).
        m_size.fetch_add(count, std::memory_order_seq_cst);
    }

    bool Pop(TaskItem &out) {
        return PopIf(out, [](TaskItem const &) { return true; });
    }

    // Pops the oldest item only when `take(item)` accepts it: the item the
    // next Pop would return, for a caller that runs only some items itself.
    template <class Take>
    bool PopIf(TaskItem &out, Take &&take) {
        if (LooksEmpty()) {
            return false;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_count == 0 || !take(m_ring[m_head])) {
            return false;
        }
        TakeAt(0, out);
        return true;
    }

    // Pops the oldest item `take` accepts, keeping the others in order (a
    // scan under the lock: for the rare caller that must pass some by).
    template <class Take>
    bool PopFirstIf(TaskItem &out, Take &&take) {
        if (LooksEmpty()) {
            return false;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        for (std::size_t i = 0; i < m_count; ++i) {
            if (take(m_ring[(m_head + i) & (m_ring.size() - 1)])) {
                TakeAt(i, out);
                return true;
            }
        }
        return false;
    }

    bool LooksEmpty() const { return m_size.load(std::memory_order_acquire) == 0; }

private:
    // Moves the item `i` places from the head out, the older ones up one
    // (m_mutex held, i < m_count).
    void TakeAt(std::size_t i, TaskItem &out) {
        std::size_t const mask = m_ring.size() - 1;
        out = m_ring[(m_head + i) & mask];
        for (std::size_t j = i; j > 0; --j) {
            m_ring[(m_head + j) & mask] = m_ring[(m_head + j - 1) & mask];
        }
        m_head = (m_head + 1) & mask;
        --m_count;
        m_size.fetch_sub(1, std::memory_order_relaxed);
    }

    // To the next power of two that holds `needed`, keeping the order.
    void Grow(std::size_t needed) {
        std::size_t capacity = m_ring.empty() ? 64 : m_ring.size();
        while (capacity < needed) {
            capacity *= 2;
        }
        std::vector<TaskItem> ring(capacity);
        for (std::size_t i = 0; i < m_count; ++i) {
            ring[i] = m_ring[(m_head + i) & (m_ring.size() - 1)];
        }
        m_ring.swap(ring);
        m_head = 0;
    }

    std::mutex m_mutex;
    std::vector<TaskItem> m_ring; // guarded by m_mutex; its size is a power of two
    std::size_t m_head = 0;       // guarded by m_mutex
    std::size_t m_count = 0;      // guarded by m_mutex
    std::atomic<std::size_t> m_size{0};
};

} // namespace detail
} // namespace ftl
