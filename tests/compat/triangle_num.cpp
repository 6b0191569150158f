// Source compatibility with the lineage: the triangle-number program from
// FiberTaskingLib's README, written the way that library's users wrote it
// (its two headers, a default Init, tasks from new[], the task array deleted
// before the wait), so it must compile and run unchanged against ftl.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <catch2/catch.hpp>

#include <cstdint>

namespace {

// The numbers [First, Last] and their sum, filled in by one task.
struct NumberRange {
    std::uint64_t First;
    std::uint64_t Last;
    std::uint64_t Sum;
};

void SumNumberRange(ftl::TaskScheduler *taskScheduler, void *arg) {
    (void)taskScheduler;
    auto *range = static_cast<NumberRange *>(arg);
    range->Sum = 0;
    for (std::uint64_t number = range->First; number <= range->Last; ++number) {
        range->Sum += number;
    }
}

} // namespace

TEST_CASE("Lineage triangle number program compiles and runs unchanged", "[compat]") {
    // Bind this thread to a scheduler with the default options.
    ftl::TaskScheduler taskScheduler;
    taskScheduler.Init();

    constexpr std::uint64_t triangleNum = 47593243ULL;
    constexpr std::uint64_t numAdditionsPerTask = 10000ULL;
    constexpr std::uint64_t numTasks = (triangleNum + numAdditionsPerTask - 1ULL) / numAdditionsPerTask;

    // Too many tasks for the stack: the lineage's users allocated them.
    ftl::Task *tasks = new ftl::Task[numTasks];
    NumberRange *ranges = new NumberRange[numTasks];
    std::uint64_t nextNumber = 1ULL;
    for (std::uint64_t i = 0ULL; i < numTasks; ++i) {
        NumberRange *range = &ranges[i];
        range->First = nextNumber;
        range->Last = nextNumber + numAdditionsPerTask - 1ULL;
        if (range->Last > triangleNum) {
            range->Last = triangleNum;
        }
        tasks[i] = {SumNumberRange, range};
        nextNumber = range->Last + 1ULL;
    }

    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(numTasks, tasks, ftl::TaskPriority::High, &counter);

    // The scheduler copied the tasks, so the array may go before they run.
    delete[] tasks;

    taskScheduler.WaitForCounter(&counter);

    std::uint64_t result = 0ULL;
    for (std::uint64_t i = 0ULL; i < numTasks; ++i) {
        result += ranges[i].Sum;
    }
    delete[] ranges;

    REQUIRE(result == triangleNum * (triangleNum + 1ULL) / 2ULL);
}
