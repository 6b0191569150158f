// ftl's implementations of the workloads (see workloads.h), through the public
// API only, as a user writes them.
#include "systems.h"
#include "workloads.h"

#include "ftl/atomic_counter.h"
#include "ftl/fibtex.h"
#include "ftl/parallel_for.h"
#include "ftl/task_counter.h"
#include "ftl/task_graph.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace bench {
namespace {

// A started scheduler. Every fixture holds one as its first member, so that it
// is built before, and destroyed after, the counters and Fibtexes tied to it.
class Scheduler {
public:
    // The measurement switches go through ftl's internal door; with all of
    // them on (the default) this is TaskScheduler::Init(options).
    Scheduler(ftl::TaskSchedulerInitOptions const &options, ftl::detail::Mechanisms const &mechanisms) {
        Start(m_scheduler, options, mechanisms);
        SetPoolStatistics([this] { return ftl::FormatStats(m_scheduler.GetStats()); });
        SetWorkerTasks([this] {
            std::vector<std::uint64_t> tasks;
            for (ftl::WorkerStats const &worker : m_scheduler.GetStats().Workers) {
                tasks.push_back(worker.TasksRun);
            }
            return tasks;
        });
    }
    ~Scheduler() {
        SetPoolStatistics(nullptr);
        SetWorkerTasks(nullptr);
    }
    Scheduler(Scheduler const &) = delete;
    Scheduler &operator=(Scheduler const &) = delete;
    // All workers = all cores (or --threads), the given mechanisms, Sleep.
    Scheduler(Sizes const &sizes, ftl::detail::Mechanisms const &mechanisms)
        : Scheduler(Options(sizes), mechanisms) {}

    static ftl::TaskSchedulerInitOptions Options(Sizes const &sizes) {
        ftl::TaskSchedulerInitOptions options;
        options.ThreadPoolSize = sizes.Threads;
        return options;
    }
    static void Start(ftl::TaskScheduler &taskScheduler, ftl::TaskSchedulerInitOptions const &options,
                      ftl::detail::Mechanisms const &mechanisms) {
        if (int const error = ftl::detail::InitWithMechanisms(taskScheduler, options, mechanisms);
            error != 0) {
            throw std::runtime_error(std::string("TaskScheduler::Init failed: ") +
                                     ftl::InitErrorString(error));
        }
    }

    ftl::TaskScheduler *Get() { return &m_scheduler; }
    unsigned Threads() const { return m_scheduler.GetThreadCount(); }

private:
    ftl::TaskScheduler m_scheduler;
};

void CountTask(ftl::TaskScheduler *taskScheduler, void *arg) {
    static_cast<Tally *>(arg)->Count(taskScheduler->GetCurrentThreadIndex());
}

void WorkTask(ftl::TaskScheduler *taskScheduler, void *arg) {
    if (WorkChain(kWorkSteps) == kWorkChainExpected) {
        static_cast<Tally *>(arg)->Count(taskScheduler->GetCurrentThreadIndex());
    }
}

// W1, W1w, W1f -----------------------------------------------------------------

enum class BatchKind {
    Empty,   // W1
    Working, // W1w: tasks that work, with the busiest thread's share
    Framed,  // W1f: empty tasks, each batch after the adding thread's own work
};

// Batches of kBatchSize tasks, one counter per batch, each waited for. W1f's
// batches each come after kFrameOwnWork of the adding thread's own work (on
// the clock, outside any task), as a game's main thread hands out its jobs
// between its own work: the other workers sleep through that work, and the
// batch must wake them (or run on without them) and not be slowed by them.
template <BatchKind Kind>
class TaskBatches final : public Fixture {
public:
    TaskBatches(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_tally(m_scheduler.Threads()),
          m_tasks(kBatchSize, ftl::Task{kWorking ? WorkTask : CountTask, &m_tally}) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        for (unsigned batch = 0; batch < kRuns; ++batch) {
            if constexpr (Kind == BatchKind::Framed) {
                StayBusyFor(kFrameOwnWork);
            }
            ftl::TaskCounter counter(ts);
            ts->AddTasks(kBatchSize, m_tasks.data(), ftl::TaskPriority::Normal, &counter);
            ts->WaitForCounter(&counter);
        }
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(kWorking ? &m_busiest : nullptr),
                           std::uint64_t(kRuns) * kBatchSize);
    }
    double BusiestThreadShare() const override { return m_busiest; }

private:
    static constexpr bool kWorking = Kind == BatchKind::Working;
    static constexpr unsigned kRuns =
        kWorking ? kWorkBatches : (Kind == BatchKind::Framed ? kFrames : kBatches);

    Scheduler m_scheduler;
    Tally m_tally;
    std::vector<ftl::Task> m_tasks;
    double m_busiest = -1;
};

// W2 ---------------------------------------------------------------------------

class ProducerConsumer final : public Fixture {
public:
    ProducerConsumer(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_consumers(m_scheduler.Threads()),
          m_producers(m_scheduler.Threads()), m_producerTasks(kProducers, ftl::Task{Producer, this}) {}

    void Run() override {
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTasks(kProducers, m_producerTasks.data(), ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("producers finished", m_producers.Take(), kProducers),
                             ExpectCount("consumers run", m_consumers.Take(),
                                         std::uint64_t(kProducers) * kConsumersPerProducer)});
    }

private:
    static void Producer(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<ProducerConsumer *>(arg);
        // 1,000 Tasks are 16 KB of this fiber's stack; AddTasks copies them.
        ftl::Task consumers[kConsumersPerProducer];
        for (ftl::Task &task : consumers) {
            task = ftl::Task{CountTask, &self->m_consumers};
        }
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(kConsumersPerProducer, consumers, ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        // Counted after the wait, on whichever thread the producer resumed on.
        self->m_producers.Count(taskScheduler->GetCurrentThreadIndex());
    }

    Scheduler m_scheduler;
    Tally m_consumers;
    Tally m_producers;
    std::vector<ftl::Task> m_producerTasks;
};

// W3 ---------------------------------------------------------------------------

// Counts fiber attaches and detaches, each fiber's in a line of its own (as
// a profiler keeps a record per fiber): W3e's callbacks.
class FiberEvents {
public:
    ftl::TaskSchedulerInitOptions Options(Sizes const &sizes) {
        ftl::TaskSchedulerInitOptions options = Scheduler::Options(sizes);
        options.Callbacks.Context = this;
        options.Callbacks.OnFiberAttached = [](void *context, unsigned fiber) {
            static_cast<FiberEvents *>(context)->Count(fiber);
        };
        options.Callbacks.OnFiberDetached = [](void *context, unsigned fiber, bool) {
            static_cast<FiberEvents *>(context)->Count(fiber);
        };
        return options;
    }
    std::uint64_t Take() {
        std::uint64_t total = 0;
        for (Slot &slot : m_slots) {
            total += slot.Events.exchange(0, std::memory_order_relaxed);
        }
        return total;
    }

private:
    void Count(unsigned fiber) { m_slots[fiber % kSlots].Events.fetch_add(1, std::memory_order_relaxed); }

