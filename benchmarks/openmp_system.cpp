// OpenMP's implementations of the workloads (see workloads.h): explicit tasks
// (`omp task` / `taskwait`) created inside `parallel` + `single` with one
// thread per worker, as a user writes them. Built with the compiler's OpenMP
// runtime (libgomp with g++); this file alone is compiled with -fopenmp.
#include "systems.h"
#include "workloads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace bench {
namespace {

unsigned ThreadIndex() {
    return static_cast<unsigned>(omp_get_thread_num());
}

// The team size of every parallel region: one thread per worker.
class Team {
public:
    explicit Team(Sizes const &sizes) : m_threads(static_cast<int>(sizes.Threads)) {}
    int Threads() const { return m_threads; }

private:
    int m_threads;
};

// W1, W1w ----------------------------------------------------------------------

// Batches of kBatchSize tasks, a taskwait after each: empty tasks (W1), or
// tasks that work, with the busiest thread's share (W1w).
template <bool Working>
class TaskBatches final : public Fixture {
public:
    explicit TaskBatches(Sizes const &sizes) : m_team(sizes), m_tally(sizes.Threads) {}

    void Run() override {
        Tally *const tally = &m_tally;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        for (unsigned batch = 0; batch < kRuns; ++batch) {
            for (unsigned i = 0; i < kBatchSize; ++i) {
#pragma omp task firstprivate(tally)
                if (!Working || WorkChain(kWorkSteps) == kWorkChainExpected) {
                    tally->Count(ThreadIndex());
                }
            }
#pragma omp taskwait
        }
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(Working ? &m_busiest : nullptr),
                           std::uint64_t(kRuns) * kBatchSize);
    }
    double BusiestThreadShare() const override {
        return m_busiest;
    }

private:
    static constexpr unsigned kRuns = Working ? kWorkBatches : kBatches;

    Team m_team;
    Tally m_tally;
    double m_busiest = -1;
};

// W2 ---------------------------------------------------------------------------

class ProducerConsumer final : public Fixture {
public:
    explicit ProducerConsumer(Sizes const &sizes)
        : m_team(sizes), m_consumers(sizes.Threads), m_producers(sizes.Threads) {}

    void Run() override {
        Tally *const consumers = &m_consumers;
        Tally *const producers = &m_producers;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        {
            for (unsigned p = 0; p < kProducers; ++p) {
#pragma omp task firstprivate(consumers, producers)
                {
                    for (unsigned c = 0; c < kConsumersPerProducer; ++c) {
#pragma omp task firstprivate(consumers)
                        consumers->Count(ThreadIndex());
                    }
#pragma omp taskwait
                    producers->Count(ThreadIndex());
                }
            }
#pragma omp taskwait
        }
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("producers finished", m_producers.Take(), kProducers),
                             ExpectCount("consumers run", m_consumers.Take(),
                                         std::uint64_t(kProducers) * kConsumersPerProducer)});
    }

private:
    Team m_team;
    Tally m_consumers;
    Tally m_producers;
};

// W3 ---------------------------------------------------------------------------

std::uint64_t Fib(unsigned n, Tally *tally) {
    tally->Count(ThreadIndex());
    if (n < 2) {
        return n;
    }
    std::uint64_t a = 0;
    std::uint64_t b = 0;
#pragma omp task shared(a) firstprivate(n, tally)
    a = Fib(n - 1, tally);
#pragma omp task shared(b) firstprivate(n, tally)
    b = Fib(n - 2, tally);
#pragma omp taskwait
    return a + b;
}

class FibonacciTree final : public Fixture {
public:
    explicit FibonacciTree(Sizes const &sizes) : m_team(sizes), m_n(sizes.FibN), m_tally(sizes.Threads) {}

    void Run() override {
        Tally *const tally = &m_tally;
        unsigned const n = m_n;
        std::uint64_t value = 0;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        {
#pragma omp task shared(value) firstprivate(n, tally)
            value = Fib(n, tally);
#pragma omp taskwait
        }
        m_value = value;
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("fib", std::exchange(m_value, 0), Fibonacci(m_n)),
                             ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(m_n))});
    }

private:
    Team m_team;
    unsigned m_n;
    Tally m_tally;
    std::uint64_t m_value = 0;
};

// W4 ---------------------------------------------------------------------------

// Each side waits, on its thread, for the value the other one writes. Two
// tasks that block their threads: this needs two threads in the team.
class PingPong final : public Fixture {
public:
    explicit PingPong(Sizes const &sizes) : m_team(sizes), m_rounds(sizes.PingPongRounds) {
        if (m_team.Threads() < 2) {
            throw std::runtime_error("W4 with OpenMP needs two threads: each side blocks its thread");
        }
    }

    void Run() override {
        PingPong *const self = this;
        m_value = 0;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        {
#pragma omp task firstprivate(self)
            self->Side(0);
#pragma omp task firstprivate(self)
            self->Side(1);
#pragma omp taskwait
        }
    }

    Verdict Check() override {
        return ExpectCount("final value", std::exchange(m_value, 0), 2ull * m_rounds);
    }

private:
    // Side 0 waits for 2i and writes 2i + 1; side 1 waits for 2i + 1 and
    // writes 2i + 2.
    void Side(unsigned side) {
        for (std::uint64_t i = 0; i < m_rounds; ++i) {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_changed.wait(lock, [this, i, side] { return m_value == 2 * i + side; });
            ++m_value;
            m_changed.notify_all();
        }
    }

    Team m_team;
    unsigned m_rounds;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::uint64_t m_value = 0; // guarded by m_mutex
};

