// The worker loop: what a pool fiber does between tasks.
//
// Find-work order (FindWork):
//   1. every m_globalInterval items (m_globalCountdown): the global queue
//      first (so tasks from outside threads are not starved by local work);
//   2. at the start of each tick: this worker's task deques first (so a pair
//      of fibers waking each other cannot starve queued tasks);
//   3. ready fibers: the pinned inbox, then the ready deque (oldest first);
//   4. own task deques, High before Normal (LIFO: depth first, cache warm);
//   5. the global queue;
//   6. steal from a random victim: its ready fibers, then its tasks.
// Ready fibers come before new tasks (docs/design.adoc, invariant 3): each holds a
// stack, so finishing old work first bounds memory.
#include "counter_ops.h"
#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "scheduler.h"

#include <chrono>
#include <exception>
#include <sched.h>

namespace ftl {
namespace detail {

namespace {

thread_local Worker *t_worker = nullptr;
thread_local char t_threadIdentity;

} // namespace

std::uint64_t NowNs() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
}

namespace {

// Spin before parking: kSpinRounds looks at every queue, kSpinPauses pause
// instructions apart (roughly 10-50 us in all, depending on the CPU's pause
// latency): long enough to catch the next task of a producer, short enough
// that an idle scheduler parks at once.
constexpr unsigned kSpinRounds = 64;
constexpr unsigned kSpinPauses = 32;

} // namespace

// Opaque to the optimizer on purpose: a fiber may call this, switch, resume
// on another thread and call it again; neither inlining nor treating it as
// pure may let the compiler reuse the first thread's TLS address. The empty
// volatile asm makes the function not pure for GCC's IPA.
__attribute__((noinline)) Worker *CurrentWorker() {
    asm volatile("" ::: "memory");
    return t_worker;
}

__attribute__((noinline)) void SetCurrentWorker(Worker *worker) {
    asm volatile("" ::: "memory");
    t_worker = worker;
}

__attribute__((noinline)) void const *CurrentFiberIdentity() {
    asm volatile("" ::: "memory");
    Worker *worker = t_worker;
    if (worker != nullptr) {
        // A task run inline shares its waiting parent's fiber; the hand of the
        // inline loop running it (on that fiber's stack) tells them apart.
        Fiber const *fiber = worker->m_currentFiber;
        return fiber->Hand != nullptr ? static_cast<void const *>(fiber->Hand) : fiber;
    }
    return &t_threadIdentity;
}

__attribute__((noinline)) Worker *Scheduler::CurrentWorkerOfThis() const {
    asm volatile("" ::: "memory"); // opaque, like CurrentWorker
    Worker *worker = t_worker;
    return worker != nullptr && worker->m_scheduler == this ? worker : nullptr;
}

void Scheduler::FiberEntry(boost::context::detail::transfer_t transfer) {
    Worker *worker = FinishSwitch(transfer);
    worker->m_scheduler->FiberLoop(worker->m_currentFiber, worker);
}

void Scheduler::FiberLoop(Fiber *self, Worker *worker) {
    for (;;) {
        TaskItem item;
        if (FindWork(worker, item)) {
            FoundWork(worker);
            worker = RunItem(self, worker, item);
            CountItem(worker);
        } else if (worker->m_doneCount != 0) {
            // Publishing may ready a fiber: look again.
            PublishFinished(worker);
        } else {
            EndTick(worker);
            worker = Idle(self, worker);
        }
    }
}

Worker *Scheduler::RunItem(Fiber *self, Worker *worker, TaskItem const &item) {
    if (item.Function == nullptr) {
        // A ready fiber: run it in our place; this fiber goes back to the pool
        // and continues from here when it is next handed out.
        auto *fiber = static_cast<Fiber *>(item.Arg);
        PublishFinished(worker); // the fiber may run for long, or wait on them
        fiber->Transition(FiberState::Ready, FiberState::Running);
        SwitchRecord record{self, fiber, worker, AfterSwitch::ReturnToPool, nullptr, nullptr, nullptr};
        return SwitchFiber(record);
    }
    BeforeTask(worker, item.Counter);
    RunTaskFunction(item);
    // The task may have waited and resumed on another worker.
    worker = self->CurrentWorker;
    FinishTask(worker, item.Counter);
    return worker;
}

void Scheduler::PublishFinished(Worker *worker) {
    unsigned const n = worker->m_doneCount;
    if (n == 0) {
        return;
    }
    TaskCounter *counter = worker->m_doneCounter;
    worker->m_doneCount = 0;
    worker->m_doneCounter = nullptr;
    // The decrement first: a finished count the drain check sees is a task
    // whose counter already says so.
    if (counter != nullptr) {
        CounterOps::Finish(*counter, n);
    }
    worker->CountFinished(n);
}

void Scheduler::RunTaskFunction(TaskItem const &item) {
    // An exception cannot cross the bottom of a fiber's stack (there is no
    // frame to unwind into), so it ends the process here, with its origin
    // named, rather than in an anonymous std::terminate.
    try {
        item.Function(m_owner, item.Arg);
    } catch (std::exception const &e) {
        FTL_FATAL("an exception escaped a task (function %p, argument %p): %s",
                  reinterpret_cast<void *>(item.Function), item.Arg, e.what());
    } catch (...) {
        FTL_FATAL("an exception escaped a task (function %p, argument %p)",
                  reinterpret_cast<void *>(item.Function), item.Arg);
    }
}

bool Scheduler::FindWork(Worker *worker, TaskItem &item) {
    bool const globalFirst = GlobalQueueDue(worker);
    bool const tasksFirst = TasksDue(worker);
    if (globalFirst) {
        worker->m_globalCountdown = worker->m_globalInterval;
    }
    if (globalFirst && TakeGlobal(worker, item)) {
        return true;
    }
    if (tasksFirst && TakeTask(worker, item)) {
        return true;
    }
    Fiber *fiber;
    if (TakeReadyFiber(worker, fiber)) {
        item = TaskItem{nullptr, fiber, nullptr};
        return true;
    }
    if (!tasksFirst && TakeTask(worker, item)) {
        return true;
    }
    if (!globalFirst && TakeGlobal(worker, item)) {
        return true;
    }
    return StealWork(worker, item);
}

bool Scheduler::TakeReadyFiber(Worker *worker, Fiber *&fiber) {
    if ((fiber = worker->m_pinned.Pop()) != nullptr) {
        return true;
    }
    // Ready fibers resume oldest first: the owner takes from the top too.
    // The fence-free emptiness check first (see WorkDeque::LooksEmpty).
    return !worker->m_ready.LooksEmpty() && worker->m_ready.Steal(fiber);
}

bool Scheduler::TakeTask(Worker *worker, TaskItem &item) {
    for (auto &deque : worker->m_tasks) {
        if (deque.Pop(item)) {
            return true;
        }
    }
    return false;
}

bool Scheduler::TakeGlobal(Worker *, TaskItem &item) {
    for (auto &queue : m_global) {
        if (queue.Pop(item)) {
            return true;
        }
    }
    return false;
}

bool Scheduler::StealWork(Worker *worker, TaskItem &item) {
    unsigned const n = m_numWorkers;
    if (n == 1) {
        return false;
    }
    unsigned const start = worker->NextRandom() % n;
    for (unsigned i = 0; i < n; ++i) {
        unsigned const victimIndex = (start + i) % n;
        if (victimIndex == worker->m_index) {
            continue;
        }
        Worker &victim = m_workers[victimIndex];
        Fiber *fiber;
        if (!victim.m_ready.LooksEmpty() && victim.m_ready.Steal(fiber)) {
            item = TaskItem{nullptr, fiber, nullptr};
            return true;
        }
        for (auto &deque : victim.m_tasks) {
            if (!deque.LooksEmpty() && deque.Steal(item)) {
                return true;
            }
        }
    }
    return false;
}

void Scheduler::EndTick(Worker *worker) {
    if (worker->m_itemsThisTick != 0 && m_options.Features.AdaptiveGlobalInterval) {
        // EWMA of the time per item (alpha = 0.1, as in Volt); the global
        // queue is then checked about once per kGlobalQueueLatencyNs.
        std::uint64_t const now = NowNs();
        std::uint64_t const sample = (now - worker->m_tickStartNs) / worker->m_itemsThisTick;
        std::uint64_t const avg = (sample + 9 * worker->m_avgTaskNs) / 10;
        worker->m_avgTaskNs = avg == 0 ? 1 : avg;
        std::uint64_t const interval = kGlobalQueueLatencyNs / worker->m_avgTaskNs;
        worker->m_globalInterval = static_cast<unsigned>(
            interval < kMinGlobalInterval ? kMinGlobalInterval
                                          : (interval > kMaxGlobalInterval ? kMaxGlobalInterval : interval));
        worker->m_tickStartNs = now;
    }
    worker->m_budget = kBudgetPerTick;
    worker->m_itemsThisTick = 0;
}

void Scheduler::FoundWork(Worker *worker) {
    if (worker->m_searching) {
        worker->m_searching = false;
        // The last searcher to find work wakes another worker to keep looking
        // if more work is queued: wake-ups spread one at a time while there
        // is work to find, and a lone task starts without paying for a futex
        // wake first. The wake only adds parallelism (this worker comes back
        // for anything left; park.pml checks the protocol). The fence pairs
        // with NotifyWork's: work published after the look finds no searcher
        // and wakes a worker itself.
        if (m_idle.StopSearching()) {
            std::atomic_thread_fence(std::memory_order_seq_cst);
            if (!AnyWorkVisible(worker)) {
                return;
            }
            int const index = m_idle.ClaimAny();
            if (index >= 0) {
                WakeWorker(static_cast<unsigned>(index));
            }
        }
    }
}

bool Scheduler::AnyWorkVisible(Worker *worker) const {
    if (!worker->m_pinned.LooksEmpty()) {
        return true;
    }
    for (auto const &queue : m_global) {
        if (!queue.LooksEmpty()) {
            return true;
        }
    }
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        Worker const &other = m_workers[i];
        if (!other.m_ready.LooksEmpty()) {
            return true;
        }
        for (auto const &deque : other.m_tasks) {
            if (!deque.LooksEmpty()) {
                return true;
            }
        }
    }
    return false;
}

