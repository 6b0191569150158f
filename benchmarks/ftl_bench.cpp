// ftl_bench: how much the scheduler costs per task, per wait and per lock.
//
//   W1  1,000,000 empty tasks, as 1,000 batches of 1,000, each batch with its
//       own TaskCounter and waited for before the next is added.
//   W2  100 producer tasks; each adds 1,000 empty consumer tasks with its own
//       counter and waits for them. The main thread waits for the producers.
//   W3  fib(25), every node n >= 2 a task that adds its two children and waits
//       on their counter.
//   W5  10,000 tasks, each doing 100 increments of one int under
//       std::lock_guard<ftl::Fibtex>.
//
// ("Empty" tasks do one thing: count themselves in a per-thread tally, so that
// every run can check that no task was lost.) Every run is checked before its
// time counts; see harness.h. The workloads are built as bench::Workload
// values with ftl as their first runner, so peers can be added beside it.
//
// Usage: ftl_bench [--short] [--reps N] [--threads N] [--filter TEXT] [--json FILE]
#include "harness.h"

#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Options {
    unsigned Repetitions = 15;
    unsigned Threads = 0; // 0: one worker per core
    std::string Filter;
    std::string JsonPath;
};

void PrintUsage(std::FILE *out) {
    std::fprintf(out, "usage: ftl_bench [--short] [--reps N] [--threads N] [--filter TEXT] [--json FILE]\n"
                      "  --short        5 repetitions per workload (the default is 15), after a warm-up run\n"
                      "  --reps N       N repetitions (at least 5)\n"
                      "  --threads N    N worker threads (default 0: one per core this process may use)\n"
                      "  --filter TEXT  only the workloads whose name contains TEXT (e.g. W3)\n"
                      "  --json FILE    also write the results to FILE as JSON\n");
}

bool ParseUnsigned(char const *text, unsigned &value) {
    char *end = nullptr;
    unsigned long const parsed = std::strtoul(text, &end, 10);
    if (end == text || *end != '\0' || parsed > 1000000ul) {
        return false;
    }
    value = static_cast<unsigned>(parsed);
    return true;
}

// Returns false (having said why) when the command line is wrong.
bool ParseOptions(int argc, char **argv, Options &options) {
    for (int i = 1; i < argc; ++i) {
        std::string const arg = argv[i];
        bool const hasValue = i + 1 < argc;
        if (arg == "--short") {
            options.Repetitions = bench::kMinRepetitions;
        } else if (arg == "--reps" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.Repetitions) ||
                options.Repetitions < bench::kMinRepetitions) {
                std::fprintf(stderr, "ftl_bench: --reps needs a number >= %u\n", bench::kMinRepetitions);
                return false;
            }
        } else if (arg == "--threads" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.Threads)) {
                std::fprintf(stderr, "ftl_bench: --threads needs a number\n");
                return false;
            }
        } else if (arg == "--filter" && hasValue) {
            options.Filter = argv[++i];
        } else if (arg == "--json" && hasValue) {
            options.JsonPath = argv[++i];
        } else if (arg == "--help" || arg == "-h") {
            PrintUsage(stdout);
            std::exit(0);
        } else {
            std::fprintf(stderr, "ftl_bench: unknown or incomplete argument '%s'\n", arg.c_str());
            PrintUsage(stderr);
            return false;
        }
    }
    return true;
}

// Counts tasks per worker thread. Each worker writes only its own slot, on its
// own cache line, so counting costs no contention; the main thread reads the
// slots only after waiting on the counters of every task that wrote them,
// which orders those writes before the read.
class TaskTally {
public:
    explicit TaskTally(unsigned threadCount) : m_slots(threadCount) {}

    void Count(ftl::TaskScheduler *taskScheduler) { ++m_slots[taskScheduler->GetCurrentThreadIndex()].Value; }

