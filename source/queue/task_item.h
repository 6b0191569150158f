// A queued unit of work: a task with its counter, a closure (a task whose
// Function is a ClosureInvoker, see ftl/detail/closure.h), or a ready fiber
// to resume (Function == nullptr, the fiber in Arg).
#pragma once

#include "ftl/detail/closure.h"
#include "ftl/task.h"

#include <atomic>
#include <cstdint>

namespace ftl {

class TaskCounter;

namespace detail {

struct Fiber;

struct TaskItem {
    // A lineage task: Function(taskScheduler, Arg). A closure: Function holds
    // its ClosureInvoker, called as invoker(taskScheduler, Arg, index).
    TaskFunction Function = nullptr;
    void *Arg = nullptr;
    TaskCounter *Counter = nullptr;
    // kClosure for a closure, its index in the low 32 bits, and for every
    // task its depth (Depth) in bits 32-47; 0 for a ready fiber.
    std::uint64_t Extra = 0;

    static constexpr std::uint64_t kClosure = std::uint64_t(1) << 63;
    static constexpr unsigned kDepthShift = 32;
    static constexpr unsigned kMaxDepth = 0xffff;

    static TaskItem ReadyFiber(Fiber *fiber) { return TaskItem{nullptr, fiber, nullptr, 0}; }
    static TaskItem Closure(ClosureInvoker invoker, void *arg, TaskCounter *counter, unsigned index) {
        // A function pointer survives the round trip through another function
        // pointer type (void (*)() is the one every type may cast through);
        // it is called only through its own (see Invoker).
        return TaskItem{reinterpret_cast<TaskFunction>(reinterpret_cast<void (*)()>(invoker)), arg, counter,
                        kClosure | index};
    }
    bool IsReadyFiber() const { return Function == nullptr; }
    bool IsClosure() const { return (Extra & kClosure) != 0; }
    // How deep in the tree of tasks adding tasks this one is (FiberPressure):
    // 0 for a task an outside thread added, else its adder's depth + 1
    // (kMaxDepth at most).
    unsigned Depth() const { return static_cast<unsigned>(Extra >> kDepthShift) & kMaxDepth; }
    // The bits of Extra that say `depth`, for a task made without them.
    static std::uint64_t DepthBits(unsigned depth) {
        return std::uint64_t{depth < kMaxDepth ? depth : kMaxDepth} << kDepthShift;
    }
    Fiber *AsFiber() const { return static_cast<Fiber *>(Arg); }
    ClosureInvoker Invoker() const {
        return reinterpret_cast<ClosureInvoker>(reinterpret_cast<void (*)()>(Function));
    }
    unsigned Index() const { return static_cast<unsigned>(Extra); }
};

// A deque cell holding a TaskItem as relaxed atomics (see work_deque.h).
struct TaskCell {
    std::atomic<TaskFunction> Function{nullptr};
    std::atomic<void *> Arg{nullptr};
    std::atomic<TaskCounter *> Counter{nullptr};
    std::atomic<std::uint64_t> Extra{0};

    void Store(TaskItem const &item) {
        Function.store(item.Function, std::memory_order_relaxed);
        Arg.store(item.Arg, std::memory_order_relaxed);
        Counter.store(item.Counter, std::memory_order_relaxed);
        Extra.store(item.Extra, std::memory_order_relaxed);
    }
    TaskItem Load() const {
        return TaskItem{Function.load(std::memory_order_relaxed), Arg.load(std::memory_order_relaxed),
                        Counter.load(std::memory_order_relaxed), Extra.load(std::memory_order_relaxed)};
    }
};

} // namespace detail
} // namespace ftl
