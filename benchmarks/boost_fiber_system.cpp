// Boost.Fiber's implementations of the workloads (see workloads.h), pooled:
// every worker thread (the main thread being one) runs
// boost::fibers::algo::work_stealing, and each task is a fiber launched with
// the default stack allocator. A counter is a latch built from
// boost::fibers::mutex and condition_variable; W3 joins its two child fibers.
//
// work_stealing keeps its scheduler registry in static members, so a process
// can start one such pool only. The harness runs every fixture in a process of
// its own, which is what makes a fresh pool per fixture possible.
#include "ftl/detail/config.h"
#include "systems.h"
#include "workloads.h"

#include <boost/fiber/algo/work_stealing.hpp>
#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/fiber.hpp>
#include <boost/fiber/mutex.hpp>
#include <boost/fiber/operations.hpp>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace bench {
namespace {

thread_local unsigned tThreadIndex = 0;

// The calling thread's index in the pool. A fiber can move to another thread
// at every wait, and the compiler may keep a thread_local's address across a
// call; FTL_NO_IPA forces a fresh look-up on every call.
FTL_NO_IPA unsigned ThreadIndex() {
    return tThreadIndex;
}

// Every fiber gets Boost's default stack: fixedsize_stack, 128 KB from
// malloc, freed when the fiber ends. With glibc's default tuning that is a
// brk or madvise system call and fresh page faults for nearly every fiber
// (the heap top is trimmed as soon as 128 KB are free), which cost Boost.Fiber
// 5-10 us per fiber on W1 and W2 here (against 0.4-1 us with the tuning below): a
// measure of glibc's trimming, not of Boost.Fiber.
// So the process keeps what it frees, as a user who tuned for fibers would:
// stacks come from the heap (not mmap) and the heap is never trimmed.
void KeepFreedStacks() {
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

// A work_stealing pool: the calling thread plus sizes.Threads - 1 threads, each
// parked in a fiber wait (so its scheduler runs, and steals, fibers) until the
// pool is destroyed. suspend = false is Boost's default: idle threads keep
// looking for work; true: they sleep until another thread wakes them.
class Pool {
public:
    Pool(unsigned threads, bool suspend) : m_threads(threads) {
        KeepFreedStacks();
        for (unsigned i = 1; i < threads; ++i) {
            m_workers.emplace_back([this, i, threads, suspend] {
                tThreadIndex = i;
                boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(threads, suspend);
                std::unique_lock<boost::fibers::mutex> lock(m_mutex);
                m_stop.wait(lock, [this] { return m_stopping; });
            });
        }
        tThreadIndex = 0;
        // Returns once every thread of the pool has registered.
        boost::fibers::use_scheduling_algorithm<boost::fibers::algo::work_stealing>(threads, suspend);
    }

    ~Pool() {
        {
            std::lock_guard<boost::fibers::mutex> lock(m_mutex);
            m_stopping = true;
        }
        m_stop.notify_all();
        for (std::thread &worker : m_workers) {
            worker.join();
        }
    }

    Pool(Pool const &) = delete;
    Pool &operator=(Pool const &) = delete;

    unsigned Threads() const { return m_threads; }

private:
    unsigned m_threads;
    boost::fibers::mutex m_mutex;
    boost::fibers::condition_variable m_stop;
    bool m_stopping = false; // guarded by m_mutex
    std::vector<std::thread> m_workers;
};

// Waits for `count` CountDown calls. Only the last CountDown takes the mutex,
// and it sets m_done under it: the waiter sees m_done only once that
// CountDown has let the mutex go, so the latch (on the waiter's stack) may die
// as soon as Wait returns.
class Latch {
public:
    explicit Latch(unsigned count) : m_count(count) {}

    void CountDown() {
        if (m_count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<boost::fibers::mutex> lock(m_mutex);
            m_done = true;
            m_zero.notify_all();
        }
    }

    void Wait() {
        std::unique_lock<boost::fibers::mutex> lock(m_mutex);
        m_zero.wait(lock, [this] { return m_done; });
    }

private:
    std::atomic<unsigned> m_count;
    boost::fibers::mutex m_mutex;
    boost::fibers::condition_variable m_zero;
    bool m_done = false; // guarded by m_mutex
};

// Launches a fiber that calls `function` and then counts the latch down.
template <class F>
void Launch(Latch &latch, F function) {
    boost::fibers::fiber([&latch, function]() mutable {
        function();
        latch.CountDown();
    }).detach();
}

// W1 ---------------------------------------------------------------------------

class EmptyBatches final : public Fixture {
public:
    explicit EmptyBatches(Sizes const &sizes) : m_pool(sizes.Threads, false), m_tally(sizes.Threads) {}

    void Run() override {
        for (unsigned batch = 0; batch < kBatches; ++batch) {
            Latch latch(kBatchSize);
            for (unsigned i = 0; i < kBatchSize; ++i) {
                Launch(latch, [this] { m_tally.Count(ThreadIndex()); });
            }
            latch.Wait();
        }
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(), std::uint64_t(kBatches) * kBatchSize);
    }

private:
    Pool m_pool;
    Tally m_tally;
};

// W2 ---------------------------------------------------------------------------

class ProducerConsumer final : public Fixture {
public:
    explicit ProducerConsumer(Sizes const &sizes)
        : m_pool(sizes.Threads, false), m_consumers(sizes.Threads), m_producers(sizes.Threads) {}

