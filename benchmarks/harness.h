// The benchmark harness: workloads, the systems that implement them, and how
// one implementation is measured.
//
// A Workload is one job, described once (its id, what one run does, the
// figures it reports). A System (ftl, oneTBB, OpenMP, Boost.Fiber, or the
// hand-written reference) implements some workloads; each Implementation makes
// a Fixture: the system's pool, started, plus the workload's state.
//
// Each (workload, system) pair is measured in a child process of its own
// (fork): its threads exist only while it is measured, an idle peer pool can
// never steal time from the system being measured, a static pool (Boost.Fiber's
// work_stealing keeps one per process) starts fresh every time, getrusage sees
// only the system being measured, and a crash or hang fails one cell of the
// table instead of the whole suite. In the child:
//
//   1. the fixture is made (the pool starts; not timed);
//   2. one warm-up run, whose figures are thrown away (first touches of memory,
//      fiber stacks, caches, lazily started threads);
//   3. `Repetitions` measured runs (at least 5).
//
// After every run, the warm-up included, Check must pass before the run's
// figures count: a benchmark that lost work must fail, not report a flattering
// figure. A timed workload's figure is Run's wall time divided by
// UnitsPerRun; a self-measured one (idle CPU time, wake latencies) reports its
// own figures. Each figure's median, minimum and maximum over the repetitions
// is what the tables print.
//
// The exception to a pool per process is a comparison whose figures must
// come from the same seconds (MeasureIsolated's `alongside`: ftl_bench
// --threads-pair, --features, and the verdicts that compare two figures):
// the child makes every fixture on a thread of its own, and they take their
// runs in turn; the idle pools' workers are parked meanwhile. None of them
// lives on the measuring thread: a pool made there ran W5s 10-25% slower
// than the same pool made on a thread of its own (identical configurations
// side by side read 0.74-1.18 of each other; 0.96-1.02 with every pool on
// its own thread).
//
// Around each measurement the child bounces a cache line between the first
// two cores (the cross-core probe, see harness.cpp), so that a figure taken
// while the host had moved the VM's CPUs apart can be told from the others;
// and the parent stops a child whose resident memory passes
// Config::MemoryLimitBytes, before the kernel's OOM killer picks a victim.
//
// In a sanitizer build every fixture still runs once (the warm-up) and is
// checked, but no figures are reported: they would measure the sanitizer.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FTL_BENCH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FTL_BENCH_SANITIZED 1
#endif
#endif
#ifndef FTL_BENCH_SANITIZED
#define FTL_BENCH_SANITIZED 0
#endif

namespace bench {

constexpr bool kSanitizedBuild = FTL_BENCH_SANITIZED != 0;
constexpr unsigned kMinRepetitions = 5;
constexpr unsigned kDefaultRepetitions = 7;
// The warm-up runs the workload until this much time has passed (at most
// kMaxWarmUpRuns times); see Runs::WarmUp (harness.cpp).
constexpr std::chrono::milliseconds kMinWarmUp{200};
constexpr unsigned kMaxWarmUpRuns = 200;

// The outcome of checking one run.
struct Verdict {
    bool Ok = true;
    std::string Error;

    static Verdict Pass() { return Verdict{}; }
    static Verdict Fail(std::string error) { return Verdict{false, std::move(error)}; }
};

// The sizes every system reads, so that all of them do the same work. Only
// --short changes them (and --threads the thread count).
struct Sizes {
    bool Short = false;
    unsigned Threads = 1;             // workers of every system: all cores by default
    unsigned FibN = 30;               // W3
    unsigned PingPongRounds = 100000; // W4
    double IdleSeconds = 2.0;         // W7: measured window (figures are scaled to 2 s)
    unsigned WakeSamples = 200;       // W8
    // --threads-pair, for a self-measured workload whose implementation
    // interleaves the pair (Implementation::InterleavesPair): its fixture
    // runs a second pool of this many workers beside the first (of Threads)
    // and reports the first pool's figures, then the second's. 0: one pool.
    // (A timed workload's pair is two fixtures: MeasureIsolated's alongside.)
    unsigned PairedThreads = 0;
};

// One system's implementation of one workload, with the system's pool
// started. Only Run is timed.
class Fixture {
public:
    Fixture() = default;
    virtual ~Fixture() = default;
    Fixture(Fixture const &) = delete;
    Fixture &operator=(Fixture const &) = delete;