Worker *Scheduler::Idle(Fiber *self, Worker *worker) {
    // Pairs with the fence in Shutdown: either this worker sees the drain
    // request, or Shutdown sees every task this worker finished.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    CheckDrain(worker);
    if (m_quit.load(std::memory_order_acquire)) {
        return ExitWorkerThread(self, worker);
    }
    if (!worker->m_searching) {
        worker->m_searching = m_idle.TryBecomeSearcher();
    }
    EmptyQueueBehavior const behavior = Behavior();
    if (behavior != EmptyQueueBehavior::Sleep) {
        // Spin and Yield never park: look until there is work (or a change).
        while (!AnyWorkVisible(worker) && !m_quit.load(std::memory_order_acquire) && Behavior() == behavior) {
            if (behavior == EmptyQueueBehavior::Yield) {
                sched_yield();
            } else {
                for (unsigned i = 0; i < kSpinPauses; ++i) {
                    CpuRelax();
                }
            }
            CheckDrain(worker);
        }
    } else {
        bool found = false;
        if (worker->m_searching && m_options.Features.SpinBeforePark) {
            for (unsigned round = 0; round < kSpinRounds && !found; ++round) {
                for (unsigned i = 0; i < kSpinPauses; ++i) {
                    CpuRelax();
                }
                found = AnyWorkVisible(worker);
            }
        }
        if (!found) {
            Park(worker);
        }
    }
    worker->m_tickStartNs = NowNs();
    return worker;
}

