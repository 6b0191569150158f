// oneTBB's implementations of the workloads (see workloads.h), through its
// public API as a user writes them: a task_arena with one slot per worker
// (the main thread takes part inside arena.execute), task_group for every
// "tasks plus a counter", spin_mutex for W5, task::suspend/resume for W4's
// wait.
#include "systems.h"
#include "workloads.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/spin_mutex.h>
#include <oneapi/tbb/task.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace bench {
namespace {

// A started arena of sizes.Threads slots: the calling thread plus
// sizes.Threads - 1 TBB workers. Every fixture holds one as its first member.
class Arena {
public:
    explicit Arena(Sizes const &sizes) : m_arena(static_cast<int>(sizes.Threads)) { m_arena.initialize(); }

    template <class F>
    void Execute(F &&function) {
        m_arena.execute(std::forward<F>(function));
    }
    tbb::task_arena &Get() { return m_arena; }
    unsigned Threads() { return static_cast<unsigned>(m_arena.max_concurrency()); }

private:
    tbb::task_arena m_arena;
};

unsigned ThreadIndex() {
    return static_cast<unsigned>(tbb::this_task_arena::current_thread_index());
}

// W1, W1w ----------------------------------------------------------------------

// Batches of kBatchSize tasks, a task_group per batch, each waited for:
// empty tasks (W1), or tasks that work, with the busiest thread's share
// (W1w).
template <bool Working>
class TaskBatches final : public Fixture {
public:
    explicit TaskBatches(Sizes const &sizes) : m_arena(sizes), m_tally(m_arena.Threads()) {}

    void Run() override {
        m_arena.Execute([this] {
            for (unsigned batch = 0; batch < kRuns; ++batch) {
                tbb::task_group group;
                for (unsigned i = 0; i < kBatchSize; ++i) {
                    group.run([this] {
                        if (!Working || WorkChain(kWorkSteps) == kWorkChainExpected) {
                            m_tally.Count(ThreadIndex());
                        }
                    });
                }
                group.wait();
            }
        });
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(Working ? &m_busiest : nullptr),
                           std::uint64_t(kRuns) * kBatchSize);
    }
    double BusiestThreadShare() const override { return m_busiest; }

private:
    static constexpr unsigned kRuns = Working ? kWorkBatches : kBatches;

    Arena m_arena;
    Tally m_tally;
    double m_busiest = -1;
};

// W2 ---------------------------------------------------------------------------

class ProducerConsumer final : public Fixture {
public:
    explicit ProducerConsumer(Sizes const &sizes)
        : m_arena(sizes), m_consumers(m_arena.Threads()), m_producers(m_arena.Threads()) {}

    void Run() override {
        m_arena.Execute([this] {
            tbb::task_group producers;
            for (unsigned p = 0; p < kProducers; ++p) {
                producers.run([this] {
                    tbb::task_group consumers;
                    for (unsigned c = 0; c < kConsumersPerProducer; ++c) {
                        consumers.run([this] { m_consumers.Count(ThreadIndex()); });
                    }
                    consumers.wait();
                    m_producers.Count(ThreadIndex());
                });
            }
            producers.wait();
        });
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("producers finished", m_producers.Take(), kProducers),
                             ExpectCount("consumers run", m_consumers.Take(),
                                         std::uint64_t(kProducers) * kConsumersPerProducer)});
    }

private:
    Arena m_arena;
    Tally m_consumers;
    Tally m_producers;
};

// W3 ---------------------------------------------------------------------------

class FibonacciTree final : public Fixture {
public:
    explicit FibonacciTree(Sizes const &sizes)
        : m_arena(sizes), m_n(sizes.FibN), m_tally(m_arena.Threads()) {}

    void Run() override {
        m_arena.Execute([this] {
            tbb::task_group root;
            root.run([this] { m_value = Fib(m_n); });
            root.wait();
        });
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("fib", std::exchange(m_value, 0), Fibonacci(m_n)),
                             ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(m_n))});
    }

private:
    std::uint64_t Fib(unsigned n) {
        m_tally.Count(ThreadIndex());
        if (n < 2) {
            return n;
        }
        std::uint64_t a = 0;
        std::uint64_t b = 0;
        tbb::task_group children;
        children.run([this, n, &a] { a = Fib(n - 1); });
        children.run([this, n, &b] { b = Fib(n - 2); });
        children.wait();
        return a + b;
    }

    Arena m_arena;
    unsigned m_n;
    Tally m_tally;
    std::uint64_t m_value = 0;
};

// W4 ---------------------------------------------------------------------------

#if __TBB_RESUMABLE_TASKS
constexpr char const *kPingPongPrimitive = "tbb::task::suspend / resume (an event per side)";

