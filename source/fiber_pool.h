// The fiber pool: fibers created at Init, handed out and taken back through
// lock-free free lists, and grown or declared dry by the configured policy.
//
// Each worker has a small free list of its own (up to kLocalCap fibers) in
// front of a shared one: a wait takes a fiber and a resume gives one back, so
// on the hot path each worker works on its own cache line instead of every
// worker contending for one list head. A worker whose lists are empty takes
// from the shared list, then from other workers' lists, before the pool grows.
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

// A Treiber stack of fiber indices. Low 32 bits of Head: index + 1 of the
// top fiber (0: empty); high 32 bits: a tag bumped by every push and pop, so a
// pop that read a stale link fails its CAS (no ABA).
struct FreeList {
    alignas(64) std::atomic<std::uint64_t> Head{0};
    std::atomic<unsigned> Count{0}; // approximate, for the local cap
};

class FiberPool {
public:
    using Entry = void (*)(boost::context::detail::transfer_t);

    bool Init(unsigned size, unsigned numWorkers, std::size_t stackSize, FiberPoolPolicy policy,
              EventCallbacks const &callbacks, Entry entry);
    void DestroyAll();

    // A free fiber, ready to be switched to. Grows the pool or aborts when none
    // is free, as the policy says.
    Fiber *Acquire(unsigned worker);
    // The fiber must be off its stack (called from the post-switch step).
    void Release(Fiber *fiber, unsigned worker);

    unsigned Size() const { return m_size.load(std::memory_order_acquire); }

private:
    Fiber *Pop(FreeList &list);
    void Push(FreeList &list, Fiber *fiber);
    Fiber *TakeAny(unsigned worker);
    bool Grow(unsigned count);

    static constexpr std::uint64_t kIndexMask = 0xffffffffu;
    // Fibers a worker keeps for itself: enough for a few nested waits and
    // resumes in a row without touching the shared list.
    static constexpr unsigned kLocalCap = 16;

    FreeList m_shared;
    std::unique_ptr<FreeList[]> m_local;
    unsigned m_numLocal = 0;
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