void Scheduler::Park(Worker *worker) {
    unsigned const index = worker->m_index;
    // 1. Announce: from here on a waker may claim us.
    m_idle.SetParked(index);
    if (worker->m_searching) {
        worker->m_searching = false;
        m_idle.StopSearching();
    }
    // 2. Re-check every queue after the announcement. Pairs with the fence
    //    in NotifyWork / ReadyFiber: either they see our bit or we see their
    //    work.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    CheckDrain(worker);
    if (AnyWorkVisible(worker) || m_quit.load(std::memory_order_seq_cst) ||
        Behavior() != EmptyQueueBehavior::Sleep) {
        if (!m_idle.UnsetParked(index)) {
            // A waker claimed us first: we wake as a searcher.
            m_idle.AddClaimedSearcher();
            worker->m_searching = true;
        }
        return;
    }
    // 3. Sleep until claimed. The futex compares m_wakeSeq atomically with
    //    going to sleep, and a waker bumps it after clearing our bit, so a
    //    claim between the check and the sleep is not lost.
    for (;;) {
        std::uint32_t const seq = worker->m_wakeSeq.load(std::memory_order_acquire);
        if (!m_idle.IsParked(index)) {
            break;
        }
        if (m_drainRequested.load(std::memory_order_relaxed)) {
            // Draining: wake now and then to check for a drain that can never
            // end (see CheckDrain).
            FutexWaitFor(&worker->m_wakeSeq, seq, kDrainPollNs);
            CheckDrain(worker);
        } else {
            FutexWait(&worker->m_wakeSeq, seq);
        }
    }
    m_idle.AddClaimedSearcher(); // claimed: we wake as a searcher
    worker->m_searching = true;
}

