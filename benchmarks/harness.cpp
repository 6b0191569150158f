// The harness's measuring (in a child process per implementation), its
// statistics, and the tables it prints and writes as JSON. See harness.h.
#include "harness.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bench {

Implementation const *System::Find(std::string const &workloadId) const {
    for (Implementation const &implementation : Implementations) {
        if (implementation.WorkloadId == workloadId) {
            return &implementation;
        }
    }
    return nullptr;
}

double MedianOf(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    std::size_t const n = values.size();
    if (n == 0) {
        return 0;
    }
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double PercentileOf(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    rank = std::clamp<std::size_t>(rank, 1, values.size());
    return values[rank - 1];
}

double PooledPercentile(std::vector<std::vector<double>> const &runs, double p) {
    std::vector<double> all;
    for (std::vector<double> const &run : runs) {
        all.insert(all.end(), run.begin(), run.end());
    }
    return p == 50 ? MedianOf(std::move(all)) : PercentileOf(std::move(all), p);
}

namespace {

using Clock = std::chrono::steady_clock;

// The child reports on a pipe, one line each:
//   probe <before> <after> <1-thread before> <1-thread after>   the probes (ns)
//   figure <repetitions> <median> <min> <max>   one per figure, each followed by
//   samples <value>...                           one per measured run, if the fixture reports them
//   ok                                           or, instead of all that,
//   fail <message>
//   down                                         once the fixture (the pool) is destroyed
std::string OneLine(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
}

bool WriteAll(int fd, std::string const &text) {
    std::size_t done = 0;
    while (done < text.size()) {
        ssize_t const n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// The cross-core probe: two threads pinned to the first two CPUs this process
// may use bounce one cache line kProbeRoundTrips times; returns ns per round
// trip, or 0 with fewer than two CPUs. On a VM this moves a lot (the host
// places the virtual CPUs), and so does every workload that hands work from
// core to core; the probe before and after each measurement says which
// placement it ran under.
constexpr unsigned kProbeRoundTrips = 20000;

// The first (at most) two CPUs this process may use: the probes' cores.
std::vector<std::size_t> ProbeCpus() {
    std::vector<std::size_t> cpus;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return cpus;
    }
    for (std::size_t cpu = 0; cpu < static_cast<std::size_t>(CPU_SETSIZE) && cpus.size() < 2; ++cpu) {
        if (CPU_ISSET(cpu, &allowed)) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

void PinThisThread(std::size_t cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

double CrossCoreProbe() {
    std::vector<std::size_t> const cpus = ProbeCpus();
    if (cpus.size() < 2) {
        return 0;
    }
    alignas(64) std::atomic<std::uint64_t> line{0};
    std::atomic<int> ready{0};
    double nsPerRoundTrip = 0;
    auto const startTogether = [&ready] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
    };
    std::thread pong([&] {
        PinThisThread(cpus[1]);
        startTogether();
        for (std::uint64_t i = 0; i < kProbeRoundTrips; ++i) {
            while (line.load(std::memory_order_acquire) != 2 * i + 1) {
            }
            line.store(2 * i + 2, std::memory_order_release);
        }
    });
    std::thread ping([&] {
        PinThisThread(cpus[0]);
        startTogether();
        auto const start = Clock::now();
        for (std::uint64_t i = 0; i < kProbeRoundTrips; ++i) {
            line.store(2 * i + 1, std::memory_order_release);
            while (line.load(std::memory_order_acquire) != 2 * i + 2) {
            }
        }
        nsPerRoundTrip =
            std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kProbeRoundTrips;
    });
    ping.join();
    pong.join();
    return nsPerRoundTrip;
}

// The single-thread probe: each of the first two CPUs this process may use,
// in turn, makes kSerialProbeOps locked increments of a cache line no other
// thread touches; returns the slower CPU's ns per increment. The host also
// switches between states in which the same single-thread code runs at
// different speeds (a lock/unlock loop 2.5 vs 4 ns), which the cross-core
// probe does not see; a workload's 1-worker figure moves with it.
constexpr unsigned kSerialProbeOps = 200000;

double SerialProbe() {
    double slowest = 0;
    for (std::size_t const cpu : ProbeCpus()) {
        double nsPerOp = 0;
        std::thread probe([cpu, &nsPerOp] {
            PinThisThread(cpu);
            alignas(64) std::atomic<std::uint64_t> line{0};
            auto const start = Clock::now();
            for (unsigned i = 0; i < kSerialProbeOps; ++i) {
                line.fetch_add(1, std::memory_order_acq_rel);
            }
            nsPerOp =
                std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kSerialProbeOps;
        });
        probe.join();
        slowest = std::max(slowest, nsPerOp);
    }
    return slowest;
}

std::function<std::string()> g_poolStatistics;
// Set on the thread that made the pool (SetWorkerTasks).
thread_local std::function<std::vector<std::uint64_t>()> t_workerTasks;
cpu_set_t g_startCpus; // the measuring child's CPUs, before any pool pinned its thread
bool g_startCpusKnown = false;

// One fixture of a measurement and the thread it lives on: the measuring
// thread when it is measured alone, else a thread of its own, for every pool
// of a side-by-side measurement alike (a thread is worker 0 of one pool at
// most; see harness.h for what a pool on the measuring thread did to its
// figures). The fixture is made, run, checked and destroyed on that thread;
// the measuring thread waits (blocked, not spinning: both threads are
// usually pinned to the first CPU).
class Subject {
public:
    // cpu: on its own thread, pinned first to that CPU of the process's (its
    // index among them; -1: all of them).
    Subject(Implementation const &implementation, Sizes const &sizes, bool ownThread, int cpu = -1) {
        if (!ownThread) {
            m_fixture = implementation.Make(sizes);
            return;
        }
        m_thread = std::thread([this, &implementation, sizes, cpu] {
            if (cpu < 0) {
                AllowStartCpus();
            } else {
                PinToStartCpu(cpu);
            }
            Serve(implementation, sizes);
        });
        std::unique_lock<std::mutex> lock(m_mutex);
        m_changed.wait(lock, [this] { return m_ready; });
        if (m_failure) {
            lock.unlock();
            m_thread.join();
            std::rethrow_exception(m_failure);
        }
    }
    ~Subject() {
        if (m_thread.joinable()) {
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                m_stop = true;
            }
            m_changed.notify_all();
            m_thread.join();
        }
    }
    Subject(Subject const &) = delete;
    Subject &operator=(Subject const &) = delete;

    // Runs `job` with the fixture on the subject's thread and waits for it;
    // rethrows what it threw.
    void With(std::function<void(Fixture &)> const &job) {
        if (!m_thread.joinable()) {
            job(*m_fixture);
            return;
        }
        std::unique_lock<std::mutex> lock(m_mutex);
        m_job = &job;
        m_changed.notify_all();
        m_changed.wait(lock, [this] { return m_job == nullptr; });
        if (std::exception_ptr failure = std::exchange(m_failure, nullptr)) {
            std::rethrow_exception(failure);
        }
    }

private:
    void Serve(Implementation const &implementation, Sizes const &sizes) {
        std::unique_lock<std::mutex> lock(m_mutex);
        try {
            m_fixture = implementation.Make(sizes);
        } catch (...) {
            m_failure = std::current_exception();
        }
        m_ready = true;
        m_changed.notify_all();
        if (m_failure) {
            return;
        }
        for (;;) {
            m_changed.wait(lock, [this] { return m_stop || m_job != nullptr; });
            if (m_job == nullptr) {
                break;
            }
            lock.unlock();
            std::exception_ptr failure;
            try {
                (*m_job)(*m_fixture);
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
            m_failure = failure;
            m_job = nullptr;
            m_changed.notify_all();
        }
        lock.unlock();
        m_fixture.reset();
    }

    std::unique_ptr<Fixture> m_fixture;
    std::thread m_thread;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::function<void(Fixture &)> const *m_job = nullptr; // guarded by m_mutex
    std::exception_ptr m_failure;                          // guarded by m_mutex
    bool m_ready = false;                                  // guarded by m_mutex
    bool m_stop = false;                                   // guarded by m_mutex
};

// How many CPUs the threads of this process may run on, all together.
int CpusOfAllThreads() {
    cpu_set_t all;
    CPU_ZERO(&all);
    DIR *const tasks = ::opendir("/proc/self/task");
    if (tasks == nullptr) {
        return -1;
    }
    while (dirent const *entry = ::readdir(tasks)) {
        cpu_set_t set;
        CPU_ZERO(&set);
        pid_t const tid = static_cast<pid_t>(std::atoi(entry->d_name));
        if (tid > 0 && sched_getaffinity(tid, sizeof set, &set) == 0) {
            CPU_OR(&all, &all, &set);
        }
    }
    ::closedir(tasks);
    return CPU_COUNT(&all);
}

// Between two runs of an interleaved pair the measuring thread stays busy
// at least kPairGap, and then until no other thread of the process is
// running, so that the pool that ran last has parked its idle workers and
// neither pool's runs share the cores with the other's spinning threads.
// ftl parks within 100 us, but a peer may spin far longer after its work
// (libgomp's threads wait at the end of a parallel region spinning,
// GOMP_SPINCOUNT). The gap gives up after kMaxPairGap (a pool that never
// stops spinning).
constexpr std::chrono::milliseconds kPairGap{1};
constexpr std::chrono::microseconds kRunningLook{100};
constexpr std::chrono::milliseconds kMaxPairGap{50};

// Whether a thread of this process other than the caller is running or
// waiting for a CPU (state R in /proc/self/task/TID/stat).
bool OtherThreadRunning() {
    pid_t const self = static_cast<pid_t>(::syscall(SYS_gettid));
    DIR *const tasks = ::opendir("/proc/self/task");
    if (tasks == nullptr) {
        return false;
    }
    bool running = false;
    while (dirent const *entry = ::readdir(tasks)) {
        pid_t const tid = static_cast<pid_t>(std::atoi(entry->d_name));
        if (tid <= 0 || tid == self) {
            continue;
        }
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
        int const fd = ::open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            continue; // ended meanwhile
        }
        char stat[512];
        ssize_t const length = ::read(fd, stat, sizeof stat - 1);
        ::close(fd);
        if (length <= 0) {
            continue;
        }
        stat[length] = '\0';
        // "TID (name) S ...": the state follows the last ')'.
        char const *const close = std::strrchr(stat, ')');
        if (close != nullptr && close[1] == ' ' && close[2] == 'R') {
            running = true;
            break;
        }
    }
    ::closedir(tasks);
    return running;
}

// Busy for kPairGap, then until no other thread runs (looking every
// kRunningLook) or kMaxPairGap has passed.
void QuietGap() {
    auto const start = Clock::now();
    auto next = start + kPairGap;
    for (;;) {
        while (Clock::now() < next) {
        }
        if (!OtherThreadRunning() || Clock::now() - start >= kMaxPairGap) {
            return;
        }
        next += kRunningLook;
    }
}

// The most workers any pool of the measurement has.
unsigned MostWorkers(Sizes const &sizes) {
    return std::max(sizes.Threads, sizes.PairedThreads);
}

// Makes the measurement's subjects: the first (on a thread of its own when
// others live beside it, as they do), then each of `alongside`. Returns the
// most workers any of their pools has.
unsigned MakeSubjects(std::vector<std::unique_ptr<Subject>> &subjects, Implementation const &implementation,
                      Sizes const &sizes, std::vector<Alongside> const &alongside) {
    subjects.push_back(std::make_unique<Subject>(implementation, sizes, !alongside.empty()));
    unsigned most = MostWorkers(sizes);
    for (Alongside const &other : alongside) {
        subjects.push_back(std::make_unique<Subject>(*other.With, other.Sizes, true, other.Cpu));
        most = std::max(most, MostWorkers(other.Sizes));
    }
    return most;
}

// Each pool pins its workers to the CPUs of the thread that started it: a
// second pool started from a thread pinned by the first would run all its
// workers on one CPU, and the comparison would measure that. Returns a
// "fail" line when the pools' threads have fewer CPUs than the largest pool
// has workers, else "".
std::string CheckPoolCpus(bool severalPools, unsigned most) {
    if (!severalPools || !g_startCpusKnown) {
        return "";
    }
    int const expected = std::min(static_cast<int>(most), CPU_COUNT(&g_startCpus));
    if (int const used = CpusOfAllThreads(); used >= 0 && used < expected) {
        return "fail the pools' threads run on " + std::to_string(used) + " CPU(s), a pool has " +
               std::to_string(most) + " workers\n";
    }
    return "";
}

// The runs of one measurement in the child: every subject's in turn, and
// the figures they report. A paired workload lists the figures of each
// subject in turn.
class Runs {
public:
    Runs(Workload const &workload, std::vector<std::unique_ptr<Subject>> &subjects)
        : m_workload(workload), m_subjects(subjects),
          m_figureCount(workload.Figures.size() / subjects.size()), m_values(workload.Figures.size()),
          m_samples(workload.Figures.size()) {}

    // One run of every subject, in an order that alternates with `turn`;
    // run 0, the warm-up, records nothing. Returns an error line, or "".
    std::string Each(unsigned run, unsigned turn) {
        for (std::size_t i = 0; i < m_subjects.size(); ++i) {
            std::size_t const which = turn % 2 == 0 ? i : m_subjects.size() - 1 - i;
            if (std::string error = Once(run, which); !error.empty()) {
                return error;
            }
        }
        return "";
    }

    // The warm-up: it repeats until kMinWarmUp has passed. One run of a
    // short workload (W2 takes about 1 ms) ends before a VM's idle virtual
    // CPUs are back at speed, and the first measured runs were then up to 2x
    // slower than the rest, for every system alike. Returns an error line,
    // or "".
    std::string WarmUp() {
        auto const warmUpStart = Clock::now();
        unsigned warmUpRuns = 0;
        do {
            if (std::string error = Each(0, warmUpRuns); !error.empty()) {
                return error;
            }
        } while (!kSanitizedBuild && ++warmUpRuns < kMaxWarmUpRuns &&
                 Clock::now() - warmUpStart < kMinWarmUp);
        return "";
    }

    // The report's lines of what the measured runs gave: the last subject's
    // busiest-thread share and tasks per worker, then each figure's median,
    // minimum and maximum, with its runs' samples.
    std::string Report(unsigned repetitions) const {
        std::string report;
        char line[160];
        if (!m_shares.empty()) {
            std::snprintf(line, sizeof line, "share %.17g\n", MedianOf(m_shares));
            report += line;
        }
        if (!m_workerTasks.empty()) {
            report += "workers";
            for (std::uint64_t const tasks : m_workerTasks) {
                report += " " + std::to_string(tasks);
            }
            report += "\n";
        }
        for (std::size_t i = 0; i < m_values.size(); ++i) {
            std::vector<double> const &figure = m_values[i];
            double const median = MedianOf(figure);
            double const min = figure.empty() ? 0 : *std::min_element(figure.begin(), figure.end());
            double const max = figure.empty() ? 0 : *std::max_element(figure.begin(), figure.end());
            std::snprintf(line, sizeof line, "figure %u %.17g %.17g %.17g\n", repetitions, median, min, max);
            report += line;
            for (std::vector<double> const &run : m_samples[i]) {
                report += "samples";
                for (double const value : run) {
                    std::snprintf(line, sizeof line, " %.6g", value);
                    report += line;
                }
                report += "\n";
            }
        }
        return report;
    }

private:
    // Runs one subject's workload once and records its figures.
    std::string Once(unsigned run, std::size_t which) {
        std::string error;
        bool const last = which + 1 == m_subjects.size();
        m_subjects[which]->With([&](Fixture &fixture) { error = RunOnItsThread(fixture, run, which, last); });
        if (m_subjects.size() > 1) {
            QuietGap();
        }
        return error;
    }

    // On the subject's thread, where its fixture set the count of its
    // workers' tasks: one run, checked, and its figures recorded.
    std::string RunOnItsThread(Fixture &fixture, unsigned run, std::size_t which, bool last) {
        std::vector<std::uint64_t> const before =
            last && run != 0 && t_workerTasks ? t_workerTasks() : std::vector<std::uint64_t>{};
        auto const start = Clock::now();
        fixture.Run();
        Clock::duration const took = Clock::now() - start;
        // (A fixture that makes and ends pools inside Run may have taken the
        // count away meanwhile.)
        if (!before.empty() && t_workerTasks) {
            std::vector<std::uint64_t> const after = t_workerTasks();
            m_workerTasks.resize(after.size());
            for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
                m_workerTasks[i] += after[i] - before[i];
            }
        }
        if (Verdict const verdict = fixture.Check(); !verdict.Ok) {
            return "fail " + (run == 0 ? std::string("warm-up run: ") : "run " + std::to_string(run) + ": ") +
                   OneLine(verdict.Error) + "\n";
        }
        if (run == 0) {
            return "";
        }
        if (double const share = fixture.BusiestThreadShare(); share >= 0 && last) {
            m_shares.push_back(share);
        }
        return RecordFigures(fixture, which, took);
    }

    // A timed run's figure from its time; a self-measured run's figures
    // (and samples) from the fixture.
    std::string RecordFigures(Fixture const &fixture, std::size_t which, Clock::duration took) {
        std::vector<double> *const into = &m_values[which * m_figureCount];
        if (!m_workload.SelfMeasured()) {
            into[0].push_back(std::chrono::duration<double, std::nano>(took).count() /
                              m_workload.UnitsPerRun);
            return "";
        }
        std::vector<double> const figures = fixture.MeasuredFigures();
        if (figures.size() != m_figureCount) {
            return "fail the fixture reported " + std::to_string(figures.size()) + " figures, expected " +
                   std::to_string(m_figureCount) + "\n";
        }
        for (std::size_t i = 0; i < m_figureCount; ++i) {
            into[i].push_back(figures[i]);
        }
        std::vector<std::vector<double>> const runSamples = fixture.MeasuredSamples();
        if (!runSamples.empty() && runSamples.size() != m_figureCount) {
            return "fail the fixture reported samples for " + std::to_string(runSamples.size()) +
                   " figures, expected " + std::to_string(m_figureCount) + "\n";
        }
        for (std::size_t i = 0; i < runSamples.size(); ++i) {
            m_samples[which * m_figureCount + i].push_back(runSamples[i]);
        }
        return "";
    }

    Workload const &m_workload;
    std::vector<std::unique_ptr<Subject>> &m_subjects;
    std::size_t const m_figureCount;
    std::vector<std::vector<double>> m_values;
    // Per figure, each measured run's samples (Fixture::MeasuredSamples).
    std::vector<std::vector<std::vector<double>>> m_samples;
    std::vector<double> m_shares;             // BusiestThreadShare of each measured run of the last subject
    std::vector<std::uint64_t> m_workerTasks; // the last subject's, summed over its measured runs
};

// Measures in this process. With `alongside`, more subjects live beside the
// first, all take their runs in turn (the order reverses from one round of
// runs to the next: ABC, CBA), and the report holds the first subject's
// figures, then the next one's (the workload lists them all); the share and
// the pool statistics are the last one's.
std::string MeasureHere(Config const &config, Sizes const &sizes, Workload const &workload,
                        std::vector<std::unique_ptr<Subject>> &subjects, Implementation const &implementation,
                        std::vector<Alongside> const &alongside) {
    double const probeBefore = CrossCoreProbe();
    double const serialBefore = SerialProbe();
    unsigned const most = MakeSubjects(subjects, implementation, sizes, alongside);
    if (std::string error = CheckPoolCpus(subjects.size() > 1 || sizes.PairedThreads != 0, most);
        !error.empty()) {
        return error;
    }
    unsigned const repetitions = kSanitizedBuild ? 0 : std::max(config.Repetitions, kMinRepetitions);
    // A sanitizer build runs the warm-up even where the workload skips it,
    // so that every fixture runs (and is checked) once.
    bool const warmUp = workload.WarmUp || repetitions == 0;
    Runs runs(workload, subjects);
    if (warmUp) {
        if (std::string error = runs.WarmUp(); !error.empty()) {
            return error;
        }
    }
    for (unsigned run = 1; run <= repetitions; ++run) {
        if (std::string error = runs.Each(run, run); !error.empty()) {
            return error;
        }
    }
    std::string report;
    if (g_poolStatistics) {
        std::istringstream lines(g_poolStatistics());
        std::string statistics;
        while (std::getline(lines, statistics)) {
            report += "stats " + statistics + "\n";
        }
    }
    // After the pools are gone, so that their threads do not share the cores
    // with the probe (a spinning pool would), and after any thread a runtime
    // keeps for the process's life has stopped spinning (libgomp's: OpenMP's
    // probes after its runs read 2.5x the others without this).
    while (!subjects.empty()) {
        subjects.pop_back();
    }
    QuietGap();
    double const probeAfter = CrossCoreProbe();
    char line[160];
    std::snprintf(line, sizeof line, "probe %.17g %.17g %.17g %.17g\n", probeBefore, probeAfter, serialBefore,
                  SerialProbe());
    return report + line + runs.Report(repetitions) + "ok\n";
}

[[noreturn]] void ChildMain(int fd, Config const &config, Sizes const &sizes, Workload const &workload,
                            Implementation const &implementation, std::vector<Alongside> const &alongside) {
    g_startCpusKnown = sched_getaffinity(0, sizeof g_startCpus, &g_startCpus) == 0;
    std::string report;
    std::vector<std::unique_ptr<Subject>> subjects;
    try {
        report = MeasureHere(config, sizes, workload, subjects, implementation, alongside);
    } catch (std::exception const &error) {
        report = "fail " + OneLine(error.what()) + "\n";
    }
    WriteAll(fd, report);
    // Shutting the pools down is part of what must work: a hang here is
    // reported (as a timeout during shutdown) even though the figures arrived.
    try {
        while (!subjects.empty()) {
            subjects.pop_back();
        }
    } catch (std::exception const &error) {
        WriteAll(fd, "shutdown failed: " + OneLine(error.what()) + "\n");
        ::_exit(1);
    }
    WriteAll(fd, "down\n");
    // _exit: the parent's stdio buffers and static objects are not ours to
    // flush or destroy.
    ::_exit(0);
}

// The resident memory of a process, from /proc/<pid>/statm (0 if unknown).
unsigned long ResidentBytes(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/statm", static_cast<int>(pid));
    std::FILE *file = std::fopen(path, "r");
    if (file == nullptr) {
        return 0;
    }
    unsigned long size = 0;
    unsigned long resident = 0;
    int const fields = std::fscanf(file, "%lu %lu", &size, &resident);
    std::fclose(file);
    return fields == 2 ? resident * static_cast<unsigned long>(sysconf(_SC_PAGE_SIZE)) : 0;
}

std::string DescribeStatus(int status) {
    if (WIFSIGNALED(status)) {
        int const signal = WTERMSIG(status);
        return "crashed: killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    }
    if (WIFEXITED(status)) {
        return "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    return "ended with wait status " + std::to_string(status);
}

// Forks the measuring child (ChildMain), its report and its stderr each on a
// pipe whose read end comes back in reportFd and errorsFd. Returns its pid,
// or -1 with `error` set.
pid_t StartChild(Config const &config, Sizes const &sizes, Workload const &workload,
                 Implementation const &implementation, std::vector<Alongside> const &alongside, int &reportFd,
                 int &errorsFd, std::string &error) {
    // The report, and the child's stderr (kept to say why a child failed).
    int report[2];
    int errors[2];
    if (::pipe2(report, O_CLOEXEC) != 0) {
        error = std::string("pipe2: ") + std::strerror(errno);
        return -1;
    }
    if (::pipe2(errors, O_CLOEXEC) != 0) {
        error = std::string("pipe2: ") + std::strerror(errno);
        ::close(report[0]);
        ::close(report[1]);
        return -1;
    }
    // Whatever is buffered would otherwise be written twice, once by the child.
    std::fflush(nullptr);
    pid_t const pid = ::fork();
    if (pid < 0) {
        error = std::string("fork: ") + std::strerror(errno);
        for (int fd : {report[0], report[1], errors[0], errors[1]}) {
            ::close(fd);
        }
        return -1;
    }
    if (pid == 0) {
        ::close(report[0]);
        ::close(errors[0]);
        ::dup2(errors[1], STDERR_FILENO);
        ChildMain(report[1], config, sizes, workload, implementation, alongside);
    }
    ::close(report[1]);
    ::close(errors[1]);
    reportFd = report[0];
    errorsFd = errors[0];
    return pid;
}

// What the parent read from a child, and how the child ended.
struct ChildEnd {
    std::string Report;
    bool TimedOut = false;
    bool MemoryExceeded = false;
    int Status = 0; // waitpid's
};

// Reads the child's report and its stderr (into childStderr, the first 64
// KB) until both pipes close, and stops the child when it passes the
// deadline or the memory limit; then reaps it. Closes both descriptors.
ChildEnd WaitForChild(pid_t pid, int reportFd, int errorsFd, Config const &config, std::string &childStderr) {
    ChildEnd end;
    auto const deadline = Clock::now() + std::chrono::seconds(config.TimeoutSeconds);
    pollfd pollers[2] = {{reportFd, POLLIN, 0}, {errorsFd, POLLIN, 0}};
    std::string *const sinks[2] = {&end.Report, &childStderr};
    int open = 2;
    while (open > 0) {
        auto const left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            end.TimedOut = true;
            ::kill(pid, SIGKILL);
            break;
        }
        int const ready = ::poll(pollers, 2, static_cast<int>(std::min<long long>(left, 100)));
        // A runaway system (one that keeps millions of fiber stacks) is
        // stopped here rather than left to the kernel's OOM killer, which may
        // pick any process on the machine.
        if (config.MemoryLimitBytes != 0 && ResidentBytes(pid) > config.MemoryLimitBytes) {
            end.MemoryExceeded = true;
            ::kill(pid, SIGKILL);
            break;
        }
        if (ready <= 0) {
            continue; // timeout slice or EINTR: the deadline is checked above
        }
        for (int i = 0; i < 2; ++i) {
            if (pollers[i].fd < 0 || pollers[i].revents == 0) {
                continue;
            }
            char buffer[4096];
            ssize_t const n = ::read(pollers[i].fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) { // end of file: the child has exited (or closed the pipe)
                ::close(pollers[i].fd);
                pollers[i].fd = -1;
                --open;
                continue;
            }
            // The report is the child's own and bounded; its stderr may not be.
            if (i == 0 || sinks[i]->size() < 65536) {
                sinks[i]->append(buffer, static_cast<std::size_t>(n));
            }
        }
    }
    for (pollfd const &poller : pollers) {
        if (poller.fd >= 0) {
            ::close(poller.fd);
        }
    }
    while (::waitpid(pid, &end.Status, 0) < 0 && errno == EINTR) {
    }
    return end;
}

// Reads the child's report (see the top of this namespace) into `result`;
// ok: the child said "ok", down: its pools shut down.
void ReadReport(std::string const &text, Measurement &result, bool &ok, bool &down) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("figure ", 0) == 0) {
            Stats stats;
            std::istringstream fields(line.substr(7));
            fields >> stats.Repetitions >> stats.Median >> stats.Min >> stats.Max;
            result.Figures.push_back(stats);
        } else if (line.rfind("samples", 0) == 0 && !result.Figures.empty()) {
            std::istringstream fields(line.substr(7));
            std::vector<double> run;
            double value = 0;
            while (fields >> value) {
                run.push_back(value);
            }
            result.Figures.back().Samples.push_back(std::move(run));
        } else if (line.rfind("probe ", 0) == 0) {
            std::istringstream fields(line.substr(6));
            fields >> result.ProbeBefore >> result.ProbeAfter >> result.SerialBefore >> result.SerialAfter;
        } else if (line.rfind("share ", 0) == 0) {
            std::istringstream fields(line.substr(6));
            fields >> result.BusiestShare;
        } else if (line.rfind("workers ", 0) == 0) {
            std::istringstream fields(line.substr(8));
            std::uint64_t tasks = 0;
            while (fields >> tasks) {
                result.WorkerTasks.push_back(tasks);
            }
        } else if (line.rfind("stats ", 0) == 0) {
            result.PoolStatistics += line.substr(6) + "\n";
        } else if (line == "ok") {
            ok = true;
        } else if (line.rfind("fail ", 0) == 0) {
            result.Error = line.substr(5);
        } else if (line == "down") {
            down = true;
        } else if (!line.empty()) {
            result.Error += (result.Error.empty() ? "" : "; ") + line;
        }
    }
}

// How the child ended, as a failure says it.
std::string HowItEnded(ChildEnd const &end, Config const &config) {
    char limit[96];
    std::snprintf(limit, sizeof limit, "stopped: its memory (resident) passed the limit of %.1f GB",
                  static_cast<double>(config.MemoryLimitBytes) / double(1ul << 30));
    return end.TimedOut         ? "timed out after " + std::to_string(config.TimeoutSeconds) + " s"
           : end.MemoryExceeded ? std::string(limit)
                                : DescribeStatus(end.Status);
}

// The child's last words (an FTL_FATAL message, say), which explain a
// crash: its stderr's last line, with the indented lines that continue it.
std::string LastWords(std::string const &childStderr) {
    std::string lastWords;
    std::istringstream errorLines(childStderr);
    std::string errorLine;
    while (std::getline(errorLines, errorLine)) {
        if (errorLine.find_first_not_of(" \t") != std::string::npos) {
            bool const continues = !lastWords.empty() && (errorLine[0] == ' ' || errorLine[0] == '\t');
            lastWords = continues ? lastWords + " " + errorLine.substr(errorLine.find_first_not_of(" \t"))
                                  : errorLine;
        }
    }
    return lastWords;
}

} // namespace

