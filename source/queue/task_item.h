// A queued unit of work: a task with its counter, or a ready fiber to resume
// (Function == nullptr, the fiber in Arg).
#pragma once

#include "ftl/task.h"

#include <atomic>

namespace ftl {

class TaskCounter;

namespace detail {

struct Fiber;

struct TaskItem {
    TaskFunction Function = nullptr;
    void *Arg = nullptr;
    TaskCounter *Counter = nullptr;

    static TaskItem ReadyFiber(Fiber *fiber) { return TaskItem{nullptr, fiber, nullptr}; }
    bool IsReadyFiber() const { return Function == nullptr; }
    Fiber *AsFiber() const { return static_cast<Fiber *>(Arg); }
};

// A deque cell holding a TaskItem as three relaxed atomics (see work_deque.h).
struct TaskCell {
    std::atomic<TaskFunction> Function{nullptr};
    std::atomic<void *> Arg{nullptr};
    std::atomic<TaskCounter *> Counter{nullptr};

    void Store(TaskItem const &item) {
        Function.store(item.Function, std::memory_order_relaxed);
        Arg.store(item.Arg, std::memory_order_relaxed);
        Counter.store(item.Counter, std::memory_order_relaxed);
    }
    TaskItem Load() const {
        return TaskItem{Function.load(std::memory_order_relaxed), Arg.load(std::memory_order_relaxed),
                        Counter.load(std::memory_order_relaxed)};
    }
};

} // namespace detail
} // namespace ftl