void Scheduler::NotifyWork(Waker waker) {
    // The work was published before this fence; a parker announces before its
    // re-check (see Park).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (m_idle.NumSearching() != 0) {
        return; // a searcher will find it, or re-check before it parks
    }
    int const index = m_idle.ClaimAny(waker == Waker::Outside ? WorkerOnCallersCpu() : -1);
    if (index >= 0) {
        WakeWorker(static_cast<unsigned>(index));
    }
}

int Scheduler::WorkerOnCallersCpu() const {
    // A thread outside the scheduler wakes the worker pinned to its own CPU
    // first: that CPU is awake, and the waker usually blocks soon after,
    // while another CPU may be idle in a power-saving (or, on a VM, a
    // descheduled) state that takes tens of microseconds to leave. (A worker
    // calling this is running, so it is not parked anyway.)
    if (!m_options.PinThreads) {
        return -1;
    }
    int const cpu = sched_getcpu();
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (m_workers[i].m_cpu == cpu) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

void Scheduler::WakeWorker(unsigned index) {
    Worker &worker = m_workers[index];
    worker.m_wakeSeq.fetch_add(1, std::memory_order_release);
    FutexWake(&worker.m_wakeSeq, 1);
}

void Scheduler::WakeAllParked() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (m_idle.ClaimSpecific(i)) {
            WakeWorker(i);
        }
    }
}

Worker *Scheduler::ExitWorkerThread(Fiber *self, Worker *worker) {
    FTL_ASSERT(worker->m_index != 0, "worker 0 belongs to the thread that called Init; it never exits here");
    // Hand the thread back to its own fiber, which returns from ThreadMain.
    // Should this pool fiber be handed out again before the scheduler is
    // gone, it simply goes on with the loop.
    SwitchRecord record{self,   &worker->m_threadFiber, worker, AfterSwitch::ReturnToPool, nullptr, nullptr,
                        nullptr};
    return SwitchFiber(record);
}

} // namespace detail
} // namespace ftl
