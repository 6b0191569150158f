// The triangle-number program as FiberTaskingLib's README has its users write
// it (the task function is called AddNumberSubset there), built as a program
// of its own: CTest runs it with FTL_TRACE set, with no change to the code,
// and ftl_trace_check reads the trace it leaves (tests/CMakeLists.txt).
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstdint>
#include <cstdio>

struct NumberSubset {
    std::uint64_t Start;
    std::uint64_t End;
    std::uint64_t Total;
};

void AddNumberSubset(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *subset = static_cast<NumberSubset *>(arg);
    subset->Total = 0;
    for (std::uint64_t n = subset->Start; n <= subset->End; ++n) {
        subset->Total += n;
    }
}

int main() {
    ftl::TaskScheduler taskScheduler;
    taskScheduler.Init();

    constexpr std::uint64_t triangleNum = 47593243ULL;
    constexpr std::uint64_t numAdditionsPerTask = 10000ULL;
    constexpr std::uint64_t numTasks = (triangleNum + numAdditionsPerTask - 1ULL) / numAdditionsPerTask;

    auto *subsets = new NumberSubset[numTasks];
    auto *tasks = new ftl::Task[numTasks];
    std::uint64_t next = 1ULL;
    for (std::uint64_t i = 0; i < numTasks; ++i) {
        NumberSubset &subset = subsets[i];
        subset.Start = next;
        subset.End =
            next + numAdditionsPerTask - 1ULL < triangleNum ? next + numAdditionsPerTask - 1ULL : triangleNum;
        next = subset.End + 1ULL;
        tasks[i] = {AddNumberSubset, &subset};
    }

    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(numTasks, tasks, ftl::TaskPriority::Normal, &counter);
    delete[] tasks;
    taskScheduler.WaitForCounter(&counter);

    std::uint64_t result = 0;
    for (std::uint64_t i = 0; i < numTasks; ++i) {
        result += subsets[i].Total;
    }
    delete[] subsets;
    std::uint64_t const expected = triangleNum * (triangleNum + 1ULL) / 2ULL;
    std::printf("Triangle number %llu: %llu (%s)\n", static_cast<unsigned long long>(triangleNum),
                static_cast<unsigned long long>(result), result == expected ? "right" : "WRONG");
    return result == expected ? 0 : 1;
}