// An auto-reset event for tasks: Wait suspends the calling task (its thread
// goes on with other work) until a Signal; a Signal with no waiter is kept for
// the next Wait.
class Event {
public:
    void Signal() {
        tbb::task::suspend_point waiter = nullptr;
        {
            std::lock_guard<tbb::spin_mutex> lock(m_mutex);
            if (m_waiter != nullptr) {
                waiter = std::exchange(m_waiter, nullptr);
            } else {
                m_signaled = true;
            }
        }
        if (waiter != nullptr) {
            tbb::task::resume(waiter);
        }
    }

    void Wait() {
        {
            std::lock_guard<tbb::spin_mutex> lock(m_mutex);
            if (std::exchange(m_signaled, false)) {
                return;
            }
        }
        tbb::task::suspend([this](tbb::task::suspend_point self) {
            // A Signal may have come between the check above and now.
            bool resumeNow = false;
            {
                std::lock_guard<tbb::spin_mutex> lock(m_mutex);
                resumeNow = std::exchange(m_signaled, false);
                if (!resumeNow) {
                    m_waiter = self;
                }
            }
            if (resumeNow) {
                tbb::task::resume(self);
            }
        });
    }

private:
    tbb::spin_mutex m_mutex;
    bool m_signaled = false;                     // guarded by m_mutex
    tbb::task::suspend_point m_waiter = nullptr; // guarded by m_mutex
};
#else
constexpr char const *kPingPongPrimitive = "std::condition_variable (this oneTBB has no task::suspend)";

class Event {
public:
    void Signal() {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_signaled = true;
        m_condition.notify_one();
    }
    void Wait() {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_condition.wait(lock, [this] { return m_signaled; });
        m_signaled = false;
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_condition;
    bool m_signaled = false;
};
#endif

class PingPong final : public Fixture {
public:
    explicit PingPong(Sizes const &sizes) : m_arena(sizes), m_rounds(sizes.PingPongRounds) {}

    void Run() override {
        m_arena.Execute([this] {
            tbb::task_group group;
            group.run([this] {
                for (unsigned i = 0; i < m_rounds; ++i) {
                    ++m_pings;
                    m_toPong.Signal();
                    m_toPing.Wait();
                }
            });
            group.run([this] {
                for (unsigned i = 0; i < m_rounds; ++i) {
                    m_toPong.Wait();
                    ++m_pongs;
                    m_toPing.Signal();
                }
            });
            group.wait();
        });
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("pings", std::exchange(m_pings, 0), m_rounds),
                             ExpectCount("pongs", std::exchange(m_pongs, 0), m_rounds)});
    }

private:
    Arena m_arena;
    unsigned m_rounds;
    Event m_toPong;
    Event m_toPing;
    std::uint64_t m_pings = 0; // written by the ping task only
    std::uint64_t m_pongs = 0; // written by the pong task only
};

// W5, W5b, W5s -----------------------------------------------------------------

// Tasks tasks of Locks increments each.
template <class Mutex, unsigned Tasks = kLockTasks, unsigned Locks = kLocksPerTask>
class ContendedMutex final : public Fixture {
public:
    explicit ContendedMutex(Sizes const &sizes) : m_arena(sizes), m_tally(sizes.Threads) {}

    void Run() override {
        m_arena.Execute([this] {
            tbb::task_group group;
            for (unsigned t = 0; t < Tasks; ++t) {
                group.run([this] {
                    m_tally.Count(ThreadIndex());
                    for (unsigned i = 0; i < Locks; ++i) {
                        std::lock_guard<Mutex> lock(m_mutex);
                        ++m_value;
                    }
                });
            }
            group.wait();
        });
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("sum", std::exchange(m_value, 0), std::uint64_t(Tasks) * Locks),
                             ExpectCount("tasks run", m_tally.Take(&m_busiest), Tasks)});
    }
    double BusiestThreadShare() const override { return m_busiest; }

private:
    Arena m_arena;
    Mutex m_mutex;
    std::uint64_t m_value = 0; // guarded by m_mutex
    Tally m_tally;
    double m_busiest = -1;
};

// W6 ---------------------------------------------------------------------------

class TriangleNumber final : public Fixture {
public:
    explicit TriangleNumber(Sizes const &sizes) : m_arena(sizes) {}

    void Run() override {
        m_arena.Execute([this] {
            tbb::task_group group;
            for (std::uint64_t i = 0; i < kTriangleTasks; ++i) {
                group.run([this, i] { m_sums.Compute(i); });
            }
            group.wait();
        });
        m_sums.Finish();
    }

    Verdict Check() override { return m_sums.Check(); }

private:
    Arena m_arena;
    TriangleSums m_sums;
};

// P1 ---------------------------------------------------------------------------

class ParallelLoop final : public Fixture {
public:
    explicit ParallelLoop(Sizes const &sizes) : m_arena(sizes) {}