void AllowStartCpus() {
    if (g_startCpusKnown) {
        pthread_setaffinity_np(pthread_self(), sizeof g_startCpus, &g_startCpus);
    }
}

void PinToStartCpu(int index) {
    if (!g_startCpusKnown) {
        return;
    }
    int seen = 0;
    for (std::size_t cpu = 0; cpu < static_cast<std::size_t>(CPU_SETSIZE); ++cpu) {
        if (CPU_ISSET(cpu, &g_startCpus) && seen++ == index) {
            PinThisThread(cpu);
            return;
        }
    }
}

void SetWorkerTasks(std::function<std::vector<std::uint64_t>()> count) {
    t_workerTasks = std::move(count);
}

void SetPoolStatistics(std::function<std::string()> describe) {
    g_poolStatistics = std::move(describe);
}

Measurement MeasureIsolated(Config const &config, Sizes const &sizes, Workload const &workload,
                            Implementation const &implementation, std::vector<Alongside> const &alongside) {
    Measurement result;
    int reportFd = -1;
    int errorsFd = -1;
    pid_t const pid =
        StartChild(config, sizes, workload, implementation, alongside, reportFd, errorsFd, result.Error);
    if (pid < 0) {
        return result;
    }
    ChildEnd const end = WaitForChild(pid, reportFd, errorsFd, config, result.ChildStderr);
    bool ok = false;
    bool down = false;
    ReadReport(end.Report, result, ok, down);
    std::string const how = HowItEnded(end, config);
    std::string const lastWords = LastWords(result.ChildStderr);
    if (!ok) {
        if (result.Error.empty()) {
            result.Error = how + (lastWords.empty() ? "" : ": " + lastWords);
        }
        result.Figures.clear();
        return result;
    }
    if (result.Figures.size() != workload.Figures.size()) {
        result.Error = "the child reported " + std::to_string(result.Figures.size()) + " figures";
        return result;
    }
    if (!down || (!end.TimedOut && !(WIFEXITED(end.Status) && WEXITSTATUS(end.Status) == 0))) {
        result.Error = "measured, but the pool did not shut down cleanly: " + how;
        return result;
    }
    result.Ok = true;
    return result;
}

