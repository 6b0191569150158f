#include "fiber/fiber_pool.h"

#include "ftl/assert.h"
#include "platform/platform.h"

#include <algorithm>

namespace ftl {
namespace detail {

bool FiberPool::Init(unsigned size, unsigned numWorkers, std::size_t stackSize, std::size_t guardSize,
                     FiberPoolPolicy policy, EventCallbacks const &callbacks, FiberEntry entry,
                     Fiber *threadFiber0) {
    if (!ValidSizes(stackSize, guardSize)) {
        return false;
    }
    m_numLocal = numWorkers;
    m_local.reset(new FreeList[numWorkers]);
    m_stackSize = stackSize;
    m_guardSize = guardSize;
    m_initialSize = size;
    m_policy = policy;
    m_callbacks = callbacks;
    m_entry = entry;
    m_threadFiber0 = threadFiber0;
    std::fegetenv(&m_initFloatEnv);
    // Growth stops at 64 times the initial size (at least 65,536 fibers): a
    // pool that needs more has a runaway wait. It stops sooner where the
    // system's limit on mappings would refuse a stack first: each fiber
    // takes two (its stack and its guard page), and an eighth of the limit
    // is left to the rest of the process. vm.max_map_count's default of
    // 65,530 thus allows 28,669 fibers.
    m_capacity = size;
    if (policy == FiberPoolPolicy::Grow) {
        m_capacity = std::max(size, 1024u) * 64u;
        std::size_t const mappings = MappingLimit();
        if (mappings != 0) {
            std::size_t const fibers = (mappings - mappings / 8) / 2;
            m_mappingCap = static_cast<unsigned>(std::min<std::size_t>(fibers, m_capacity));
            m_capacity = std::max(size, m_mappingCap);
        }
    }
    m_numChunks = (m_capacity + kChunkSize - 1) / kChunkSize;
    // Value-initialized: every chunk pointer starts null.
    m_chunks.reset(new std::atomic<Fiber *>[m_numChunks]());
    m_size.store(size, std::memory_order_release);
    // Indices [1, numWorkers) are the worker threads' first fibers, made here
    // so that a failure is Init's error; fresh hand-outs start after them.
    unsigned const firsts = std::min(size, numWorkers);
    for (unsigned index = 1; index < firsts; ++index) {
        if (Make(index) == nullptr) {
            DestroyAll();
            return false;
        }
    }
    m_fresh.store(firsts, std::memory_order_release);
    return true;
}

void FiberPool::DestroyAll() {
    std::lock_guard<std::mutex> lock(m_mutex);
    for (unsigned c = 0; c < m_numChunks; ++c) {
        Fiber *chunk = m_chunks[c].load(std::memory_order_acquire);
        if (chunk == nullptr) {
            continue;
        }
        for (unsigned i = 0; i < kChunkSize; ++i) {
            if (chunk[i].Mapping != nullptr) {
                UnmakeFiberStack(chunk[i]);
            }
        }
        delete[] chunk;
        m_chunks[c].store(nullptr, std::memory_order_relaxed);
    }
    m_size.store(0, std::memory_order_release);
    m_fresh.store(0, std::memory_order_release);
    m_shared.Head.store(0, std::memory_order_relaxed);
    for (unsigned i = 0; i < m_numLocal; ++i) {
        m_local[i].Head.store(0, std::memory_order_relaxed);
    }
}

Fiber *FiberPool::Make(unsigned index) {
    unsigned const c = index >> kChunkShift;
    if (m_chunks[c].load(std::memory_order_acquire) == nullptr) {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_chunks[c].load(std::memory_order_relaxed) == nullptr) {
            // Release: the descriptors are constructed before any thread
            // that finds the chunk (At) reads one.
            m_chunks[c].store(new Fiber[kChunkSize], std::memory_order_release);
        }
    }
    Fiber *fiber = At(index);
    std::fenv_t callersEnv;
    std::fegetenv(&callersEnv);
    std::fesetenv(&m_initFloatEnv);
    bool const made = MakeFiberStack(*fiber, index, m_stackSize, m_guardSize, m_entry);
    std::fesetenv(&callersEnv);
    return made ? fiber : nullptr;
}

bool FiberPool::Grow() {
    unsigned const size = m_size.load(std::memory_order_relaxed);
    if (size >= m_capacity) {
        return false;
    }
    // Half the pool again (at least 16). Growing only raises the limit:
    // stacks are still made one at a time, as they are handed out.
    unsigned const extra = std::min(std::max(size / 2, 16u), m_capacity - size);
    m_size.store(size + extra, std::memory_order_release);
    return true;
}

Fiber *FiberPool::Pop(FreeList &list) {
    std::uint64_t head = list.Head.load(std::memory_order_acquire);
    for (;;) {
        auto const index = static_cast<std::uint32_t>(head & kIndexMask);
        if (index == 0) {
            return nullptr;
        }
        Fiber *fiber = At(index);
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
        if (list.Head.compare_exchange_weak(head, (tag << 32) | fiber->Index, std::memory_order_release,
                                            std::memory_order_relaxed)) {
            return;
        }
    }
}

Fiber *FiberPool::TakeFree(unsigned worker) {
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

Fiber *FiberPool::TakeFresh() {
    unsigned index = m_fresh.load(std::memory_order_relaxed);
    do {
        if (index >= m_size.load(std::memory_order_acquire)) {
            return nullptr;
        }
    } while (!m_fresh.compare_exchange_weak(index, index + 1, std::memory_order_acq_rel,
                                            std::memory_order_relaxed));
    Fiber *fiber = Make(index);
    if (fiber == nullptr) {
        FTL_FATAL(
            "the fiber pool could not make fiber %u: the system refused a stack of %zu bytes with a guard of "
            "%zu (on Linux each fiber takes up to three mappings, its guard, its stack and the gap above it; "
            "see vm.max_map_count and the memory limits)",
            index, m_stackSize, m_guardSize);
    }
    return fiber;
}

Fiber *FiberPool::AcquireFirst(unsigned worker) {
    FTL_ASSERT(worker != 0, "worker 0 runs on the Init thread's own fiber");
    if (worker < m_initialSize) {
        return At(worker); // made for this worker at Init
    }
    return Acquire(worker);
}

Fiber *FiberPool::Acquire(unsigned worker) {
    // Two passes over the lists: fibers move between them while we look, so
    // one empty pass alone does not prove the pool dry. Existing stacks
    // before a fresh one: a reused stack is warm and costs no mmap.
    for (int pass = 0; pass < 2; ++pass) {
        if (Fiber *fiber = TakeFree(worker)) {
            return fiber;
        }
    }
    if (Fiber *fiber = TakeFresh()) {
        return fiber;
    }
    if (m_policy == FiberPoolPolicy::Fatal) {
        FTL_FATAL(
            "the fiber pool ran dry: all %u fibers are in use (TaskSchedulerInitOptions::FiberPoolSize = "
            "%u, FiberPoolPolicy::Fatal). Raise FiberPoolSize, or use FiberPoolPolicy::Grow.",
            Size(), m_initialSize);
    }
    unsigned grownTo = 0;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        // Another thread may have grown the pool while we waited for the lock.
        if (m_fresh.load(std::memory_order_acquire) >= Size()) {
            if (!Grow()) {
                if (m_capacity == m_mappingCap) {
                    FTL_FATAL("the fiber pool ran dry: all %u fibers are in use, the most the system's limit "
                              "on memory mappings allows (vm.max_map_count = %zu; each fiber takes two "
                              "mappings). Raise vm.max_map_count, or make fewer tasks wait at once.",
                              Size(), MappingLimit());
                }
                FTL_FATAL(
                    "the fiber pool ran dry: all %u fibers are in use, the most FiberPoolPolicy::Grow "
                    "allows (64 x TaskSchedulerInitOptions::FiberPoolSize, at least 65,536; FiberPoolSize "
                    "= %u). Raise FiberPoolSize, or make fewer tasks wait at once.",
                    Size(), m_initialSize);
            }
            grownTo = Size();
            m_growths.fetch_add(1, std::memory_order_relaxed);
        }
    }
    if (grownTo != 0 && m_callbacks.OnFiberPoolGrown != nullptr) {
        m_callbacks.OnFiberPoolGrown(m_callbacks.Context, grownTo);
    }
    return Acquire(worker);
}

unsigned FiberPool::FreeCount() const {
    unsigned free = m_shared.Count.load(std::memory_order_relaxed);
    for (unsigned i = 0; i < m_numLocal; ++i) {
        free += m_local[i].Count.load(std::memory_order_relaxed);
    }
    return free;
}

void FiberPool::Release(Fiber *fiber, unsigned worker) {
    FTL_ASSERT(fiber != m_threadFiber0, "the Init thread's own fiber never goes back to the pool");
    FreeList &local = m_local[worker];
    Push(local.Count.load(std::memory_order_relaxed) < kLocalCap ? local : m_shared, fiber);
}

} // namespace detail
} // namespace ftl