    // Does the work and returns once all of it is done.
    virtual void Run() = 0;
    // Inspects what the last run produced, and resets what the next run needs
    // reset.
    virtual Verdict Check() = 0;
    // For self-measured workloads: the last run's figures, one per
    // Workload::Figures entry.
    virtual std::vector<double> MeasuredFigures() const { return {}; }
    // Optional, for figures that are a percentile of samples
    // (Figure::Percentile): the last run's samples behind each figure, one
    // vector per Workload::Figures entry (empty: not reported).
    virtual std::vector<std::vector<double>> MeasuredSamples() const { return {}; }
    // For workloads whose figure means something only when the work spread
    // over the threads (W5: one lock contended by all of them): the share of
    // the last run's tasks that the busiest thread ran, 0 to 1 (-1: not
    // counted). A run where one thread ran them all measured an uncontended
    // lock.
    virtual double BusiestThreadShare() const { return -1; }
};

// A system's description of what its pool did, one line or more (ftl: its
// GetStats table). A fixture sets it while its pool lives, and the figures
// of the cell come with it.
void SetPoolStatistics(std::function<std::string()> describe);

// The tasks each worker of the calling thread's pool has run since it
// started, in worker order (ftl: GetStats' TasksRun). A fixture sets it on
// the thread that makes it, while its pool lives; the harness reads it on
// that thread around each run, and reports where the last pool of a
// side-by-side measurement ran its tasks (Measurement::WorkerTasks).
void SetWorkerTasks(std::function<std::vector<std::uint64_t>()> count);

// Gives the calling thread the CPUs the measuring process started with. A
// thread started by a pool's worker 0 inherits its one CPU, and a pool that
// thread starts would pin every worker there: the thread of a second pool in
// one fixture calls this first.
void AllowStartCpus();
// Pins the calling thread to the index-th CPU the measuring process started with.
void PinToStartCpu(int index);

using FixtureFactory = std::function<std::unique_ptr<Fixture>(Sizes const &sizes)>;

struct Implementation {
    std::string WorkloadId;
    std::string Primitive; // what the system uses for it, e.g. "task_group, wait per batch"
    FixtureFactory Make;
    // Whether its fixture, self-measured, honours Sizes::PairedThreads.
    bool InterleavesPair = false;
};

// The implementation of `workloadId` whose fixture is T(sizes).
template <class T>
Implementation Make(char const *workloadId, char const *primitive) {
    return Implementation{workloadId, primitive, [](Sizes const &sizes) -> std::unique_ptr<Fixture> {
                              return std::make_unique<T>(sizes);
                          }};
}

struct System {
    std::string Name;
    std::vector<Implementation> Implementations;

    Implementation const *Find(std::string const &workloadId) const;
};

struct Figure {
    std::string Id; // the row label, e.g. "W8 p99"
    std::string Unit;
    bool Ratio = true; // whether "peer / ftl" means anything for it
    // Above 0: the figure is this percentile (50: the median) of the run's
    // samples, and a fixture that reports them (Fixture::MeasuredSamples)
    // lets --threads-pair take the percentile of every run's samples pooled.
    double Percentile = 0;
};

struct Workload {
    std::string Id;
    std::string Description;
    std::vector<Figure> Figures; // a timed workload has exactly one
    // Timed workloads: the figure is Run's time in ns divided by this (1e6
    // gives ms per run). 0: the fixture measures its own figures.
    double UnitsPerRun = 0;
    // An idle measurement has nothing to warm up.
    bool WarmUp = true;
    // Whether --threads-pair measures it: not when one worker cannot do what
    // the figure is about (M2's second task starts when the first ends).
    bool Paired = true;