std::string JsonString(std::string const &text) {
    std::string quoted = "\"";
    for (char const c : text) {
        if (c == '"' || c == '\\') {
            quoted += '\\';
            quoted += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
            quoted += escaped;
        } else {
            quoted += c;
        }
    }
    return quoted + "\"";
}

std::string FormatValue(double value) {
    if (value == 0) {
        return "0";
    }
    int const magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
    int const decimals = std::clamp(2 - magnitude, 0, 6);
    char text[64];
    std::snprintf(text, sizeof text, "%.*f", decimals, value);
    return text;
}

std::string Format(char const *format, ...) {
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    int const length = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    std::string text(length > 0 ? static_cast<std::size_t>(length) : 0, '\0');
    if (length > 0) {
        std::vsnprintf(text.data(), text.size() + 1, format, again);
    }
    va_end(again);
    return text;
}

namespace {

std::string FormatRatio(double ratio) {
    char text[32];
    std::snprintf(text, sizeof text, ratio >= 100 ? "%.0fx" : "%.2fx", ratio);
    return text;
}

// What a cell's ratio is taken over: the first column's median measured
// beside it, else the first column's own cell (0: neither).
double RatioBase(Cell const &cell, Cell const &reference) {
    if (cell.PairedReference > 0) {
        return cell.PairedReference;
    }
    return reference.Status == Cell::State::Measured ? reference.Figure.Median : 0;
}

std::string FormatJsonNumber(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.9g", value);
    return text;
}

} // namespace