    // The total since the last Take, and a fresh start.
    std::uint64_t Take() {
        std::uint64_t total = 0;
        for (Slot &slot : m_slots) {
            total += slot.Value;
            slot.Value = 0;
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

bench::Verdict ExpectCount(char const *what, std::uint64_t got, std::uint64_t expected) {
    if (got == expected) {
        return bench::Verdict::Pass();
    }
    return bench::Verdict::Fail(std::string(what) + ": " + std::to_string(got) + ", expected " +
                                std::to_string(expected));
}

void CountingTask(ftl::TaskScheduler *taskScheduler, void *arg) {
    static_cast<TaskTally *>(arg)->Count(taskScheduler);
}

// W1 ---------------------------------------------------------------------------

class EmptyTaskBatches {
public:
    static constexpr unsigned kBatches = 1000;
    static constexpr unsigned kBatchSize = 1000;

    explicit EmptyTaskBatches(ftl::TaskScheduler *taskScheduler)
        : m_taskScheduler(taskScheduler), m_tally(taskScheduler->GetThreadCount()),
          m_tasks(kBatchSize, ftl::Task{CountingTask, &m_tally}) {}

    void Run() {
        for (unsigned batch = 0; batch < kBatches; ++batch) {
            ftl::TaskCounter counter(m_taskScheduler);
            m_taskScheduler->AddTasks(kBatchSize, m_tasks.data(), ftl::TaskPriority::Normal, &counter);
            m_taskScheduler->WaitForCounter(&counter);
        }
    }

    bench::Verdict Check() {
        return ExpectCount("tasks run", m_tally.Take(), std::uint64_t(kBatches) * kBatchSize);
    }

private:
    ftl::TaskScheduler *m_taskScheduler;
    TaskTally m_tally;
    std::vector<ftl::Task> m_tasks;
};

// W2 ---------------------------------------------------------------------------

class ProducerConsumer {
public:
    static constexpr unsigned kProducers = 100;
    static constexpr unsigned kConsumersPerProducer = 1000;

    explicit ProducerConsumer(ftl::TaskScheduler *taskScheduler)
        : m_taskScheduler(taskScheduler), m_consumers(taskScheduler->GetThreadCount()),
          m_producers(taskScheduler->GetThreadCount()),
          m_producerTasks(kProducers, ftl::Task{Producer, this}) {}

    void Run() {
        ftl::TaskCounter counter(m_taskScheduler);
        m_taskScheduler->AddTasks(kProducers, m_producerTasks.data(), ftl::TaskPriority::Normal, &counter);
        m_taskScheduler->WaitForCounter(&counter);
    }

    bench::Verdict Check() {
        bench::Verdict verdict = ExpectCount("producers finished", m_producers.Take(), kProducers);
        bench::Verdict consumers = ExpectCount("consumers run", m_consumers.Take(),
                                               std::uint64_t(kProducers) * kConsumersPerProducer);
        return verdict.Ok ? consumers : verdict;
    }

private:
    static void Producer(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *self = static_cast<ProducerConsumer *>(arg);
        // 1,000 Tasks are 16 KB of this fiber's stack; AddTasks copies them.
        ftl::Task consumers[kConsumersPerProducer];
        for (ftl::Task &task : consumers) {
            task = ftl::Task{CountingTask, &self->m_consumers};
        }
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(kConsumersPerProducer, consumers, ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        // Counted after the wait, on whichever thread the producer resumed on.
        self->m_producers.Count(taskScheduler);
    }

    ftl::TaskScheduler *m_taskScheduler;
    TaskTally m_consumers;
    TaskTally m_producers;
    std::vector<ftl::Task> m_producerTasks;
};

// W3 ---------------------------------------------------------------------------

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

class FibonacciTree {
public:
    static constexpr unsigned kN = 25;

    explicit FibonacciTree(ftl::TaskScheduler *taskScheduler)
        : m_taskScheduler(taskScheduler), m_tally(taskScheduler->GetThreadCount()) {}

    void Run() {
        m_root = Node{kN, 0, &m_tally};
        ftl::TaskCounter counter(m_taskScheduler);
        m_taskScheduler->AddTask(ftl::Task{Fib, &m_root}, ftl::TaskPriority::Normal, &counter);
        m_taskScheduler->WaitForCounter(&counter);
    }

    bench::Verdict Check() {
        bench::Verdict verdict = ExpectCount("fib(25)", m_root.Value, Fibonacci(kN));
        bench::Verdict tasks = ExpectCount("tasks run", m_tally.Take(), FibonacciNodes(kN));
        return verdict.Ok ? tasks : verdict;
    }

private:
    struct Node {
        unsigned N;
        std::uint64_t Value;
        TaskTally *Tally;
    };

    static void Fib(ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *node = static_cast<Node *>(arg);
        node->Tally->Count(taskScheduler);
        if (node->N < 2) {
            node->Value = node->N;
            return;
        }
        Node children[2] = {Node{node->N - 1, 0, node->Tally}, Node{node->N - 2, 0, node->Tally}};
        ftl::Task const tasks[2] = {ftl::Task{Fib, &children[0]}, ftl::Task{Fib, &children[1]}};
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(2, tasks, ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        node->Value = children[0].Value + children[1].Value;
    }

    ftl::TaskScheduler *m_taskScheduler;
    TaskTally m_tally;
    Node m_root{kN, 0, nullptr};
};

// W5 ---------------------------------------------------------------------------

class ContendedFibtex {
public:
    static constexpr unsigned kTasks = 10000;
    static constexpr unsigned kIncrementsPerTask = 100;

    explicit ContendedFibtex(ftl::TaskScheduler *taskScheduler)
        : m_taskScheduler(taskScheduler), m_lock(taskScheduler), m_tasks(kTasks, ftl::Task{Increment, this}) {
    }

    void Run() {
        ftl::TaskCounter counter(m_taskScheduler);
        m_taskScheduler->AddTasks(kTasks, m_tasks.data(), ftl::TaskPriority::Normal, &counter);
        m_taskScheduler->WaitForCounter(&counter);
    }

    bench::Verdict Check() {
        int const value = m_value;
        m_value = 0;
        return ExpectCount("sum", static_cast<std::uint64_t>(value),
                           std::uint64_t(kTasks) * kIncrementsPerTask);
    }

private:
    static void Increment(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
        auto *self = static_cast<ContendedFibtex *>(arg);
        for (unsigned i = 0; i < kIncrementsPerTask; ++i) {
            std::lock_guard<ftl::Fibtex> lock(self->m_lock);
            ++self->m_value;
        }
    }

    ftl::TaskScheduler *m_taskScheduler;
    ftl::Fibtex m_lock;
    int m_value = 0; // guarded by m_lock
    std::vector<ftl::Task> m_tasks;
};

template <class Fixture>
bench::Runner MakeRunner(std::string peer, Fixture &fixture) {
    return bench::Runner{std::move(peer), [&fixture] { fixture.Run(); },
                         [&fixture] { return fixture.Check(); }};
}

} // namespace

int main(int argc, char **argv) {
    Options options;
    if (!ParseOptions(argc, argv, options)) {
        return 2;
    }

    ftl::TaskScheduler taskScheduler;
    ftl::TaskSchedulerInitOptions initOptions;
    initOptions.ThreadPoolSize = options.Threads;
    if (int const error = taskScheduler.Init(initOptions); error != 0) {
        std::fprintf(stderr, "ftl_bench: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }
    unsigned const threads = taskScheduler.GetThreadCount();
    unsigned const fibersAtStart = taskScheduler.GetFiberCount();

    bench::Config config;
    config.Repetitions = options.Repetitions;
    config.Filter = options.Filter;
    // What Measure will do: no timed runs at all in a sanitizer build.
    unsigned const repetitions =
        bench::kSanitizedBuild ? 0 : std::max(config.Repetitions, bench::kMinRepetitions);

    std::vector<bench::Row> rows;
    {
        // The fixtures hold counters and a Fibtex tied to the scheduler, so
        // they go before it does.
        EmptyTaskBatches w1(&taskScheduler);
        ProducerConsumer w2(&taskScheduler);
        FibonacciTree w3(&taskScheduler);
        ContendedFibtex w5(&taskScheduler);

        std::vector<bench::Workload> workloads;
        workloads.push_back({"W1",
                             "1000 batches x 1000 empty tasks",
                             "ns/task",
                             double(EmptyTaskBatches::kBatches) * EmptyTaskBatches::kBatchSize,
                             {MakeRunner("ftl", w1)}});
        workloads.push_back({"W2",
                             "100 producers x 1000 consumers",
                             "ns/consumer",
                             double(ProducerConsumer::kProducers) * ProducerConsumer::kConsumersPerProducer,
                             {MakeRunner("ftl", w2)}});
        workloads.push_back({"W3",
                             "fib(25), a task per node",
                             "ns/task",
                             double(FibonacciNodes(FibonacciTree::kN)),
                             {MakeRunner("ftl", w3)}});
        workloads.push_back({"W5",
                             "10000 tasks x 100 Fibtex locks",
                             "ns/lock",
                             double(ContendedFibtex::kTasks) * ContendedFibtex::kIncrementsPerTask,
                             {MakeRunner("ftl", w5)}});

        rows = bench::RunAll(config, workloads);
    }

    if (!bench::kSanitizedBuild) {
        std::printf(
            "ftl_bench: %u worker threads; median, min and max of %u checked runs after a warm-up run\n",
            threads, repetitions);
    } else {
        std::printf(
            "WARNING: this is a sanitizer build. Every workload ran once and its result was checked,\n"
            "         but timings would measure the sanitizer, so none are reported. Build without\n"
            "         FTL_SANITIZE (e.g. the `main` preset) for figures.\n");
    }
    bench::PrintTable(stdout, rows);
    std::printf("fiber pool: %u fibers at Init, %u at the end\n", fibersAtStart,
                taskScheduler.GetFiberCount());

    if (!options.JsonPath.empty()) {
        std::vector<std::pair<std::string, std::string>> const context = {
            {"tool", bench::JsonString("ftl_bench")},
            {"threads", std::to_string(threads)},
            {"repetitions", std::to_string(repetitions)},
            {"fibers_at_init", std::to_string(fibersAtStart)},
            {"fibers_at_end", std::to_string(taskScheduler.GetFiberCount())},
        };
        if (!bench::WriteJson(options.JsonPath, context, rows)) {
            std::fprintf(stderr, "ftl_bench: cannot write %s\n", options.JsonPath.c_str());
            return 1;
        }
        std::printf("results written to %s\n", options.JsonPath.c_str());
    }

    if (!bench::AllOk(rows)) {
        std::fprintf(stderr, "ftl_bench: a workload produced a wrong result (see FAILED above)\n");
        return 1;
    }
    if (rows.empty()) {
        std::fprintf(stderr, "ftl_bench: no workload matches --filter '%s'\n", options.Filter.c_str());
        return 1;
    }
    return 0;
}
