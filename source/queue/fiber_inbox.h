// A worker's inbox of fibers pinned to it: any thread pushes, only the owner
// pops. Pushes go onto a lock-free stack; the owner takes the whole stack at
// once and reverses it, so fibers resume in the order they were readied.
#pragma once

#include "fiber/fiber.h"

#include <atomic>

namespace ftl {
namespace detail {

class FiberInbox {
public:
    // Any thread.
    void Push(Fiber *fiber) {
        Fiber *head = m_incoming.load(std::memory_order_relaxed);
        do {
            fiber->NextReady = head;
        } while (!m_incoming.compare_exchange_weak(head, fiber, std::memory_order_release,
                                                   std::memory_order_relaxed));
    }

    // Owner only.
    Fiber *Pop() {
        if (m_local == nullptr) {
            if (m_incoming.load(std::memory_order_relaxed) == nullptr) {
                return nullptr;
            }
            Fiber *list = m_incoming.exchange(nullptr, std::memory_order_acquire);
            while (list != nullptr) { // reverse into FIFO order
                Fiber *next = list->NextReady;
                list->NextReady = m_local;
                m_local = list;
                list = next;
            }
        }
        Fiber *fiber = m_local;
        if (fiber != nullptr) {
            m_local = fiber->NextReady;
            fiber->NextReady = nullptr;
        }
        return fiber;
    }

    // Owner only.
    bool LooksEmpty() const {
        return m_local == nullptr && m_incoming.load(std::memory_order_acquire) == nullptr;
    }

private:
    std::atomic<Fiber *> m_incoming{nullptr};
    Fiber *m_local = nullptr;
};

} // namespace detail
} // namespace ftl