Table::Table(std::vector<std::string> columns, std::vector<bool> built)
    : m_columns(std::move(columns)), m_built(std::move(built)) {
    m_built.resize(m_columns.size(), true);
}

void Table::AddRow(Figure const &figure, std::string const &workloadId, std::string const &description) {
    Row row{figure, workloadId, description, std::vector<Cell>(m_columns.size())};
    for (std::size_t i = 0; i < m_columns.size(); ++i) {
        row.Cells[i].Status = m_built[i] ? Cell::State::NotImplemented : Cell::State::NotBuilt;
    }
    m_rows.push_back(std::move(row));
}

bool Table::Built(std::string const &column) const {
    for (std::size_t i = 0; i < m_columns.size(); ++i) {
        if (m_columns[i] == column) {
            return m_built[i];
        }
    }
    return false;
}

Cell &Table::At(std::string const &figureId, std::string const &column) {
    Cell const *cell = static_cast<Table const *>(this)->Find(figureId, column);
    if (cell == nullptr) {
        std::fprintf(stderr, "ftl_bench: no cell (%s, %s)\n", figureId.c_str(), column.c_str());
        std::abort();
    }
    return const_cast<Cell &>(*cell);
}

Cell const *Table::Find(std::string const &figureId, std::string const &column) const {
    for (Row const &row : m_rows) {
        if (row.Fig.Id != figureId) {
            continue;
        }
        for (std::size_t i = 0; i < m_columns.size(); ++i) {
            if (m_columns[i] == column) {
                return &row.Cells[i];
            }
        }
    }
    return nullptr;
}

