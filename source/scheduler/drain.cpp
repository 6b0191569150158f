// The drain at destruction: the Init thread waits until every task added so
// far has finished, and a drain that can never end (every worker idle, no
// task finishing) is reported with the fibers that wait, not left to hang.
#include "scheduler/scheduler.h"

#include "ftl/assert.h"
#include "ftl/atomic_counter.h"

#include <algorithm>
#include <cstdio>

namespace ftl {
namespace detail {

void Scheduler::Drain() {
    Worker *worker = CurrentWorkerOfThis();
    if (worker != &m_workers[0] || worker->CurrentFiber() != &worker->ThreadFiber() ||
        worker->ThreadFiber().Hand != nullptr) {
        FTL_FATAL("a TaskScheduler must be destroyed by the thread that called Init, outside any task");
    }
    // Run everything already added. The Init thread parks on m_drainFlag; the
    // first worker to go idle with every task finished clears it.
    m_drainFlag->Set();
    m_drainRequested.store(true, std::memory_order_seq_cst);
    // The request's store before the count loads of Quiescent (arm64 and x86
    // alike may otherwise load first). Pairs with Worker::Idle's fence, which
    // orders a worker's published finishes before its load of the request:
    // either that worker sees the request, or this sees its finishes.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (Quiescent()) {
        m_drainRequested.store(false, std::memory_order_relaxed);
    } else {
        m_owner->WaitForCounter(m_drainFlag.get(), true);
    }
}

std::uint64_t Scheduler::FinishedCount() const {
    std::uint64_t finished = 0;
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        finished += m_workers[i].Finished();
    }
    return finished;
}

std::uint64_t Scheduler::AddedCount() const {
    std::uint64_t added = m_externalAdded.load(std::memory_order_acquire);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        added += m_workers[i].Added();
    }
    return added;
}

bool Scheduler::Quiescent() const {
    // Finished counts first, added counts second. Each only grows and a task
    // is counted as added before it can finish, so
    //   finished read <= finished(t) <= added(t) <= added read
    // for the moment t between the two passes: equal sums mean that at t every
    // task added had finished, and nothing was left to add more.
    std::uint64_t const finished = FinishedCount();
    return finished == AddedCount();
}

void Scheduler::CheckDrain(Worker const &worker, bool yielding) {
    if (!m_drainRequested.load(std::memory_order_relaxed)) {
        return;
    }
    if (Quiescent()) {
        if (m_drainRequested.exchange(false, std::memory_order_acq_rel)) {
            m_drainFlag->Clear();
        }
        return;
    }
    // Not done. If no task has finished for kDrainStallNs while every other
    // worker is parked or only resumes fibers that call Yield, and nothing
    // else is queued, the unfinished tasks are fibers waiting for counters,
    // flags or Fibtexes that no task will ever change, or tasks that yield
    // for something that never comes: the drain would hang forever. Say so
    // instead. (A thread outside the scheduler could still release them; a
    // program that relies on that must do it before destroying the
    // scheduler.)
    std::uint64_t const finished = FinishedCount();
    std::uint64_t const now = NowNs();
    // The time first, the count last (release), read count first (acquire):
    // a worker that reads a count another just stored reads that one's time
    // (or a later one). Relaxed, arm64 could pair the new count with an old
    // time and report a stall at once, not kDrainStallNs after the last finish.
    if (finished != m_drainProgress.load(std::memory_order_acquire) ||
        m_drainProgressNs.load(std::memory_order_relaxed) == 0) {
        m_drainProgressNs.store(now, std::memory_order_relaxed);
        m_drainProgress.store(finished, std::memory_order_release);
        return;
    }
    // A pending timer will end a wait: not a stall.
    if (now - m_drainProgressNs.load(std::memory_order_relaxed) < kDrainStallNs || !m_timers.Empty() ||
        !OthersStalled(worker.Index(), now, yielding) || AnyWorkVisible(worker, true, !yielding)) {
        return;
    }
    // Reported once, by the first worker to see it.
    if (m_stallReported.exchange(true, std::memory_order_relaxed)) {
        return;
    }
    // What each of them waits for (not the drain's own wait).
    std::vector<WaitingFiber> waiting = WaitingFibers();
    waiting.erase(
        std::remove_if(waiting.begin(), waiting.end(),
                       [this](WaitingFiber const &fiber) { return fiber.Object == m_drainFlag.get(); }),
        waiting.end());
    std::fputs(FormatWaitingFibers(waiting).c_str(), stderr);
    FTL_FATAL(
        "TaskScheduler destroyed while %llu task(s) can never finish: %s (no task has finished for %llu "
        "ms, %s; the fibers %s are listed above)",
        static_cast<unsigned long long>(AddedCount() - finished),
        yielding ? "tasks keep calling Yield while nothing else finishes"
                 : "their fibers wait on counters, flags or Fibtexes that nothing changes any more",
        static_cast<unsigned long long>(kDrainStallNs / 1000000u),
        yielding ? "and no worker has other work" : "every worker is idle",
        yielding ? "parked in a wait or a yield" : "that wait");
}

bool Scheduler::OthersStalled(unsigned self, std::uint64_t now, bool yielding) const {
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        if (i != self && !m_idle.IsParked(i) &&
            !(yielding && m_workers[i].YieldLoopSince(now - kDrainPollNs))) {
            return false;
        }
    }
    return true;
}

} // namespace detail
} // namespace ftl
