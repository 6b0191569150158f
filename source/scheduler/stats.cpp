// GetStats: each worker's own counts (worker.h, idle.h) and the pool's,
// gathered without stopping anyone; and their table.
#include "scheduler/scheduler.h"

#include "scheduler/help.h"
#include "wait/wait_list.h"

#include <algorithm>

#include <cinttypes>
#include <cstdio>

namespace ftl {
namespace detail {

SchedulerStats Scheduler::Stats() const {
    SchedulerStats stats;
    std::uint64_t const now = NowNs();
    std::uint64_t const lifetime = now > m_startNs ? now - m_startNs : 0;
    stats.Workers.resize(m_numWorkers);
    for (unsigned i = 0; i < m_numWorkers; ++i) {
        WorkerStats &worker = stats.Workers[i];
        m_workers[i].FillStats(worker, now);
        worker.Parks = m_idle.Parks(i);
        worker.WakeUps = m_idle.WakeUps(i);
        auto const idle = static_cast<std::uint64_t>(worker.IdleTime.count());
        worker.BusyTime = std::chrono::nanoseconds(lifetime > idle ? lifetime - idle : 0);
    }
    stats.FiberPoolSize = m_pool.Size();
    stats.PoolGrowths = m_pool.Growths();
    stats.FibersPeak = m_pool.Made();
    unsigned const free = m_pool.FreeCount();
    stats.FibersInUse = stats.FibersPeak > free ? stats.FibersPeak - free : 0;
    return stats;
}

std::vector<WaitingFiber> Scheduler::WaitingFibers() const {
    std::vector<WaitingFiber> fibers;
    m_pool.ForEachMade([&](Fiber const &fiber) {
        // Acquire: the node's fields were set before it was published.
        if (WaitNode const *node = fiber.ParkedOn.load(std::memory_order_acquire)) {
            WaitingFiber waiting;
            waiting.FiberIndex = fiber.Index;
            waiting.Kind = node->Kind;
            waiting.Object = node->Object;
            waiting.Target = node->Target;
            // The task that waits, from the fiber's own stack, which stays as
            // it is while the fiber is parked. A fiber that resumes meanwhile
            // may change it: every read stays inside memory of that stack
            // (the inline loop's index is clamped to its hand), and the copy
            // is dropped below.
            TaskItem const *task = nullptr;
            InlineHand const *hand = fiber.Hand;
            if (hand != nullptr && hand->Next != 0) {
                task = &hand->Items()[std::min(hand->Next, kInlineBatch) - 1];
            } else {
                task = static_cast<TaskItem const *>(fiber.LoopItem);
            }
            waiting.Function =
                task != nullptr
                    ? reinterpret_cast<void const *>(reinterpret_cast<std::uintptr_t>(task->Function))
                    : nullptr;
            // Still the same wait: the copy is of a node in use (a fiber that
            // resumed meanwhile may have reused its node's memory).
            if (fiber.ParkedOn.load(std::memory_order_acquire) == node) {
                fibers.push_back(waiting);
            }
        }
    });
    return fibers;
}

} // namespace detail

std::string FormatStats(SchedulerStats const &stats) {
    std::string out =
        "ftl: worker    tasks run      stolen  failed steals     parks  wake-ups   busy ms   idle ms\n";
    char line[160];
    for (std::size_t i = 0; i < stats.Workers.size(); ++i) {
        WorkerStats const &w = stats.Workers[i];
        std::snprintf(line, sizeof line,
                      "ftl: %6zu %12" PRIu64 " %11" PRIu64 " %14" PRIu64 " %9" PRIu64 " %9" PRIu64
                      " %9.1f %9.1f\n",
                      i, w.TasksRun, w.Stolen, w.FailedSteals, w.Parks, w.WakeUps,
                      std::chrono::duration<double, std::milli>(w.BusyTime).count(),
                      std::chrono::duration<double, std::milli>(w.IdleTime).count());
        out += line;
    }
    std::snprintf(line, sizeof line, "ftl: fibers: %u in use now, %u at most, pool of %u (grew %u times)\n",
                  stats.FibersInUse, stats.FibersPeak, stats.FiberPoolSize, stats.PoolGrowths);
    out += line;
    return out;
}

std::string FormatWaitingFibers(std::vector<WaitingFiber> const &fibers) {
    std::string out;
    for (WaitingFiber const &fiber : fibers) {
        char what[96];
        if (fiber.Kind == WaitKind::Counter) {
            std::snprintf(what, sizeof what, "counter %p to reach %u", fiber.Object, fiber.Target);
        } else if (fiber.Object != nullptr) {
            std::snprintf(what, sizeof what, "%s %p", WaitKindName(fiber.Kind), fiber.Object);
        } else {
            std::snprintf(what, sizeof what, "%s", WaitKindName(fiber.Kind));
        }
        out += "ftl: fiber " + std::to_string(fiber.FiberIndex) + " waits for " + what + ", in ";
        out += fiber.Function != nullptr ? FunctionName(fiber.Function) : "the thread that called Init";
        out += "\n";
    }
    return out;
}

} // namespace ftl
