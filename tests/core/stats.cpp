// GetStats: tasks counted on the worker that ran them, steals, parks and
// wake-ups, idle time, the fiber pool's use and growth; FormatStats and
// FTL_STATS=1 at destruction.
#include "ftl/stats.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using ftl_test::Options;

namespace {

using Clock = std::chrono::steady_clock;

// Polls GetStats until `done(stats)` or 10 s; returns the last stats.
template <class Done>
ftl::SchedulerStats StatsWhen(ftl::TaskScheduler &ts, Done done) {
    auto const deadline = Clock::now() + std::chrono::seconds(10);
    ftl::SchedulerStats stats = ts.GetStats();
    while (!done(stats) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        stats = ts.GetStats();
    }
    return stats;
}

std::uint64_t Sum(ftl::SchedulerStats const &stats, std::uint64_t ftl::WorkerStats::*field) {
    std::uint64_t total = 0;
    for (auto const &worker : stats.Workers) {
        total += worker.*field;
    }
    return total;
}

} // namespace

TEST_CASE("GetStats counts each task on the worker that ran it", "[stats]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::vector<std::atomic<std::uint64_t>> ranOn(threads);
    constexpr unsigned kTasks = 3000;
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        kTasks,
        [&](ftl::TaskScheduler *inner, unsigned) { ranOn[inner->GetCurrentThreadIndex()].fetch_add(1); },
        ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    // A worker publishes its count just after the counter it lowered.
    ftl::SchedulerStats const stats = StatsWhen(
        ts, [](ftl::SchedulerStats const &s) { return Sum(s, &ftl::WorkerStats::TasksRun) >= kTasks; });
    REQUIRE(stats.Workers.size() == threads);
    REQUIRE(Sum(stats, &ftl::WorkerStats::TasksRun) == kTasks);
    for (unsigned i = 0; i < threads; ++i) {
        CAPTURE(i);
        REQUIRE(stats.Workers[i].TasksRun == ranOn[i].load());
    }
}

