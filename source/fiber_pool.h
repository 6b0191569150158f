// The fiber pool: fibers created at Init, handed out and taken back through a
// lock-free free list (a Treiber stack of fiber indices with a version tag
// against ABA), and grown or declared dry by the configured policy.
#pragma once

#include "fiber.h"
#include "ftl/callbacks.h"
#include "ftl/task_scheduler.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ftl {
namespace detail {

class FiberPool {
public:
    using Entry = void (*)(boost::context::detail::transfer_t);

    bool Init(unsigned size, std::size_t stackSize, FiberPoolPolicy policy, EventCallbacks const &callbacks,
              Entry entry);
    void DestroyAll();

    // A free fiber, ready to be switched to. Grows the pool or aborts when none
    // is free, as the policy says.
    Fiber *Acquire();
    // The fiber must be off its stack (called from the post-switch step).
    void Release(Fiber *fiber);

    unsigned Size() const { return m_size.load(std::memory_order_acquire); }

private:
    Fiber *Pop();
    void Push(Fiber *fiber);
    bool Grow(unsigned count);

    static constexpr std::uint64_t kIndexMask = 0xffffffffu;
    // Low 32 bits: index + 1 of the top free fiber (0: empty); high 32 bits:
    // a tag bumped by every push and pop.
    alignas(64) std::atomic<std::uint64_t> m_head{0};
    alignas(64) std::atomic<unsigned> m_size{0};
    unsigned m_capacity = 0;
    std::unique_ptr<std::atomic<Fiber *>[]> m_directory;

    std::mutex m_growMutex;
    std::vector<std::unique_ptr<Fiber[]>> m_chunks;
    std::size_t m_stackSize = 0;
    unsigned m_initialSize = 0;
    FiberPoolPolicy m_policy = FiberPoolPolicy::Grow;
    EventCallbacks m_callbacks;
    Entry m_entry = nullptr;
};

} // namespace detail
} // namespace ftl