    void Run() override {
        Latch producers(kProducers);
        for (unsigned p = 0; p < kProducers; ++p) {
            Launch(producers, [this] {
                Latch consumers(kConsumersPerProducer);
                for (unsigned c = 0; c < kConsumersPerProducer; ++c) {
                    Launch(consumers, [this] { m_consumers.Count(ThreadIndex()); });
                }
                consumers.Wait();
                m_producers.Count(ThreadIndex());
            });
        }
        producers.Wait();
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("producers finished", m_producers.Take(), kProducers),
                             ExpectCount("consumers run", m_consumers.Take(),
                                         std::uint64_t(kProducers) * kConsumersPerProducer)});
    }

private:
    Pool m_pool;
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
    boost::fibers::fiber left([n, tally, &a] { a = Fib(n - 1, tally); });
    boost::fibers::fiber right([n, tally, &b] { b = Fib(n - 2, tally); });
    left.join();
    right.join();
    return a + b;
}

class FibonacciTree final : public Fixture {
public:
    explicit FibonacciTree(Sizes const &sizes)
        : m_pool(sizes.Threads, false), m_n(sizes.FibN), m_tally(sizes.Threads) {}

    void Run() override {
        boost::fibers::fiber root([this] { m_value = Fib(m_n, &m_tally); });
        root.join();
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("fib", std::exchange(m_value, 0), Fibonacci(m_n)),
                             ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(m_n))});
    }

private:
    Pool m_pool;
    unsigned m_n;
    Tally m_tally;
    std::uint64_t m_value = 0;
};

// W4 ---------------------------------------------------------------------------

class PingPong final : public Fixture {
public:
    explicit PingPong(Sizes const &sizes) : m_pool(sizes.Threads, false), m_rounds(sizes.PingPongRounds) {}

    void Run() override {
        m_value = 0;
        boost::fibers::fiber ping([this] { Side(0); });
        boost::fibers::fiber pong([this] { Side(1); });
        ping.join();
        pong.join();
    }

    Verdict Check() override {
        return ExpectCount("final value", std::exchange(m_value, 0), 2ull * m_rounds);
    }

private:
    // Side 0 waits for 2i and writes 2i + 1; side 1 waits for 2i + 1 and
    // writes 2i + 2.
    void Side(unsigned side) {
        for (std::uint64_t i = 0; i < m_rounds; ++i) {
            std::unique_lock<boost::fibers::mutex> lock(m_mutex);
            m_changed.wait(lock, [this, i, side] { return m_value == 2 * i + side; });
            ++m_value;
            m_changed.notify_all();
        }
    }

    Pool m_pool;
    unsigned m_rounds;
    boost::fibers::mutex m_mutex;
    boost::fibers::condition_variable m_changed;
    std::uint64_t m_value = 0; // guarded by m_mutex
};

// W5, W5b, W5s -----------------------------------------------------------------

// Tasks tasks of Locks increments each.
template <class Mutex, unsigned Tasks = kLockTasks, unsigned Locks = kLocksPerTask>
class ContendedMutex final : public Fixture {
public:
    explicit ContendedMutex(Sizes const &sizes) : m_pool(sizes.Threads, false), m_tally(sizes.Threads) {}