bool Table::AllOk() const {
    for (Row const &row : m_rows) {
        for (Cell const &cell : row.Cells) {
            if (cell.Status == Cell::State::Failed) {
                return false;
            }
        }
    }
    return true;
}

std::vector<double> Table::Probes() const {
    std::vector<double> probes;
    for (Row const &row : m_rows) {
        for (Cell const &cell : row.Cells) {
            for (double const probe : {cell.ProbeBefore, cell.ProbeAfter}) {
                if (cell.Status == Cell::State::Measured && probe > 0) {
                    probes.push_back(probe);
                }
            }
        }
    }
    return probes;
}

double LowerQuartile(std::vector<double> values) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    return values[(values.size() - 1) / 4];
}

void Table::Print(std::FILE *out, double probeBase) const {
    bool anySlow = false;
    // Cell texts first, to size the columns.
    std::vector<std::vector<std::string>> texts;
    std::vector<std::size_t> widths;
    for (std::string const &column : m_columns) {
        widths.push_back(column.size());
    }
    std::size_t labelWidth = std::string("figure").size();
    std::size_t unitWidth = std::string("unit").size();
    for (Row const &row : m_rows) {
        labelWidth = std::max(labelWidth, row.Fig.Id.size());
        unitWidth = std::max(unitWidth, row.Fig.Unit.size());
        Cell const &reference = row.Cells[0];
        std::vector<std::string> cells;
        for (std::size_t i = 0; i < row.Cells.size(); ++i) {
            Cell const &cell = row.Cells[i];
            std::string text;
            switch (cell.Status) {
            case Cell::State::Measured:
                if (kSanitizedBuild) {
                    text = "checked";
                    break;
                }
                text = FormatValue(cell.Figure.Median);
                if (double const base = RatioBase(cell, reference); i > 0 && row.Fig.Ratio && base > 0) {
                    text += " (" + FormatRatio(cell.Figure.Median / base) + ")";
                }
                if (probeBase > 0 &&
                    std::max(cell.ProbeBefore, cell.ProbeAfter) > kSlowPlacement * probeBase) {
                    text += "*";
                    anySlow = true;
                }
                break;
            case Cell::State::Failed:
                text = "FAILED";
                break;
            case Cell::State::NotBuilt:
                text = "n/a";
                break;
            case Cell::State::NotImplemented:
                text = "-";
                break;
            }
            widths[i] = std::max(widths[i], text.size());
            cells.push_back(text);
        }
        texts.push_back(std::move(cells));
    }
    std::fprintf(out, "%-*s  %-*s", static_cast<int>(labelWidth), "figure", static_cast<int>(unitWidth),
                 "unit");
    for (std::size_t i = 0; i < m_columns.size(); ++i) {
        std::fprintf(out, "  %*s", static_cast<int>(widths[i]), m_columns[i].c_str());
    }
    std::fprintf(out, "\n");
    for (std::size_t r = 0; r < m_rows.size(); ++r) {
        std::fprintf(out, "%-*s  %-*s", static_cast<int>(labelWidth), m_rows[r].Fig.Id.c_str(),
                     static_cast<int>(unitWidth), m_rows[r].Fig.Unit.c_str());
        for (std::size_t i = 0; i < m_columns.size(); ++i) {
            std::fprintf(out, "  %*s", static_cast<int>(widths[i]), texts[r][i].c_str());
        }
        std::fprintf(out, "\n");
    }
    if (anySlow) {
        std::fprintf(
            out,
            "* measured while a cache-line round trip between the two first cores took more than %.1fx\n"
            "  the run's lower quartile (%s ns): the host had placed the virtual CPUs further apart, and\n"
            "  hand-offs between cores cost more; compare such a figure only with others so marked.\n",
            kSlowPlacement, FormatValue(probeBase).c_str());
    }
    for (Row const &row : m_rows) {
        for (std::size_t i = 0; i < row.Cells.size(); ++i) {
            if (row.Cells[i].Status == Cell::State::Failed) {
                std::fprintf(out, "FAILED %s %s: %s\n", row.Fig.Id.c_str(), m_columns[i].c_str(),
                             row.Cells[i].Error.c_str());
            }
        }
    }
}

