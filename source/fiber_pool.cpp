#include "fiber_pool.h"

#include "ftl/assert.h"

#include <algorithm>

namespace ftl {
namespace detail {

bool FiberPool::Init(unsigned size, unsigned numWorkers, std::size_t stackSize, FiberPoolPolicy policy,
                     EventCallbacks const &callbacks, Entry entry) {
    m_numLocal = numWorkers;
    m_local.reset(new FreeList[numWorkers]);
    m_stackSize = stackSize;
    m_initialSize = size;
    m_policy = policy;
    m_callbacks = callbacks;
    m_entry = entry;
    // The directory maps an index to its fiber for the free list. It is sized
    // once, so lookups need no lock while the pool grows.
    m_capacity = policy == FiberPoolPolicy::Grow ? std::max(size, 1024u) * 64u : size;
    m_directory.reset(new std::atomic<Fiber *>[m_capacity]);
    return Grow(size);
}

void FiberPool::DestroyAll() {
    std::lock_guard<std::mutex> lock(m_growMutex);
    unsigned const size = m_size.load(std::memory_order_acquire);
    for (unsigned i = 0; i < size; ++i) {
        DestroyPoolFiber(*m_directory[i].load(std::memory_order_relaxed));
    }
    m_chunks.clear();
    m_size.store(0, std::memory_order_release);
    m_shared.Head.store(0, std::memory_order_relaxed);
    for (unsigned i = 0; i < m_numLocal; ++i) {
        m_local[i].Head.store(0, std::memory_order_relaxed);
    }
}

bool FiberPool::Grow(unsigned count) {
    unsigned const first = m_size.load(std::memory_order_relaxed);
    if (count == 0 || first + count > m_capacity || first + count < first) {
        return false;
    }
    std::unique_ptr<Fiber[]> chunk(new Fiber[count]);
    for (unsigned i = 0; i < count; ++i) {
        if (!CreatePoolFiber(chunk[i], first + i, m_stackSize, m_entry)) {
            for (unsigned j = 0; j < i; ++j) {
                DestroyPoolFiber(chunk[j]);
            }
            return false;
        }
        m_directory[first + i].store(&chunk[i], std::memory_order_relaxed);
    }
    // Publish the directory entries before any index can be popped.
    m_size.store(first + count, std::memory_order_release);
    for (unsigned i = count; i-- > 0;) {
        Push(m_shared, &chunk[i]);
    }
    m_chunks.push_back(std::move(chunk));
    return true;
}

Fiber *FiberPool::Pop(FreeList &list) {
    std::uint64_t head = list.Head.load(std::memory_order_acquire);
    for (;;) {
        auto const index = static_cast<std::uint32_t>(head & kIndexMask);
        if (index == 0) {
            return nullptr;
        }
        Fiber *fiber = m_directory[index - 1].load(std::memory_order_relaxed);
        // May read a stale link if another thread popped this fiber meanwhile;
        // the tag then makes the CAS fail.
        std::uint64_t const next = fiber->NextFree.load(std::memory_order_relaxed);
        std::uint64_t const tag = (head >> 32) + 1;
        if (list.Head.compare_exchange_weak(head, (tag << 32) | next, std::memory_order_acquire,
                                            std::memory_order_acquire)) {
            list.Count.fetch_sub(1, std::memory_order_relaxed);
            return fiber;
        }
    }
}

void FiberPool::Push(FreeList &list, Fiber *fiber) {
    list.Count.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t head = list.Head.load(std::memory_order_relaxed);
    for (;;) {
        fiber->NextFree.store(static_cast<std::uint32_t>(head & kIndexMask), std::memory_order_relaxed);
        std::uint64_t const tag = (head >> 32) + 1;
        // Release: the fiber's saved context is visible to whoever pops it.
        if (list.Head.compare_exchange_weak(head, (tag << 32) | (fiber->Index + 1u),
                                            std::memory_order_release, std::memory_order_relaxed)) {
            return;
        }
    }
}

Fiber *FiberPool::TakeAny(unsigned worker) {
    if (Fiber *fiber = Pop(m_local[worker])) {
        return fiber;
    }
    if (Fiber *fiber = Pop(m_shared)) {
        return fiber;
    }
    for (unsigned i = 1; i < m_numLocal; ++i) {
        if (Fiber *fiber = Pop(m_local[(worker + i) % m_numLocal])) {
            return fiber;
        }
    }
    return nullptr;
}

Fiber *FiberPool::Acquire(unsigned worker) {
    // Two passes over the lists: fibers move between them while we look, so
    // one empty pass alone does not prove the pool dry.
    for (int pass = 0; pass < 2; ++pass) {
        if (Fiber *fiber = TakeAny(worker)) {
            return fiber;
        }
    }
    if (m_policy == FiberPoolPolicy::Fatal) {
        FTL_FATAL(
            "the fiber pool ran dry: all %u fibers are in use (TaskSchedulerInitOptions::FiberPoolSize = "
            "%u, FiberPoolPolicy::Fatal). Raise FiberPoolSize, or use FiberPoolPolicy::Grow.",
            Size(), m_initialSize);
    }
    unsigned grownTo = 0;
    {
        std::lock_guard<std::mutex> lock(m_growMutex);
        // Another thread may have grown the pool while we waited for the lock.
        if (Fiber *fiber = TakeAny(worker)) {
            return fiber;
        }
        unsigned const size = Size();
        if (size >= m_capacity) {
            FTL_FATAL("the fiber pool ran dry at its limit of %u fibers (%u at Init x 64)", size, m_capacity);
        }
        // Grow by half the pool; when the memory (or the kernel's mapping
        // limit) cannot take that much, by less, down to one fiber.
        unsigned extra = std::min(std::max(size / 2, 16u), m_capacity - size);
        while (extra != 0 && !Grow(extra)) {
            extra /= 2;
        }
        if (extra == 0) {
            FTL_FATAL("the fiber pool ran dry at %u fibers and could not grow: mmap refused another stack of "
                      "%zu bytes (each fiber takes two mappings, its stack and its guard page; see "
                      "vm.max_map_count and the memory limits)",
                      size, m_stackSize);
        }
        grownTo = Size();
    }
    if (m_callbacks.OnFiberPoolGrown != nullptr) {
        m_callbacks.OnFiberPoolGrown(m_callbacks.Context, grownTo);
    }
    return Acquire(worker);
}

void FiberPool::Release(Fiber *fiber, unsigned worker) {
    FreeList &local = m_local[worker];
    Push(local.Count.load(std::memory_order_relaxed) < kLocalCap ? local : m_shared, fiber);
}

} // namespace detail
} // namespace ftl
