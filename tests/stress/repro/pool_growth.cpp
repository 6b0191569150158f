// Reproduction of a fiber-pool growth failure found by ftl_stress (seed
// 2279783365317349890, 1 thread, in an early version of the suite whose DAGs
// parked ~23000 fibers at once). Not part of the build; kept as a manual check.
// Build and run from the repository root:
//
//   c++ -std=c++17 -O2 -Iinclude tests/stress/repro/pool_growth.cpp
//       build/<dir>/libftl.a -lboost_context -pthread -o /tmp/pool_growth
//   /tmp/pool_growth 30000
//
// N tasks each park on one AtomicFlag at a single thread, so the pool must
// hold N waiting fibers.
//
// Found: with vm.max_map_count = 65530 (the Linux default) it died at 23058
// fibers with "the fiber pool ran dry at 23058 fibers and could not grow
// (limit 65536 fibers ...)". Each pool fiber is two mappings (stack and guard
// page) and the pool grew by half its size in one all-or-nothing step: 23058
// -> 34587 fibers needs ~69000 mappings, so the step failed and was rolled
// back whole although ~9000 more fibers still fitted, and the message named a
// capacity a default kernel never allows.
//
// Now (FiberPool::Acquire grows by less when mmap refuses): 30000 prints "ok";
// 40000 stops at ~32700 fibers with a fatal error naming vm.max_map_count.
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

struct Shared {
    ftl::AtomicFlag *Gate;
};

void WaitOnGate(ftl::TaskScheduler *ts, void *arg) {
    ts->WaitForCounter(static_cast<Shared *>(arg)->Gate);
}

void OpenGate(ftl::TaskScheduler * /*ts*/, void *arg) {
    static_cast<Shared *>(arg)->Gate->Clear();
}

} // namespace

int main(int argc, char **argv) {
    unsigned const waiters = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 30000u;
    ftl::TaskScheduler ts;
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = 1;
    if (ts.Init(options) != 0) {
        return 2;
    }
    ftl::AtomicFlag gate(&ts, 1);
    Shared shared{&gate};
    ftl::TaskCounter counter(&ts);
    std::vector<ftl::Task> tasks(waiters, ftl::Task{WaitOnGate, &shared});
    ts.AddTasks(waiters, tasks.data(), ftl::TaskPriority::High, &counter);
    // Normal priority: runs after every High waiter has started and parked.
    ts.AddTask(ftl::Task{OpenGate, &shared}, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    std::printf("ok: %u fibers waited at once; pool holds %u fibers\n", waiters, ts.GetFiberCount());
    return 0;
}
