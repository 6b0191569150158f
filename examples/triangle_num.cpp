// The n-th triangle number, 1 + 2 + ... + n, added up by many small tasks.
//
// The range 1..n is cut into slices of 10,000 numbers, one task per slice.
// All of them go to the scheduler in a single AddTasks call with one
// TaskCounter, and the main thread waits on that counter: while it waits, it
// runs slices itself. The total is checked against Gauss's n(n + 1) / 2.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

// One task's share of the work, and where it leaves its partial sum.
struct Slice {
    std::uint64_t First;
    std::uint64_t Last; // inclusive
    std::uint64_t Sum;
};

void SumSlice(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *slice = static_cast<Slice *>(arg);
    std::uint64_t sum = 0;
    for (std::uint64_t i = slice->First; i <= slice->Last; ++i) {
        sum += i;
    }
    slice->Sum = sum;
}

} // namespace

int main() {
    constexpr std::uint64_t kN = 47593243;
    constexpr std::uint64_t kAdditionsPerTask = 10000;
    constexpr std::uint64_t kNumTasks = (kN + kAdditionsPerTask - 1) / kAdditionsPerTask;

    ftl::TaskScheduler taskScheduler;
    if (int const error = taskScheduler.Init(); error != 0) {
        std::fprintf(stderr, "triangle_num: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }

    // The slices must live until their tasks have run; the Task structs
    // themselves are copied by AddTasks and could be dropped right after it.
    std::vector<Slice> slices(kNumTasks);
    std::vector<ftl::Task> tasks(kNumTasks);
    for (std::uint64_t i = 0; i < kNumTasks; ++i) {
        std::uint64_t const first = i * kAdditionsPerTask + 1;
        std::uint64_t const last = first + kAdditionsPerTask - 1 < kN ? first + kAdditionsPerTask - 1 : kN;
        slices[i] = Slice{first, last, 0};
        tasks[i] = ftl::Task{SumSlice, &slices[i]};
    }

    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(static_cast<unsigned>(kNumTasks), tasks.data(), ftl::TaskPriority::Normal,
                           &counter);
    // Every slice's Sum is visible once the wait returns: the counter reaching
    // 0 orders each task's writes before this point.
    taskScheduler.WaitForCounter(&counter);

    std::uint64_t total = 0;
    for (Slice const &slice : slices) {
        total += slice.Sum;
    }

    std::uint64_t const expected = kN * (kN + 1) / 2;
    std::printf("triangle_num: T(%" PRIu64 ") = %" PRIu64 " from %" PRIu64 " tasks on %u threads\n", kN,
                total, kNumTasks, taskScheduler.GetThreadCount());
    if (total != expected) {
        std::fprintf(stderr, "triangle_num: wrong result, expected %" PRIu64 "\n", expected);
        return 1;
    }
    // Where the tasks ran: one line per worker.
    ftl::SchedulerStats const stats = taskScheduler.GetStats();
    std::fputs(ftl::FormatStats(stats).c_str(), stdout);
    std::uint64_t ran = 0;
    for (ftl::WorkerStats const &worker : stats.Workers) {
        ran += worker.TasksRun;
    }
    if (ran > kNumTasks) {
        std::fprintf(stderr, "triangle_num: the statistics count %" PRIu64 " tasks, more than were added\n",
                     ran);
        return 1;
    }
    return 0;
}