    static constexpr unsigned kSlots = 1024;
    struct alignas(64) Slot {
        std::atomic<std::uint64_t> Events{0};
    };
    std::array<Slot, kSlots> m_slots{};
};

// W3; kFiberCallbacks: with OnFiberAttached and OnFiberDetached installed,
// whose waits switch to a pool fiber to run the counter's tasks (W3e).
template <bool kFiberCallbacks>
class FibonacciTree final : public Fixture {
public:
    FibonacciTree(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(kFiberCallbacks ? m_events.Options(sizes) : Scheduler::Options(sizes), mechanisms),
          m_n(sizes.FibN), m_tally(m_scheduler.Threads()) {}

    void Run() override {
        m_root = Node{m_n, 0, &m_tally};
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTask(ftl::Task{Fib, &m_root}, ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override {
        std::uint64_t const events = m_events.Take();
        if (kFiberCallbacks && events == 0) {
            return Verdict::Fail("the fiber callbacks were never called");
        }
        return FirstFailure({ExpectCount("fib", m_root.Value, Fibonacci(m_n)),
                             ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(m_n))});
    }

private:
    struct Node {
        unsigned N;
        std::uint64_t Value;
        Tally *Counts;
    };

    static void Fib(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *node = static_cast<Node *>(arg);
        node->Counts->Count(taskScheduler->GetCurrentThreadIndex());
        if (node->N < 2) {
            node->Value = node->N;
            return;
        }
        Node children[2] = {Node{node->N - 1, 0, node->Counts}, Node{node->N - 2, 0, node->Counts}};
        ftl::Task const tasks[2] = {ftl::Task{Fib, &children[0]}, ftl::Task{Fib, &children[1]}};
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(2, tasks, ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        node->Value = children[0].Value + children[1].Value;
    }

    FiberEvents m_events; // before the scheduler, which calls it
    Scheduler m_scheduler;
    unsigned m_n;
    Tally m_tally;
    Node m_root{0, 0, nullptr};
};

// W1c, W3c, W3s: the same work with closures ----------------------------------

// W1 with one AddTasks(count, f) per batch: f captures a pointer, so it
// travels inside each queued task.
class EmptyBatchesClosure final : public Fixture {
public:
    EmptyBatchesClosure(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_tally(m_scheduler.Threads()) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        Tally *const tally = &m_tally;
        for (unsigned batch = 0; batch < kBatches; ++batch) {
            ftl::TaskCounter counter(ts);
            ts->AddTasks(
                kBatchSize,
                [tally](ftl::TaskScheduler *taskScheduler, unsigned) {
                    tally->Count(taskScheduler->GetCurrentThreadIndex());
                },
                ftl::TaskPriority::Normal, &counter);
            ts->WaitForCounter(&counter);
        }
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(), std::uint64_t(kBatches) * kBatchSize);
    }

private:
    Scheduler m_scheduler;
    Tally m_tally;
};

// W3 with closures: kTwoClosures adds each child with AddTask and a closure of
// three pointers (24 bytes: in a slot of the closure pool); otherwise one
// AddTasks(2, f) per node, f capturing a pointer (inside the queued tasks).
template <bool kTwoClosures>
class FibonacciClosures final : public Fixture {
public:
    FibonacciClosures(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_n(sizes.FibN), m_tally(m_scheduler.Threads()) {}

    void Run() override {
        m_root = Node{m_n, 0};
        ftl::TaskCounter counter(m_scheduler.Get());
        Node *const root = &m_root;
        Tally *const tally = &m_tally;
        m_scheduler.Get()->AddTask([root, tally](ftl::TaskScheduler *ts) { Fib(ts, root, tally); },
                                   ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override {
        return FirstFailure({ExpectCount("fib", m_root.Value, Fibonacci(m_n)),
                             ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(m_n))});
    }

private:
    struct Node {
        unsigned N;
        std::uint64_t Value;
    };

    static void Fib(ftl::TaskScheduler *ts, Node *node, Tally *tally) {
        tally->Count(ts->GetCurrentThreadIndex());
        if (node->N < 2) {
            node->Value = node->N;
            return;
        }
        Node children[2] = {Node{node->N - 1, 0}, Node{node->N - 2, 0}};
        ftl::TaskCounter counter(ts);
        if constexpr (kTwoClosures) {
            for (Node &child : children) {
                ts->AddTask([ts, child = &child, tally] { Fib(ts, child, tally); }, ftl::TaskPriority::Normal,
                            &counter);
            }
        } else {
            struct Both {
                Node *Children;
                Tally *Counts;
            };
            // One pointer to both, so the closure fits in the queued task.
            Both const both{children, tally};
            Both const *const shared = &both;
            ts->AddTasks(
                2,
                [shared](ftl::TaskScheduler *taskScheduler, unsigned i) {
                    Fib(taskScheduler, &shared->Children[i], shared->Counts);
                },
                ftl::TaskPriority::Normal, &counter);
        }
        ts->WaitForCounter(&counter);
        node->Value = children[0].Value + children[1].Value;
    }

    Scheduler m_scheduler;
    unsigned m_n;
    Tally m_tally;
    Node m_root{0, 0};
};

// W4 ---------------------------------------------------------------------------

// Ping waits for 2i and writes 2i + 1; pong waits for 2i + 1 and writes 2i + 2.
class PingPong final : public Fixture {
public:
    PingPong(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_rounds(sizes.PingPongRounds), m_value(m_scheduler.Get()) {}

    void Run() override {
        m_value.Store(0);
        ftl::Task const tasks[2] = {ftl::Task{Ping, this}, ftl::Task{Pong, this}};
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTasks(2, tasks, ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override { return ExpectCount("final value", m_value.Load(), 2ull * m_rounds); }

private:
    static void Ping(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<PingPong *>(arg);
        for (unsigned i = 0; i < self->m_rounds; ++i) {
            taskScheduler->WaitForCounter(&self->m_value, 2 * i);
            self->m_value.FetchAdd(1);
        }
    }
    static void Pong(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<PingPong *>(arg);
        for (unsigned i = 0; i < self->m_rounds; ++i) {
            taskScheduler->WaitForCounter(&self->m_value, 2 * i + 1);
            self->m_value.FetchAdd(1);
        }
    }

    Scheduler m_scheduler;
    unsigned m_rounds;
    ftl::FullAtomicCounter m_value;
};

// W5, W5b, W5s -----------------------------------------------------------------

// Tasks tasks of Locks increments each.
template <unsigned Tasks = kLockTasks, unsigned Locks = kLocksPerTask>
class ContendedFibtex final : public Fixture {
public:
    ContendedFibtex(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_lock(m_scheduler.Get()),
          m_tasks(Tasks, ftl::Task{Increment, this}), m_tally(sizes.Threads) {}

    void Run() override {
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTasks(Tasks, m_tasks.data(), ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override {
        std::uint64_t const value = m_value;
        m_value = 0;
        return FirstFailure({ExpectCount("sum", value, std::uint64_t(Tasks) * Locks),
                             ExpectCount("tasks run", m_tally.Take(&m_busiest), Tasks)});
    }
    double BusiestThreadShare() const override { return m_busiest; }

private:
    static void Increment(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<ContendedFibtex *>(arg);
        self->m_tally.Count(taskScheduler->GetCurrentThreadIndex());
        for (unsigned i = 0; i < Locks; ++i) {
            std::lock_guard<ftl::Fibtex> lock(self->m_lock);
            ++self->m_value;
        }
    }

    Scheduler m_scheduler;
    ftl::Fibtex m_lock;
    std::uint64_t m_value = 0; // guarded by m_lock
    std::vector<ftl::Task> m_tasks;
    Tally m_tally;
    double m_busiest = -1;
};

// W6 ---------------------------------------------------------------------------

class TriangleNumber final : public Fixture {
public:
    TriangleNumber(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_items(kTriangleTasks), m_tasks(kTriangleTasks) {
        for (std::uint64_t i = 0; i < kTriangleTasks; ++i) {
            m_items[i].Range = TriangleSlice(i);
            m_tasks[i] = ftl::Task{SumSlice, &m_items[i]};
        }
    }

    void Run() override {
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTasks(static_cast<unsigned>(kTriangleTasks), m_tasks.data(),
                                    ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
        m_total = 0;
        for (Item const &item : m_items) {
            m_total += item.Sum;
        }
    }

    Verdict Check() override {
        for (Item &item : m_items) {
            item.Sum = 0;
        }
        return ExpectCount("total", m_total, kTriangleExpected);
    }

private:
    struct Item {
        Slice Range;
        std::uint64_t Sum;
    };

    static void SumSlice(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        auto *item = static_cast<Item *>(arg);
        item->Sum = SumRange(item->Range.First, item->Range.Last);
    }

    Scheduler m_scheduler;
    std::vector<Item> m_items;
    std::vector<ftl::Task> m_tasks;
    std::uint64_t m_total = 0;
};

// P1, P1h: a parallel loop ------------------------------------------------------

// kHandWritten: each pass is AddTasks of kLoopBatchesPerWorker batches per
// worker and a TaskCounter, as a user writes it without ParallelFor.
template <bool kHandWritten>
class ParallelLoop final : public Fixture {
public:
    ParallelLoop(Sizes const &sizes, ftl::detail::Mechanisms mechanisms) : m_scheduler(sizes, mechanisms) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        std::uint64_t *const values = m_values.Reset();
        for (unsigned pass = 0; pass < kLoopPasses; ++pass) {
            if constexpr (kHandWritten) {
                unsigned const batches = kLoopBatchesPerWorker * m_scheduler.Threads();
                ftl::TaskCounter counter(ts);
                ts->AddTasks(
                    batches,
                    [values, batches](unsigned batch) {
                        std::size_t const last = kLoopSize * (batch + 1) / batches;
                        for (std::size_t i = kLoopSize * batch / batches; i < last; ++i) {
                            values[i] = LoopStep(values[i]);
                        }
                    },
                    ftl::TaskPriority::Normal, &counter);
                ts->WaitForCounter(&counter);
            } else {
                ftl::ParallelFor(ts, std::size_t{0}, kLoopSize,
                                 [values](std::size_t i) { values[i] = LoopStep(values[i]); });
            }
        }
    }

    Verdict Check() override { return m_values.Check(); }

private:
    Scheduler m_scheduler;
    LoopValues m_values;
};

// W7, W7s ----------------------------------------------------------------------

// Measures the idle window, then runs one task to check that the pool still
// works after it.
class Idle final : public Fixture {
public:
    Idle(Sizes const &sizes, ftl::TaskSchedulerInitOptions const &options,
         ftl::detail::Mechanisms const &mechanisms)
        : m_sizes(sizes), m_scheduler(options, mechanisms) {}

    void Run() override {
        m_cpuSeconds = MeasureIdleCpu(m_sizes);
        ftl::TaskCounter counter(m_scheduler.Get());
        m_scheduler.Get()->AddTask(ftl::Task{Probe, &m_probed}, ftl::TaskPriority::Normal, &counter);
        m_scheduler.Get()->WaitForCounter(&counter);
    }

    Verdict Check() override { return ExpectCount("probe tasks run", std::exchange(m_probed, 0), 1); }
    std::vector<double> MeasuredFigures() const override { return {m_cpuSeconds}; }

private:
    static void Probe(ftl::TaskScheduler * /*taskScheduler*/, void *arg) { ++*static_cast<unsigned *>(arg); }

    Sizes m_sizes;
    Scheduler m_scheduler;
    double m_cpuSeconds = 0;
    unsigned m_probed = 0;
};

// W7t: idle with a pending SleepFor and a timed wait -----------------------------

// The idle window of W7, but with a task asleep in SleepFor for all of it and
// the main thread in a timed wait on a flag nobody clears: the scheduler has
// pending deadlines and nothing else to do.
class IdleWithTimers final : public Fixture {
public:
    IdleWithTimers(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_sizes(sizes), m_scheduler(sizes, mechanisms) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        auto const window = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(m_sizes.IdleSeconds));
        ftl::TaskCounter sleeper(ts);
        ftl::AtomicFlag never(ts, 1);
        double const before = ProcessCpuSeconds();
        ts->AddTask([window](ftl::TaskScheduler *taskScheduler) { taskScheduler->SleepFor(window); },
                    ftl::TaskPriority::Normal, &sleeper);
        m_timedOut += ts->WaitForCounter(&never, window) ? 0u : 1u;
        ts->WaitForCounter(&sleeper);
        double const after = ProcessCpuSeconds();
        m_cpuSeconds = (after - before) * (kIdleReportSeconds / m_sizes.IdleSeconds);
    }

    Verdict Check() override {
        return ExpectCount("timed waits that timed out", std::exchange(m_timedOut, 0), 1);
    }
    std::vector<double> MeasuredFigures() const override { return {m_cpuSeconds}; }

private:
    Sizes m_sizes;
    Scheduler m_scheduler;
    double m_cpuSeconds = 0;
    unsigned m_timedOut = 0;
};

// T1: how late SleepFor and timed waits return -----------------------------------

// Tasks sleep 1 ms (and time out of a 1 ms wait) one at a time, from an
// otherwise idle scheduler; each sample is how long after its deadline the
// task ran again.
class TimerLateness final : public Fixture {
public:
    TimerLateness(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_samples(sizes.WakeSamples) {}

    void Run() override {
        m_lateness.assign(m_samples, -1);
        ftl::TaskCounter done(m_scheduler.Get());
        std::vector<std::int64_t> *const lateness = &m_lateness;
        unsigned const samples = m_samples;
        m_scheduler.Get()->AddTask(
            [lateness, samples](ftl::TaskScheduler *ts) {
                ftl::AtomicFlag never(ts, 1);
                for (unsigned i = 0; i < samples; ++i) {
                    std::int64_t const start = NowNs();
                    if (i % 2 == 0) {
                        ts->SleepFor(kTimerDelay);
                    } else {
                        ts->WaitForCounter(&never, kTimerDelay);
                    }
                    (*lateness)[i] = NowNs() - start - kTimerDelay.count();
                }
            },
            ftl::TaskPriority::Normal, &done);
        m_scheduler.Get()->WaitForCounter(&done);
    }

    Verdict Check() override { return CheckWakeSamples(m_lateness, m_samples); }
    std::vector<double> MeasuredFigures() const override { return WakeFigures(m_lateness); }

private:
    static constexpr std::chrono::nanoseconds kTimerDelay{1000000};
    Scheduler m_scheduler;
    unsigned m_samples;
    std::vector<std::int64_t> m_lateness;
};

// G1: a TaskGraph run per batch -------------------------------------------------

// W1's size as a graph: 1,000 nodes (a root, 998 nodes after it, and a sink
// after those), built once and run kBatches times, each run waited for.
class GraphRuns final : public Fixture {
public:
    GraphRuns(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_tally(m_scheduler.Threads()), m_graph(m_scheduler.Get()) {
        Tally *const tally = &m_tally;
        auto count = [tally](ftl::TaskScheduler *taskScheduler) {
            tally->Count(taskScheduler->GetCurrentThreadIndex());
        };
        ftl::TaskGraph::Node root = m_graph.Add(count);
        ftl::TaskGraph::Node sink = m_graph.Add(count);
        for (unsigned i = 2; i < kBatchSize; ++i) {
            ftl::TaskGraph::Node node = m_graph.Add(count);
            root.Precede(node);
            node.Precede(sink);
        }
    }

    void Run() override {
        ftl::TaskCounter done(m_scheduler.Get());
        for (unsigned batch = 0; batch < kBatches; ++batch) {
            m_graph.Run(&done);
            m_scheduler.Get()->WaitForCounter(&done);
        }
    }

    Verdict Check() override {
        return ExpectCount("graph nodes run", m_tally.Take(), std::uint64_t(kBatches) * kBatchSize);
    }

private:
    Scheduler m_scheduler;
    Tally m_tally;
    ftl::TaskGraph m_graph;
};

// A1, A2: tasks after tasks ---------------------------------------------------

// W1's batches with AddTaskAfter: each batch's 1,000 tasks start after a gate
// counter held at 1 while they are added, so every one waits in its record
// (none finds the gate at 0), and the gate's release starts them all.
class AfterBatches final : public Fixture {
public:
    AfterBatches(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_tally(m_scheduler.Threads()) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        ftl::Task const task{CountTask, &m_tally};
        for (unsigned batch = 0; batch < kBatches; ++batch) {
            ftl::TaskCounter gate(ts, 1);
            ftl::TaskCounter counter(ts);
            for (unsigned i = 0; i < kBatchSize; ++i) {
                ts->AddTaskAfter({&gate}, task, ftl::TaskPriority::Normal, &counter);
            }
            gate.Decrement();
            ts->WaitForCounter(&counter);
        }
    }

    Verdict Check() override {
        return ExpectCount("tasks run", m_tally.Take(), std::uint64_t(kBatches) * kBatchSize);
    }

private:
    Scheduler m_scheduler;
    Tally m_tally;
};

// A chain of kChainLinks tasks, each AddTaskAfter the previous one's counter,
// all added before the first runs. Figures: ns per link, and how many fibers
// the run added to the pool's peak (FibersPeak): none, where a fiber parked
// per link would add one each. Check: each link ran after the one before,
// and no link ran on a stack deeper than the others' (no recursion).
class AfterChain final : public Fixture {
public:
    AfterChain(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_frames(kChainLinks), m_fibers(kChainLinks), m_order(kChainLinks) {
    }

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        unsigned const peakBefore = ts->GetStats().FibersPeak;
        m_next.store(0, std::memory_order_relaxed);
        auto const start = std::chrono::steady_clock::now();
        std::deque<ftl::TaskCounter> counters;
        counters.emplace_back(ts);
        ts->AddTask(Link{this, 0}, ftl::TaskPriority::Normal, &counters.back());
        for (unsigned i = 1; i < kChainLinks; ++i) {
            ftl::TaskCounter &previous = counters.back();
            counters.emplace_back(ts);
            ts->AddTaskAfter({&previous}, Link{this, i}, ftl::TaskPriority::Normal, &counters.back());
        }
        ts->WaitForCounter(&counters.back());
        double const took =
            std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
        m_figures = {took / kChainLinks, double(ts->GetStats().FibersPeak - peakBefore)};
    }

    Verdict Check() override {
        if (Verdict const count = ExpectCount("links run", m_next.exchange(0), kChainLinks); !count.Ok) {
            return count;
        }
        for (unsigned i = 0; i < kChainLinks; ++i) {
            if (m_order[i] != i) {
                return Verdict::Fail("link " + std::to_string(i) + " ran as number " +
                                     std::to_string(m_order[i]));
            }
        }
        // Per fiber, the lowest and highest frame of a link it ran. A
        // worker's loop and the Init thread's wait start links a few frames
        // apart; recursion would spread them over the stack.
        std::map<unsigned, std::pair<std::uintptr_t, std::uintptr_t>> frames;
        for (unsigned i = 0; i < kChainLinks; ++i) {
            auto const seen = frames.emplace(m_fibers[i], std::make_pair(m_frames[i], m_frames[i])).first;
            seen->second.first = std::min(seen->second.first, m_frames[i]);
            seen->second.second = std::max(seen->second.second, m_frames[i]);
        }
        for (auto const &fiber : frames) {
            if (std::uintptr_t const spread = fiber.second.second - fiber.second.first;
                spread > kFrameSpread) {
                return Verdict::Fail("the links fiber " + std::to_string(fiber.first) + " ran spread over " +
                                     std::to_string(spread) + " bytes of its stack");
            }
        }
        return Verdict::Pass();
    }
    std::vector<double> MeasuredFigures() const override { return m_figures; }

private:
    static constexpr std::uintptr_t kFrameSpread = 64 * 1024;

    // Link i of the chain: where its frame was, on which fiber, and when.
    struct Link {
        AfterChain *Chain;
        unsigned I;
        void operator()() const {
            // The frame, not a local's address: AddressSanitizer moves
            // locals to a stack of its own.
            Chain->m_frames[I] = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
            Chain->m_fibers[I] = Chain->m_scheduler.Get()->GetCurrentFiberIndex();
            Chain->m_order[I] = Chain->m_next.fetch_add(1, std::memory_order_relaxed);
        }
    };

    Scheduler m_scheduler;
    std::vector<std::uintptr_t> m_frames;
    std::vector<unsigned> m_fibers;
    std::vector<unsigned> m_order;
    std::atomic<unsigned> m_next{0};
    std::vector<double> m_figures;
};

// C1: cancelling queued tasks ---------------------------------------------------

// kCancelledTasks tasks queued with one counter by the Init thread, while a
// task on every other worker spins, so that none starts; then Cancel, the
// spinners released, and the wait. Figures: Cancel's time, and the time from
// Cancel to the wait's return. Check: none of the tasks ran.
class CancelQueued final : public Fixture {
public:
    CancelQueued(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_tally(m_scheduler.Threads()) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        std::atomic<unsigned> spinning{0};
        std::atomic<bool> release{false};
        ftl::TaskCounter spinners(ts);
        unsigned const others = m_scheduler.Threads() - 1;
        for (unsigned i = 0; i < others; ++i) {
            ts->AddTask(
                [&spinning, &release] {
                    spinning.fetch_add(1);
                    while (!release.load()) {
                        std::this_thread::yield();
                    }
                },
                ftl::TaskPriority::High, &spinners);
        }
        while (spinning.load() != others) {
            std::this_thread::yield();
        }
        ftl::TaskCounter counter(ts);
        Tally *const tally = &m_tally;
        ts->AddTasks(
            kCancelledTasks,
            [tally](ftl::TaskScheduler *taskScheduler, unsigned) {
                tally->Count(taskScheduler->GetCurrentThreadIndex());
            },
            ftl::TaskPriority::Normal, &counter);
        auto const start = std::chrono::steady_clock::now();
        counter.Cancel();
        auto const cancelled = std::chrono::steady_clock::now();
        release.store(true);
        ts->WaitForCounter(&counter);
        auto const waited = std::chrono::steady_clock::now();
        ts->WaitForCounter(&spinners);
        m_figures = {std::chrono::duration<double, std::micro>(cancelled - start).count(),
                     std::chrono::duration<double, std::milli>(waited - start).count()};
    }

    Verdict Check() override { return ExpectCount("cancelled tasks run", m_tally.Take(), 0); }
    std::vector<double> MeasuredFigures() const override { return m_figures; }

private:
    Scheduler m_scheduler;
    Tally m_tally;
    std::vector<double> m_figures;
};

// S1 ---------------------------------------------------------------------------

// Starts and destroys schedulers with a small and a large pool, alternately
// (so that drift hits both alike), and reports the median Init time of each.
// Each started scheduler runs one task, so the pool works before it goes.
class Startup final : public Fixture {
public:
    Startup(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_sizes(sizes), m_mechanisms(mechanisms) {}

    void Run() override {
        std::vector<double> small;
        std::vector<double> large;
        for (unsigned i = 0; i < kStarts; ++i) {
            small.push_back(StartOnce(kSmallPool));
            large.push_back(StartOnce(kLargePool));
        }
        m_figures = {MedianOf(small), MedianOf(large)};
    }

    Verdict Check() override {
        return ExpectCount("probe tasks run", std::exchange(m_probed, 0), 2ull * kStarts);
    }
    std::vector<double> MeasuredFigures() const override { return m_figures; }

private:
    static void Probe(ftl::TaskScheduler * /*taskScheduler*/, void *arg) { ++*static_cast<unsigned *>(arg); }

    // Microseconds Init took.
    double StartOnce(unsigned poolSize) {
        ftl::TaskSchedulerInitOptions options = Scheduler::Options(m_sizes);
        options.FiberPoolSize = poolSize;
        ftl::TaskScheduler taskScheduler;
        auto const start = std::chrono::steady_clock::now();
        Scheduler::Start(taskScheduler, options, m_mechanisms);
        double const micros =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        ftl::TaskCounter counter(&taskScheduler);
        taskScheduler.AddTask(ftl::Task{Probe, &m_probed}, ftl::TaskPriority::Normal, &counter);
        taskScheduler.WaitForCounter(&counter);
        return micros;
    }

    Sizes m_sizes;
    ftl::detail::Mechanisms m_mechanisms;
    unsigned m_probed = 0;
    std::vector<double> m_figures;
};

// W8 ---------------------------------------------------------------------------

// The main thread (worker 0) waits on a counter that only the driver thread
// releases, so every worker is parked between samples. The driver, a thread
// that is not a worker, adds one task per sample after kWakeGap of idleness;
// the task reads the clock first thing. W8b (kBusyAdder): the driver stays
// busy for kBusyAfterAdd after each add.
//
// With Sizes::PairedThreads (--threads-pair), a second scheduler of that many
// workers runs beside the first (of Sizes::Threads), its worker 0 a thread of
// its own, parked on a counter for the fixture's life. The driver takes the
// samples of both in turn (ABBA: which one goes first alternates), so that
// the host's drift, which moves a wake's latency by 2x from one second to
// the next, falls on both alike; the figures are the first scheduler's, then
// the second's.
template <bool kBusyAdder>
class WakeLatency final : public Fixture {
public:
    WakeLatency(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_samples(sizes.WakeSamples),
          m_schedulers(sizes.PairedThreads == 0 ? 1 : 2) {
        m_targets[0] = m_scheduler.Get();
        if (m_schedulers == 2) {
            StartPaired(sizes, mechanisms);
        }
    }

    ~WakeLatency() override {
        if (m_pairedThread.joinable()) {
            m_pairedLife->Decrement();
            m_pairedThread.join();
        }
    }

    void Run() override {
        unsigned const total = m_samples * m_schedulers;
        for (auto &latencies : m_latencies) {
            latencies = std::vector<std::atomic<std::int64_t>>(m_samples);
        }
        m_starts.assign(total, 0);
        m_taken.store(0, std::memory_order_relaxed);
        m_warmedUp.store(0, std::memory_order_relaxed);
        ftl::TaskCounter done(m_scheduler.Get());
        done.Add(1); // the driver's share, released when it has added its last task
        ftl::TaskCounter *counters[2] = {&done, m_pairedLife};
        std::thread driver([this, total, &done, &counters] {
            // The driver stands for a long-lived adder, but it is a new
            // thread each run, and a new thread's first busy spell is not
            // cut short by the worker it woke on its CPU: every run's first
            // W8b sample took the whole kBusyAfterAdd (32 runs of 32), and
            // it always went to the first scheduler. So it first adds one
            // unmeasured task to each scheduler, as it adds the probes.
            for (unsigned which = 0; which < m_schedulers; ++which) {
                std::this_thread::sleep_for(kWakeGap);
                m_targets[which]->AddTask(ftl::Task{WarmUpTask, this}, ftl::TaskPriority::Normal,
                                          counters[which]);
                if (kBusyAdder) {
                    StayBusyAfterAdd();
                }
                while (m_warmedUp.load(std::memory_order_acquire) <= which) {
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                }
            }
            for (unsigned i = 0; i < total; ++i) {
                std::this_thread::sleep_for(kWakeGap);
                // The previous probe ran long ago; make sure before m_probe is reused.
                // (Checked here, not right after the add, so that nothing runs on
                // this thread while a worker wakes.)
                WaitForSample(i);
                unsigned const sample = i / m_schedulers;
                unsigned const which = (i + sample) % m_schedulers; // ABBA
                m_probe = Probe{this, which, sample, i};
                m_starts[i] = NowNs();
                m_targets[which]->AddTask(ftl::Task{ProbeTask, &m_probe}, ftl::TaskPriority::Normal,
                                          counters[which]);
                if (kBusyAdder) {
                    StayBusyAfterAdd();
                }
            }
            WaitForSample(total);
            done.Decrement();
        });
        m_scheduler.Get()->WaitForCounter(&done);
        driver.join();
    }

    Verdict Check() override {
        for (unsigned which = 0; which < m_schedulers; ++which) {
            if (Verdict verdict = CheckWakeSamples(Latencies(which), m_samples); !verdict.Ok) {
                return verdict;
            }
        }
        return Verdict::Pass();
    }
    std::vector<double> MeasuredFigures() const override {
        std::vector<double> figures;
        for (unsigned which = 0; which < m_schedulers; ++which) {
            std::vector<double> const more = WakeFigures(Latencies(which));
            figures.insert(figures.end(), more.begin(), more.end());
        }
        return figures;
    }
    // Both figures of a scheduler (median, p99) come from its samples.
    std::vector<std::vector<double>> MeasuredSamples() const override {
        std::vector<std::vector<double>> samples;
        for (unsigned which = 0; which < m_schedulers; ++which) {
            std::vector<double> const microseconds = Microseconds(Latencies(which));
            samples.push_back(microseconds);
            samples.push_back(microseconds);
        }
        return samples;
    }

private:
    struct Probe {
        WakeLatency *Self;
        unsigned Which;  // the scheduler
        unsigned Sample; // its sample
        unsigned Index;  // in the driver's order
    };

    // The second scheduler lives on a thread of its own (with the process's
    // CPUs, not the one worker 0 of the first pinned it to), which Inits it,
    // waits on m_pairedLife (the driver's tasks count on it too) and destroys
    // it. Its pool statistics are not reported.
    void StartPaired(Sizes const &sizes, ftl::detail::Mechanisms const &mechanisms) {
        std::promise<void> started;
        std::future<void> ready = started.get_future();
        m_pairedThread = std::thread([this, sizes, mechanisms, &started] {
            AllowStartCpus();
            Sizes paired = sizes;
            paired.Threads = sizes.PairedThreads;
            ftl::TaskScheduler taskScheduler;
            try {
                Scheduler::Start(taskScheduler, Scheduler::Options(paired), mechanisms);
            } catch (...) {
                started.set_exception(std::current_exception());
                return;
            }
            ftl::TaskCounter life(&taskScheduler);
            life.Add(1);
            m_targets[1] = &taskScheduler;
            m_pairedLife = &life;
            started.set_value();
            taskScheduler.WaitForCounter(&life);
        });
        try {
            ready.get();
        } catch (...) {
            m_pairedThread.join();
            throw;
        }
    }

    static void ProbeTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        std::int64_t const now = NowNs();
        auto const *probe = static_cast<Probe const *>(arg);
        WakeLatency *self = probe->Self;
        self->m_latencies[probe->Which][probe->Sample].store(now - self->m_starts[probe->Index],
                                                             std::memory_order_relaxed);
        self->m_taken.fetch_add(1, std::memory_order_release);
    }

    static void WarmUpTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        static_cast<WakeLatency *>(arg)->m_warmedUp.fetch_add(1, std::memory_order_release);
    }

    // Waits until the probe before sample `next` (in the driver's order) has run.
    void WaitForSample(unsigned next) const {
        while (m_taken.load(std::memory_order_acquire) < next) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    std::vector<std::int64_t> Latencies(unsigned which) const {
        std::vector<std::int64_t> values;
        for (std::atomic<std::int64_t> const &latency : m_latencies[which]) {
            values.push_back(latency.load(std::memory_order_relaxed));
        }
        return values;
    }

    Scheduler m_scheduler;
    unsigned m_samples;
    unsigned m_schedulers; // 2 with a paired scheduler
    ftl::TaskScheduler *m_targets[2] = {nullptr, nullptr};
    std::thread m_pairedThread;
    ftl::TaskCounter *m_pairedLife = nullptr; // the paired scheduler's, on its thread's stack
    Probe m_probe{nullptr, 0, 0, 0};
    std::vector<std::int64_t> m_starts;
    std::vector<std::atomic<std::int64_t>> m_latencies[2];
    std::atomic<unsigned> m_taken{0};    // probes that have run
    std::atomic<unsigned> m_warmedUp{0}; // the driver's unmeasured tasks that have run
};

// M1 ---------------------------------------------------------------------------

// Every worker is busy with long tasks (kLongTaskNs of spinning each) from a
// deque of its own: one spawner task per worker adds them and waits. A thread
// outside adds a probe task every kProbeGap. The figure is how long a probe
// waits in the global queue: what the global-queue interval
// (the AdaptiveGlobalInterval mechanism) decides while no worker's local
// work runs out.
class GlobalQueueLatency final : public Fixture {
public:
    GlobalQueueLatency(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_work(kLongTasks, ftl::Task{LongTask, this}),
          m_spawners(m_scheduler.Threads(), ftl::Task{Spawner, this}) {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        m_probes.clear();
        m_probes.reserve(kMaxProbes);
        m_done.store(false, std::memory_order_relaxed);
        ftl::TaskCounter work(ts);
        ftl::TaskCounter probes(ts);
        std::thread driver([this, ts, &probes] {
            while (!m_done.load(std::memory_order_acquire) && m_probes.size() < kMaxProbes) {
                std::this_thread::sleep_for(kProbeGap);
                m_probes.push_back(Probe{this, NowNs(), -1});
                // The vector never reallocates (reserved above), so the probe
                // stays where the task finds it.
                ts->AddTask(ftl::Task{ProbeTask, &m_probes.back()}, ftl::TaskPriority::Normal, &probes);
            }
        });
        ts->AddTasks(static_cast<unsigned>(m_spawners.size()), m_spawners.data(), ftl::TaskPriority::Normal,
                     &work);
        ts->WaitForCounter(&work);
        m_done.store(true, std::memory_order_release);
        driver.join();
        ts->WaitForCounter(&probes);
    }

    Verdict Check() override {
        for (Probe const &probe : m_probes) {
            if (probe.LatencyNs < 0) {
                return Verdict::Fail("a probe task did not run");
            }
        }
        if (m_probes.size() < kMinProbes) {
            return Verdict::Fail("fewer probes than expected: the long tasks ran too fast");
        }
        return ExpectCount("long tasks run", m_longRuns.exchange(0), m_work.size() * m_spawners.size());
    }

    std::vector<double> MeasuredFigures() const override {
        std::vector<std::int64_t> latencies;
        for (Probe const &probe : m_probes) {
            latencies.push_back(probe.LatencyNs);
        }
        return WakeFigures(latencies);
    }

private:
    static constexpr std::int64_t kLongTaskNs = 200000;
    static constexpr unsigned kLongTasks = 150; // per worker: 30 ms of work each
    static constexpr std::chrono::milliseconds kProbeGap{2};
    static constexpr std::size_t kMaxProbes = 64;
    static constexpr std::size_t kMinProbes = 5;

    struct Probe {
        GlobalQueueLatency *Self;
        std::int64_t AddedNs;
        std::int64_t LatencyNs;
    };

    static void LongTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        auto *self = static_cast<GlobalQueueLatency *>(arg);
        std::int64_t const start = NowNs();
        while (NowNs() - start < kLongTaskNs) {
        }
        self->m_longRuns.fetch_add(1, std::memory_order_relaxed);
    }

    static void Spawner(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<GlobalQueueLatency *>(arg);
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(static_cast<unsigned>(self->m_work.size()), self->m_work.data(),
                                ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
    }

    static void ProbeTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        auto *probe = static_cast<Probe *>(arg);
        probe->LatencyNs = NowNs() - probe->AddedNs;
    }

    Scheduler m_scheduler;
    std::vector<ftl::Task> m_work;     // one spawner's long tasks
    std::vector<ftl::Task> m_spawners; // one per worker
    std::vector<Probe> m_probes;       // written by the driver; read after the waits
    std::atomic<bool> m_done{false};
    std::atomic<std::uint64_t> m_longRuns{0};
};

// M2 ---------------------------------------------------------------------------

// A task (the main thread) runs kTinyBatches of W1's batches, whose steals
// keep a thief busy for less than they cost, so an idle worker backs off
// from other workers' tasks (the StealBackoff mechanism). Then it adds two
// long tasks (kLongTaskNs of spinning each) and waits: the figure is how
// long after the add the later of the two starts. With 2 workers or more
// that is how soon a backed-off thief picks up work that does pay; at 1
// worker it is the first task's length. A longer backoff makes this figure
// worse and W1's and G1's better (docs/design.adoc, "The steal backoff").
class LongAfterTiny final : public Fixture {
public:
    LongAfterTiny(Sizes const &sizes, ftl::detail::Mechanisms mechanisms)
        : m_scheduler(sizes, mechanisms), m_samples(sizes.WakeSamples), m_tally(m_scheduler.Threads()),
          m_tiny(kBatchSize, ftl::Task{CountTask, &m_tally}), m_long{ftl::Task{LongTask, &m_starts[0]},
                                                                     ftl::Task{LongTask, &m_starts[1]}} {}

    void Run() override {
        ftl::TaskScheduler *const ts = m_scheduler.Get();
        m_latencies.assign(m_samples, 0);
        m_longRuns = 0;
        for (unsigned sample = 0; sample < m_samples; ++sample) {
            for (unsigned batch = 0; batch < kTinyBatches; ++batch) {
                ftl::TaskCounter counter(ts);
                ts->AddTasks(kBatchSize, m_tiny.data(), ftl::TaskPriority::Normal, &counter);
                ts->WaitForCounter(&counter);
            }
            m_starts[0].store(0, std::memory_order_relaxed);
            m_starts[1].store(0, std::memory_order_relaxed);
            ftl::TaskCounter counter(ts);
            std::int64_t const added = NowNs();
            ts->AddTasks(2, m_long, ftl::TaskPriority::Normal, &counter);
            ts->WaitForCounter(&counter);
            std::int64_t const first = m_starts[0].load(std::memory_order_relaxed);
            std::int64_t const second = m_starts[1].load(std::memory_order_relaxed);
            std::int64_t const later = std::max(first, second);
            // 0 (a task that never started) stays non-positive and fails the check.
            m_latencies[sample] = later == 0 ? 0 : later - added;
            m_longRuns += (first != 0 ? 1u : 0u) + (second != 0 ? 1u : 0u);
        }
    }

    Verdict Check() override {
        return FirstFailure({CheckWakeSamples(m_latencies, m_samples),
                             ExpectCount("long tasks run", m_longRuns, 2 * std::uint64_t(m_samples)),
                             ExpectCount("tiny tasks run", m_tally.Take(),
                                         std::uint64_t(m_samples) * kTinyBatches * kBatchSize)});
    }

    std::vector<double> MeasuredFigures() const override { return WakeFigures(m_latencies); }

    std::vector<std::vector<double>> MeasuredSamples() const override {
        std::vector<double> const microseconds = Microseconds(m_latencies);
        return {microseconds, microseconds};
    }

private:
    // 20 of W1's batches: far more worthless steals than the backoff needs
    // to reach its longest, in 0.1 to 0.4 ms per sample.
    static constexpr unsigned kTinyBatches = 20;
    static constexpr std::int64_t kLongTaskNs = 1000000;

    static void LongTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        std::int64_t const start = NowNs();
        static_cast<std::atomic<std::int64_t> *>(arg)->store(start, std::memory_order_relaxed);
        while (NowNs() - start < kLongTaskNs) {
        }
    }

    Scheduler m_scheduler;
    unsigned m_samples;
    Tally m_tally;
    std::vector<ftl::Task> m_tiny;
    std::atomic<std::int64_t> m_starts[2] = {};
    ftl::Task m_long[2];
    std::vector<std::int64_t> m_latencies;
    std::uint64_t m_longRuns = 0;
};

template <class T>
Implementation Make(char const *workloadId, char const *primitive, ftl::detail::Mechanisms mechanisms) {
    return Implementation{workloadId, primitive,
                          [mechanisms](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                              return std::make_unique<T>(sizes, mechanisms);
                          }};
}

// An implementation whose fixture honours Sizes::PairedThreads.
Implementation InterleavingPair(Implementation implementation) {
    implementation.InterleavesPair = true;
    return implementation;
}

} // namespace

System MakeFtlSystem(std::string name, ftl::detail::Mechanisms const &mechanisms) {
    System system{std::move(name), {}};
    auto &list = system.Implementations;
    list.push_back(Make<TaskBatches<BatchKind::Empty>>(
        "W1", "AddTasks + TaskCounter + WaitForCounter per batch", mechanisms));
    list.push_back(Make<TaskBatches<BatchKind::Working>>(
        "W1w", "AddTasks + TaskCounter + WaitForCounter per batch", mechanisms));
    list.push_back(Make<TaskBatches<BatchKind::Framed>>(
        "W1f", "the adding thread's own work, then AddTasks + TaskCounter + WaitForCounter", mechanisms));
    list.push_back(
        Make<ProducerConsumer>("W2", "AddTasks + TaskCounter, producers wait in tasks", mechanisms));
    list.push_back(
        Make<FibonacciTree<false>>("W3", "AddTasks(2) + TaskCounter + WaitForCounter per node", mechanisms));
    list.push_back(Make<FibonacciTree<true>>(
        "W3e", "W3's tasks, OnFiberAttached + OnFiberDetached installed (per-fiber counts)", mechanisms));
    list.push_back(
        Make<EmptyBatchesClosure>("W1c", "AddTasks(1000, closure) + TaskCounter per batch", mechanisms));
    list.push_back(
        Make<FibonacciClosures<false>>("W3c", "AddTasks(2, closure) + TaskCounter per node", mechanisms));
    list.push_back(Make<FibonacciClosures<true>>("W3s", "AddTask(24-byte closure) x2 + TaskCounter per node",
                                                 mechanisms));
    list.push_back(Make<GraphRuns>("G1", "TaskGraph::Run + WaitForCounter per run", mechanisms));
    list.push_back(
        Make<AfterBatches>("A1", "AddTaskAfter a gate counter + TaskCounter per batch", mechanisms));
    list.push_back(Make<AfterChain>("A2", "AddTaskAfter the previous link's TaskCounter", mechanisms));
    list.push_back(Make<CancelQueued>("C1", "TaskCounter::Cancel, then WaitForCounter", mechanisms));
    list.push_back(Make<PingPong>("W4", "FullAtomicCounter, WaitForCounter(counter, value)", mechanisms));
    list.push_back(Make<ContendedFibtex<>>("W5", "Fibtex, std::lock_guard", mechanisms));
    list.push_back(Make<ContendedFibtex<>>("W5b", "Fibtex, std::lock_guard", mechanisms));
    list.push_back(Make<ContendedFibtex<kShortLockTasks, kLocksPerShortTask>>(
        "W5s", "Fibtex, std::lock_guard", mechanisms));
    list.push_back(Make<TriangleNumber>("W6", "one AddTasks + TaskCounter", mechanisms));
    list.push_back(Make<ParallelLoop<false>>("P1", "ParallelFor(ts, 0, n, f(i)) per pass", mechanisms));
    list.push_back(Make<ParallelLoop<true>>("P1h", "AddTasks(4 per worker, closure) + TaskCounter per pass",
                                            mechanisms));
    list.push_back(Implementation{"W7", "TaskSchedulerInitOptions defaults (Behavior = Sleep)",
                                  [mechanisms](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                                      return std::make_unique<Idle>(sizes, Scheduler::Options(sizes),
                                                                    mechanisms);
                                  }});
    list.push_back(Implementation{"W7s", "EmptyQueueBehavior::Sleep",
                                  [mechanisms](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                                      ftl::TaskSchedulerInitOptions options = Scheduler::Options(sizes);
                                      options.Behavior = ftl::EmptyQueueBehavior::Sleep;
                                      return std::make_unique<Idle>(sizes, options, mechanisms);
                                  }});
    list.push_back(Make<IdleWithTimers>("W7t", "SleepFor in a task, timed WaitForCounter on the main thread",
                                        mechanisms));
    list.push_back(
        Make<TimerLateness>("T1", "SleepFor / timed WaitForCounter of 1 ms in a task", mechanisms));
    // A wake's latency drifts by 2x within seconds: the pair measures both
    // worker counts in one process, sample by sample.
    list.push_back(InterleavingPair(
        Make<WakeLatency<false>>("W8", "AddTask from a non-worker thread, every worker parked", mechanisms)));
    list.push_back(InterleavingPair(Make<WakeLatency<true>>(
        "W8b", "AddTask from a non-worker thread that stays busy after it", mechanisms)));
    list.push_back(Make<GlobalQueueLatency>("M1", "AddTask from a non-worker thread while workers are busy",
                                            mechanisms));
    list.push_back(Make<LongAfterTiny>(
        "M2", "AddTasks(2) of 1 ms tasks after batches of empty ones, WaitForCounter", mechanisms));
    list.push_back(Make<Startup>("S1", "TaskScheduler::Init, one task, destruction", mechanisms));
    return system;
}

} // namespace bench
