#include "queue/closure_pool.h"

#include <new>

namespace ftl {
namespace detail {

namespace {
constexpr std::align_val_t kChunkAlign{64};
} // namespace

ClosurePool::ClosurePool(std::size_t slotBytes) : m_slotBytes(slotBytes) {}

ClosurePool::~ClosurePool() {
    for (void *chunk : m_chunks) {
        ::operator delete(chunk, kChunkAlign);
    }
}

void ClosurePool::Init(unsigned numWorkers) {
    m_numLocal = numWorkers;
    m_local.reset(new Local[numWorkers]);
}

void *ClosurePool::NewChunk() {
    void *chunk = ::operator new(m_slotBytes *kChunkSlots, kChunkAlign);
    m_chunks.push_back(chunk);
    return chunk;
}

void ClosurePool::Refill(Local &local, unsigned count) {
    // A new chunk only when the shared list is empty: taking fewer than
    // `count` is enough, and keeps the pool from growing past what is in use
    // plus what the workers' lists hold.
    if (m_shared == nullptr) {
        auto *chunk = static_cast<unsigned char *>(NewChunk());
        for (unsigned s = 0; s < kChunkSlots; ++s) {
            auto *slot = ::new (chunk + s * m_slotBytes) FreeSlot{m_shared};
            m_shared = slot;
        }
    }
    for (unsigned i = 0; i < count && m_shared != nullptr; ++i) {
        FreeSlot *slot = m_shared;
        m_shared = slot->Next;
        slot->Next = local.Head;
        local.Head = slot;
        ++local.Count;
    }
}

void *ClosurePool::Allocate(int worker) {
    if (worker < 0) {
        std::lock_guard<std::mutex> lock(m_mutex);
        Local outside;
        Refill(outside, 1);
        return outside.Head;
    }
    Local &local = m_local[static_cast<unsigned>(worker)];
    if (local.Head == nullptr) {
        std::lock_guard<std::mutex> lock(m_mutex);
        Refill(local, kRefill);
    }
    FreeSlot *slot = local.Head;
    local.Head = slot->Next;
    --local.Count;
    return slot;
}

void ClosurePool::Free(void *memory, int worker) {
    if (worker < 0) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_shared = ::new (memory) FreeSlot{m_shared};
        return;
    }
    Local &local = m_local[static_cast<unsigned>(worker)];
    auto *slot = ::new (memory) FreeSlot{local.Head};
    local.Head = slot;
    if (++local.Count > kLocalMax) {
        // Half back to the shared list: slots drift to the workers that run
        // closures, away from those that add them.
        std::lock_guard<std::mutex> lock(m_mutex);
        while (local.Count > kLocalMax / 2) {
            FreeSlot *moved = local.Head;
            local.Head = moved->Next;
            moved->Next = m_shared;
            m_shared = moved;
            --local.Count;
        }
    }
}

std::size_t ClosurePool::Made() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_chunks.size() * kChunkSlots;
}

} // namespace detail
} // namespace ftl