TEST_CASE("GetStats counts the tasks other workers stole", "[stats]") {
    unsigned const threads = GENERATE(2u, 3u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    constexpr unsigned kChildren = 64;
    std::atomic<unsigned> elsewhere{0};
    std::atomic<bool> sawThief{false};
    ftl::TaskCounter root(&ts);
    ts.AddTask(
        [&](ftl::TaskScheduler *inner) {
            unsigned const home = inner->GetCurrentThreadIndex();
            ftl::TaskCounter children(inner);
            // Queued on this worker only: any child that runs elsewhere was stolen.
            inner->AddTasks(
                kChildren,
                [&, home](ftl::TaskScheduler *child, unsigned) {
                    if (child->GetCurrentThreadIndex() != home) {
                        elsewhere.fetch_add(1);
                    }
                },
                ftl::TaskPriority::Normal, &children);
            auto const deadline = Clock::now() + std::chrono::seconds(10);
            while (elsewhere.load() == 0 && Clock::now() < deadline) {
            }
            sawThief.store(elsewhere.load() != 0);
            inner->WaitForCounter(&children);
        },
        ftl::TaskPriority::Normal, &root);
    ts.WaitForCounter(&root);
    REQUIRE(sawThief.load());
    ftl::SchedulerStats const stats = ts.GetStats();
    REQUIRE(Sum(stats, &ftl::WorkerStats::Stolen) >= elsewhere.load());
}

TEST_CASE("GetStats sees a worker park, idle, and wake for work", "[stats]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    // Worker 1 has nothing to do: it spins briefly, then sleeps.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ftl::SchedulerStats const idle = ts.GetStats();
    REQUIRE(idle.Workers[1].Parks >= 1u);
    REQUIRE(idle.Workers[1].IdleTime >= std::chrono::milliseconds(50));
    REQUIRE(idle.Workers[1].TasksRun == 0u);

    // The main thread (worker 0) adds a task and does not wait yet: worker 1
    // is woken to take it.
    std::atomic<unsigned> ranOn{99};
    ftl::TaskCounter counter(&ts);
    ts.AddTask([&](ftl::TaskScheduler *inner) { ranOn.store(inner->GetCurrentThreadIndex()); },
               ftl::TaskPriority::Normal, &counter);
    ftl::SchedulerStats const woken =
        StatsWhen(ts, [](ftl::SchedulerStats const &s) { return s.Workers[1].TasksRun == 1; });
    REQUIRE(woken.Workers[1].TasksRun == 1u);
    REQUIRE(woken.Workers[1].WakeUps >= 1u);
    REQUIRE(woken.Workers[1].Stolen == 1u);
    REQUIRE(ranOn.load() == 1u);
    ts.WaitForCounter(&counter);
}

TEST_CASE("GetStats shows the fibers parked tasks hold, and the pool's growth", "[stats]") {
    ftl::TaskSchedulerInitOptions options = Options(2);
    options.FiberPoolSize = 8;
    options.PoolPolicy = ftl::FiberPoolPolicy::Grow;
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(options) == 0);
    constexpr unsigned kWaiters = 20;
    ftl::AtomicFlag gate(&ts, 1);
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        kWaiters, [&gate](ftl::TaskScheduler *inner, unsigned) { inner->WaitForCounter(&gate); },
        ftl::TaskPriority::Normal, &counter);
    // Worker 1 runs them (the main thread is outside the scheduler): each
    // parks, holding its fiber.
    ftl::SchedulerStats const parked =
        StatsWhen(ts, [](ftl::SchedulerStats const &s) { return s.FibersInUse >= kWaiters + 1; });
    REQUIRE(parked.FibersInUse >= kWaiters + 1);
    REQUIRE(parked.FibersPeak >= parked.FibersInUse);
    REQUIRE(parked.PoolGrowths >= 1u);
    REQUIRE(parked.FiberPoolSize >= kWaiters + 1);
    REQUIRE(parked.FiberPoolSize == ts.GetFiberCount());

    gate.Clear();
    ts.WaitForCounter(&counter);
    ftl::SchedulerStats const after =
        StatsWhen(ts, [](ftl::SchedulerStats const &s) { return s.FibersInUse <= 4; });
    REQUIRE(after.FibersInUse <= 4u); // the workers' own, give or take the loop fibers
    REQUIRE(after.FibersPeak >= parked.FibersInUse);
}

TEST_CASE("FTL_STATS=1 prints the table when the scheduler is destroyed", "[stats]") {
    ftl_test::ChildResult const child = ftl_test::RunInChild([] {
        ftl_test::SetEnv("FTL_STATS", "1");
        ftl::TaskScheduler ts;
        if (ts.Init(Options(1)) != 0) {
            std::_Exit(3);
        }
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(
            123, [](unsigned) {}, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    });
    REQUIRE(child.Exited);
    REQUIRE(child.ExitCode == 0);
    INFO(child.Stderr);
    REQUIRE(child.StderrHas("tasks run"));
    REQUIRE(child.StderrHas("fibers:"));
    // Worker 0's line: its index, then the tasks it ran.
    std::istringstream lines(child.Stderr);
    std::string line;
    bool found = false;
    while (std::getline(lines, line)) {
        unsigned index = 0;
        unsigned long long tasks = 0;
        if (std::sscanf(line.c_str(), "ftl: %u %llu", &index, &tasks) == 2 && index == 0) {
            found = true;
            REQUIRE(tasks == 123u);
        }
    }
    REQUIRE(found);
}

TEST_CASE("FormatStats writes a line per worker and the pool's figures", "[stats]") {
    ftl::SchedulerStats stats;
    stats.Workers.resize(3);
    stats.Workers[2].TasksRun = 4242;
    stats.Workers[2].IdleTime = std::chrono::milliseconds(7);
    stats.FibersInUse = 5;
    stats.FibersPeak = 9;
    stats.FiberPoolSize = 400;
    std::string const text = ftl::FormatStats(stats);
    REQUIRE(text.find("4242") != std::string::npos);
    REQUIRE(text.find("5 in use now, 9 at most, pool of 400") != std::string::npos);
    unsigned lines = 0;
    for (char c : text) {
        lines += c == '\n' ? 1u : 0u;
    }
    REQUIRE(lines == 5u); // header, three workers, the pool
}