    void Run() override {
        std::uint64_t *const values = m_values.Reset();
        m_arena.Execute([values] {
            for (unsigned pass = 0; pass < kLoopPasses; ++pass) {
                tbb::parallel_for(tbb::blocked_range<std::size_t>(0, kLoopSize),
                                  [values](tbb::blocked_range<std::size_t> const &range) {
                                      for (std::size_t i = range.begin(); i != range.end(); ++i) {
                                          values[i] = LoopStep(values[i]);
                                      }
                                  });
            }
        });
    }

    Verdict Check() override { return m_values.Check(); }

private:
    Arena m_arena;
    LoopValues m_values;
};

// W7 ---------------------------------------------------------------------------

// Starts the workers with a little work, measures the idle window, then runs
// a task group to check the arena still works.
class Idle final : public Fixture {
public:
    explicit Idle(Sizes const &sizes) : m_sizes(sizes), m_arena(sizes) { RunProbes(); }

    void Run() override {
        m_cpuSeconds = MeasureIdleCpu(m_sizes);
        RunProbes();
    }

    Verdict Check() override {
        return ExpectCount("probe tasks run", m_probes.exchange(0), 2ull * m_sizes.Threads);
    }
    std::vector<double> MeasuredFigures() const override { return {m_cpuSeconds}; }

private:
    void RunProbes() {
        m_probes.store(0);
        m_arena.Execute([this] {
            tbb::task_group group;
            for (unsigned i = 0; i < 2 * m_sizes.Threads; ++i) {
                group.run([this] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    m_probes.fetch_add(1);
                });
            }
            group.wait();
        });
    }

    Sizes m_sizes;
    Arena m_arena;
    std::atomic<std::uint64_t> m_probes{0};
    double m_cpuSeconds = 0;
};

// W8 ---------------------------------------------------------------------------

// The main thread stays outside the arena and enqueues one task per sample
// after kWakeGap; the task reads the clock first thing. W8b (kBusyAdder):
// the main thread stays busy for kBusyAfterAdd after each enqueue.
template <bool kBusyAdder>
class WakeLatency final : public Fixture {
public:
    explicit WakeLatency(Sizes const &sizes) : m_arena(sizes), m_samples(sizes.WakeSamples) {}

    void Run() override {
        m_starts.assign(m_samples, 0);
        m_latencies.assign(m_samples, 0);
        m_taken.store(0);
        for (unsigned i = 0; i < m_samples; ++i) {
            std::this_thread::sleep_for(kWakeGap);
            WaitForSample(i);
            m_starts[i] = NowNs();
            m_arena.Get().enqueue([this, i] {
                std::int64_t const now = NowNs();
                m_latencies[i] = now - m_starts[i];
                m_taken.fetch_add(1, std::memory_order_release);
            });
            if (kBusyAdder) {
                StayBusyAfterAdd();
            }
        }
        WaitForSample(m_samples);
    }

    Verdict Check() override { return CheckWakeSamples(m_latencies, m_samples); }
    std::vector<double> MeasuredFigures() const override { return WakeFigures(m_latencies); }

private:
    void WaitForSample(unsigned next) const {
        while (m_taken.load(std::memory_order_acquire) < next) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    Arena m_arena;
    unsigned m_samples;
    std::vector<std::int64_t> m_starts;
    std::vector<std::int64_t> m_latencies;
    std::atomic<unsigned> m_taken{0};
};

} // namespace

System MakeTbbSystem() {
    System system{"oneTBB", {}};
    auto &list = system.Implementations;
    list.push_back(Make<TaskBatches<false>>("W1", "task_group per batch: run + wait"));
    list.push_back(Make<TaskBatches<true>>("W1w", "task_group per batch: run + wait"));
    list.push_back(Make<ProducerConsumer>("W2", "task_group per producer, waited in tasks"));
    list.push_back(Make<FibonacciTree>("W3", "task_group per node: run x2 + wait"));
    list.push_back(Make<PingPong>("W4", kPingPongPrimitive));
    list.push_back(Make<ContendedMutex<tbb::spin_mutex>>("W5", "tbb::spin_mutex, std::lock_guard"));
    list.push_back(Make<ContendedMutex<std::mutex>>("W5b", "std::mutex, std::lock_guard"));
    list.push_back(Make<ContendedMutex<tbb::spin_mutex, kShortLockTasks, kLocksPerShortTask>>(
        "W5s", "tbb::spin_mutex, std::lock_guard"));
    list.push_back(Make<TriangleNumber>("W6", "one task_group, run per slice"));
    list.push_back(Make<ParallelLoop>("P1", "tbb::parallel_for(blocked_range) per pass, auto_partitioner"));
    list.push_back(Make<Idle>("W7", "task_arena, workers started, then idle"));
    list.push_back(Make<WakeLatency<false>>("W8", "task_arena::enqueue from outside the arena"));
    list.push_back(
        Make<WakeLatency<true>>("W8b", "task_arena::enqueue from a thread that stays busy after it"));
    return system;
}

} // namespace bench
