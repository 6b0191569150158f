// ftl_bench: ftl beside its peers (oneTBB, OpenMP tasks, Boost.Fiber) and a
// hand-written reference, on the workloads of workloads.h, in one run.
//
// For every workload, each system that implements it is measured in turn, in
// a child process of its own (harness.h): a warm-up run, then at least 5
// checked repetitions; the table gives each system's median and its ratio to
// ftl's. --features adds one ftl column per measurement switch
// (source/scheduler/mechanisms.h), with that one mechanism off, and prints
// them as a second table. The run ends with the verdicts on the performance
// targets (targets.h, verdicts.h).
//
// --threads-pair measures ftl alone at 1 worker and at every core, and
// --pair-merge reports several such runs as one (a merge's JSON counts as
// the runs it lists, so that a merge grows with new runs): threads_pair.h.
//
// Usage: ftl_bench [--short] [--reps N] [--threads N] [--filter IDS] [--systems NAMES]
//                  [--features] [--json FILE] [--timeout SECONDS] [--threads-pair ROUNDS]
//        ftl_bench --pair-merge FILES [--json FILE]
#include "harness.h"
#include "host.h"
#include "systems.h"
#include "threads_pair.h"
#include "verdicts.h"
#include "workloads.h"

#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Options {
    bool Short = false;
    bool Features = false;
    unsigned Repetitions = 0; // 0: the default for the mode
    unsigned Threads = 0;     // 0: one per core this process may use
    unsigned PairRounds = 0;  // --threads-pair: rounds of ftl at 1 worker and at Threads
    unsigned TimeoutSeconds = 900;
    std::vector<std::string> Filter;    // workload or figure ids; empty: all
    std::vector<std::string> Systems;   // column names; empty: all
    std::vector<std::string> PairMerge; // --pair-merge: the JSON of --threads-pair runs or merges
    std::string JsonPath;
};

