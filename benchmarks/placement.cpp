// ftl_placement_<pad>: the suite's W5 (kLockTasks tasks of kLocksPerTask
// increments under one Fibtex), a pool of 1 worker and a pool of 2 taking
// runs in turn in one process, with the library's code, linked after this
// file's, moved by <pad> bytes (FTL_PLACEMENT_PAD). The programs differ in
// nothing else, so what sets one apart from the next is where the code sits.
// See docs/design.adoc (Fibtex: the waiter's code placement).
//
//   for p in build/main/benchmarks/ftl_placement_*; do $p; done
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "workloads.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#ifndef FTL_PLACEMENT_PAD
#define FTL_PLACEMENT_PAD 0
#endif

// FTL_PLACEMENT_PAD bytes of code, never run, ahead of the library's (one
// more: the assembler refuses a skip of 0). The task function below, an
// inline member emitted in a section of its own, may stay where it is.
extern "C" __attribute__((used, noinline)) void FtlPlacementPad() {
    asm volatile(".skip %c0" ::"i"(FTL_PLACEMENT_PAD + 1));
}

namespace {

constexpr unsigned kRunsPerRound = 7;

class ContendedFibtex {
public:
    explicit ContendedFibtex(unsigned workers)
        : m_lock(&m_scheduler), m_tasks(bench::kLockTasks, ftl::Task{Increment, this}), m_tally(workers) {
        ftl::TaskSchedulerInitOptions options;
        options.ThreadPoolSize = workers;
        if (int const error = m_scheduler.Init(options); error != 0) {
            std::fprintf(stderr, "TaskScheduler::Init failed: %s\n", ftl::InitErrorString(error));
            std::exit(1);
        }
    }

    // One run, in ns a lock; exits when the sum is wrong.
    double Run() {
        auto const start = std::chrono::steady_clock::now();
        ftl::TaskCounter counter(&m_scheduler);
        m_scheduler.AddTasks(bench::kLockTasks, m_tasks.data(), ftl::TaskPriority::Normal, &counter);
        m_scheduler.WaitForCounter(&counter);
        std::chrono::duration<double, std::nano> const took = std::chrono::steady_clock::now() - start;
        std::uint64_t const expected = std::uint64_t(bench::kLockTasks) * bench::kLocksPerTask;
        if (m_value != expected) {
            std::fprintf(stderr, "sum %llu, expected %llu\n", static_cast<unsigned long long>(m_value),
                         static_cast<unsigned long long>(expected));
            std::exit(1);
        }
        m_value = 0;
        return took.count() / static_cast<double>(expected);
    }

    // The share of the tasks since the last call that the busiest worker ran.
    double BusiestShare() {
        double share = 0;
        m_tally.Take(&share);
        return share;
    }

private:
    static void Increment(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<ContendedFibtex *>(arg);
        self->m_tally.Count(taskScheduler->GetCurrentThreadIndex());
        for (unsigned i = 0; i < bench::kLocksPerTask; ++i) {
            std::lock_guard<ftl::Fibtex> lock(self->m_lock);
            ++self->m_value;
        }
    }

    ftl::TaskScheduler m_scheduler;
    ftl::Fibtex m_lock;
    std::uint64_t m_value = 0; // guarded by m_lock
    std::vector<ftl::Task> m_tasks;
    bench::Tally m_tally;
};

// A pool on a thread of its own (its worker 0), as the suite's pairs run
// theirs: it makes, runs and ends its fixture there; Run waits, blocked.
class Subject {
public:
    explicit Subject(unsigned workers)
        : m_thread([this, workers] {
              ContendedFibtex fixture(workers);
              std::unique_lock<std::mutex> lock(m_mutex);
              for (;;) {
                  m_changed.wait(lock, [this] { return m_stop || m_job; });
                  if (m_stop) {
                      return;
                  }
                  lock.unlock();
                  m_job(fixture);
                  lock.lock();
                  m_job = nullptr;
                  m_changed.notify_all();
              }
          }) {}
    ~Subject() {
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_stop = true;
        }
        m_changed.notify_all();
        m_thread.join();
    }
    Subject(Subject const &) = delete;
    Subject &operator=(Subject const &) = delete;

    void With(std::function<void(ContendedFibtex &)> job) {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_job = std::move(job);
        m_changed.notify_all();
        m_changed.wait(lock, [this] { return !m_job; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::function<void(ContendedFibtex &)> m_job; // guarded by m_mutex
    bool m_stop = false;                          // guarded by m_mutex
    std::thread m_thread;                         // last: it uses the members above
};

double Median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
    unsigned const rounds = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 6;
    if (rounds == 0) {
        std::fprintf(stderr, "usage: %s [rounds, at least 1]\n", argv[0]);
        return 2;
    }
    Subject one(1);
    Subject two(2);
    std::vector<double> ratios;
    double busiest = 0;
    for (unsigned round = 0; round <= rounds; ++round) {
        std::vector<double> single;
        std::vector<double> pair;
        for (unsigned run = 0; run < kRunsPerRound; ++run) {
            one.With([&](ContendedFibtex &fixture) { single.push_back(fixture.Run()); });
            two.With([&](ContendedFibtex &fixture) { pair.push_back(fixture.Run()); });
        }
        two.With([&](ContendedFibtex &fixture) { busiest = fixture.BusiestShare(); });
        if (round == 0) {
            continue; // the warm-up
        }
        double const ratio = Median(pair) / Median(single);
        ratios.push_back(ratio);
        std::printf(
            "  round %u: 1 worker %.2f ns/lock, 2 workers %.2f, ratio %.3f, busiest worker ran %.0f%% "
            "of the tasks\n",
            round, Median(single), Median(pair), ratio, 100 * busiest);
    }
    auto const [low, high] = std::minmax_element(ratios.begin(), ratios.end());
    std::printf("pad %3d bytes: W5 at 2 workers over 1, median of %u rounds %.3f (%.3f-%.3f)\n",
                FTL_PLACEMENT_PAD, rounds, Median(ratios), *low, *high);
    return 0;
}
