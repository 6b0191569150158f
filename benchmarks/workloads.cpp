// The workload list and the helpers every system's implementation shares.
#include "workloads.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

namespace bench {

void TriangleSums::Finish() {
    m_total = 0;
    for (std::uint64_t const sum : m_sums) {
        m_total += sum;
    }
}

Verdict TriangleSums::Check() {
    std::fill(m_sums.begin(), m_sums.end(), 0);
    return ExpectCount("total", std::exchange(m_total, 0), kTriangleExpected);
}

__attribute__((noinline)) std::uint64_t WorkChain(unsigned steps) {
    std::uint64_t x = 1;
    for (unsigned i = 0; i < steps; ++i) {
        x = WorkStep(x);
        asm volatile("" : "+r"(x)); // one step after another, not folded
    }
    return x;
}

__attribute__((noinline)) std::uint64_t SumRange(std::uint64_t first, std::uint64_t last) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = first; i <= last; ++i) {
        sum += i;
    }
    return sum;
}

std::uint64_t *LoopValues::Reset() {
    for (std::size_t i = 0; i < m_values.size(); ++i) {
        m_values[i] = i;
    }
    return m_values.data();
}

Verdict LoopValues::Check() const {
    // Computed once per process: kLoopSize x kLoopPasses steps.
    static std::uint64_t const expected = [] {
        std::uint64_t sum = 0;
        for (std::uint64_t i = 0; i < kLoopSize; ++i) {
            std::uint64_t x = i;
            for (unsigned pass = 0; pass < kLoopPasses; ++pass) {
                x = LoopStep(x);
            }
            sum += x;
        }
        return sum;
    }();
    std::uint64_t sum = 0;
    for (std::uint64_t const value : m_values) {
        sum += value;
    }
    return ExpectCount("sum of the loop's values", sum, expected);
}

Verdict ExpectCount(char const *what, std::uint64_t got, std::uint64_t expected) {
    if (got == expected) {
        return Verdict::Pass();
    }
    return Verdict::Fail(std::string(what) + ": " + std::to_string(got) + ", expected " +
                         std::to_string(expected));
}

Verdict FirstFailure(std::vector<Verdict> const &verdicts) {
    for (Verdict const &verdict : verdicts) {
        if (!verdict.Ok) {
            return verdict;
        }
    }
    return Verdict::Pass();
}

double ProcessCpuSeconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    auto const seconds = [](timeval const &time) {
        return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) * 1e-6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double MeasureIdleCpu(Sizes const &sizes) {
    double const before = ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(sizes.IdleSeconds));
    double const after = ProcessCpuSeconds();
    return (after - before) * (kIdleReportSeconds / sizes.IdleSeconds);
}

std::vector<double> Microseconds(std::vector<std::int64_t> const &ns) {
    std::vector<double> microseconds;
    microseconds.reserve(ns.size());
    for (std::int64_t const value : ns) {
        microseconds.push_back(static_cast<double>(value) / 1000.0);
    }
    return microseconds;
}

std::vector<double> WakeFigures(std::vector<std::int64_t> const &latenciesNs) {
    std::vector<double> const microseconds = Microseconds(latenciesNs);
    return {MedianOf(microseconds), PercentileOf(microseconds, 99)};
}

Verdict CheckWakeSamples(std::vector<std::int64_t> const &latenciesNs, std::size_t expected) {
    if (latenciesNs.size() != expected) {
        return ExpectCount("wake samples", latenciesNs.size(), expected);
    }
    for (std::size_t i = 0; i < latenciesNs.size(); ++i) {
        if (latenciesNs[i] <= 0) {
            return Verdict::Fail("wake sample " + std::to_string(i) + " was not taken (or is not positive: " +
                                 std::to_string(latenciesNs[i]) + " ns)");
        }
    }
    return Verdict::Pass();
}