void PrintUsage(std::FILE *out) {
    std::fprintf(
        out,
        "usage: ftl_bench [--short] [--reps N] [--threads N] [--filter IDS] [--systems NAMES]\n"
        "                 [--features] [--json FILE] [--timeout SECONDS] [--threads-pair ROUNDS]\n"
        "       ftl_bench --pair-merge FILES [--json FILE]\n"
        "  --short          5 repetitions and smaller sizes: fib(25), 10,000 ping-pongs, 0.25 s idle\n"
        "                   windows, 50 wake samples (the full run: 7 repetitions, fib(30), 100,000,\n"
        "                   2 s, 200)\n"
        "  --reps N         N repetitions after the warm-up (at least %u)\n"
        "  --threads N      N workers in every system (default: one per core this process may use)\n"
        "  --filter IDS     only these workloads, comma-separated (e.g. W1,W3,R2)\n"
        "  --systems NAMES  only these systems, comma-separated (ftl,oneTBB,OpenMP,Boost.Fiber,reference)\n"
        "  --features       also run ftl once per scheduling mechanism, with that one switched off\n"
        "  --json FILE      also write every figure to FILE as JSON\n"
        "  --timeout S      give up on one (workload, system) after S seconds (default 900)\n"
        "  --threads-pair R only ftl, at 1 worker and at --threads workers (default: every core), in R\n"
        "                   rounds alternating which goes first; prints each figure's ratio of the two\n"
        "                   per round, with the host's state from the cross-core probe (--json: to FILE)\n"
        "  --pair-merge F   measures nothing: reports the rounds of several --threads-pair runs (their\n"
        "                   --json files, comma-separated; one host, one worker count) as one run, each\n"
        "                   round in its own run's host state (--json: to FILE); an earlier merge's\n"
        "                   JSON brings all the runs it merged\n"
        "Exits 1 when ftl or the reference fails a check (or crashes); a peer's failure, or ftl's\n"
        "with a mechanism off, is reported in its cell and the table but is not an error.\n",
        bench::kMinRepetitions);
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

std::vector<std::string> SplitList(std::string const &text) {
    std::vector<std::string> items;
    std::istringstream stream(text);
    std::string item;
    while (std::getline(stream, item, ',')) {
        if (!item.empty()) {
            items.push_back(item);
        }
    }
    return items;
}

// Returns false (having said why) when the command line is wrong.
bool ParseOptions(int argc, char **argv, Options &options) {
    for (int i = 1; i < argc; ++i) {
        std::string const arg = argv[i];
        bool const hasValue = i + 1 < argc;
        if (arg == "--short") {
            options.Short = true;
        } else if (arg == "--features") {
            options.Features = true;
        } else if (arg == "--reps" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.Repetitions) ||
                options.Repetitions < bench::kMinRepetitions) {
                std::fprintf(stderr, "ftl_bench: --reps needs a number >= %u\n", bench::kMinRepetitions);
                return false;
            }
        } else if (arg == "--threads" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.Threads) || options.Threads == 0) {
                std::fprintf(stderr, "ftl_bench: --threads needs a number >= 1\n");
                return false;
            }
        } else if (arg == "--threads-pair" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.PairRounds) || options.PairRounds == 0) {
                std::fprintf(stderr, "ftl_bench: --threads-pair needs a number of rounds >= 1\n");
                return false;
            }
        } else if (arg == "--timeout" && hasValue) {
            if (!ParseUnsigned(argv[++i], options.TimeoutSeconds) || options.TimeoutSeconds == 0) {
                std::fprintf(stderr, "ftl_bench: --timeout needs a number of seconds >= 1\n");
                return false;
            }
        } else if (arg == "--filter" && hasValue) {
            options.Filter = SplitList(argv[++i]);
        } else if (arg == "--systems" && hasValue) {
            options.Systems = SplitList(argv[++i]);
        } else if (arg == "--pair-merge" && hasValue) {
            options.PairMerge = SplitList(argv[++i]);
            if (options.PairMerge.empty()) {
                std::fprintf(stderr, "ftl_bench: --pair-merge needs the JSON files of --threads-pair runs\n");
                return false;
            }
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

bool Contains(std::vector<std::string> const &list, std::string const &item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// A system to measure, and the table and column its results go to.
struct Column {
    bench::System System;
    bench::Table *Target;
};

// Workloads where ftl runs exactly what it runs in another one (W5b: Fibtex as
// in W5; W7s: Sleep, which is also the default of W7). The main table measures
// them again, for a ratio within their own row; the --features table leaves
// them out.
bool DuplicateForFtl(std::string const &workloadId) {
    return workloadId == "W5b" || workloadId == "W7s";
}

// The --features column of ftl with every mechanism on, measured as the
// switched-off configurations are: its ratio is the noise of the method.
constexpr char kControlColumn[] = "all on again";

// ---------------------------------------------------------------------------
// Plan: what the options ask to measure, with which systems, into which
// tables.

// The sizes every system runs with: the full run's, or --short's.
bench::Sizes SizesFor(Options const &options) {
    bench::Sizes sizes;
    sizes.Short = options.Short;
    sizes.Threads = options.Threads != 0 ? options.Threads : bench::AllowedCpuCount();
    if (options.Short) {
        sizes.FibN = 25;
        sizes.PingPongRounds = 10000;
        sizes.IdleSeconds = 0.25;
        sizes.WakeSamples = 50;
    }
    return sizes;
}

bench::Config ConfigFor(Options const &options) {
    bench::Config config;
    config.Repetitions = options.Repetitions != 0 ? options.Repetitions
                         : options.Short          ? bench::kMinRepetitions
                                                  : bench::kDefaultRepetitions;
    config.TimeoutSeconds = options.TimeoutSeconds;
    config.MemoryLimitBytes = bench::MemoryLimit();
    return config;
}

// The columns of a table: every one's name and whether this build has it,
// and the systems it has, in column order.
struct SystemList {
    std::vector<std::string> Names;
    std::vector<bool> Built;
    std::vector<bench::System> Systems;
};

// The main table's systems: ftl first (the reference of every ratio), then
// the peers this build has, then the hand-written reference.
SystemList MakeSystems() {
    SystemList list;
    list.Names = {"ftl"};
    list.Built = {true};
    list.Systems.push_back(bench::MakeFtlSystem("ftl", ftl::detail::Mechanisms{}));
    auto const addPeer = [&list](char const *name, bool isBuilt, auto make) {
        list.Names.emplace_back(name);
        list.Built.push_back(isBuilt);
        if (isBuilt) {
            list.Systems.push_back(make());
        }
    };
#if FTL_BENCH_HAVE_TBB
    addPeer("oneTBB", true, [] { return bench::MakeTbbSystem(); });
#else
    addPeer("oneTBB", false, [] { return bench::System{}; });
#endif
#if FTL_BENCH_HAVE_OPENMP
    addPeer("OpenMP", true, [] { return bench::MakeOpenMpSystem(); });
#else
    addPeer("OpenMP", false, [] { return bench::System{}; });
#endif
#if FTL_BENCH_HAVE_BOOST_FIBER
    addPeer("Boost.Fiber", true, [] { return bench::MakeBoostFiberSystem(); });
#else
    addPeer("Boost.Fiber", false, [] { return bench::System{}; });
#endif
    list.Names.emplace_back("reference");
    list.Built.push_back(true);
    list.Systems.push_back(bench::MakeReferenceSystem());
    return list;
}

// The --features table's systems: its first column, "all on", is the main
// table's ftl; with --features, the control (all on, measured like the
// switched-off configurations, beside all on: how far apart two identical
// pools read), then ftl with each mechanism off.
SystemList MakeFeatureSystems(bool features) {
    SystemList list;
    list.Names = {"all on"};
    if (features) {
        list.Names.push_back(kControlColumn);
        list.Systems.push_back(bench::MakeFtlSystem(kControlColumn, ftl::detail::Mechanisms{}));
        for (ftl::detail::MechanismSwitch const &flag : ftl::detail::kMechanismSwitches) {
            ftl::detail::Mechanisms mechanisms;
            mechanisms.*flag.Flag = false;
            list.Names.push_back(std::string(flag.Name) + " off");
            list.Systems.push_back(bench::MakeFtlSystem(list.Names.back(), mechanisms));
        }
    }
    list.Built.assign(list.Names.size(), true);
    return list;
}

// False, having said why, when --systems names a system that is not a column.
bool KnownSystems(Options const &options, std::vector<std::string> const &names) {
    for (std::string const &wanted : options.Systems) {
        if (!Contains(names, wanted)) {
            std::fprintf(stderr, "ftl_bench: --systems: unknown system '%s'\n", wanted.c_str());
            return false;
        }
    }
    return true;
}

// The systems --systems selects, each with the table it goes to; the
// --features columns come with ftl.
std::vector<Column> SelectColumns(Options const &options, SystemList &main, bench::Table &table,
                                  SystemList &features, bench::Table &featureTable) {
    std::vector<Column> columns;
    for (bench::System &system : main.Systems) {
        if (options.Systems.empty() || Contains(options.Systems, system.Name)) {
            columns.push_back(Column{std::move(system), &table});
        }
    }
    if (options.Systems.empty() || Contains(options.Systems, "ftl")) {
        for (bench::System &system : features.Systems) {
            columns.push_back(Column{std::move(system), &featureTable});
        }
    }
    return columns;
}

// The workloads --filter selects (all without it); false, having said why,
// when it names one that does not exist.
bool SelectWorkloads(Options const &options, bench::Sizes const &sizes,
                     std::vector<bench::Workload> &workloads) {
    workloads = bench::MakeWorkloads(sizes);
    if (options.Filter.empty()) {
        return true;
    }
    for (std::string const &wanted : options.Filter) {
        bool const known =
            std::any_of(workloads.begin(), workloads.end(),
                        [&](bench::Workload const &workload) { return workload.Id == wanted; });
        if (!known) {
            std::fprintf(stderr, "ftl_bench: --filter: unknown workload '%s'\n", wanted.c_str());
            return false;
        }
    }
    workloads.erase(std::remove_if(workloads.begin(), workloads.end(),
                                   [&](bench::Workload const &workload) {
                                       return !Contains(options.Filter, workload.Id);
                                   }),
                    workloads.end());
    return true;
}

// A row per figure in the main table, and in the --features table for the
// workloads ftl runs but does not duplicate.
void AddRows(std::vector<bench::Workload> const &workloads, bool features, bench::System const &ftlAllOn,
             bench::Table &table, bench::Table &featureTable) {
    for (bench::Workload const &workload : workloads) {
        for (bench::Figure const &figure : workload.Figures) {
            table.AddRow(figure, workload.Id, workload.Description);
            if (features && ftlAllOn.Find(workload.Id) != nullptr && !DuplicateForFtl(workload.Id)) {
                featureTable.AddRow(figure, workload.Id, workload.Description);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Measure: every cell of the tables, then the pairs the verdicts compare,
// measured once more together.

// What the cells are measured with and into.
struct Suite {
    bench::Config const &Config;
    bench::Sizes const &Sizes;
    bench::Table &Main;
    bench::Table &Features;
    bool WithFeatures;
    bench::System const &FtlAllOn; // the all-on pool a switched-off one runs beside
};

// A cell's measurement, and on a timed workload of --features the all-on
// pool's medians, measured beside it (else empty).
struct CellMeasurement {
    bench::Measurement Measured;
    std::vector<double> PairedReference;
};

// A mechanism switched off, on a timed workload, runs beside an all-on pool
// in the same child, their runs in turn: from one process to the next this
// host drifts by more than most mechanisms change (the all-on cell of one
// full run read W1c at 36 ns a task, every switched-off one at 10 to 18).
// Its ratio is taken over that all-on pool.
CellMeasurement MeasureCell(Suite const &suite, bench::Workload const &workload, Column const &column,
                            bench::Implementation const &implementation) {
    bench::Implementation const *const allOn = suite.FtlAllOn.Find(workload.Id);
    bool const besideAllOn = column.Target == &suite.Features && !workload.SelfMeasured() &&
                             !bench::kSanitizedBuild && allOn != nullptr;
    std::fprintf(stderr, "  %-4s %-28s %s", workload.Id.c_str(), column.System.Name.c_str(),
                 besideAllOn ? "beside all on, run by run: " : "");
    CellMeasurement cell;
    if (!besideAllOn) {
        cell.Measured = bench::MeasureIsolated(suite.Config, suite.Sizes, workload, implementation);
        return cell;
    }
    std::vector<bench::Measurement> const results = bench::MeasureSideBySide(
        suite.Config, suite.Sizes, workload, *allOn, {bench::Alongside{&implementation, suite.Sizes, -1}});
    cell.Measured = results.back();
    if (results.size() == 2) {
        for (bench::Stats const &stats : results.front().Figures) {
            cell.PairedReference.push_back(stats.Median);
        }
    }
    return cell;
}

// Records a measurement in its column's cells, one per figure; ftl's in the
// main table is also the --features table's "all on".
void RecordCells(Suite const &suite, bench::Workload const &workload, Column const &column,
                 bench::Implementation const &implementation, CellMeasurement const &measured) {
    bench::Measurement const &measurement = measured.Measured;
    for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
        bench::Cell &cell = column.Target->At(workload.Figures[i].Id, column.System.Name);
        cell.Primitive = implementation.Primitive;
        cell.PairedReference = i < measured.PairedReference.size() ? measured.PairedReference[i] : -1;
        cell.ProbeBefore = measurement.ProbeBefore;
        cell.ProbeAfter = measurement.ProbeAfter;
        cell.BusiestShare = measurement.BusiestShare;
        if (measurement.Ok) {
            cell.Status = bench::Cell::State::Measured;
            cell.Figure = measurement.Figures[i];
        } else {
            cell.Status = bench::Cell::State::Failed;
            cell.Error = measurement.Error;
        }
        if (column.Target == &suite.Main && column.System.Name == "ftl" && suite.WithFeatures) {
            if (suite.Features.Find(workload.Figures[i].Id, "all on") != nullptr) {
                suite.Features.At(workload.Figures[i].Id, "all on") = cell;
            }
        }
    }
}

// The rest of a cell's progress line on stderr: its figures, or why it
// failed; then what the pool says it did, and the child's stderr.
void PrintMeasured(bench::Workload const &workload, CellMeasurement const &measured) {
    bench::Measurement const &measurement = measured.Measured;
    if (!measurement.Ok) {
        std::fprintf(stderr, "FAILED: %s\n", measurement.Error.c_str());
        if (!measurement.ChildStderr.empty()) {
            std::fprintf(stderr, "       its stderr:\n%s\n", measurement.ChildStderr.c_str());
        }
        return;
    }
    if (bench::kSanitizedBuild) {
        std::fprintf(stderr, "checked\n");
        return;
    }
    std::string line;
    for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
        bench::Stats const &stats = measurement.Figures[i];
        line += (i == 0 ? "" : ", ") + bench::FormatValue(stats.Median) + " [" +
                bench::FormatValue(stats.Min) + " .. " + bench::FormatValue(stats.Max) + "] " +
                workload.Figures[i].Unit;
        if (i < measured.PairedReference.size()) {
            line += " (all on: " + bench::FormatValue(measured.PairedReference[i]) + ")";
        }
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    if (!measurement.PoolStatistics.empty()) {
        // ftl's table, indented under the cell: where the work ran.
        std::istringstream lines(measurement.PoolStatistics);
        std::string statistics;
        while (std::getline(lines, statistics)) {
            std::fprintf(stderr, "       %s\n", statistics.c_str());
        }
    }
    if (!measurement.ChildStderr.empty()) {
        std::fprintf(stderr, "       its stderr:\n%s\n", measurement.ChildStderr.c_str());
    }
}

// Workload by workload, every system in turn, so that the figures a ratio
// compares were measured minutes apart at most.
void MeasureTables(Suite const &suite, std::vector<bench::Workload> const &workloads,
                   std::vector<Column> const &columns) {
    for (bench::Workload const &workload : workloads) {
        for (Column const &column : columns) {
            bench::Implementation const *implementation = column.System.Find(workload.Id);
            if (implementation == nullptr ||
                (column.Target == &suite.Features && DuplicateForFtl(workload.Id))) {
                continue;
            }
            CellMeasurement const measured = MeasureCell(suite, workload, column, *implementation);
            RecordCells(suite, workload, column, *implementation, measured);
            PrintMeasured(workload, measured);
        }
    }
}

// One Together per figure of `workload` (none Ok when the measurement failed).
std::vector<bench::Together> MeasureTogetherEach(bench::Config const &config, bench::Sizes const &sizes,
                                                 bench::Workload const &workload,
                                                 bench::Implementation const &first,
                                                 bench::Implementation const &second,
                                                 char const *secondName) {
    std::fprintf(stderr, "  %-4s and %s together, run by run: ", workload.Id.c_str(), secondName);
    std::vector<bench::Measurement> const results =
        bench::MeasureSideBySide(config, sizes, workload, first, {bench::Alongside{&second, sizes, -1}});
    std::vector<bench::Together> each(workload.Figures.size());
    if (!results.front().Ok) {
        std::fprintf(stderr, "FAILED: %s\n", results.front().Error.c_str());
        return each;
    }
    for (std::size_t i = 0; i < each.size(); ++i) {
        bench::Together &together = each[i];
        together.Ok = true;
        together.First = results[0].Figures[i].Median;
        together.Second = results[1].Figures[i].Median;
        together.Probe = std::max(results[0].ProbeBefore, results[0].ProbeAfter);
        together.SecondShare = results[1].BusiestShare;
        std::fprintf(stderr, "%s%s and %s %s", i == 0 ? "" : "; ", bench::FormatValue(together.First).c_str(),
                     bench::FormatValue(together.Second).c_str(), workload.Figures[i].Unit.c_str());
    }
    std::fprintf(stderr, "\n");
    return each;
}

// The main table's implementation of `figure` by `system`, or nullptr.
bench::Implementation const *ImplementationOf(std::vector<Column> const &columns, bench::Table const &table,
                                              std::string const &system, std::string const &figure) {
    for (Column const &column : columns) {
        if (column.Target == &table && column.System.Name == system) {
            return column.System.Find(figure);
        }
    }
    return nullptr;
}

// The workload whose id is `id`, or workloads.end().
std::vector<bench::Workload>::const_iterator WorkloadOf(std::vector<bench::Workload> const &workloads,
                                                        std::string const &id) {
    return std::find_if(workloads.begin(), workloads.end(),
                        [&id](bench::Workload const &workload) { return workload.Id == id; });
}

// The targets that compare two figures, measured once more together (see
// bench::Together): the first figure by its system beside the second by its.
struct Comparison {
    char const *First;
    char const *FirstSystem;
    char const *Second;
    char const *SecondSystem;
    char const *SecondName; // on stderr, "W8 and the raw futex together"
};

constexpr Comparison kComparisons[] = {
    {"W8", "ftl", "W8", "reference", "the raw futex"},
    {"W6", "ftl", "W6", "reference", "the std::thread loop"},
    {"G1", "ftl", "W1", "ftl", "W1"},
    {"A1", "ftl", "W1", "ftl", "W1"},
    {"W1c", "ftl", "W1", "ftl", "W1"},
    {"W3c", "ftl", "W3", "ftl", "W3"},
    {"P1", "ftl", "P1h", "ftl", "AddTasks batches by hand"},
};

bench::TogetherMap MeasureComparisons(bench::Config const &config, bench::Sizes const &sizes,
                                      std::vector<bench::Workload> const &workloads,
                                      std::vector<Column> const &columns, bench::Table const &table) {
    bench::TogetherMap together;
    if (bench::kSanitizedBuild) {
        return together;
    }
    for (Comparison const &comparison : kComparisons) {
        bench::Cell const *firstCell = table.Find(comparison.First, comparison.FirstSystem);
        bench::Cell const *secondCell = table.Find(comparison.Second, comparison.SecondSystem);
        auto const first = WorkloadOf(workloads, comparison.First);
        auto const second = WorkloadOf(workloads, comparison.Second);
        bench::Implementation const *firstImplementation =
            ImplementationOf(columns, table, comparison.FirstSystem, comparison.First);
        bench::Implementation const *secondImplementation =
            ImplementationOf(columns, table, comparison.SecondSystem, comparison.Second);
        // Both measured in the table, and one unit for both (the harness
        // divides every run's time by the first workload's units).
        if (firstCell != nullptr && secondCell != nullptr &&
            firstCell->Status == bench::Cell::State::Measured &&
            secondCell->Status == bench::Cell::State::Measured && first != workloads.end() &&
            second != workloads.end() && first->UnitsPerRun == second->UnitsPerRun &&
            firstImplementation != nullptr && secondImplementation != nullptr) {
            together[comparison.First] = MeasureTogetherEach(config, sizes, *first, *firstImplementation,
                                                             *secondImplementation, comparison.SecondName)
                                             .front();
        }
    }
    return together;
}

// The (figure, peer) pairs to measure beside ftl: W1-W4 and W8 with the best
// peer (ftl's W8 cell read 17.0 us in a full run whose --features columns,
// minutes later, read 3.2 to 7.8), and every figure where a peer's cell beat
// ftl's, but for a lock workload the peer ran on one thread (which "no peer
// beats ftl" leaves out).
std::vector<std::pair<std::string, std::string>> PeerPairs(bench::Table const &table, unsigned threads) {
    std::vector<std::pair<std::string, std::string>> pairs; // figure, peer
    for (char const *figure : {"W1", "W2", "W3", "W4", "W8"}) {
        if (bench::PeerBest const best = bench::BestPeer(table, {figure}); best.Median >= 0) {
            pairs.emplace_back(figure, best.Column);
        }
    }
    for (bench::Table::Row const &row : table.Rows()) {
        double const ftl = bench::CellMedian(table, row.Fig.Id, "ftl");
        for (char const *peer : bench::kPeers) {
            double const median = bench::CellMedian(table, row.Fig.Id, peer);
            if (bench::OneThreadCell(table.Find(row.Fig.Id, peer), threads)) {
                continue; // a lock that one thread took alone: the verdict leaves it out
            }
            if (ftl >= 0 && median >= 0 && median < ftl &&
                std::find(pairs.begin(), pairs.end(), std::make_pair(row.Fig.Id, std::string(peer))) ==
                    pairs.end()) {
                pairs.emplace_back(row.Fig.Id, peer);
            }
        }
    }
    return pairs;
}

// ftl beside a peer (see bench::PeerTogetherMap), for each of PeerPairs. A
// workload of several figures (W8's median and p99) is measured once for all
// of them. Not an idle workload: its CPU time is the whole process's.
bench::PeerTogetherMap MeasureBesidePeers(bench::Config const &config, bench::Sizes const &sizes,
                                          std::vector<bench::Workload> const &workloads,
                                          std::vector<Column> const &columns, bench::Table const &table) {
    bench::PeerTogetherMap peerTogether;
    for (auto const &[figure, peer] : PeerPairs(table, sizes.Threads)) {
        auto const workload = std::find_if(
            workloads.begin(), workloads.end(), [&figure = figure](bench::Workload const &candidate) {
                return std::any_of(candidate.Figures.begin(), candidate.Figures.end(),
                                   [&figure](bench::Figure const &its) { return its.Id == figure; });
            });
        if (bench::kSanitizedBuild || workload == workloads.end() ||
            peerTogether.count(bench::PeerKey(workload->Figures.front().Id, peer)) != 0 ||
            workload->Figures.front().Unit.rfind("cpu-s", 0) == 0) {
            continue; // not measured, measured with another of its figures, or idle
        }
        bench::Implementation const *const ours = ImplementationOf(columns, table, "ftl", workload->Id);
        bench::Implementation const *const theirs = ImplementationOf(columns, table, peer, workload->Id);
        if (ours == nullptr || theirs == nullptr) {
            continue;
        }
        std::vector<bench::Together> const each =
            MeasureTogetherEach(config, sizes, *workload, *ours, *theirs, peer.c_str());
        for (std::size_t i = 0; i < each.size(); ++i) {
            peerTogether[bench::PeerKey(workload->Figures[i].Id, peer)] = each[i];
        }
    }
    return peerTogether;
}

// ---------------------------------------------------------------------------
// Report: the run's conditions, its tables and verdicts on stdout, and all of
// it as JSON.

// What a report says of its run besides the tables.
struct RunInfo {
    std::string Started;
    std::string Finished;
    std::string LoadBefore;
    std::string LoadAfter;
    unsigned Threads = 0;
    unsigned Repetitions = 0; // 0 in a sanitizer build
    bool Short = false;
};

void PrintConditions(RunInfo const &run, bench::Config const &config,
                     std::vector<bench::Workload> const &workloads) {
    std::printf("ftl_bench: %s to %s; %s, %u workers per system (all cores: %u)\n", run.Started.c_str(),
                run.Finished.c_str(), bench::CpuModel().c_str(), run.Threads, bench::AllowedCpuCount());
    std::printf("load average before %s, after %s; a system's process is stopped above %.1f GB resident\n",
                run.LoadBefore.c_str(), run.LoadAfter.c_str(),
                static_cast<double>(config.MemoryLimitBytes) / double(1ul << 30));
    if (bench::kSanitizedBuild) {
        std::printf(
            "WARNING: this is a sanitizer build. Every workload ran once and its result was checked,\n"
            "         but timings would measure the sanitizer, so none are reported. Build without\n"
            "         FTL_SANITIZE (e.g. the `bench` or `main` preset) for figures.\n");
    } else {
        std::printf("each figure: the median of %u checked repetitions after a warm-up run%s\n",
                    run.Repetitions, run.Short ? " (--short: smaller sizes, see the workload list)" : "");
    }
    std::printf("\nWorkloads:\n");
    for (bench::Workload const &workload : workloads) {
        std::printf("  %-4s %s\n", workload.Id.c_str(), workload.Description.c_str());
    }
}

void PrintTables(bench::Table const &table, bench::Table const &featureTable, bool features) {
    std::printf("\nEvery measurement: median [min .. max]; the cross-core probe (a cache-line round trip\n"
                "between the first two cores) just before and just after it; what the system used:\n");
    table.PrintDetails(stdout);
    std::printf(
        "\nMedians; in parentheses each system's median over ftl's (above 1: ftl is faster).\n"
        "n/a: the peer is not in this build (not found at configure time; sanitizer builds leave peers\n"
        "out); -: the system has no such workload.\n\n");
    std::vector<double> probes = table.Probes();
    std::vector<double> const featureProbes = featureTable.Probes();
    probes.insert(probes.end(), featureProbes.begin(), featureProbes.end());
    double const probeBase = bench::LowerQuartile(probes);
    table.Print(stdout, probeBase);
    if (features) {
        std::printf("\nftl with one scheduling mechanism off; medians, in parentheses over \"all on\"\n"
                    "(above 1: the mechanism helps on this workload); on a timed workload, over the\n"
                    "all-on pool measured beside it in the same process, their runs in turn (the \"all on\"\n"
                    "column is the main table's cell):\n\n");
        featureTable.Print(stdout, probeBase);
        std::printf("\nftl with one mechanism off, every measurement:\n");
        featureTable.PrintDetails(stdout);
    }
}

// The JSON up to the verdicts: the run, its systems and workloads.
void WriteRunJson(std::ofstream &json, RunInfo const &run, SystemList const &systems,
                  std::vector<bench::Workload> const &workloads) {
    json << "{\n  \"tool\": \"ftl_bench\",\n"
         << "  \"started\": " << bench::JsonString(run.Started) << ",\n"
         << "  \"finished\": " << bench::JsonString(run.Finished) << ",\n"
         << "  \"cpu\": " << bench::JsonString(bench::CpuModel()) << ",\n"
         << "  \"cores\": " << bench::AllowedCpuCount() << ",\n"
         << "  \"threads\": " << run.Threads << ",\n"
         << "  \"load_before\": " << bench::JsonString(run.LoadBefore) << ",\n"
         << "  \"load_after\": " << bench::JsonString(run.LoadAfter) << ",\n"
         << "  \"short\": " << (run.Short ? "true" : "false") << ",\n"
         << "  \"sanitized\": " << (bench::kSanitizedBuild ? "true" : "false") << ",\n"
         << "  \"repetitions\": " << run.Repetitions << ",\n"
         << "  \"systems\": [";
    for (std::size_t i = 0; i < systems.Names.size(); ++i) {
        json << (i == 0 ? "" : ", ") << "{\"name\": " << bench::JsonString(systems.Names[i])
             << ", \"built\": " << (systems.Built[i] ? "true" : "false") << "}";
    }
    json << "],\n  \"workloads\": [";
    for (std::size_t i = 0; i < workloads.size(); ++i) {
        bench::Workload const &workload = workloads[i];
        json << (i == 0 ? "\n" : ",\n") << "    {\"id\": " << bench::JsonString(workload.Id)
             << ", \"description\": " << bench::JsonString(workload.Description) << ", \"figures\": [";
        for (std::size_t f = 0; f < workload.Figures.size(); ++f) {
            json << (f == 0 ? "" : ", ") << "{\"id\": " << bench::JsonString(workload.Figures[f].Id)
                 << ", \"unit\": " << bench::JsonString(workload.Figures[f].Unit) << "}";
        }
        json << "]}";
    }
    json << "\n  ]";
}

// --json: the whole run; false, having said so, when the file cannot be written.
bool WriteResultsJson(std::string const &path, RunInfo const &run, SystemList const &systems,
                      std::vector<bench::Workload> const &workloads,
                      std::vector<bench::TargetVerdict> const &verdicts, bench::Table const &table,
                      bench::Table const *featureTable) {
    std::ofstream json(path);
    WriteRunJson(json, run, systems, workloads);
    json << ",\n  \"targets\": [";
    for (std::size_t i = 0; i < verdicts.size(); ++i) {
        json << (i == 0 ? "\n" : ",\n") << "    {\"text\": " << bench::JsonString(verdicts[i].Text)
             << ", \"met\": " << (verdicts[i].Met ? "true" : "false") << "}";
    }
    json << "\n  ],\n  \"results\": " << table.Json("  ");
    if (featureTable != nullptr) {
        json << ",\n  \"features\": " << featureTable->Json("  ");
    }
    json << "\n}\n";
    json.close();
    if (!json) {
        std::fprintf(stderr, "ftl_bench: cannot write %s\n", path.c_str());
        return false;
    }
    std::printf("\nresults written to %s\n", path.c_str());
    return true;
}

// ftl (as configured by default) and the reference must not fail: that is
// an error. A peer that fails, or ftl with a mechanism switched off, is a
// finding, reported in its cell.
int ExitStatus(std::vector<bench::Workload> const &workloads, bench::Table const &table,
               bench::Table const &featureTable) {
    if (workloads.empty()) {
        std::fprintf(stderr, "ftl_bench: no workload selected\n");
        return 1;
    }
    bool mustPass = true;
    for (bench::Table::Row const &row : table.Rows()) {
        for (std::size_t i = 0; i < row.Cells.size(); ++i) {
            bool const ours = table.Columns()[i] == "ftl" || table.Columns()[i] == "reference";
            if (ours && row.Cells[i].Status == bench::Cell::State::Failed) {
                mustPass = false;
            }
        }
    }
    if (!mustPass) {
        std::fprintf(stderr, "ftl_bench: an ftl or reference measurement failed (see FAILED above)\n");
        return 1;
    }
    if (!table.AllOk() || !featureTable.AllOk()) {
        std::fprintf(stderr, "ftl_bench: some peer or --features measurements failed; see FAILED above "
                             "(reported as findings, not errors)\n");
    }
    return 0;
}

// --pair-merge: measures nothing.
int PairMerge(Options const &options) {
    if (options.PairRounds != 0) {
        std::fprintf(stderr, "ftl_bench: --pair-merge measures nothing; run --threads-pair on its own\n");
        return 2;
    }
    return bench::RunPairMerge(options.PairMerge, options.JsonPath);
}

// --threads-pair, on the workloads --filter selected.
int ThreadsPair(Options const &options, bench::Config const &config, bench::Sizes const &sizes,
                std::vector<bench::Workload> const &workloads) {
    unsigned const more = options.Threads != 0 ? options.Threads : bench::AllowedCpuCount();
    if (more < 2) {
        std::fprintf(stderr, "ftl_bench: --threads-pair needs at least 2 workers to compare with 1\n");
        return 2;
    }
    return bench::RunThreadsPair(config, sizes, more, options.PairRounds, workloads, options.JsonPath);
}

} // namespace

int main(int argc, char **argv) {
    Options options;
    if (!ParseOptions(argc, argv, options)) {
        return 2;
    }
    if (!options.PairMerge.empty()) {
        return PairMerge(options);
    }
    bench::Sizes const sizes = SizesFor(options);
    bench::Config const config = ConfigFor(options);
    SystemList systems = MakeSystems();
    if (!KnownSystems(options, systems.Names)) {
        return 2;
    }
    bench::Table table(systems.Names, systems.Built);
    SystemList featureSystems = MakeFeatureSystems(options.Features);
    bench::Table featureTable(featureSystems.Names, featureSystems.Built);
    std::vector<Column> const columns = SelectColumns(options, systems, table, featureSystems, featureTable);
    std::vector<bench::Workload> workloads;
    if (!SelectWorkloads(options, sizes, workloads)) {
        return 2;
    }
    bench::System const ftlAllOn = bench::MakeFtlSystem("ftl", ftl::detail::Mechanisms{});
    AddRows(workloads, options.Features, ftlAllOn, table, featureTable);
    if (options.PairRounds != 0) {
        return ThreadsPair(options, config, sizes, workloads);
    }

    RunInfo run;
    run.Started = bench::UtcNow();
    run.LoadBefore = bench::LoadAverage();
    run.Threads = sizes.Threads;
    run.Repetitions = bench::kSanitizedBuild ? 0 : config.Repetitions;
    run.Short = options.Short;
    std::fprintf(stderr, "ftl_bench: %s, load average %s; %u workers per system, %u repetitions%s\n",
                 run.Started.c_str(), run.LoadBefore.c_str(), run.Threads, run.Repetitions,
                 options.Short ? " (--short)" : "");
    Suite const suite{config, sizes, table, featureTable, options.Features, ftlAllOn};
    MeasureTables(suite, workloads, columns);
    bench::TogetherMap const together = MeasureComparisons(config, sizes, workloads, columns, table);
    bench::PeerTogetherMap const peerTogether = MeasureBesidePeers(config, sizes, workloads, columns, table);
    run.LoadAfter = bench::LoadAverage();
    run.Finished = bench::UtcNow();

    PrintConditions(run, config, workloads);
    PrintTables(table, featureTable, options.Features);
    std::vector<bench::TargetVerdict> verdicts;
    if (!bench::kSanitizedBuild) {
        verdicts = bench::JudgeTargets(table, sizes.Threads, together, peerTogether);
        bench::PrintTargets(stdout, verdicts);
    }
    if (!options.JsonPath.empty() && !WriteResultsJson(options.JsonPath, run, systems, workloads, verdicts,
                                                       table, options.Features ? &featureTable : nullptr)) {
        return 1;
    }
    std::fflush(stdout);
    return ExitStatus(workloads, table, featureTable);
}