void Table::PrintDetails(std::FILE *out) const {
    std::size_t labelWidth = 0;
    std::size_t columnWidth = 0;
    for (Row const &row : m_rows) {
        labelWidth = std::max(labelWidth, row.Fig.Id.size());
    }
    for (std::string const &column : m_columns) {
        columnWidth = std::max(columnWidth, column.size());
    }
    for (Row const &row : m_rows) {
        for (std::size_t i = 0; i < row.Cells.size(); ++i) {
            Cell const &cell = row.Cells[i];
            if (cell.Status != Cell::State::Measured) {
                continue;
            }
            std::string const range =
                kSanitizedBuild ? "checked, not timed"
                                : FormatValue(cell.Figure.Median) + " [" + FormatValue(cell.Figure.Min) +
                                      " .. " + FormatValue(cell.Figure.Max) + "] " + row.Fig.Unit;
            std::string const probe = cell.ProbeBefore > 0 ? FormatValue(cell.ProbeBefore) + "/" +
                                                                 FormatValue(cell.ProbeAfter) + " ns"
                                                           : "-";
            std::string share;
            if (cell.BusiestShare >= 0) {
                char text[64];
                std::snprintf(text, sizeof text, "; its busiest thread ran %.0f%% of the tasks",
                              100 * cell.BusiestShare);
                share = text;
            }
            std::fprintf(out, "  %-*s  %-*s  %-32s  %-14s  %s%s\n", static_cast<int>(labelWidth),
                         row.Fig.Id.c_str(), static_cast<int>(columnWidth), m_columns[i].c_str(),
                         range.c_str(), probe.c_str(), cell.Primitive.c_str(), share.c_str());
        }
    }
}

