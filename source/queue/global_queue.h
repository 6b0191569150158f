// The global injection queue: tasks added from threads that are not workers,
// and fibers readied by such threads. It is off the hot path (workers push to
// their own deques), so a mutex guards it; an atomic size lets workers skip it
// without taking the lock.
#pragma once

#include "queue/task_item.h"

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>

namespace ftl {
namespace detail {

class GlobalQueue {
public:
    template <class Make>
    void PushBatch(std::size_t count, Make &&make) {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (std::size_t i = 0; i < count; ++i) {
            m_items.push_back(make(i));
        }
        // seq_cst: ordered before the pusher's check for parked workers.
        m_size.fetch_add(count, std::memory_order_seq_cst);
    }

    bool Pop(TaskItem &out) {
        if (LooksEmpty()) {
            return false;
        }
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_items.empty()) {
            return false;
        }
        out = m_items.front();
        m_items.pop_front();
        m_size.fetch_sub(1, std::memory_order_relaxed);
        return true;
    }

    bool LooksEmpty() const { return m_size.load(std::memory_order_acquire) == 0; }

private:
    std::mutex m_mutex;
    std::deque<TaskItem> m_items;
    std::atomic<std::size_t> m_size{0};
};

} // namespace detail
} // namespace ftl
