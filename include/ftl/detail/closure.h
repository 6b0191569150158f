// Internal: how a closure rides in the scheduler's queues (TaskScheduler's
// AddTask/AddTasks/AddPinnedTask templates). Nothing here is API.
//
// A queued closure is an invoker (one instantiation per closure type) and a
// pointer-sized argument. Where the closure itself lives:
// - trivially copyable and no larger than a pointer (a lambda capturing one
//   reference, or `this`): in the argument itself, copied by value;
// - up to kClosureSlotSize bytes (alignment up to kClosureSlotAlign): moved
//   into a slot of the scheduler's closure pool, which keeps per-worker free
//   lists, so adding such a closure allocates nothing once the lists are
//   warm; the invoker destroys it and returns the slot after the call;
// - larger: on the heap, deleted after the call.
// AddTasks(count, f) shares one copy of f between its count tasks: in the
// argument when it fits there, else with a count of the tasks still to run
// (the last one destroys it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace ftl {

class TaskScheduler;

namespace detail {

// Runs a queued closure: `arg` as it was queued, `index` the task's index in
// its AddTasks call (0 for AddTask). With kSkipTask set in `index`, the task
// was cancelled (TaskCounter::Cancel): the invoker destroys the closure, or
// does its share of that, without calling it.
using ClosureInvoker = void (*)(TaskScheduler *taskScheduler, void *arg, unsigned index);
// Above any index: a count passes no TaskCounter::kMaxCount.
constexpr unsigned kSkipTask = 0x80000000u;

constexpr std::size_t kClosureSlotSize = 48;
constexpr std::size_t kClosureSlotAlign = 16;

// A slot of kClosureSlotSize bytes from the scheduler's closure pool, and its
// return. Any thread may allocate; FreeClosureSlot runs on a worker.
void *AllocateClosureSlot(TaskScheduler *taskScheduler);
void FreeClosureSlot(TaskScheduler *taskScheduler, void *slot) noexcept;

template <class Fn>
constexpr bool kFitsInArg = std::is_trivially_copyable<Fn>::value && sizeof(Fn) <= sizeof(void *) &&
                            alignof(Fn) <= alignof(void *);
template <class Fn>
constexpr bool kFitsInSlot = sizeof(Fn) <= kClosureSlotSize && alignof(Fn) <= kClosureSlotAlign;

// What AddTask accepts: called as f() or f(TaskScheduler *).
template <class Fn>
constexpr bool kIsTaskClosure =
    std::is_invocable<Fn &>::value || std::is_invocable<Fn &, TaskScheduler *>::value;
// What AddTasks accepts: called as f(i) or f(TaskScheduler *, i).
template <class Fn>
constexpr bool kIsIndexedClosure =
    std::is_invocable<Fn &, unsigned>::value || std::is_invocable<Fn &, TaskScheduler *, unsigned>::value;

// Calls a closure: an AddTasks one (Indexed) as f(i) or f(TaskScheduler *, i),
// an AddTask one as f() or f(TaskScheduler *).
template <bool Indexed, class Fn>
void Call(Fn &fn, TaskScheduler *taskScheduler, unsigned index) {
    if constexpr (Indexed) {
        if constexpr (std::is_invocable<Fn &, unsigned>::value) {
            fn(index);
        } else {
            fn(taskScheduler, index);
        }
    } else {
        (void)index;
        if constexpr (std::is_invocable<Fn &>::value) {
            fn();
        } else {
            fn(taskScheduler);
        }
    }
}

// The closure's bytes in a pointer-sized argument.
template <class Fn>
void *PackArg(Fn const &fn) {
    void *arg = nullptr;
    std::memcpy(static_cast<void *>(&arg), static_cast<void const *>(std::addressof(fn)), sizeof(Fn));
    return arg;
}

template <bool Indexed, class Fn>
void InvokeInArg(TaskScheduler *taskScheduler, void *arg, unsigned index) {
    if ((index & kSkipTask) != 0) {
        return; // trivially copyable: nothing to destroy
    }
    alignas(Fn) unsigned char bytes[sizeof(Fn)];
    std::memcpy(bytes, static_cast<void const *>(&arg), sizeof(Fn));
    Call<Indexed>(*std::launder(reinterpret_cast<Fn *>(bytes)), taskScheduler, index);
}

template <class Fn>
void InvokeInSlot(TaskScheduler *taskScheduler, void *slot, unsigned index) {
    // Destroyed and returned whether the call returns or throws.
    struct Release {
        TaskScheduler *Scheduler;
        Fn *Closure;
        ~Release() {
            Closure->~Fn();
            FreeClosureSlot(Scheduler, Closure);
        }
    } const release{taskScheduler, std::launder(static_cast<Fn *>(slot))};
    if ((index & kSkipTask) == 0) {
        Call<false>(*release.Closure, taskScheduler, index);
    }
}

template <class Fn>
void InvokeOnHeap(TaskScheduler *taskScheduler, void *closure, unsigned index) {
    std::unique_ptr<Fn> const owner(static_cast<Fn *>(closure));
    if ((index & kSkipTask) == 0) {
        Call<false>(*owner, taskScheduler, index);
    }
}

// One closure shared by the tasks of an AddTasks call.
template <class Fn>
struct SharedClosure {
    Fn Closure;
    std::atomic<unsigned> Remaining;
};

template <class Fn>
void InvokeShared(TaskScheduler *taskScheduler, void *shared, unsigned index) {
    struct Release {
        TaskScheduler *Scheduler;
        SharedClosure<Fn> *Shared;
        ~Release() {
            // acq_rel: every task's use of the closure happens before the
            // last one destroys it.
            if (Shared->Remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                if constexpr (kFitsInSlot<SharedClosure<Fn>>) {
                    Shared->~SharedClosure<Fn>();
                    FreeClosureSlot(Scheduler, Shared);
                } else {
                    delete Shared;
                }
            }
        }
    } const release{taskScheduler, static_cast<SharedClosure<Fn> *>(shared)};
    if ((index & kSkipTask) == 0) {
        Call<true>(release.Shared->Closure, taskScheduler, index);
    }
}

// Frees a slot unless dismissed: a closure whose construction throws gives
// its slot back.
struct SlotGuard {
    TaskScheduler *Scheduler;
    void *Slot;
    ~SlotGuard() {
        if (Slot != nullptr) {
            FreeClosureSlot(Scheduler, Slot);
        }
    }
};

// The invoker and argument that queue `f` as a single task.
template <class F>
std::pair<ClosureInvoker, void *> PackClosure(TaskScheduler *taskScheduler, F &&f) {
    using Fn = std::decay_t<F>;
    if constexpr (kFitsInArg<Fn>) {
        return {&InvokeInArg<false, Fn>, PackArg(f)};
    } else if constexpr (kFitsInSlot<Fn>) {
        SlotGuard guard{taskScheduler, AllocateClosureSlot(taskScheduler)};
        void *const slot = ::new (guard.Slot) Fn(std::forward<F>(f));
        guard.Slot = nullptr;
        return {&InvokeInSlot<Fn>, slot};
    } else {
        return {&InvokeOnHeap<Fn>, new Fn(std::forward<F>(f))};
    }
}

// The invoker and argument that queue `count` tasks of `f`.
template <class F>
std::pair<ClosureInvoker, void *> PackSharedClosure(TaskScheduler *taskScheduler, unsigned count, F &&f) {
    using Fn = std::decay_t<F>;
    using Shared = SharedClosure<Fn>;
    if constexpr (kFitsInArg<Fn>) {
        return {&InvokeInArg<true, Fn>, PackArg(f)};
    } else if constexpr (kFitsInSlot<Shared>) {
        SlotGuard guard{taskScheduler, AllocateClosureSlot(taskScheduler)};
        void *const slot = ::new (guard.Slot) Shared{Fn(std::forward<F>(f)), {count}};
        guard.Slot = nullptr;
        return {&InvokeShared<Fn>, slot};
    } else {
        return {&InvokeShared<Fn>, new Shared{Fn(std::forward<F>(f)), {count}}};
    }
}

} // namespace detail
} // namespace ftl
