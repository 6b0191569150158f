// GetStats: each worker's own counts (worker.h, idle.h) and the pool's,
// gathered without stopping anyone; and their table.
#include "scheduler/scheduler.h"

#include "ftl/detail/config.h"
#include "scheduler/help.h"
#include "wait/wait_list.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace ftl {
namespace detail {

void Scheduler::PrintStatsIfAsked() const {
    if (char const *stats = std::getenv("FTL_STATS"); stats != nullptr && *stats != '\0' && *stats != '0') {
        std::fputs(FormatStats(Stats()).c_str(), stderr);
    }
}

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

namespace {

// Copies what a parked fiber waits for, from its wait node and its stack,
// which stay as they are while it is parked. A fiber that resumes meanwhile
// changes them under the copy: the caller drops such a copy (the node is no
// longer published afterwards), and every read here stays inside memory
// that is mapped for the scheduler's life (the node and the task are on the
// fiber's stack; the inline loop's index is clamped to its batch). Those
// reads are the one deliberate race of the scheduler: the sanitizers do not
// watch them (they would report the race the check below makes harmless),
// and no optimization moves them into code they do watch (FTL_NO_IPA: no
// inlining, and under GCC no loads hoisted into the caller).
FTL_NO_IPA __attribute__((no_sanitize("address", "thread"))) WaitingFiber CopyWait(Fiber const &fiber,
                                                                                   WaitNode const &node) {
    WaitingFiber waiting;
    waiting.FiberIndex = fiber.Index;
    waiting.Kind = node.Kind;
    waiting.Object = node.Object;
    waiting.Target = node.Target;
    TaskItem const *task = static_cast<TaskItem const *>(fiber.LoopItem);
    InlineHand const *const hand = fiber.Hand;
    if (hand != nullptr) {
        unsigned next = hand->Next;
        if (next != 0) {
            next = next < kInlineBatch ? next : kInlineBatch;
            task = reinterpret_cast<TaskItem const *>(hand->Storage) + (next - 1);
        }
    }
    waiting.Function = task != nullptr
                           ? reinterpret_cast<void const *>(reinterpret_cast<std::uintptr_t>(task->Function))
                           : nullptr;
    return waiting;
}

} // namespace

std::vector<WaitingFiber> Scheduler::WaitingFibers() const {
    std::vector<WaitingFiber> fibers;
    m_pool.ForEachMade([&](Fiber const &fiber) {
        // Acquire: the node's fields were set before it was published.
        if (WaitNode const *node = fiber.ParkedOn.load(std::memory_order_acquire)) {
            WaitingFiber const waiting = CopyWait(fiber, *node);
            // The copy's loads before the re-check's (arm64: dmb ishld; x86
            // keeps loads in order). Pairs with the release fence after Park
            // clears ParkedOn: a copy that read anything the resumed fiber
            // wrote then sees ParkedOn cleared, and is dropped.
            std::atomic_thread_fence(std::memory_order_acquire);
            // Still the same wait: the copy is of a wait in progress.
            if (fiber.ParkedOn.load(std::memory_order_relaxed) == node) {
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
            std::snprintf(what, sizeof what, "counter 0x%" PRIxPTR " to reach %u",
                          reinterpret_cast<std::uintptr_t>(fiber.Object), fiber.Target);
        } else if (fiber.Object != nullptr) {
            std::snprintf(what, sizeof what, "%s 0x%" PRIxPTR, WaitKindName(fiber.Kind),
                          reinterpret_cast<std::uintptr_t>(fiber.Object));
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
