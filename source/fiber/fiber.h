// The fiber layer: a fiber is a stack of its own (with a guard below it)
// and a saved context. Switching fibers is one jump that carries a
// message to the other side; what must happen to
// the fiber left (back to the pool, or published as a waiter) is the
// scheduler's post-switch step, done by the fiber switched to once the switch
// has completed (docs/design.adoc, invariant 1). This layer calls nothing of
// the scheduler: it makes stacks, switches, and tells sanitizers and valgrind.
// The descriptor also carries four fields of the scheduler's (each marked
// so), so that all of a fiber's state is one descriptor of two cache lines;
// this layer never reads them.
//
// Two backends, chosen at configure time (FTL_FIBER_BACKEND):
// - switch_boost.cpp: Boost.Context's fcontext on stacks from MapStack;
// - switch_win32.cpp: the Win32 fiber API (CreateFiberEx, SwitchToFiber),
//   where the system makes each stack, for Windows builds without Boost.
//
// Fiber state machine (every change goes through Fiber::Transition, which
// aborts when the fiber was not in the state the caller expects):
//
//   Free --acquire+switch--> Running --wait--> Waiting --target reached--> Ready
//    ^                        |  ^                                            |
//    +------ReturnToPool------+  +-----------------resume---------------------+
//
// A thread's own fiber (the stack the thread started on) is never Free: it is
// Running, Waiting or Ready, and it only ever runs on its own thread.
#pragma once

#if !FTL_FIBER_WIN32
#include <boost/context/detail/fcontext.hpp>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ftl {
namespace detail {

class Worker;
struct InlineHand;
struct WaitNode;

enum class FiberState : std::uint8_t { Free, Running, Waiting, Ready };

// Where a new fiber starts, with the message of the first switch into it. It
// never returns.
using FiberEntry = void (*)(void *message);

// Cache-line aligned: descriptors sit side by side in the pool's chunks, and
// each is written by the worker running it (at every switch, and by every
// inline loop on it): neighbours must not share a line.
struct alignas(64) Fiber {
    // Two cache lines, packed: keep it so (the static_assert below).
#if FTL_FIBER_WIN32
    // The system's fiber (ConvertThreadToFiberEx for a thread's own stack).
    void *Context = nullptr;
#else
    // Valid while the fiber is not running: where jump_fcontext resumes it.
    boost::context::detail::fcontext_t Context = nullptr;
#endif
    // The scheduler's: the worker the fiber runs on now, written at every
    // switch into it.
    Worker *CurrentWorker = nullptr;

    // Pool fibers: the memory of the stack, guard and gap included (Win32: the
    // system's fiber, which owns its stack). nullptr for a thread's stack.
    void *Mapping = nullptr;
#if FTL_FIBER_WIN32
    // The message of the switch into this fiber, written by the fiber that
    // switches, read when this one resumes (switch_win32.cpp).
    void *Incoming = nullptr;
#else
    std::size_t MappingSize = 0;
#endif
    void *StackLow = nullptr; // lowest usable address
    std::size_t StackSize = 0;
    FiberEntry Entry = nullptr;

    unsigned Index = 0; // pool index (fiber_pool.h: 0 is the Init thread's own stack)
    bool IsThreadFiber = false;
    // Whether EventCallbacks hear of this fiber's attach and detach: all but
    // the own stacks of worker threads 1..n-1, which only start a pool fiber
    // and take the thread back at the end (each worker thread attaches one
    // fiber when it starts, as in the lineage).
    bool Reported = true;
    std::atomic<FiberState> State{FiberState::Free};
    // The lowest address this fiber's frames may reach: StackLow for a pool
    // fiber, the thread stack's low end for a thread fiber (0: unknown).
    std::uintptr_t StackFloor = 0;
    // The scheduler's: helping while waiting (scheduler/help.h): the innermost hand of
    // children an inline loop running on this fiber holds; nullptr when no
    // inline loop runs on it. While it is set, the fiber runs a task, even a
    // thread's own fiber.
    InlineHand *Hand = nullptr;

    // Intrusive links: the pool's free lists (the next fiber's index; 0, the
    // Init thread's own fiber, is never on a list, so it marks the end) and a
    // worker's pinned-fiber inbox.
    Fiber *NextReady = nullptr;
    std::atomic<std::uint32_t> NextFree{0};

    // Sanitizer and valgrind bookkeeping (unused in other builds).
    unsigned ValgrindStackId = 0;
    void *AsanFakeStack = nullptr;
    void *TsanFiber = nullptr;

    // The scheduler's: what the list of parked fibers reads (TaskScheduler::GetWaitingFibers):
    // the node of the wait the fiber is parked in (set, release, before it
    // leaves its thread; cleared when it runs again, then a release fence,
    // so a reader that re-checks it after an acquire fence drops a copy
    // torn by the resumed fiber: see Park), and the item the fiber's worker
    // loop runs (a TaskItem, on the fiber's own stack; null on a thread's
    // own fiber).
    std::atomic<WaitNode const *> ParkedOn{nullptr};
    void const *LoopItem = nullptr;

    void Transition(FiberState from, FiberState to) {
        // Relaxed: each change is ordered by the queue or list hand-off that
        // passes the fiber between threads; the value is for checking only.
        FiberState const was = State.load(std::memory_order_relaxed);
        if (was != from) {
            BadTransition(from, to, was);
        }
        State.store(to, std::memory_order_relaxed);
    }
    [[noreturn, gnu::cold]] void BadTransition(FiberState from, FiberState to, FiberState was) const;
};

static_assert(sizeof(Fiber) == 128, "a fiber descriptor takes two cache lines");

// The backends' shared part of MakeFiberStack and AdoptThreadStack: the
// descriptor's fields that do not depend on how fibers switch.
void DescribePoolFiber(Fiber &fiber, unsigned index, FiberEntry entry);
void DescribeThreadFiber(Fiber &fiber, unsigned index, bool reported);

// Makes a pool fiber's stack and context, with a guard of guardSize bytes
// below the stack (MapStack); it starts at `entry`. False when the memory
// could not be had.
bool MakeFiberStack(Fiber &fiber, unsigned index, std::size_t stackSize, std::size_t guardSize,
                    FiberEntry entry);
void UnmakeFiberStack(Fiber &fiber);
// Makes `fiber` stand for the calling thread's own stack, with pool index
// `index`; `reported` as in Fiber::Reported.
void AdoptThreadStack(Fiber &fiber, unsigned index, bool reported);
void ReleaseThreadStack(Fiber &fiber);

// A new pool fiber starts with the floating-point control state (rounding
// mode, flush-to-zero) of the thread that last called this, Init's thread,
// and not with that of whichever fiber makes it (the pool makes stacks
// lazily, from a running task).
void RememberNewFiberFpControl();
// Called first thing on each new fiber by the backends' entry points.
void LoadNewFiberFpControl();

// Switches from `from` (the running fiber) to `to`, handing `message` to the
// other side. Returns when `from` is resumed (possibly on another thread),
// with the message of the switch that resumed it.
void *SwitchFiber(Fiber *from, Fiber *to, void *message);

// Where a fault address lies relative to a fiber's stack: below a pool
// fiber's stack (its guard, or just under it: a frame larger than the guard
// can step over it into the gap above the stack below), or below a thread's
// stack (the kernel's stack guard gap for the main thread, glibc's guard page
// otherwise).
enum class StackFault { None, PoolGuard, ThreadGuard };
StackFault ClassifyFault(Fiber const &fiber, std::uintptr_t address);

} // namespace detail
} // namespace ftl