    bool SelfMeasured() const { return UnitsPerRun == 0; }
};

struct Config {
    unsigned Repetitions = kDefaultRepetitions;
    unsigned TimeoutSeconds = 900; // per (workload, system) pair, pool start and shutdown included
    // A child whose resident memory passes this is stopped; 0: no limit.
    unsigned long MemoryLimitBytes = 0;
};

struct Stats {
    unsigned Repetitions = 0;
    double Median = 0;
    double Min = 0;
    double Max = 0;
    // Each measured run's samples, when the fixture reports them
    // (Fixture::MeasuredSamples); else empty.
    std::vector<std::vector<double>> Samples;
};

// The result of measuring one implementation: one Stats per figure.
struct Measurement {
    bool Ok = false;
    std::string Error;
    std::vector<Stats> Figures;
    std::string ChildStderr; // what the child wrote on stderr (the first 64 KB)
    // What the system's pool did over every run, when the system says
    // (SetPoolStatistics): ftl's per-worker statistics.
    std::string PoolStatistics;
    // The cross-core cache-line round trip (ns) just before the pool started
    // and just after it stopped (0: fewer than two CPUs).
    double ProbeBefore = 0;
    double ProbeAfter = 0;
    // The single-thread probe (ns per locked increment on the slower of the
    // first two CPUs), at the same two moments.
    double SerialBefore = 0;
    double SerialAfter = 0;
    // The median over the measured runs of Fixture::BusiestThreadShare (-1:
    // not counted).
    double BusiestShare = -1;
    // The tasks each worker of the last pool ran over the measured runs, in
    // worker order (empty: the system does not say; see SetWorkerTasks).
    std::vector<std::uint64_t> WorkerTasks;
};

// Another fixture measured in the same child process as the first: made
// (with these sizes) on a thread of its own, as the first then is too, so
// that both can be pools, and run in turn with it (ABBA: which goes first
// alternates), so that the host's drift from one second to the next falls
// on both alike. The other pools' idle workers are parked meanwhile.
struct Alongside {
    Implementation const *With = nullptr;
    bench::Sizes Sizes;
    // Pins its thread to this CPU of the process's (its index among them)
    // before the fixture is made, so that a pool of one worker runs there;
    // -1: the thread may use all of them.
    int Cpu = -1;
};

// Measures one implementation in a child process (see the top of this file).
// With `alongside` (see MeasureSideBySide), the workload lists the figures
// of every fixture, the first's then the next one's, and so does the result.
Measurement MeasureIsolated(Config const &config, Sizes const &sizes, Workload const &workload,
                            Implementation const &implementation,
                            std::vector<Alongside> const &alongside = {});

// MeasureIsolated with the fixtures `alongside` the first, or with a first
// fixture that runs a second pool itself (sizes.PairedThreads, a
// self-measured workload): one measurement per pool, the first's first, each
// with the workload's figures (probes, share and statistics are the
// child's). A failure comes back as one measurement, not Ok.
std::vector<Measurement> MeasureSideBySide(Config const &config, Sizes const &sizes, Workload const &workload,
                                           Implementation const &implementation,
                                           std::vector<Alongside> const &alongside);

double MedianOf(std::vector<double> values);
// The p-th percentile (0..100), nearest rank.
double PercentileOf(std::vector<double> values, double p);
// The p-th percentile of several runs' samples taken together (50: MedianOf).
double PooledPercentile(std::vector<std::vector<double>> const &runs, double p);

// One cell of a result table.
struct Cell {
    enum class State { Measured, Failed, NotBuilt, NotImplemented };
    State Status = State::NotImplemented;
    std::string Primitive;
    std::string Error;
    Stats Figure;
    double ProbeBefore = 0; // see Measurement
    double ProbeAfter = 0;
    double BusiestShare = -1; // see Measurement
    // The first column's median as measured beside this cell, in the same
    // child, the two pools' runs in turn (-1: not measured so): the cell's
    // ratio is taken over it rather than over the first column's own cell,
    // measured in another process.
    double PairedReference = -1;
};

// A table of results: rows are figures, columns are systems; the first
// column is the reference the others are compared with ("x.xx" = this
// system's median over the reference's).
class Table {
public:
    Table(std::vector<std::string> columns, std::vector<bool> built);

    void AddRow(Figure const &figure, std::string const &workloadId, std::string const &description);
    Cell &At(std::string const &figureId, std::string const &column);
    Cell const *Find(std::string const &figureId, std::string const &column) const;

    std::vector<std::string> const &Columns() const { return m_columns; }
    bool Built(std::string const &column) const;
    bool AllOk() const;
    bool Empty() const { return m_rows.empty(); }

    // Median per cell, the ratio to the first column beside it (to the
    // cell's PairedReference when it has one). A cell whose
    // cross-core probe was above kSlowPlacement x probeBase (the run's LowerQuartile) gets a '*'.
    void Print(std::FILE *out, double probeBase) const;
    // Median, min, max, the probe and the primitive, one line per measured cell.
    void PrintDetails(std::FILE *out) const;
    // The cross-core probes around the measured cells.
    std::vector<double> Probes() const;
    // The cells as a JSON array.
    std::string Json(std::string const &indent) const;

    struct Row {
        Figure Fig;
        std::string WorkloadId;
        std::string Description;
        std::vector<Cell> Cells;
    };
    std::vector<Row> const &Rows() const { return m_rows; }

private:
    std::vector<std::string> m_columns;
    std::vector<bool> m_built;
    std::vector<Row> m_rows;
};

// See Table::Print. On the 2-core AMD VM the probe sits at 60-100 ns while
// the host keeps the two virtual CPUs close and at 300-350 ns when it does
// not: 2.5x the run's lower quartile (LowerQuartile) separates the two. Not the
// fastest: on the Intel host the probe reads 150-250 ns, and a handful of
// readings at 50-65 ns in a full run put 2.5x the fastest below that and
// marked every cell.
constexpr double kSlowPlacement = 2.5;
// The lower quartile of `values` (0: none): the cross-core probe the table's
// '*' is relative to, and the single-thread probe the pair's is.
double LowerQuartile(std::vector<double> values);

// A cross-core cache-line round trip between two cores of one socket takes
// 50-150 ns; a host whose probe reads above this is in its slow state (seen
// on VMs: about 450 ns, minutes at a time). An absolute bound, because a
// whole run may fall in one state (the table's '*', relative to the run's
// fastest probe, then marks nothing). The verdicts and --threads-pair name
// the state each of their measurements was taken in.
constexpr double kSlowProbeNs = 250;

std::string JsonString(std::string const &text);
// Formats a figure with 3-4 significant digits.
std::string FormatValue(double value);
// printf into a string of whatever length it takes (a verdict that lists
// every figure runs past a fixed buffer).
__attribute__((format(printf, 1, 2))) std::string Format(char const *format, ...);

} // namespace bench