namespace {

// W1-W3 and their variants, G1, A1 and A2: tasks added, run and waited for.
void AddTaskWorkloads(Sizes const &sizes, std::vector<Workload> &workloads) {
    std::string const fib = "fib(" + std::to_string(sizes.FibN) + ")";
    workloads.push_back(
        {"W1",
         "1,000,000 empty tasks: 1000 batches of 1000, one counter per batch, each waited for",
         {{"W1", "ns/task"}},
         double(kBatches) * kBatchSize});
    workloads.push_back({"W1w",
                         "W1 with tasks that work: 100 batches of 1000 tasks, each a chain of 200 "
                         "multiply-adds, one counter per batch, each waited for",
                         {{"W1w", "ns/task"}},
                         double(kWorkBatches) * kBatchSize});
    workloads.push_back({"W1f",
                         "W1 as a game's frame (ftl only): 300 batches of 1000 empty tasks, one counter "
                         "per batch, each waited for, and before each the adding thread's own work, 50 us "
                         "on the clock",
                         {{"W1f", "us/frame"}},
                         double(kFrames) * 1e3});
    workloads.push_back({"W2",
                         "100 producer tasks, each adding 1000 empty consumers with its own counter and "
                         "waiting; the main thread waits on the producers",
                         {{"W2", "ns/consumer"}},
                         double(kProducers) * kConsumersPerProducer});
    workloads.push_back(
        {"W3",
         fib + ", a task per node; each node n >= 2 adds its two children and waits for them (" +
             std::to_string(FibonacciNodes(sizes.FibN)) + " tasks)",
         {{"W3", "ns/task"}},
         double(FibonacciNodes(sizes.FibN))});
    workloads.push_back(
        {"W3e",
         "W3 with fiber callbacks, ftl only: OnFiberAttached and OnFiberDetached installed (each counts "
         "into the fiber's own line), so that a wait switches fibers as the lineage reports them",
         {{"W3e", "ns/task"}},
         double(FibonacciNodes(sizes.FibN))});
    workloads.push_back({"W1c",
                         "W1 with closures, ftl only: one AddTasks(1000, closure) per batch, the closure "
                         "capturing a pointer (it travels inside each queued task)",
                         {{"W1c", "ns/task"}},
                         double(kBatches) * kBatchSize});
    workloads.push_back(
        {"W3c",
         "W3 with closures, ftl only: one AddTasks(2, closure) per node, the closure capturing a "
         "pointer",
         {{"W3c", "ns/task"}},
         double(FibonacciNodes(sizes.FibN))});
    workloads.push_back(
        {"W3s",
         "W3 with closures, ftl only: two AddTask per node, each closure 24 bytes (in a slot of "
         "the closure pool)",
         {{"W3s", "ns/task"}},
         double(FibonacciNodes(sizes.FibN))});
    workloads.push_back(
        {"G1",
         "W1 as a TaskGraph, ftl only: 1,000 nodes (a root, 998 after it, a sink after those) "
         "built once and run 1,000 times, each run waited for",
         {{"G1", "ns/node"}},
         double(kBatches) * kBatchSize});
    workloads.push_back(
        {"A1",
         "W1 as tasks after tasks, ftl only: each batch's 1000 tasks added with AddTaskAfter a "
         "gate counter held at 1 until all are added, then released; one counter per batch, "
         "each waited for",
         {{"A1", "ns/task"}},
         double(kBatches) * kBatchSize});
    workloads.push_back({"A2",
                         "a chain of 100,000 tasks, ftl only: each AddTaskAfter the previous one's counter, "
                         "all added before the first runs, the last waited for; and the fibers the run added "
                         "to the pool's peak (FibersPeak)",
                         {{"A2", "ns/link"}, {"A2 fibers", "fibers", false}},
                         0});
    workloads.push_back({"C1",
                         "cancellation, ftl only: 1,000,000 tasks of one counter queued while every other "
                         "worker is busy, then TaskCounter::Cancel and the wait; the time Cancel took, and "
                         "from Cancel to the wait's return",
                         {{"C1 cancel", "us", false}, {"C1 wait", "ms", false}},
                         0});
}

// W4-W6, P1 and P1h: tasks that wait for each other, share a lock, or split
// one computation.
void AddSharingWorkloads(Sizes const &sizes, std::vector<Workload> &workloads) {
    workloads.push_back({"W4",
                         "two tasks ping-pong " + std::to_string(sizes.PingPongRounds) +
                             " times, each waiting for the value the other one writes",
                         {{"W4", "ns/round trip"}},
                         double(sizes.PingPongRounds)});
    workloads.push_back({"W5",
                         "10,000 tasks x 100 increments of one int under each system's own mutex",
                         {{"W5", "ns/lock"}},
                         double(kLockTasks) * kLocksPerTask});
    workloads.push_back({"W5b",
                         "W5 with std::mutex for the peers (ftl: Fibtex again)",
                         {{"W5b", "ns/lock"}},
                         double(kLockTasks) * kLocksPerTask});
    workloads.push_back({"W5s",
                         "W5 with short tasks: 50,000 tasks x 20 increments under each system's own mutex",
                         {{"W5s", "ns/lock"}},
                         double(kShortLockTasks) * kLocksPerShortTask});
    workloads.push_back({"W6",
                         "triangle number of 47,593,243 in " + std::to_string(kTriangleTasks) +
                             " tasks of 10,000 additions, checked",
                         {{"W6", "ms"}},
                         1e6});
    workloads.push_back(
        {"P1",
         "parallel loop: 200 passes over 20,000 elements, each element replaced by 8 "
         "dependent multiply-adds of itself, each pass waited for; each system's parallel for",
         {{"P1", "ns/element"}},
         double(kLoopPasses) * kLoopSize});
    workloads.push_back({"P1h",
                         "P1 with AddTasks batches written by hand, ftl only: 4 batches per worker, a "
                         "TaskCounter per pass",
                         {{"P1h", "ns/element"}},
                         double(kLoopPasses) * kLoopSize});
}

// W7, W7s, W7t and T1: an idle pool's CPU time, and how late a timer runs.
void AddIdleWorkloads(Sizes const &sizes, std::vector<Workload> &workloads) {
    char idle[64];
    if (sizes.IdleSeconds == kIdleReportSeconds) {
        std::snprintf(idle, sizeof idle, "%g s", kIdleReportSeconds);
    } else {
        std::snprintf(idle, sizeof idle, "%g s (scaled to %g s)", sizes.IdleSeconds, kIdleReportSeconds);
    }
    Workload w7{"W7",
                std::string("idle ") + idle +
                    " after the pool started, default settings: process CPU seconds",
                {{"W7", "cpu-s/2s", false}},
                0};
    w7.WarmUp = false;
    workloads.push_back(w7);
    Workload w7s{"W7s",
                 "W7 with the system's low-power idle setting (ftl Sleep; Boost.Fiber suspend=true)",
                 {{"W7s", "cpu-s/2s", false}},
                 0};
    w7s.WarmUp = false;
    workloads.push_back(w7s);
    Workload w7t{"W7t",
                 std::string("idle ") + idle +
                     " with only deadlines pending, ftl only: a task in SleepFor and the main thread in a "
                     "timed wait for the whole window",
                 {{"W7t", "cpu-s/2s", false}},
                 0};
    w7t.WarmUp = false;
    workloads.push_back(w7t);
    workloads.push_back({"T1",
                         "timer lateness, ftl only: a task sleeps 1 ms (SleepFor) or times out of a 1 ms "
                         "timed wait, " +
                             std::to_string(sizes.WakeSamples) + " samples; how late it runs again",
                         {{"T1", "us median", true, 50}, {"T1 p99", "us p99", true, 99}},
                         0});
}

// W8, W8b, M1 and M2: how long an added task waits for a worker.
void AddWakeWorkloads(Sizes const &sizes, std::vector<Workload> &workloads) {
    workloads.push_back({"W8",
                         "wake latency: after 2 ms idle, another thread adds a task; add call to the task's "
                         "first instruction, " +
                             std::to_string(sizes.WakeSamples) + " samples",
                         {{"W8", "us median", true, 50}, {"W8 p99", "us p99", true, 99}},
                         0});
    workloads.push_back({"W8b",
                         "W8 with an adder that stays busy: it computes for 1 ms after each add before it "
                         "sleeps, as a main thread that hands out a job and goes on",
                         {{"W8b", "us median", true, 50}, {"W8b p99", "us p99", true, 99}},
                         0});
    workloads.push_back({"M1",
                         "mechanism probe: every worker busy with 200 us tasks while another thread adds a "
                         "task every 2 ms; add call to the task's first instruction",
                         {{"M1", "us median", true, 50}, {"M1 p99", "us p99", true, 99}},
                         0});
    Workload m2{"M2",
                "mechanism probe: a task runs 20 batches of 1,000 empty tasks, then adds two 1 ms tasks and "
                "waits; add call to the later one's first instruction, " +
                    std::to_string(sizes.WakeSamples) + " samples",
                {{"M2", "us median", true, 50}, {"M2 p99", "us p99", true, 99}},
                0};
    m2.Paired = false; // at 1 worker the later task starts when the first ends
    workloads.push_back(m2);
}

// S1, R1 and R2: the scheduler's start, and the raw limits.
void AddStartAndRawWorkloads(std::vector<Workload> &workloads) {
    workloads.push_back({"S1",
                         "scheduler start: Init with the default pool (400 fibers) and with 40,000, "
                         "interleaved, each started " +
                             std::to_string(kStarts) + " times and destroyed",
                         {{"S1", "us Init", false}, {"S1 40k", "us Init", false}},
                         0});
    workloads.push_back({"R1",
                         "raw: one Boost.Context fcontext round trip (jump_fcontext there and back)",
                         {{"R1", "ns"}},
                         double(kContextRoundTrips)});
    workloads.push_back(
        {"R2", "raw: one cache-line round trip between two threads pinned to two cores", {{"R2", "ns"}}, 0});
}

} // namespace

std::vector<Workload> MakeWorkloads(Sizes const &sizes) {
    std::vector<Workload> workloads;
    AddTaskWorkloads(sizes, workloads);
    AddSharingWorkloads(sizes, workloads);
    AddIdleWorkloads(sizes, workloads);
    AddWakeWorkloads(sizes, workloads);
    AddStartAndRawWorkloads(workloads);
    return workloads;
}

} // namespace bench