    void Run() override {
        Latch latch(Tasks);
        for (unsigned t = 0; t < Tasks; ++t) {
            Launch(latch, [this] {
                m_tally.Count(ThreadIndex());
                for (unsigned i = 0; i < Locks; ++i) {
                    std::lock_guard<Mutex> lock(m_mutex);
                    ++m_value;
                }
            });
        }
        latch.Wait();
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("sum", std::exchange(m_value, 0), std::uint64_t(Tasks) * Locks),
                             ExpectCount("tasks run", m_tally.Take(&m_busiest), Tasks)});
    }
    double BusiestThreadShare() const override { return m_busiest; }

private:
    Pool m_pool;
    Mutex m_mutex;
    std::uint64_t m_value = 0; // guarded by m_mutex
    Tally m_tally;
    double m_busiest = -1;
};

// W6 ---------------------------------------------------------------------------

class TriangleNumber final : public Fixture {
public:
    explicit TriangleNumber(Sizes const &sizes) : m_pool(sizes.Threads, false) {}

    void Run() override {
        Latch latch(static_cast<unsigned>(kTriangleTasks));
        for (std::uint64_t i = 0; i < kTriangleTasks; ++i) {
            Launch(latch, [this, i] { m_sums.Compute(i); });
        }
        latch.Wait();
        m_sums.Finish();
    }

    Verdict Check() override { return m_sums.Check(); }

private:
    Pool m_pool;
    TriangleSums m_sums;
};

// W7, W7s ----------------------------------------------------------------------

// Measures the idle window (the main thread sleeps, the other threads' schedulers
// idle), then runs a few fibers to check the pool still works.
class Idle final : public Fixture {
public:
    Idle(Sizes const &sizes, bool suspend) : m_sizes(sizes), m_pool(sizes.Threads, suspend) {}

    void Run() override {
        m_cpuSeconds = MeasureIdleCpu(m_sizes);
        Latch latch(2 * m_sizes.Threads);
        for (unsigned i = 0; i < 2 * m_sizes.Threads; ++i) {
            Launch(latch, [this] { m_probes.fetch_add(1); });
        }
        latch.Wait();
    }

    Verdict Check() override {
        return ExpectCount("probe fibers run", m_probes.exchange(0), 2ull * m_sizes.Threads);
    }
    std::vector<double> MeasuredFigures() const override { return {m_cpuSeconds}; }

private:
    Sizes m_sizes;
    Pool m_pool;
    std::atomic<std::uint64_t> m_probes{0};
    double m_cpuSeconds = 0;
};

} // namespace

System MakeBoostFiberSystem() {
    System system{"Boost.Fiber", {}};
    auto &list = system.Implementations;
    list.push_back(Make<EmptyBatches>("W1", "fiber per task, latch per batch"));
    list.push_back(Make<ProducerConsumer>("W2", "fiber per task, latch per producer"));
    list.push_back(Make<FibonacciTree>("W3", "two fibers per node, joined"));
    list.push_back(Make<PingPong>("W4", "fibers::mutex + fibers::condition_variable"));
    list.push_back(Make<ContendedMutex<boost::fibers::mutex>>("W5", "boost::fibers::mutex, std::lock_guard"));
    list.push_back(Make<ContendedMutex<std::mutex>>("W5b", "std::mutex, std::lock_guard"));
    list.push_back(Make<ContendedMutex<boost::fibers::mutex, kShortLockTasks, kLocksPerShortTask>>(
        "W5s", "boost::fibers::mutex, std::lock_guard"));
    list.push_back(Make<TriangleNumber>("W6", "fiber per slice, one latch"));
    list.push_back(Implementation{
        "W7", "work_stealing default (suspend = false), idle",
        [](Sizes const &sizes) -> std::unique_ptr<Fixture> { return std::make_unique<Idle>(sizes, false); }});
    list.push_back(Implementation{
        "W7s", "work_stealing with suspend = true, idle",
        [](Sizes const &sizes) -> std::unique_ptr<Fixture> { return std::make_unique<Idle>(sizes, true); }});
    return system;
}

} // namespace bench
