// A Chase-Lev work-stealing deque (Chase & Lev 2005, with the C11 memory
// orders of Le, Pop, Cohen & Zappa Nardelli, PPoPP 2013).
//
// The owner pushes and pops at the bottom (LIFO); any thread steals at the
// top (FIFO). Push, Pop and Steal take no lock and, but for growth, allocate
// nothing. The buffer doubles when full; old buffers are kept until the deque
// is destroyed, because a thief may still be reading one.
//
// Cells are atomics accessed relaxed: a thief may read a cell the owner is
// about to overwrite after a wrap-around, and the CAS on m_top then fails, so
// the torn value is never used; making the cells atomic keeps that race
// defined (and visible to TSan as benign).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ftl {
namespace detail {

template <class T, class Cell>
class WorkDeque {
public:
    explicit WorkDeque(std::size_t initialCapacity = 256) {
        m_array.store(NewArray(initialCapacity), std::memory_order_relaxed);
    }
    ~WorkDeque() {
        delete m_array.load(std::memory_order_relaxed);
        for (Array *old : m_retired) {
            delete old;
        }
    }
    WorkDeque(WorkDeque const &) = delete;
    WorkDeque &operator=(WorkDeque const &) = delete;

    // Owner only.
    void Push(T const &item) {
        std::int64_t const b = m_bottom.load(std::memory_order_relaxed);
        std::int64_t const t = m_top.load(std::memory_order_acquire);
        Array *array = m_array.load(std::memory_order_relaxed);
        if (b - t > static_cast<std::int64_t>(array->Mask)) {
            array = Grow(array, t, b);
        }
        array->At(b).Store(item);
        // Release: a thief that reads the new bottom also reads the cell (and
        // everything the pusher wrote before, e.g. the task's argument).
        m_bottom.store(b + 1, std::memory_order_release);
    }

    // Owner only. Pushes `count` items with one publication of m_bottom.
    // `beforeVisible` runs once the items are written and before any thief
    // can see them; an allocation that throws does so before either.
    struct Nothing {
        void operator()() const {}
    };
    template <class Make, class BeforeVisible = Nothing>
    void PushBatch(std::size_t count, Make &&make, BeforeVisible &&beforeVisible = BeforeVisible{}) {
        std::int64_t const b = m_bottom.load(std::memory_order_relaxed);
        std::int64_t const t = m_top.load(std::memory_order_acquire);
        Array *array = m_array.load(std::memory_order_relaxed);
        while (b - t + static_cast<std::int64_t>(count) > static_cast<std::int64_t>(array->Mask) + 1) {
            array = Grow(array, t, b);
        }
        auto const ring = array->View();
        for (std::size_t i = 0; i < count; ++i) {
            ring.At(b + static_cast<std::int64_t>(i)).Store(make(i));
        }
        beforeVisible();
        m_bottom.store(b + static_cast<std::int64_t>(count), std::memory_order_release);
    }

    // Owner only: the most recently pushed item.
    bool Pop(T &out) {
        // Empty without the fence: only the owner moves m_bottom, and m_top
        // only grows, so a top read at or past the bottom cannot be stale in
        // the direction that matters.
        if (m_top.load(std::memory_order_relaxed) >= m_bottom.load(std::memory_order_relaxed)) {
            return false;
        }
        std::int64_t const b = m_bottom.load(std::memory_order_relaxed) - 1;
        Array *array = m_array.load(std::memory_order_relaxed);
        // Relaxed: a thief that reads it synchronizes with the last Push, as
        // the owner's later stores extend that Push's release sequence in C++17
        // (not in C++20, which would need release here; arm64 keeps it anyway).
        m_bottom.store(b, std::memory_order_relaxed);
        // The bottom store before the top load, or a thief and the owner could
        // both take the last item (store-load order, which neither x86 nor
        // arm64 keeps unfenced). Pairs with the fence in Steal.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        std::int64_t t = m_top.load(std::memory_order_relaxed);
        if (t > b) {
            // Relaxed: the fence above is also a release fence, so a thief
            // that reads this store synchronizes with it (and every Push).
            m_bottom.store(b + 1, std::memory_order_relaxed);
            return false;
        }
        out = array->At(b).Load();
        if (t == b) {
            // The last item: race the thieves for it through m_top.
            bool const won =
                m_top.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed);
            m_bottom.store(b + 1, std::memory_order_relaxed);
            return won;
        }
        return true;
    }

