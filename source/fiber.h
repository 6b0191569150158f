// A fiber: a stack of its own (mmap, with a guard page below it) and a saved
// Boost.Context fcontext. Switching fibers is one jump_fcontext; what must
// happen to the fiber we left (back to the pool, or published as a waiter)
// is done by the fiber we switched to, once the switch has completed.
//
// Fiber state machine (every change goes through Fiber::Transition, which
// asserts the state it leaves):
//
//   Free --acquire+switch--> Running --wait--> Waiting --counter reached--> Ready
//    ^                        |  ^                                            |
//    +------ReturnToPool------+  +-----------------resume---------------------+
//
// A worker thread's own fiber (the stack the thread started on) is never
// Free: it is Running, Waiting or Ready, and it only ever runs on its thread.
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ftl {
namespace detail {

class Worker;
struct WaitNode;

enum class FiberState : std::uint8_t { Free, Running, Waiting, Ready };

struct InlineHand;

struct Fiber {
    // Valid while the fiber is not running: where jump_fcontext resumes it.
    boost::context::detail::fcontext_t Context = nullptr;
    // The worker the fiber runs on now; written at every switch into it.
    Worker *CurrentWorker = nullptr;

    void *Mapping = nullptr; // the whole mmap, guard page included (pool fibers)
    std::size_t MappingSize = 0;
    void *StackLow = nullptr; // lowest usable address
    std::size_t StackSize = 0;

    unsigned Index = 0; // pool index (see fiber_pool.h: 0 is the Init thread's own stack)
    // The lowest address this fiber's frames may reach: StackLow for a pool
    // fiber, the thread stack's low end for a thread fiber (0: unknown).
    std::uintptr_t StackFloor = 0;
    // Inline loops (Scheduler::RunChildrenInline) running on this fiber, one
    // inside the other: above 0, the fiber runs a task even if it is a
    // thread's own fiber.
    unsigned InlineDepth = 0;
    // The innermost inline loop's hand of children taken but not yet run
    // (see Scheduler::RunChildrenInline); a wait puts them back first.
    InlineHand *Hand = nullptr;
    bool IsThreadFiber = false;
    // Whether EventCallbacks hear of this fiber's attach and detach: all but
    // the own stacks of worker threads 1..n-1, which only start a pool fiber
    // and take the thread back at the end (each worker thread attaches one
    // fiber when it starts, as in the lineage).
    bool Reported = true;
    std::atomic<FiberState> State{FiberState::Free};

    // Intrusive links: the pool's free lists (the next fiber's index; 0, the
    // Init thread's own fiber, is never on a list, so it marks the end) and a
    // worker's pinned-fiber inbox.
    std::atomic<std::uint32_t> NextFree{0};
    Fiber *NextReady = nullptr;

    // Sanitizer bookkeeping (unused in other builds).
    void *AsanFakeStack = nullptr;
    void *TsanFiber = nullptr;
    unsigned ValgrindStackId = 0;

    void Transition(FiberState from, FiberState to);
};

// Creates a pool fiber's stack and context. Returns false when the memory
// could not be had.
bool CreatePoolFiber(Fiber &fiber, unsigned index, std::size_t stackSize,
                     void (*entry)(boost::context::detail::transfer_t));
void DestroyPoolFiber(Fiber &fiber);
// Makes `fiber` stand for the calling thread's own stack, with pool index
// `index`; `reported` as in Fiber::Reported.
void InitThreadFiber(Fiber &fiber, unsigned index, bool reported);
void DestroyThreadFiber(Fiber &fiber);

// What the fiber switched to does with the fiber switched from.
enum class AfterSwitch : std::uint8_t {
    Started,      // a worker thread's own fiber handed the thread to the worker's first fiber:
                  // the worker is up (Init waits for every worker's)
    ReturnToPool, // the fiber left is idle: back to the free list
    Park,         // the fiber left waits: publish it as a waiter
};

// Everything the other side of a switch needs. It lives on the stack of the
// fiber being left, which stays valid until the post-switch step publishes
// that fiber; the step copies what it needs first.
struct SwitchRecord {
    Fiber *From;
    Fiber *To;
    Worker *OnWorker;
    AfterSwitch Action;
    // Park only: registers Node on Waitable's list unless the condition it
    // waits for already holds (then returns false and the fiber is readied).
    bool (*Register)(void *waitable, WaitNode *node);
    void *Waitable;
    WaitNode *Node;
};

// Switches from record.From (the running fiber) to record.To. Returns when
// record.From is resumed, with the worker it now runs on.
Worker *SwitchFiber(SwitchRecord &record);
// The receiving half of a switch; the entry of a new fiber calls it first.
Worker *FinishSwitch(boost::context::detail::transfer_t transfer);

} // namespace detail
} // namespace ftl
