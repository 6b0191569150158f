// A worker: one OS thread's share of the scheduler. Fields the owner alone
// touches come first; fields other threads read or write sit on cache lines
// of their own.
#pragma once

#include "fault.h"
#include "fiber.h"
#include "fiber_inbox.h"
#include "task_item.h"
#include "work_deque.h"

#include <atomic>
#include <cstdint>
#include <thread>

namespace ftl {
namespace detail {

class Scheduler;

// Tuning constants. Each says where it comes from.
// 128 items a tick before maintenance: Tokio's and Volt's BUDGET_PER_TICK.
constexpr unsigned kBudgetPerTick = 128;
// Global-queue check interval bounds and the latency target it is derived
// from (interval = target / average task time), from Volt.
constexpr unsigned kMinGlobalInterval = 8;
constexpr unsigned kMaxGlobalInterval = 255;
constexpr std::uint64_t kGlobalQueueLatencyNs = 1000000;
constexpr std::uint64_t kInitialAvgTaskNs = 50000;
// With AdaptiveGlobalInterval off: a fixed interval in the same range.
constexpr unsigned kFixedGlobalInterval = 31;
// A wait runs its children inline only while at least 3/4 of FiberStackSize
// is free on the waiting fiber: every task starts with that much stack or more
// (a task on a fresh fiber has all of it, less the worker loop's frames).
constexpr unsigned kInlineStackShareNum = 3;
constexpr unsigned kInlineStackShareDen = 4;
// Children an inline loop takes from its deque at once: one fence for up to
// 8 tasks, and at most 8 tasks' worth of work hidden from thieves.
constexpr unsigned kInlineBatch = 8;

using TaskDeque = WorkDeque<TaskItem, TaskCell>;
using FiberDeque = WorkDeque<Fiber *, PointerCell<Fiber *>>;

constexpr unsigned kNumPriorities = 2;

class alignas(64) Worker {
public:
    Scheduler *m_scheduler = nullptr;
    unsigned m_index = 0;

    // --- owner only ---
    Fiber m_threadFiber;
    Fiber *m_currentFiber = nullptr;
    // Tick state: it belongs to the worker, not to the fiber running the loop,
    // since several fibers take turns running the loop on one worker.
    unsigned m_budget = kBudgetPerTick;
    unsigned m_itemsThisTick = 0;
    std::uint64_t m_tickStartNs = 0;
    std::uint64_t m_avgTaskNs = kInitialAvgTaskNs;
    unsigned m_globalInterval = kFixedGlobalInterval;
    // Items left before the global queue's turn comes (0: it is due now).
    unsigned m_globalCountdown = 0;
    // Finished tasks not yet published: the tasks of one counter that finish
    // one after another on this worker lower it with a single atomic
    // operation (Scheduler::FinishTask / PublishFinished).
    TaskCounter *m_doneCounter = nullptr;
    unsigned m_doneCount = 0;
    bool m_searching = false;
    std::uint32_t m_rng = 1;
    int m_cpu = -1;
    std::thread m_thread;
    AltSignalStack m_altStack;

    // --- shared: stolen from, pushed to, or read by other threads ---
    TaskDeque m_tasks[kNumPriorities];
    FiberDeque m_ready;
    alignas(64) FiberInbox m_pinned;
    // Futex word for parking: a waker bumps it after claiming this worker.
    alignas(64) std::atomic<std::uint32_t> m_wakeSeq{0};
    // Tasks this worker added and finished, for the quiescence check at
    // destruction. Only the owner writes them (so no RMW is needed); others
    // read them.
    alignas(64) std::atomic<std::uint64_t> m_tasksAdded{0};
    std::atomic<std::uint64_t> m_tasksFinished{0};

    std::uint32_t NextRandom() {
        // xorshift32: cheap, good enough to pick steal victims.
        std::uint32_t x = m_rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        m_rng = x;
        return x;
    }
    void CountAdded(std::uint64_t n) {
        m_tasksAdded.store(m_tasksAdded.load(std::memory_order_relaxed) + n, std::memory_order_release);
    }
    void CountFinished(std::uint64_t n) {
        m_tasksFinished.store(m_tasksFinished.load(std::memory_order_relaxed) + n, std::memory_order_release);
    }
};

static_assert(alignof(Worker) == 64, "per-worker data must be cache-line aligned");

// Monotonic clock in nanoseconds.
std::uint64_t NowNs();

// While the scheduler drains at destruction, parked workers look this often
// for a drain that cannot end.
constexpr std::uint64_t kDrainPollNs = 100u * 1000u * 1000u;
// A drain in which no task has finished for this long, with every worker idle
// and no work queued, can never end: it is reported (see CheckDrain).
constexpr std::uint64_t kDrainStallNs = 2000u * 1000u * 1000u;

// The worker the calling thread is, or nullptr. Never cached across a fiber
// switch: the function is opaque to the optimizer (see worker.cpp).
Worker *CurrentWorker();
void SetCurrentWorker(Worker *worker);
// Identifies the running fiber (or, outside any scheduler, the thread), for
// Fibtex's owner check.
void const *CurrentFiberIdentity();

} // namespace detail
} // namespace ftl
