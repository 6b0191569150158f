// The fiber pool: a fixed number of fibers (FiberPoolSize), handed out and
// taken back through lock-free free lists, grown or declared dry by the
// configured policy when every fiber is in use.
//
// Indices. The pool's fibers are numbered [0, Size()), the numbers profilers
// see in EventCallbacks and GetCurrentFiberIndex. Index 0 is the stack of the
// thread that called Init (it is worker 0's own fiber, never handed out);
// index i in [1, numWorkers) is the fiber worker thread i starts its loop on;
// the rest are handed out to waits as needed.
//
// Lazy stacks. Init makes no stack: a fiber's descriptor and stack are made
// the first time the pool hands that index out, and reused from then on, so
// Init and destruction cost O(threads + fibers used), not O(FiberPoolSize).
// A new context takes the floating-point control state (rounding mode,
// exception masks) of the thread that makes it, so fibers are made under the
// state the Init thread had at Init, never under a task's own.
// A worker takes a fiber from its own free list first, then the shared one,
// then other workers' lists (fibers whose stacks exist), and only then makes a
// fresh one; the pool is dry when every index below Size() is in use.
//
// Each worker has a small free list of its own (up to kLocalCap fibers) in
// front of the shared one: a wait takes a fiber and a resume gives one back,
// so on the hot path each worker works on its own cache line instead of every
// worker contending for one list head.
#pragma once

#include "fiber/fiber.h"
#include "ftl/callbacks.h"
#include "ftl/scheduler_options.h"

#include <atomic>
#include <cfenv>
#include <cstdint>
#include <memory>
#include <mutex>

namespace ftl {
namespace detail {

// A Treiber stack of fiber indices. Low 32 bits of Head: the top fiber's
// index (0: empty, since index 0 is never on a list); high 32 bits: a tag
// bumped by every push and pop, so a pop that read a stale link fails its CAS
// (no ABA).
struct FreeList {
    alignas(64) std::atomic<std::uint64_t> Head{0};
    std::atomic<unsigned> Count{0}; // approximate, for the local cap
};

class FiberPool {
public:
    // The bounds of TaskSchedulerInitOptions::FiberStackSize and
    // FiberStackGuardSize. With both at most 1 GiB, rounding them up to pages
    // and adding the gap (MapStack) cannot wrap, even in 32 bits.
    static constexpr std::size_t kMinStackSize = 16 * 1024;
    static constexpr std::size_t kMaxStackSize = std::size_t{1} << 30;
    static constexpr std::size_t kMaxGuardSize = std::size_t{1} << 30;
    // Whether Init takes these sizes: a stack in [kMinStackSize,
    // kMaxStackSize], a guard in [1, kMaxGuardSize] (both are rounded up to
    // whole pages).
    static bool ValidSizes(std::size_t stackSize, std::size_t guardSize) {
        return stackSize >= kMinStackSize && stackSize <= kMaxStackSize && guardSize != 0 &&
               guardSize <= kMaxGuardSize;
    }

    // threadFiber0 is the Init thread's own fiber, which takes index 0.
    // Makes the worker threads' first fibers; false when their stacks could
    // not be had, or when the sizes are not ValidSizes.
    bool Init(unsigned size, unsigned numWorkers, std::size_t stackSize, std::size_t guardSize,
              FiberPoolPolicy policy, EventCallbacks const &callbacks, FiberEntry entry, Fiber *threadFiber0);
    // Unmaps every stack made. No fiber may run on one any more.
    void DestroyAll();

    // The fiber worker thread `worker` (>= 1) starts on: fiber `worker`,
    // made at Init, when the pool has it; else any free fiber.
    Fiber *AcquireFirst(unsigned worker);
    // A free fiber, ready to be switched to. Grows the pool or aborts when none
    // is free, as the policy says.
    Fiber *Acquire(unsigned worker);
    // The fiber must be off its stack (called from the post-switch step).
    void Release(Fiber *fiber, unsigned worker);

    // The pool's size: indices [0, Size()) exist, made or not.
    unsigned Size() const { return m_size.load(std::memory_order_acquire); }
    // Fibers whose stacks were made so far (index 0 included).
    unsigned Made() const { return m_fresh.load(std::memory_order_acquire); }
    // Made fibers on the free lists now (approximate while fibers move).
    unsigned FreeCount() const;
    // Times the pool grew (FiberPoolPolicy::Grow).
    unsigned Growths() const { return m_growths.load(std::memory_order_relaxed); }
    // Calls visit(fiber) for the Init thread's own fiber and every fiber
    // whose descriptor exists (a snapshot: the pool may grow meanwhile).
    template <class Visit>
    void ForEachMade(Visit &&visit) const {
        visit(*m_threadFiber0);
        unsigned const made = Made();
        for (unsigned i = 1; i < made; ++i) {
            Fiber const *chunk = m_chunks[i >> kChunkShift].load(std::memory_order_acquire);
            if (chunk != nullptr) {
                visit(chunk[i & (kChunkSize - 1)]);
            }
        }
    }

private:
    static constexpr unsigned kChunkShift = 8; // 256 descriptors a chunk
    static constexpr unsigned kChunkSize = 1u << kChunkShift;

    Fiber *At(unsigned index) const {
        return &m_chunks[index >> kChunkShift].load(std::memory_order_acquire)[index & (kChunkSize - 1)];
    }
    Fiber *Pop(FreeList &list);
    void Push(FreeList &list, Fiber *fiber);
    Fiber *TakeFree(unsigned worker);
    Fiber *TakeFresh();
    // Makes fiber `index`'s descriptor (its chunk, if need be) and stack;
    // nullptr when the stack could not be had.
    Fiber *Make(unsigned index);
    bool Grow();

    static constexpr std::uint64_t kIndexMask = 0xffffffffu;
    // Fibers a worker keeps for itself: enough for a few nested waits and
    // resumes in a row without touching the shared list.
    static constexpr unsigned kLocalCap = 16;

    FreeList m_shared;
    std::unique_ptr<FreeList[]> m_local;
    unsigned m_numLocal = 0;
    alignas(64) std::atomic<unsigned> m_size{0};
    // Indices below it have a descriptor and a stack (or are being made).
    std::atomic<unsigned> m_fresh{0};
    std::atomic<unsigned> m_growths{0};
    unsigned m_capacity = 0;
    // The capacity the system's mapping limit allows (0: no such limit).
    unsigned m_mappingCap = 0;
    // Descriptor chunks, made on first use; sized once, so lookups need no lock.
    std::unique_ptr<std::atomic<Fiber *>[]> m_chunks;
    unsigned m_numChunks = 0;

    std::mutex m_mutex; // making chunks, growing
    std::size_t m_stackSize = 0;
    std::size_t m_guardSize = 0;
    unsigned m_initialSize = 0;
    FiberPoolPolicy m_policy = FiberPoolPolicy::Grow;
    EventCallbacks m_callbacks;
    FiberEntry m_entry = nullptr;
    Fiber *m_threadFiber0 = nullptr;
    std::fenv_t m_initFloatEnv{}; // the Init thread's, read at Init
};

} // namespace detail
} // namespace ftl