    // Owner only: up to `max` of the most recently pushed items, newest first
    // in `out`, with one fence for all of them; at most half of what the
    // deque held when the batch was sized (but at least one), so thieves
    // still find the rest. (Thieves stealing meanwhile can leave the batch
    // more than half of what is left, or all of it on the contested path.)
    // Returns how many were taken. source/models/deque.pml checks it against
    // concurrent thieves.
    //
    // Why the range [nb, b) is the owner's when the top read after the fence
    // is below nb: a thief takes index i only by reading m_top == i and then,
    // after its fence, a bottom above i. A thief that reads m_top >= nb does
    // so after our read of a smaller top, hence after our fence, and so reads
    // bottom <= nb. Only the item at the top read, if it lies in the range,
    // may also be taken by a thief that read the old bottom: we race for it
    // with a CAS, as Pop does for the last item, and the range above it is
    // ours again by the same argument.
    std::size_t PopBatch(T *out, std::size_t max) {
        std::int64_t const b = m_bottom.load(std::memory_order_relaxed);
        std::int64_t t = m_top.load(std::memory_order_relaxed);
        if (t >= b) {
            return 0;
        }
        std::int64_t k = (b - t) / 2;
        if (k < 1) {
            k = 1;
        }
        if (k > static_cast<std::int64_t>(max)) {
            k = static_cast<std::int64_t>(max);
        }
        std::int64_t const nb = b - k;
        Array *array = m_array.load(std::memory_order_relaxed);
        m_bottom.store(nb, std::memory_order_relaxed);
        // As in Pop: the bottom store before the top load (pairs with the
        // fence in Steal); the restores below rely on it as a release fence.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        t = m_top.load(std::memory_order_relaxed);
        std::size_t n = 0;
        if (t < nb) {
            for (std::int64_t i = b - 1; i >= nb; --i) {
                out[n++] = array->At(i).Load();
            }
            return n;
        }
        // Thieves reached the range: [t, b) is left, and the item at t is
        // contested. Afterwards the deque is empty.
        if (t < b) {
            for (std::int64_t i = b - 1; i > t; --i) {
                out[n++] = array->At(i).Load();
            }
            std::int64_t const contested = t;
            T const last = array->At(contested).Load();
            if (m_top.compare_exchange_strong(t, contested + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                out[n++] = last;
            }
            m_bottom.store(contested + 1, std::memory_order_relaxed);
        } else {
            m_bottom.store(b, std::memory_order_relaxed);
        }
        return n;
    }

    // Any thread: the oldest item. Retries while it loses races and items remain.
    bool Steal(T &out) {
        for (;;) {
            std::int64_t t = m_top.load(std::memory_order_acquire);
            // The top load before the bottom load. Pairs with the owner's
            // fence in Pop / PopBatch: either this thief sees the owner's
            // lowered bottom, or the owner's top load sees at least the top
            // read here; so an item both may take is the one at that top,
            // which the CAS on top gives to one of them.
            std::atomic_thread_fence(std::memory_order_seq_cst);
            std::int64_t const b = m_bottom.load(std::memory_order_acquire);
            if (t >= b) {
                return false;
            }
            Array *array = m_array.load(std::memory_order_acquire);
            T item = array->At(t).Load();
            if (m_top.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                              std::memory_order_relaxed)) {
                out = item;
                return true;
            }
        }
    }

    // Any thread: how many items the deque held at some moment of the call
    // (0 when it looked empty); a hint for sizing a batch of Steals.
    std::int64_t SizeHint() const {
        std::int64_t const t = m_top.load(std::memory_order_relaxed);
        std::int64_t const b = m_bottom.load(std::memory_order_relaxed);
        return b > t ? b - t : 0;
    }

    // Any thread; a snapshot that may be stale by the time it is used. Callers
    // that decide to sleep on it order it after their announcement with a
    // seq_cst fence (see IdleState::Park). It costs no fence, so thieves and
    // the owner check it before a Steal: m_top only grows, so a stale read
    // errs towards "not empty", where Steal's own check decides.
    bool LooksEmpty() const {
        std::int64_t const t = m_top.load(std::memory_order_acquire);
        std::int64_t const b = m_bottom.load(std::memory_order_acquire);
        return t >= b;
    }

private:
    struct Array {
        std::size_t Mask;
        std::unique_ptr<Cell[]> Cells;
        Cell &At(std::int64_t i) { return Cells[static_cast<std::size_t>(i) & Mask]; }
        // The cells and mask as values, for a loop that stores to cells: the
        // compiler reloads both after each atomic store otherwise.
        struct Ring {
            Cell *Cells;
            std::size_t Mask;
            Cell &At(std::int64_t i) const { return Cells[static_cast<std::size_t>(i) & Mask]; }
        };
        Ring View() { return Ring{Cells.get(), Mask}; }
    };
    static Array *NewArray(std::size_t capacity) {
        std::size_t size = 1;
        while (size < capacity) {
            size <<= 1;
        }
        return new Array{size - 1, std::unique_ptr<Cell[]>(new Cell[size])};
    }
    // Strong exception guarantee: if an allocation throws, the deque is as
    // it was. Out of line: the pushes that inline the rest keep their
    // registers for the common case, where the array has room.
    [[gnu::cold, gnu::noinline]] Array *Grow(Array *old, std::int64_t top, std::int64_t bottom) {
        std::unique_ptr<Array> bigger(NewArray((old->Mask + 1) * 2));
        for (std::int64_t i = top; i < bottom; ++i) {
            bigger->At(i).Store(old->At(i).Load());
        }
        m_retired.push_back(old);
        m_array.store(bigger.get(), std::memory_order_release);
        return bigger.release();
    }

    // Owner-written and thief-written ends on separate cache lines.
    alignas(64) std::atomic<std::int64_t> m_top{0};
    alignas(64) std::atomic<std::int64_t> m_bottom{0};
    std::atomic<Array *> m_array{nullptr};
    std::vector<Array *> m_retired;
};

// A cell holding one pointer.
template <class P>
struct PointerCell {
    std::atomic<P> Value{nullptr};
    void Store(P p) { Value.store(p, std::memory_order_relaxed); }
    P Load() const { return Value.load(std::memory_order_relaxed); }
};

} // namespace detail
} // namespace ftl
