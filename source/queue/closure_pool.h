// The closure pool: fixed-size slots for closures queued as tasks (see
// ftl/detail/closure.h), so that adding a closure of up to kClosureSlotSize
// bytes allocates nothing once the pool is warm.
//
// The scheduler keeps a second pool, of larger slots, for the records of
// tasks after tasks (scheduler/after.cpp).
//
// Each worker keeps a free list of its own (owner only, no atomics): a task
// adding a closure takes a slot from the adding worker's list, and the
// worker that runs it puts the slot back on its own. Slots therefore drift
// from producers to consumers: a list that grows past kLocalMax hands half of
// it to a shared list (under a mutex), and a worker whose list is empty
// refills from there before the pool makes a new chunk of slots. Threads
// that are not workers take slots from the shared list. Memory stays bounded
// by the most closures ever queued at once plus the workers' lists.
#pragma once

#include "ftl/detail/closure.h"

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace ftl {
namespace detail {

class ClosurePool {
public:
    // slotBytes: a multiple of 64 (a cache line), at least kClosureSlotSize.
    explicit ClosurePool(std::size_t slotBytes = kClosureSlotBytes);
    ~ClosurePool();
    ClosurePool(ClosurePool const &) = delete;
    ClosurePool &operator=(ClosurePool const &) = delete;

    void Init(unsigned numWorkers);

    // worker: the calling thread's worker index, or -1 for any other thread.
    void *Allocate(int worker);
    // worker as for Allocate (closures run on workers; a closure whose
    // construction threw gives its slot back on the adding thread).
    void Free(void *slot, int worker);

    // Slots made so far (for tests: a warm pool stops growing).
    std::size_t Made() const;

    static constexpr std::size_t kClosureSlotBytes = 64; // kClosureSlotSize, rounded to a cache line

private:
    static constexpr unsigned kChunkSlots = 64;
    static constexpr unsigned kLocalMax = 256;
    static constexpr unsigned kRefill = 32;
    static_assert(kClosureSlotSize <= kClosureSlotBytes && kClosureSlotBytes % kClosureSlotAlign == 0,
                  "a slot holds kClosureSlotSize bytes at kClosureSlotAlign");

    struct FreeSlot {
        FreeSlot *Next;
    };
    struct alignas(64) Local {
        FreeSlot *Head = nullptr;
        unsigned Count = 0;
    };

    // Under m_mutex: `count` slots from the shared list (making a chunk if
    // need be) onto `local`.
    void Refill(Local &local, unsigned count);
    void *NewChunk();

    std::size_t m_slotBytes;
    std::unique_ptr<Local[]> m_local;
    unsigned m_numLocal = 0;
    mutable std::mutex m_mutex;
    FreeSlot *m_shared = nullptr;
    std::vector<void *> m_chunks;
};

} // namespace detail
} // namespace ftl