// W5, W5b, W5s -----------------------------------------------------------------

// omp_lock_t with the Lockable interface, for std::lock_guard.
class OmpLock {
public:
    OmpLock() { omp_init_lock(&m_lock); }
    ~OmpLock() { omp_destroy_lock(&m_lock); }
    OmpLock(OmpLock const &) = delete;
    OmpLock &operator=(OmpLock const &) = delete;
    void lock() { omp_set_lock(&m_lock); }
    void unlock() { omp_unset_lock(&m_lock); }

private:
    omp_lock_t m_lock;
};

// Tasks tasks of Locks increments each.
template <class Mutex, unsigned Tasks = kLockTasks, unsigned Locks = kLocksPerTask>
class ContendedMutex final : public Fixture {
public:
    explicit ContendedMutex(Sizes const &sizes) : m_team(sizes), m_tally(sizes.Threads) {}

    void Run() override {
        ContendedMutex *const self = this;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        {
            for (unsigned t = 0; t < Tasks; ++t) {
#pragma omp task firstprivate(self)
                self->Increment();
            }
#pragma omp taskwait
        }
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("sum", std::exchange(m_value, 0), std::uint64_t(Tasks) * Locks),
                             ExpectCount("tasks run", m_tally.Take(&m_busiest), Tasks)});
    }
    double BusiestThreadShare() const override {
        return m_busiest;
    }

private:
    void Increment() {
        m_tally.Count(ThreadIndex());
        for (unsigned i = 0; i < Locks; ++i) {
            std::lock_guard<Mutex> lock(m_mutex);
            ++m_value;
        }
    }

    Team m_team;
    Mutex m_mutex;
    std::uint64_t m_value = 0; // guarded by m_mutex
    Tally m_tally;
    double m_busiest = -1;
};

// W6 ---------------------------------------------------------------------------

class TriangleNumber final : public Fixture {
public:
    explicit TriangleNumber(Sizes const &sizes) : m_team(sizes) {}

    void Run() override {
        TriangleSums *const sums = &m_sums;
#pragma omp parallel num_threads(m_team.Threads())
#pragma omp single
        {
            for (std::uint64_t i = 0; i < kTriangleTasks; ++i) {
#pragma omp task firstprivate(i, sums)
                sums->Compute(i);
            }
#pragma omp taskwait
        }
        m_sums.Finish();
    }

    Verdict Check() override {
        return m_sums.Check();
    }

private:
    Team m_team;
    TriangleSums m_sums;
};

// P1 ---------------------------------------------------------------------------

// One parallel region for the run, an `omp for` (and its barrier) per pass.
class ParallelLoop final : public Fixture {
public:
    explicit ParallelLoop(Sizes const &sizes) : m_team(sizes) {}

    void Run() override {
        std::uint64_t *const values = m_values.Reset();
#pragma omp parallel num_threads(m_team.Threads())
        for (unsigned pass = 0; pass < kLoopPasses; ++pass) {
#pragma omp for
            for (std::size_t i = 0; i < kLoopSize; ++i) {
                values[i] = LoopStep(values[i]);
            }
        }
    }

    Verdict Check() override {
        return m_values.Check();
    }

private:
    Team m_team;
    LoopValues m_values;
};

// W7 ---------------------------------------------------------------------------

// Starts the team with a parallel region, measures the idle window, then runs
// one more region to check the team still works.
class Idle final : public Fixture {
public:
    explicit Idle(Sizes const &sizes) : m_sizes(sizes), m_team(sizes) { RunProbes(); }

    void Run() override {
        m_cpuSeconds = MeasureIdleCpu(m_sizes);
        RunProbes();
    }

    Verdict Check() override {
        return ExpectCount("threads that ran the probe region", m_probes.exchange(0), m_sizes.Threads);
    }
    std::vector<double> MeasuredFigures() const override { return {m_cpuSeconds}; }

private:
    void RunProbes() {
        m_probes.store(0);
        std::atomic<std::uint64_t> *const probes = &m_probes;
#pragma omp parallel num_threads(m_team.Threads())
        probes->fetch_add(1);
    }

    Sizes m_sizes;
    Team m_team;
    std::atomic<std::uint64_t> m_probes{0};
    double m_cpuSeconds = 0;
};

} // namespace

System MakeOpenMpSystem() {
    System system{"OpenMP", {}};
    auto &list = system.Implementations;
    list.push_back(Make<TaskBatches<false>>("W1", "omp task x1000 + taskwait per batch"));
    list.push_back(Make<TaskBatches<true>>("W1w", "omp task x1000 + taskwait per batch"));
    list.push_back(Make<ProducerConsumer>("W2", "omp task per producer, taskwait in tasks"));
    list.push_back(Make<FibonacciTree>("W3", "omp task x2 + taskwait per node"));
    list.push_back(Make<PingPong>("W4", "std::mutex + std::condition_variable (blocks the thread)"));
    list.push_back(Make<ContendedMutex<OmpLock>>("W5", "omp_lock_t"));
    list.push_back(Make<ContendedMutex<std::mutex>>("W5b", "std::mutex, std::lock_guard"));
    list.push_back(Make<ContendedMutex<OmpLock, kShortLockTasks, kLocksPerShortTask>>("W5s", "omp_lock_t"));
    list.push_back(Make<TriangleNumber>("W6", "omp task per slice + taskwait"));
    list.push_back(Make<ParallelLoop>("P1", "omp for in one parallel region, a barrier per pass"));
    list.push_back(Make<Idle>("W7", "team started by a parallel region, then idle"));
    return system;
}

} // namespace bench
