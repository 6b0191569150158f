// The workloads' fixed parameters and the pieces every system's
// implementation shares: the expected results, W6's summing kernel, the
// per-thread task tally, and the clocks of the self-measured workloads.
//
//   W1  1,000,000 empty tasks: 1,000 batches of 1,000, one counter (task
//       group, latch) per batch, each batch waited for      -> ns per task
//   W1w W1 with tasks that work: 100 batches of 1,000 tasks, each a chain of
//       200 multiply-adds (a few hundred ns, a game's small job)
//                                                             -> ns per task
//   W1f W1 as a game's frame: 300 batches of 1,000 empty tasks, and before
//       each the adding thread's own work, 50 us on the clock
//                                                             -> us per frame
//   W2  100 producer tasks, each adding 1,000 empty consumer tasks with its
//       own counter and waiting for them; the main thread waits for the
//       producers                                             -> ns per consumer
//   W3  fib(30) (fib(25) with --short): every node n >= 2 is a task that adds
//       its two children as tasks and waits for them         -> ns per task
//   W3e W3 with OnFiberAttached/OnFiberDetached installed (ftl only): the
//       cost of the fiber callbacks' path                     -> ns per task
//   A1  W1 with AddTaskAfter (ftl only): each batch's tasks start after a
//       gate counter held while they are added               -> ns per task
//   A2  a chain of 100,000 tasks, each AddTaskAfter the one before (ftl
//       only), all added before the first runs    -> ns per link, fibers added
//   C1  1,000,000 queued tasks of one counter cancelled (ftl only)
//                                   -> us for Cancel, ms until the wait returned
//   W4  two tasks ping-pong 100,000 times (10,000 with --short), each waiting
//       for the value the other one writes                   -> ns per round trip
//   W5  10,000 tasks x 100 increments of one int under a lock -> ns per lock
//       (W5: each system's own mutex; W5b: std::mutex for the peers)
//   W5s W5 with short tasks: 50,000 tasks x 20 increments, each system's own
//       mutex                                                 -> ns per lock
//   W6  the triangle number of 47,593,243 in tasks of 10,000 additions,
//       checked against n(n+1)/2                              -> ms
//   P1  a parallel loop: 200 passes over 20,000 elements, each element
//       replaced by 8 dependent multiply-adds of itself, every pass waited
//       for (P1: each system's parallel for; P1h: ftl's AddTasks batches
//       written by hand, 4 per worker)                        -> ns per element
//   W7  the pool idles 2 s after it started (the main thread sleeps): CPU
//       seconds the process used (getrusage)                 -> cpu-s per 2 s
//       (W7: default settings; W7s: the system's low-power idle setting)
//   W8  wake latency: the pool has been idle for 2 ms, another thread adds a
//       task; the time from the add call to the task's first instruction,
//       200 samples (50 with --short)                        -> us, median and p99
//   S1  scheduler start: Init with the default pool (400 fibers) and with
//       40,000, interleaved, kStarts times each, then destruction (ftl only)
//                                                             -> us per Init, each
//   R1  one Boost.Context fcontext round trip (there and back) -> ns
//   R2  one cache-line round trip between two threads pinned to two cores -> ns
//
// An "empty" task does one thing: it counts itself in its thread's slot of a
// Tally, so that every run can check that no task was lost.
#pragma once

#include "harness.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// W1
constexpr unsigned kBatches = 1000;
constexpr unsigned kBatchSize = 1000;
// A2
constexpr unsigned kChainLinks = 100000;
// C1
constexpr unsigned kCancelledTasks = 1000000;
// W1w
constexpr unsigned kWorkBatches = 100;
constexpr unsigned kWorkSteps = 200;
// W1f: long enough that the other workers sleep through it (longer than
// their spin before a park), as they do between a game's frames.
constexpr unsigned kFrames = 300;
constexpr std::chrono::microseconds kFrameOwnWork{50};
// W2
constexpr unsigned kProducers = 100;
constexpr unsigned kConsumersPerProducer = 1000;
// W5
constexpr unsigned kLockTasks = 10000;
constexpr unsigned kLocksPerTask = 100;
// W5s
constexpr unsigned kShortLockTasks = 50000;
constexpr unsigned kLocksPerShortTask = 20;
// W6
constexpr std::uint64_t kTriangleN = 47593243;
constexpr std::uint64_t kAdditionsPerTask = 10000;
constexpr std::uint64_t kTriangleTasks = (kTriangleN + kAdditionsPerTask - 1) / kAdditionsPerTask;
constexpr std::uint64_t kTriangleExpected = kTriangleN * (kTriangleN + 1) / 2;
// P1
constexpr unsigned kLoopPasses = 200;
constexpr std::size_t kLoopSize = 20000;
constexpr unsigned kLoopSteps = 8;
// P1h: the batches of the hand-written loop, per worker.
constexpr unsigned kLoopBatchesPerWorker = 4;
// W7: figures are CPU seconds per this much idle time.
constexpr double kIdleReportSeconds = 2.0;
// W8: how long the pool idles before each sample. Longer than any system's
// spin-before-sleep, so every sample starts from parked threads.
constexpr std::chrono::microseconds kWakeGap{2000};
// W8b: how long the adding thread keeps its CPU busy after each add, as a
// game's main thread that hands out a job and goes on with its frame.
constexpr std::chrono::microseconds kBusyAfterAdd{1000};
// S1: starts per pool size and run; the pool sizes.
constexpr unsigned kStarts = 10;
constexpr unsigned kSmallPool = 400;
constexpr unsigned kLargePool = 40000;
// R1, R2
constexpr unsigned kContextRoundTrips = 1000000;
constexpr unsigned kCacheLineRoundTrips = 100000;

