// ThreadLocal<T>: one T per worker thread of a scheduler, for fiber code.
//
// The C++ thread_local keyword is unsafe in fiber code: a task that waits may
// resume on another thread, and the compiler may keep the old thread's address.
// ThreadLocal looks the thread up on every access instead.
//
// Contract
// - Each worker's value is built on that worker's first access, by the
//   factory (or T's default constructor).
// - operator* and operator-> must be called on a worker thread of the
//   scheduler; anywhere else is a fatal error.
// - A ThreadLocalHandle caches the current thread's value: do not keep one
//   across a wait (with asserts on, using it on another thread is caught).
// - GetAllValues / GetAllValuesByRef return one value per worker thread, in
//   thread order, building (on the calling thread) the values of threads that
//   never touched theirs; ForEachValue visits the built values only. Call
//   them once the tasks that use the values have been waited for: they read
//   and build other threads' slots without synchronizing with those threads.
#pragma once

#include "ftl/assert.h"
#include "ftl/task_scheduler.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace ftl {

template <class T>
class ThreadLocal;

template <class T>
class ThreadLocalHandle {
public:
    T &operator*() const {
        CheckThread();
        return *m_value;
    }
    T *operator->() const {
        CheckThread();
        return m_value;
    }

private:
    friend class ThreadLocal<T>;
    ThreadLocalHandle(ThreadLocal<T> &parent, T &value) : m_parent(&parent), m_value(&value) {}
    void CheckThread() const {
        FTL_ASSERT(m_parent->Peek() == m_value,
                   "ThreadLocalHandle used on another thread than the one it was taken on");
    }

    ThreadLocal<T> *m_parent;
    T *m_value;
};

template <class T>
class ThreadLocal {
public:
    explicit ThreadLocal(TaskScheduler *taskScheduler) : ThreadLocal(taskScheduler, [] { return T(); }) {}

    template <class Factory>
    ThreadLocal(TaskScheduler *taskScheduler, Factory &&factory)
        : m_taskScheduler(taskScheduler), m_factory(std::forward<Factory>(factory)),
          m_count(taskScheduler->GetThreadCount()), m_slots(new Slot[m_count]) {}

    ~ThreadLocal() {
        for (std::size_t i = 0; i < m_count; ++i) {
            if (m_slots[i].Built) {
                m_slots[i].Get()->~T();
            }
        }
    }

    ThreadLocal(ThreadLocal const &) = delete;
    ThreadLocal(ThreadLocal &&) = delete;
    ThreadLocal &operator=(ThreadLocal const &) = delete;
    ThreadLocal &operator=(ThreadLocal &&) = delete;

    T &operator*() { return *Current(); }
    T *operator->() { return Current(); }
    ThreadLocalHandle<T> GetHandle() { return ThreadLocalHandle<T>(*this, *Current()); }

    // Calls f(threadIndex, value) for each value built so far.
    template <class F>
    void ForEachValue(F &&f) {
        for (std::size_t i = 0; i < m_count; ++i) {
            if (m_slots[i].Built) {
                f(static_cast<unsigned>(i), *m_slots[i].Get());
            }
        }
    }

    // Copies of every thread's value, in thread order (GetThreadCount() of them).
    std::vector<T> GetAllValues() {
        std::vector<T> values;
        values.reserve(m_count);
        for (std::size_t i = 0; i < m_count; ++i) {
            values.push_back(*Built(m_slots[i]));
        }
        return values;
    }

    // References to every thread's value, in thread order.
    std::vector<std::reference_wrapper<T>> GetAllValuesByRef() {
        std::vector<std::reference_wrapper<T>> values;
        values.reserve(m_count);
        for (std::size_t i = 0; i < m_count; ++i) {
            values.push_back(std::ref(*Built(m_slots[i])));
        }
        return values;
    }

private:
    friend class ThreadLocalHandle<T>;

    static constexpr std::size_t kAlignment = alignof(T) > 64 ? alignof(T) : 64;
    // One cache line (at least) per thread, so neighbours never share a line.
    struct alignas(kAlignment) Slot {
        alignas(T) unsigned char Storage[sizeof(T)];
        bool Built = false;
        T *Get() { return std::launder(reinterpret_cast<T *>(Storage)); }
    };
    static_assert(alignof(Slot) >= 64, "ThreadLocal slots must not share cache lines");

    Slot &CurrentSlot() {
        unsigned const index = m_taskScheduler->GetCurrentThreadIndex();
        if (index == kInvalidIndex) {
            FTL_FATAL("ThreadLocal accessed from a thread that is not a worker of its TaskScheduler");
        }
        if (index >= m_count) {
            FTL_FATAL("ThreadLocal has %zu slots but is used on worker %u: create it after "
                      "TaskScheduler::Init",
                      m_count, index);
        }
        return m_slots[index];
    }
    // The current thread's value if built, without building it.
    T *Peek() {
        Slot &slot = CurrentSlot();
        return slot.Built ? slot.Get() : nullptr;
    }
    T *Built(Slot &slot) {
        if (!slot.Built) {
            ::new (static_cast<void *>(slot.Storage)) T(m_factory());
            slot.Built = true;
        }
        return slot.Get();
    }
    T *Current() { return Built(CurrentSlot()); }

    TaskScheduler *m_taskScheduler;
    std::function<T()> m_factory;
    std::size_t m_count;
    std::unique_ptr<Slot[]> m_slots;
};

template <class Factory>
ThreadLocal(TaskScheduler *, Factory) -> ThreadLocal<std::invoke_result_t<Factory>>;

} // namespace ftl
