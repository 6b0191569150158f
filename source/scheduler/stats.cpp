// GetStats: each worker's own counts (worker.h, idle.h) and the pool's,
// gathered without stopping anyone; and their table.
#include "scheduler/scheduler.h"

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

} // namespace ftl