constexpr std::uint64_t Fibonacci(unsigned n) {
    std::uint64_t a = 0;
    std::uint64_t b = 1;
    for (unsigned i = 0; i < n; ++i) {
        std::uint64_t const next = a + b;
        a = b;
        b = next;
    }
    return a;
}

// The number of nodes (tasks) in the naive recursion tree of fib(n).
constexpr std::uint64_t FibonacciNodes(unsigned n) {
    return 2 * Fibonacci(n + 1) - 1;
}

// W6: the slice of 1..kTriangleN that task `index` adds up.
struct Slice {
    std::uint64_t First;
    std::uint64_t Last; // inclusive
};
inline Slice TriangleSlice(std::uint64_t index) {
    std::uint64_t const first = index * kAdditionsPerTask + 1;
    std::uint64_t const last = first + kAdditionsPerTask - 1;
    return Slice{first, last < kTriangleN ? last : kTriangleN};
}
// first + (first + 1) + ... + last. Defined out of line and never inlined, so
// that every system (and the reference loop) runs the very same machine code.
std::uint64_t SumRange(std::uint64_t first, std::uint64_t last);

// W1w: one task's work, a chain of `steps` dependent multiply-adds from 1.
// Out of line and never inlined, like SumRange. A task counts itself only
// when the chain ends where it must (WorkChainResult), so that the check of
// the tasks run also checks the work.
std::uint64_t WorkChain(unsigned steps);
constexpr std::uint64_t WorkStep(std::uint64_t x) {
    return x * 6364136223846793005ull + 1442695040888963407ull;
}
constexpr std::uint64_t WorkChainResult(unsigned steps) {
    std::uint64_t x = 1;
    for (unsigned i = 0; i < steps; ++i) {
        x = WorkStep(x);
    }
    return x;
}
constexpr std::uint64_t kWorkChainExpected = WorkChainResult(kWorkSteps);

// W6's results for the peers that run one task per slice: task `index`
// stores its slice's sum (Compute), the run adds them up (Finish), and Check
// compares the total with n(n+1)/2 and clears everything for the next run.
class TriangleSums {
public:
    TriangleSums() : m_sums(kTriangleTasks) {}

    void Compute(std::uint64_t index) {
        Slice const slice = TriangleSlice(index);
        m_sums[index] = SumRange(slice.First, slice.Last);
    }
    void Finish();
    Verdict Check();

private:
    std::vector<std::uint64_t> m_sums;
    std::uint64_t m_total = 0;
};

// P1's loop: values[i] = LoopStep(values[i]) for every i, kLoopPasses
// times. Reset starts a run from values[i] = i; Check compares the sum with
// the one every element reaches after exactly kLoopPasses steps (an element
// missed or stepped twice in a pass moves it).
inline std::uint64_t LoopStep(std::uint64_t x) {
    for (unsigned i = 0; i < kLoopSteps; ++i) {
        x = WorkStep(x);
    }
    return x;
}

class LoopValues {
public:
    LoopValues() : m_values(kLoopSize) {}

    std::uint64_t *Reset();
    Verdict Check() const;

private:
    std::vector<std::uint64_t> m_values;
};

// Counts tasks per worker thread. Each thread writes only its own slot, on its
// own cache line; the slots are read only after waiting for every task that
// wrote them, which orders those writes before the read.
class Tally {
public:
    explicit Tally(unsigned threads) : m_slots(threads) {}

    void Count(unsigned threadIndex) { ++m_slots[threadIndex].Value; }

    // The total since the last Take, and a fresh start. busiestShare: the
    // share of that total the busiest thread counted (0 when nothing was).
    std::uint64_t Take(double *busiestShare = nullptr) {
        std::uint64_t total = 0;
        std::uint64_t busiest = 0;
        for (Slot &slot : m_slots) {
            total += slot.Value;
            busiest = slot.Value > busiest ? slot.Value : busiest;
            slot.Value = 0;
        }
        if (busiestShare != nullptr) {
            *busiestShare = total == 0 ? 0 : double(busiest) / double(total);
        }
        return total;
    }

private:
    struct alignas(64) Slot {
        std::uint64_t Value = 0;
    };
    static_assert(sizeof(Slot) == 64, "each thread's tally must have a cache line to itself");
    std::vector<Slot> m_slots;
};

Verdict ExpectCount(char const *what, std::uint64_t got, std::uint64_t expected);
// The first failing verdict, or a pass.
Verdict FirstFailure(std::vector<Verdict> const &verdicts);

// CPU seconds (user + system) the whole process has used so far.
double ProcessCpuSeconds();
// Sleeps sizes.IdleSeconds on the calling thread and returns the CPU seconds
// the process used meanwhile, scaled to kIdleReportSeconds.
double MeasureIdleCpu(Sizes const &sizes);

// Nanoseconds on the steady clock, as one integer a thread can publish
// atomically.
inline std::int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Computes (reads the clock) for `duration`, as a thread busy with its own
// work: W1f's adder before each batch, W8b's after its add.
inline void StayBusyFor(std::chrono::nanoseconds duration) {
    std::int64_t const until = NowNs() + duration.count();
    while (NowNs() < until) {
    }
}
inline void StayBusyAfterAdd() {
    StayBusyFor(kBusyAfterAdd);
}

// Nanoseconds in microseconds.
std::vector<double> Microseconds(std::vector<std::int64_t> const &ns);
// W8's figures from one run's samples (ns): {median, p99}, in microseconds.
std::vector<double> WakeFigures(std::vector<std::int64_t> const &latenciesNs);
// Checks that every sample was taken and is positive.
Verdict CheckWakeSamples(std::vector<std::int64_t> const &latenciesNs, std::size_t expected);

// Every workload, with the sizes of this run.
std::vector<Workload> MakeWorkloads(Sizes const &sizes);

} // namespace bench
