// Shared state behind a Fibtex: many tasks fill one histogram.
//
// 1,000 tasks each roll three dice 1,000 times and count every total in a
// shared std::map, taking a Fibtex with std::lock_guard for each update. A
// task that finds the Fibtex taken parks its fiber; its thread goes on with
// other tasks instead of blocking. When a task is done it records its index
// in a second shared list, through a LockWrapper that spins a little before
// parking. The histogram and the list are then checked against a serial run.
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

namespace {

constexpr unsigned kNumTasks = 1000;
constexpr unsigned kRollsPerTask = 1000;

// Three dice from one well-mixed 64-bit number (a splitmix64 step).
unsigned RollThreeDice(std::uint64_t seed) {
    std::uint64_t x = seed + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return static_cast<unsigned>(x % 6 + (x / 6) % 6 + (x / 36) % 6) + 3;
}

struct SharedState {
    explicit SharedState(ftl::TaskScheduler *taskScheduler)
        : HistogramLock(taskScheduler), FinishedLock(taskScheduler) {}

    ftl::Fibtex HistogramLock;
    std::map<unsigned, std::uint64_t> Histogram; // guarded by HistogramLock
    std::uint64_t Rolls = 0;                     // guarded by HistogramLock

    ftl::Fibtex FinishedLock;
    std::vector<unsigned> Finished; // guarded by FinishedLock
};

struct Job {
    SharedState *State;
    unsigned Index;
};

void RollDice(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *job = static_cast<Job *>(arg);
    SharedState &state = *job->State;
    for (unsigned roll = 0; roll < kRollsPerTask; ++roll) {
        unsigned const total = RollThreeDice(std::uint64_t(job->Index) * kRollsPerTask + roll);
        // One lock per update, on purpose, so that the tasks really contend.
        std::lock_guard<ftl::Fibtex> lock(state.HistogramLock);
        ++state.Histogram[total];
        ++state.Rolls;
    }

    // The same Fibtex semantics with a chosen lock behaviour: spin up to 500
    // attempts (the holder is probably about to unlock), then park.
    ftl::LockWrapper finishedLock(state.FinishedLock, ftl::FibtexLockBehavior::Spin, false, 500);
    std::lock_guard<ftl::LockWrapper> lock(finishedLock);
    state.Finished.push_back(job->Index);
}

} // namespace

int main() {
    ftl::TaskScheduler taskScheduler;
    if (int const error = taskScheduler.Init(); error != 0) {
        std::fprintf(stderr, "fibtex_shared_state: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }

    bool ok = true;
    {
        SharedState state(&taskScheduler);
        std::vector<Job> jobs(kNumTasks);
        std::vector<ftl::Task> tasks(kNumTasks);
        for (unsigned i = 0; i < kNumTasks; ++i) {
            jobs[i] = Job{&state, i};
            tasks[i] = ftl::Task{RollDice, &jobs[i]};
        }

        ftl::TaskCounter counter(&taskScheduler);
        taskScheduler.AddTasks(kNumTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
        taskScheduler.WaitForCounter(&counter);

        // Every task has finished, so nobody holds the locks any more; the
        // counter's wait made their writes visible here.
        std::map<unsigned, std::uint64_t> expected;
        for (unsigned i = 0; i < kNumTasks; ++i) {
            for (unsigned roll = 0; roll < kRollsPerTask; ++roll) {
                ++expected[RollThreeDice(std::uint64_t(i) * kRollsPerTask + roll)];
            }
        }

        std::uint64_t histogramTotal = 0;
        for (auto const &[total, count] : state.Histogram) {
            histogramTotal += count;
            std::printf("fibtex_shared_state: %2u %7" PRIu64 "\n", total, count);
        }
        std::uint64_t const expectedRolls = std::uint64_t(kNumTasks) * kRollsPerTask;
        if (state.Rolls != expectedRolls || histogramTotal != expectedRolls) {
            std::fprintf(stderr,
                         "fibtex_shared_state: counted %" PRIu64 " rolls (histogram %" PRIu64
                         "), expected %" PRIu64 "\n",
                         state.Rolls, histogramTotal, expectedRolls);
            ok = false;
        }
        if (state.Histogram != expected) {
            std::fprintf(stderr, "fibtex_shared_state: the histogram differs from a serial run\n");
            ok = false;
        }

        std::sort(state.Finished.begin(), state.Finished.end());
        bool allFinishedOnce = state.Finished.size() == kNumTasks;
        for (unsigned i = 0; allFinishedOnce && i < kNumTasks; ++i) {
            allFinishedOnce = state.Finished[i] == i;
        }
        if (!allFinishedOnce) {
            std::fprintf(stderr,
                         "fibtex_shared_state: %zu tasks reported finishing, expected each of %u once\n",
                         state.Finished.size(), kNumTasks);
            ok = false;
        }
        std::printf("fibtex_shared_state: %" PRIu64 " rolls by %u tasks on %u threads: %s\n", state.Rolls,
                    kNumTasks, taskScheduler.GetThreadCount(), ok ? "ok" : "WRONG");
    }
    return ok ? 0 : 1;
}