std::string Table::Json(std::string const &indent) const {
    std::string json = "[";
    bool first = true;
    for (Row const &row : m_rows) {
        Cell const &reference = row.Cells[0];
        for (std::size_t i = 0; i < row.Cells.size(); ++i) {
            Cell const &cell = row.Cells[i];
            char const *status = "not implemented";
            switch (cell.Status) {
            case Cell::State::Measured:
                status = "ok";
                break;
            case Cell::State::Failed:
                status = "failed";
                break;
            case Cell::State::NotBuilt:
                status = "not built";
                break;
            case Cell::State::NotImplemented:
                break;
            }
            json += first ? "\n" : ",\n";
            first = false;
            json += indent + "  {\"figure\": " + JsonString(row.Fig.Id) +
                    ", \"workload\": " + JsonString(row.WorkloadId) +
                    ", \"system\": " + JsonString(m_columns[i]) + ", \"unit\": " + JsonString(row.Fig.Unit) +
                    ", \"status\": " + JsonString(status);
            if (!cell.Primitive.empty()) {
                json += ", \"primitive\": " + JsonString(cell.Primitive);
            }
            if (cell.Status == Cell::State::Failed) {
                json += ", \"error\": " + JsonString(cell.Error);
            }
            if (cell.Status == Cell::State::Measured && !kSanitizedBuild) {
                json += ", \"repetitions\": " + std::to_string(cell.Figure.Repetitions) +
                        ", \"median\": " + FormatJsonNumber(cell.Figure.Median) +
                        ", \"min\": " + FormatJsonNumber(cell.Figure.Min) +
                        ", \"max\": " + FormatJsonNumber(cell.Figure.Max);
                if (cell.ProbeBefore > 0) {
                    json += ", \"cross_core_ns\": [" + FormatJsonNumber(cell.ProbeBefore) + ", " +
                            FormatJsonNumber(cell.ProbeAfter) + "]";
                }
                if (cell.BusiestShare >= 0) {
                    json += ", \"busiest_thread_share\": " + FormatJsonNumber(cell.BusiestShare);
                }
                if (cell.PairedReference > 0) {
                    json += ", \"paired_reference\": " + FormatJsonNumber(cell.PairedReference);
                }
                if (double const base = RatioBase(cell, reference); i > 0 && row.Fig.Ratio && base > 0) {
                    json += ", \"ratio\": " + FormatJsonNumber(cell.Figure.Median / base);
                }
            }
            json += "}";
        }
    }
    return json + "\n" + indent + "]";
}

std::vector<Measurement> MeasureSideBySide(Config const &config, Sizes const &sizes, Workload const &workload,
                                           Implementation const &implementation,
                                           std::vector<Alongside> const &alongside) {
    std::size_t const pools =
        1 + alongside.size() + (sizes.PairedThreads != 0 && workload.SelfMeasured() ? 1 : 0);
    Workload all = workload;
    for (std::size_t pool = 1; pool < pools; ++pool) {
        all.Figures.insert(all.Figures.end(), workload.Figures.begin(), workload.Figures.end());
    }
    Measurement const result = MeasureIsolated(config, sizes, all, implementation, alongside);
    if (!result.Ok) {
        return {result};
    }
    std::size_t const count = workload.Figures.size();
    std::vector<Measurement> measurements(pools, result);
    for (std::size_t pool = 0; pool < pools; ++pool) {
        auto const from = result.Figures.begin() + static_cast<std::ptrdiff_t>(pool * count);
        measurements[pool].Figures.assign(from, from + static_cast<std::ptrdiff_t>(count));
    }
    return measurements;
}

} // namespace bench
