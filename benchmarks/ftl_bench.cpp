// ftl_bench: ftl beside its peers (oneTBB, OpenMP tasks, Boost.Fiber) and a
// hand-written reference, on the workloads of workloads.h, in one run.
//
// For every workload, each system that implements it is measured in turn, in
// a child process of its own (harness.h): a warm-up run, then at least 5
// checked repetitions; the table gives each system's median and its ratio to
// ftl's. --features adds one ftl column per measurement switch
// (source/scheduler/mechanisms.h), with that one mechanism off, and prints
// them as a second table.
//
// --threads-pair measures ftl alone at 1 worker and at every core, and
// --pair-merge reports several such runs as one (a merge's JSON counts as
// the runs it lists, so that a merge grows with new runs).
//
// Usage: ftl_bench [--short] [--reps N] [--threads N] [--filter IDS] [--systems NAMES]
//                  [--features] [--json FILE] [--timeout SECONDS] [--threads-pair ROUNDS]
//        ftl_bench --pair-merge FILES [--json FILE]
#include "../tests/json_reader.h"
#include "harness.h"
#include "systems.h"
#include "workloads.h"

#include "ftl_bench_revision.h" // FTL_BENCH_REVISION (revision.cmake)

#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
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

unsigned AllowedCpuCount() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return 1;
    }
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

// A quarter of the machine's memory (at least 2 GB) as each child's limit:
// far more than any system needs for these workloads (ftl's fiber stacks, at
// most 32k of them, touch a few KB each), and far from what would make the
// kernel kill processes on a shared machine.
unsigned long MemoryLimit() {
    long const pages = sysconf(_SC_PHYS_PAGES);
    long const pageSize = sysconf(_SC_PAGE_SIZE);
    unsigned long const quarter = pages > 0 && pageSize > 0 ? static_cast<unsigned long>(pages) *
                                                                  static_cast<unsigned long>(pageSize) / 4
                                                            : 0;
    return std::max(quarter, 2ul << 30);
}

std::string ReadFirstLine(char const *path) {
    std::ifstream file(path);
    std::string line;
    std::getline(file, line);
    return line;
}

std::string LoadAverage() {
    std::istringstream fields(ReadFirstLine("/proc/loadavg"));
    std::string one;
    std::string five;
    std::string fifteen;
    fields >> one >> five >> fifteen;
    return one + " " + five + " " + fifteen;
}

std::string CpuModel() {
    std::ifstream file("/proc/cpuinfo");
    std::string line;
    while (std::getline(file, line)) {
        if (line.rfind("model name", 0) == 0) {
            std::size_t const colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown CPU";
}

std::string UtcNow() {
    std::time_t const now = std::time(nullptr);
    std::tm parts{};
    gmtime_r(&now, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &parts);
    return text;
}

// A system to measure, and the table and column its results go to.
struct Column {
    bench::System System;
    bench::Table *Target;
};

constexpr char const *kPeers[] = {"oneTBB", "OpenMP", "Boost.Fiber"};

// Workloads where ftl runs exactly what it runs in another one (W5b: Fibtex as
// in W5; W7s: Sleep, which is also the default of W7). The main table measures
// them again, for a ratio within their own row; the --features table leaves
// them out.
bool DuplicateForFtl(std::string const &workloadId) {
    return workloadId == "W5b" || workloadId == "W7s";
}

// ---------------------------------------------------------------------------
// The performance targets (README, "Performance targets"), judged on this
// run's medians.

double MedianOf(bench::Table const &table, std::string const &figure, std::string const &column) {
    bench::Cell const *cell = table.Find(figure, column);
    return cell != nullptr && cell->Status == bench::Cell::State::Measured ? cell->Figure.Median : -1;
}

// The peer with the lowest median on one of `figures`.
struct PeerBest {
    double Median = -1;                // -1: no peer measured
    std::string Name;                  // "oneTBB (its primitive)"
    std::string Column;                // "oneTBB"
    bench::Cell const *Cell = nullptr; // its cell
};

// Only cells `eligible` takes, when it is given.
PeerBest BestPeer(bench::Table const &table, std::vector<std::string> const &figures,
                  std::function<bool(bench::Cell const &)> const &eligible = nullptr) {
    PeerBest best;
    for (std::string const &figure : figures) {
        for (char const *peer : kPeers) {
            double const median = MedianOf(table, figure, peer);
            if (median >= 0 && eligible && !eligible(*table.Find(figure, peer))) {
                continue;
            }
            if (median >= 0 && (best.Median < 0 || median < best.Median)) {
                bench::Cell const *cell = table.Find(figure, peer);
                best = PeerBest{median, std::string(peer) + " (" + cell->Primitive + ")", peer, cell};
            }
        }
    }
    return best;
}

// A cross-core cache-line round trip between two cores of one socket takes
// 50-150 ns; a host whose probe reads above this is in its slow state (seen
// on VMs: about 450 ns, minutes at a time). An absolute bound, because a
// whole run may fall in one state (the table's '*', relative to the run's
// fastest probe, then marks nothing).
constexpr double kSlowProbeNs = 250;

// The host's state while a cell was measured.
char const *StateOf(bench::Cell const *cell) {
    return std::max(cell->ProbeBefore, cell->ProbeAfter) > kSlowProbeNs ? "slow" : "fast";
}

// One target's verdict on this run: what was compared, and whether it holds.
struct TargetVerdict {
    std::string Text;
    bool Met;
};

// printf into a string of whatever length it takes (a verdict that lists
// every figure runs past a fixed buffer).
__attribute__((format(printf, 1, 2))) std::string Format(char const *format, ...) {
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

// The shortest text that reads back as exactly `value`: a --threads-pair
// run's JSON keeps what a merge computes its figures from (--pair-merge).
std::string Exact(double value) {
    char text[32];
    std::to_chars_result const written = std::to_chars(text, text + sizeof text, value);
    return std::string(text, written.ptr);
}

// " (ftl measured in the fast state, the peer in the slow state)": a target
// that compares two cells holds in both host states, one run usually sees
// one, and a cell from a slow or noisy minute explains a miss.
std::string MeasuredIn(bench::Cell const *first, char const *firstName, bench::Cell const *second,
                       char const *secondName) {
    return Format(" (%s measured in the %s state, %s in the %s state)", firstName, StateOf(first), secondName,
                  StateOf(second));
}

std::string MeasuredIn(bench::Cell const *ftl, bench::Cell const *other, char const *otherName) {
    return MeasuredIn(ftl, "ftl", other, otherName);
}

// The --features column of ftl with every mechanism on, measured as the
// switched-off configurations are: its ratio is the noise of the method.
constexpr char kControlColumn[] = "all on again";

// A W5 cell whose busiest thread ran at least this share of the tasks
// measured one thread taking an uncontended lock, not a contended one.
constexpr double kOneThreadShare = 0.95;

// Whether a measured cell of a lock workload, with a pool of `threads`,
// had one thread take the lock alone (kOneThreadShare).
bool OneThreadCell(bench::Cell const *cell, unsigned threads) {
    return threads >= 2 && cell != nullptr && cell->Status == bench::Cell::State::Measured &&
           cell->BusiestShare >= kOneThreadShare;
}

// A target that compares two figures (W8 with the raw futex, W6 with the
// std::thread loop, G1 with W1, W1c and W3c with W1 and W3) would compare
// two table cells measured in two processes seconds or minutes apart, and
// the host's drift (2x within seconds for a wake, 1.5x for whole seconds of
// W1; ftl's W6 read 10.7 to 17.4 ms in the processes of one full run) can
// put them on either side of the target whatever ftl does. So such a verdict rests on a
// measurement of its own: the two fixtures in one process, their runs in
// turn. The table keeps both cells as measured.
struct Together {
    bool Ok = false;
    double First = 0;
    double Second = 0;
    double Probe = 0; // the higher of the two probes around it
    // The second pool's busiest thread's share of the tasks (W5; -1: not counted).
    double SecondShare = -1;
};

// One Together per figure of `workload` (none Ok when the measurement failed).
std::vector<Together> MeasureTogetherEach(bench::Config const &config, bench::Sizes const &sizes,
                                          bench::Workload const &workload, bench::Implementation const &first,
                                          bench::Implementation const &second, char const *secondName) {
    std::fprintf(stderr, "  %-4s and %s together, run by run: ", workload.Id.c_str(), secondName);
    std::vector<bench::Measurement> const results =
        bench::MeasureSideBySide(config, sizes, workload, first, {bench::Alongside{&second, sizes, -1}});
    std::vector<Together> each(workload.Figures.size());
    if (!results.front().Ok) {
        std::fprintf(stderr, "FAILED: %s\n", results.front().Error.c_str());
        return each;
    }
    for (std::size_t i = 0; i < each.size(); ++i) {
        Together &together = each[i];
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

// The first figure of `workload` measured together (MeasureTogetherEach).
Together MeasureTogether(bench::Config const &config, bench::Sizes const &sizes,
                         bench::Workload const &workload, bench::Implementation const &first,
                         bench::Implementation const &second, char const *secondName) {
    return MeasureTogetherEach(config, sizes, workload, first, second, secondName).front();
}

// "measured together, run by run, in the fast state"
std::string TogetherState(Together const &together) {
    return Format("measured together, run by run, in the %s state",
                  together.Probe > kSlowProbeNs ? "slow" : "fast");
}

// " (measured together, run by run, in the fast state)"
std::string TogetherIn(Together const &together) {
    return " (" + TogetherState(together) + ")";
}

// The together measurements, by the first figure's id.
using TogetherMap = std::map<std::string, Together>;

// The figures ftl is compared with a peer on (W1-W4 and W8: the best peer; any
// figure: a peer whose cell beat ftl's) measured together as well: ftl's and
// a peer's cells, from two processes, moved as much as the host (W3: 1.48x
// and 2.09x the best peer in two full runs an hour apart). By PeerKey.
using PeerTogetherMap = std::map<std::string, Together>;

std::string PeerKey(std::string const &figure, std::string const &peer) {
    return figure + " " + peer;
}

std::vector<TargetVerdict> JudgeTargets(bench::Table const &table, unsigned threads,
                                        TogetherMap const &together, PeerTogetherMap const &peerTogether) {
    auto const measuredTogether = [&together](char const *id) -> Together const * {
        auto const found = together.find(id);
        return found != together.end() && found->second.Ok ? &found->second : nullptr;
    };
    auto const measuredWithPeer = [&peerTogether](std::string const &figure,
                                                  std::string const &peer) -> Together const * {
        auto const found = peerTogether.find(PeerKey(figure, peer));
        return found != peerTogether.end() && found->second.Ok ? &found->second : nullptr;
    };
    std::vector<TargetVerdict> verdicts;
    for (char const *figure : {"W1", "W2", "W3"}) {
        double const ftlCell = MedianOf(table, figure, "ftl");
        PeerBest const best = BestPeer(table, {figure});
        if (ftlCell <= 0 || best.Median < 0) {
            continue; // not measured in this run (needs ftl and a peer)
        }
        Together const *both = measuredWithPeer(figure, best.Column);
        double const ftl = both != nullptr ? both->First : ftlCell;
        double const peer = both != nullptr ? both->Second : best.Median;
        verdicts.push_back(TargetVerdict{
            Format("%s: best peer %s %s, ftl %s: ftl %.2fx faster%s; target >= 1.5x", figure,
                   best.Name.c_str(), bench::FormatValue(peer).c_str(), bench::FormatValue(ftl).c_str(),
                   peer / ftl, both != nullptr ? TogetherIn(*both).c_str() : ""),
            peer / ftl >= 1.5});
    }
    for (auto const &[closure, lineage] :
         {std::pair<char const *, char const *>{"W1c", "W1"}, {"W3c", "W3"}}) {
        Together const *both = measuredTogether(closure);
        double const withClosures = both != nullptr ? both->First : MedianOf(table, closure, "ftl");
        double const withTasks = both != nullptr ? both->Second : MedianOf(table, lineage, "ftl");
        if (withClosures > 0 && withTasks > 0) {
            verdicts.push_back(TargetVerdict{
                Format("%s: a closure task %s ns, a lineage Task (%s) %s ns: %+.2f ns%s; target <= +2 ns",
                       closure, bench::FormatValue(withClosures).c_str(), lineage,
                       bench::FormatValue(withTasks).c_str(), withClosures - withTasks,
                       both != nullptr ? TogetherIn(*both).c_str()
                                       : MeasuredIn(table.Find(closure, "ftl"), closure,
                                                    table.Find(lineage, "ftl"), lineage)
                                             .c_str()),
                withClosures - withTasks <= 2.0});
        }
    }
    // A target on the ratio of two of ftl's figures: first's at most
    // `limit` times second's.
    auto const ratioTarget = [&](char const *first, char const *firstName, char const *second,
                                 char const *secondName, char const *unit, double limit) {
        Together const *both = measuredTogether(first);
        double const a = both != nullptr ? both->First : MedianOf(table, first, "ftl");
        double const b = both != nullptr ? both->Second : MedianOf(table, second, "ftl");
        if (a > 0 && b > 0) {
            verdicts.push_back(TargetVerdict{
                Format("%s: %s %s %s, %s %s %s = %.2fx%s; target <= %.2fx", first, firstName,
                       bench::FormatValue(a).c_str(), unit, secondName, bench::FormatValue(b).c_str(), unit,
                       a / b,
                       both != nullptr
                           ? TogetherIn(*both).c_str()
                           : MeasuredIn(table.Find(first, "ftl"), first, table.Find(second, "ftl"), second)
                                 .c_str(),
                       limit),
                a <= limit * b});
        }
    };
    ratioTarget("G1", "a TaskGraph node", "W1", "a W1 task", "ns", 1.0);
    ratioTarget("P1", "ParallelFor", "P1h", "AddTasks batches by hand (P1h)", "ns per element", 1.05);
    {
        PeerBest const best = BestPeer(table, {"W4"});
        Together const *both = measuredWithPeer("W4", best.Column);
        double const ftl = both != nullptr ? both->First : MedianOf(table, "W4", "ftl");
        double const peer = both != nullptr ? both->Second : best.Median;
        if (ftl > 0 && peer >= 0) {
            verdicts.push_back(TargetVerdict{
                Format("W4: best peer %s %s ns, ftl %s ns = %.2f of it%s; target <= 0.50", best.Name.c_str(),
                       bench::FormatValue(peer).c_str(), bench::FormatValue(ftl).c_str(), ftl / peer,
                       both != nullptr ? TogetherIn(*both).c_str()
                                       : MeasuredIn(table.Find("W4", "ftl"), best.Cell, "the peer").c_str()),
                ftl <= 0.5 * peer});
        }
    }
    {
        // With 2 or more threads the target is about a contended lock: a cell
        // whose busiest thread ran (nearly) every task measured none, and a
        // peer's such cell is left out, said so.
        auto const spread = [threads](bench::Cell const &cell) { return !OneThreadCell(&cell, threads); };
        std::string leftOut;
        for (char const *figure : {"W5", "W5b"}) {
            for (char const *peer : kPeers) {
                bench::Cell const *cell = table.Find(figure, peer);
                if (OneThreadCell(cell, threads)) {
                    leftOut += Format("%s%s %s (%s), whose busiest thread ran %.0f%% of the tasks",
                                      leftOut.empty() ? "" : "; ", figure, peer, cell->Primitive.c_str(),
                                      100 * cell->BusiestShare);
                }
            }
        }
        if (!leftOut.empty()) {
            leftOut = " [left out: " + leftOut + "]";
        }
        double const ftl = MedianOf(table, "W5", "ftl");
        bench::Cell const *ftlCell = table.Find("W5", "ftl");
        PeerBest const best = BestPeer(table, {"W5", "W5b"}, spread);
        double const peer = best.Median;
        if (ftl > 0 && !spread(*ftlCell)) {
            verdicts.push_back(TargetVerdict{
                Format(
                    "W5: ftl's busiest worker ran %.0f%% of the tasks, so its %s ns measured no contention; "
                    "target: Fibtex no slower than the fastest peer mutex, both contended",
                    100 * ftlCell->BusiestShare, bench::FormatValue(ftl).c_str()),
                false});
        } else if (ftl > 0 && peer >= 0) {
            verdicts.push_back(TargetVerdict{
                Format("W5: fastest peer mutex %s %s ns, ftl Fibtex %s ns = %.2fx%s%s; target <= 1.00x",
                       best.Name.c_str(), bench::FormatValue(peer).c_str(), bench::FormatValue(ftl).c_str(),
                       ftl / peer, MeasuredIn(ftlCell, best.Cell, "the peer").c_str(), leftOut.c_str()),
                ftl <= peer});
        } else if (ftl > 0 && !leftOut.empty()) {
            verdicts.push_back(TargetVerdict{
                Format(
                    "W5: no peer mutex was measured contended%s; target: Fibtex no slower than the fastest "
                    "peer mutex",
                    leftOut.c_str()),
                false});
        }
    }
    {
        Together const *both = measuredTogether("W6");
        double const ftl = both != nullptr ? both->First : MedianOf(table, "W6", "ftl");
        double const reference = both != nullptr ? both->Second : MedianOf(table, "W6", "reference");
        if (ftl > 0 && reference > 0) {
            verdicts.push_back(TargetVerdict{
                Format("W6: std::thread loop %s ms, ftl %s ms = %.3fx%s; target <= 1.05x",
                       bench::FormatValue(reference).c_str(), bench::FormatValue(ftl).c_str(),
                       ftl / reference,
                       both != nullptr
                           ? TogetherIn(*both).c_str()
                           : MeasuredIn(table.Find("W6", "ftl"), table.Find("W6", "reference"), "the loop")
                                 .c_str()),
                ftl <= 1.05 * reference});
        }
    }
    for (char const *figure : {"W7", "W7s", "W7t"}) {
        double const ftl = MedianOf(table, figure, "ftl");
        if (ftl >= 0) {
            verdicts.push_back(TargetVerdict{Format("%s: ftl %s cpu-s over 2 s idle; target < 0.02", figure,
                                                    bench::FormatValue(ftl).c_str()),
                                             ftl < 0.02});
        }
    }
    {
        double const median = MedianOf(table, "T1", "ftl");
        double const p99 = MedianOf(table, "T1 p99", "ftl");
        if (median >= 0) {
            verdicts.push_back(
                TargetVerdict{Format("T1: a 1 ms timer runs its task %s us late at the median "
                                     "(p99 %s us); target <= 1000 us",
                                     bench::FormatValue(median).c_str(), bench::FormatValue(p99).c_str()),
                              median <= 1000});
        }
    }
    if (Together const *wakes = measuredTogether("W8")) {
        verdicts.push_back(TargetVerdict{
            Format("W8: raw futex wake %s us, ftl %s us = %.2fx%s; target <= 1.5x",
                   bench::FormatValue(wakes->Second).c_str(), bench::FormatValue(wakes->First).c_str(),
                   wakes->First / wakes->Second, TogetherIn(*wakes).c_str()),
            wakes->First <= 1.5 * wakes->Second});
    } else {
        double const ftl = MedianOf(table, "W8", "ftl");
        double const futex = MedianOf(table, "W8", "reference");
        if (ftl > 0 && futex > 0) {
            verdicts.push_back(TargetVerdict{
                Format(
                    "W8: raw futex wake %s us, ftl %s us = %.2fx%s; target <= 1.5x",
                    bench::FormatValue(futex).c_str(), bench::FormatValue(ftl).c_str(), ftl / futex,
                    MeasuredIn(table.Find("W8", "ftl"), table.Find("W8", "reference"), "the futex").c_str()),
                ftl <= 1.5 * futex});
        }
    }
    // No figure where a peer beats ftl (lower is better for every figure).
    // A pair measured together (see PeerTogetherMap) is judged on that.
    std::vector<std::string> slower;
    std::vector<std::string> cleared; // a peer's cell beat ftl's, not when measured together
    unsigned compared = 0;
    for (bench::Table::Row const &row : table.Rows()) {
        double const ftlCell = MedianOf(table, row.Fig.Id, "ftl");
        if (ftlCell < 0) {
            continue;
        }
        for (char const *peer : kPeers) {
            double const median = MedianOf(table, row.Fig.Id, peer);
            if (OneThreadCell(table.Find(row.Fig.Id, peer), threads)) {
                continue; // a lock that one thread took alone: see the W5 verdict
            }
            compared += median >= 0 ? 1 : 0;
            // Idle CPU time is read from getrusage; below a millisecond per 2 s
            // (0.05% of a core) the difference is noise, not a win.
            double const tie = row.Fig.Unit.rfind("cpu-s", 0) == 0 ? 0.001 : 0;
            if (median < 0 || median >= ftlCell - tie) {
                continue;
            }
            Together const *both = measuredWithPeer(row.Fig.Id, peer);
            if (both == nullptr) {
                slower.push_back(row.Fig.Id + " (" + peer + " " + bench::FormatValue(median) + " vs ftl " +
                                 bench::FormatValue(ftlCell) + " " + row.Fig.Unit + ")");
                continue;
            }
            if (threads >= 2 && both->SecondShare >= kOneThreadShare) {
                continue; // beside ftl, the peer took the lock on one thread
            }
            std::string const pair = row.Fig.Id + " (" + peer + " " + bench::FormatValue(both->Second) +
                                     " vs ftl " + bench::FormatValue(both->First) + " " + row.Fig.Unit +
                                     ", " + TogetherState(*both) + ")";
            (both->Second < both->First ? slower : cleared).push_back(pair);
        }
    }
    if (compared != 0) {
        auto const join = [](std::vector<std::string> const &items) {
            std::string list;
            for (std::string const &item : items) {
                list += (list.empty() ? "" : "; ") + item;
            }
            return list;
        };
        std::string text = "no figure where a peer beats ftl";
        if (!slower.empty()) {
            text += ": " + join(slower);
        }
        if (!cleared.empty()) {
            text += " [a peer's cell beat ftl's, but not beside it: " + join(cleared) + "]";
        }
        verdicts.push_back(TargetVerdict{text, slower.empty()});
    }
    return verdicts;
}

void PrintTargets(std::FILE *out, std::vector<TargetVerdict> const &verdicts) {
    std::fprintf(out, "\nPerformance targets (README), on this run's medians:\n");
    if (verdicts.empty()) {
        std::fprintf(out, "  (no figure with both ftl and a peer in this run)\n");
    }
    for (TargetVerdict const &verdict : verdicts) {
        std::fprintf(out, "  %s: %s\n", verdict.Text.c_str(), verdict.Met ? "met" : "NOT met");
    }
}

// --threads-pair: one child process at one worker and one at `more`, in an
// order that alternates with the round. False when either failed.
bool MeasureApart(bench::Config const &config, bench::Sizes sizes, unsigned more,
                  bench::Workload const &workload, bench::Implementation const &implementation,
                  unsigned round, bench::Measurement (&measured)[2]) {
    for (unsigned turn = 0; turn < 2; ++turn) {
        unsigned const which = (round + turn) % 2;
        sizes.Threads = which == 0 ? 1 : more;
        std::fprintf(stderr, "  %-4s round %u, %u worker%s: ", workload.Id.c_str(), round + 1, sizes.Threads,
                     sizes.Threads == 1 ? "" : "s");
        measured[which] = bench::MeasureIsolated(config, sizes, workload, implementation);
        if (!measured[which].Ok) {
            std::fprintf(stderr, "FAILED: %s\n", measured[which].Error.c_str());
            return false;
        }
        std::fprintf(stderr, "%s %s\n", bench::FormatValue(measured[which].Figures[0].Median).c_str(),
                     workload.Figures[0].Unit.c_str());
    }
    return true;
}

// --threads-pair in one process. A timed workload: the child runs a pool of
// one worker on the first CPU, one on the second, and a pool of `more`, side
// by side, and takes their runs in turn. The host runs one vCPU up to 1.5
// times slower than the other for seconds at a time, so the 1-worker figure
// is the two CPUs' figures (each in `cores`) weighed by where the larger
// pool ran its tasks: W1's pool of two runs 99.9% of them on its worker 0,
// on the first CPU, and the figure to compare it with is that CPU's, while
// W5's splits them about evenly. The weight is the larger pool's share of
// tasks on its worker 0 (`firstShare`), when it has two workers and ran at
// least kWeighedTasks tasks; else it is one half (W4's two tasks say
// nothing of where its work ran). A self-measured workload whose fixture
// interleaves the pair (W8): its pools swap places from round to round
// (odd rounds: the larger one is the fixture's own, the 1-worker one its
// paired pool), and `cores` stays empty. The probes are the child's, for
// both. False when it failed.
constexpr std::uint64_t kWeighedTasks = 1000;

bool MeasureInterleaved(bench::Config const &config, bench::Sizes sizes, unsigned more,
                        bench::Workload const &workload, bench::Implementation const &implementation,
                        unsigned round, bench::Measurement (&measured)[2],
                        std::vector<std::pair<double, double>> &cores, double &firstShare) {
    sizes.Threads = 1;
    std::vector<bench::Alongside> alongside;
    bool const eachCpu = !workload.SelfMeasured() && AllowedCpuCount() >= 2;
    // W8's fixture has its own pool's worker 0 on the measuring thread and
    // the paired pool's on a thread of its own, both on the first CPU. Before
    // the adder yielded to the worker it woke (YieldToWokenWorker), a wake
    // there waited out W8b's 1 ms busy adder more often in the paired pool,
    // whichever its size (0.86% against 0.66% of 19,200 samples each, half
    // at each size), and a p99 of pooled samples sat on that edge. The pools
    // still differ in that way, so the sizes take turns in them.
    bool const swapped = workload.SelfMeasured() && round % 2 == 1;
    if (workload.SelfMeasured()) {
        sizes.PairedThreads = more; // the fixture runs both pools
        if (swapped) {
            sizes.Threads = more;
            sizes.PairedThreads = 1;
        }
    } else {
        if (eachCpu) {
            alongside.push_back(bench::Alongside{&implementation, sizes, 1});
        }
        alongside.push_back(bench::Alongside{&implementation, sizes, -1});
        alongside.back().Sizes.Threads = more;
    }
    std::fprintf(stderr, "  %-4s round %u, 1 worker%s and %u, %s by %s: ", workload.Id.c_str(), round + 1,
                 eachCpu ? " (each of 2 CPUs)" : "", more, workload.SelfMeasured() ? "sample" : "run",
                 workload.SelfMeasured() ? "sample" : "run");
    std::vector<bench::Measurement> const results =
        bench::MeasureSideBySide(config, sizes, workload, implementation, alongside);
    if (!results.front().Ok) {
        std::fprintf(stderr, "FAILED: %s\n", results.front().Error.c_str());
        return false;
    }
    measured[0] = swapped ? results.back() : results.front();
    measured[1] = swapped ? results.front() : results.back();
    cores.clear();
    firstShare = -1;
    if (eachCpu) {
        std::vector<std::uint64_t> const &tasks = results.back().WorkerTasks;
        double weight = 0.5;
        if (more == 2 && tasks.size() == 2 && tasks[0] + tasks[1] >= kWeighedTasks) {
            firstShare = double(tasks[0]) / double(tasks[0] + tasks[1]);
            weight = firstShare;
        }
        std::vector<bench::Stats> const &second = results[1].Figures;
        for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
            cores.emplace_back(measured[0].Figures[i].Median, second[i].Median);
            measured[0].Figures[i].Median = weight * cores[i].first + (1 - weight) * cores[i].second;
        }
        std::fprintf(stderr, "%s (%s, %s; %s) and ",
                     bench::FormatValue(measured[0].Figures[0].Median).c_str(),
                     bench::FormatValue(cores[0].first).c_str(), bench::FormatValue(cores[0].second).c_str(),
                     firstShare < 0 ? "halves" : Format("%.0f%% on the first", 100 * firstShare).c_str());
    } else {
        std::fprintf(stderr, "%s and ", bench::FormatValue(measured[0].Figures[0].Median).c_str());
    }
    std::fprintf(stderr, "%s %s\n", bench::FormatValue(measured[1].Figures[0].Median).c_str(),
                 workload.Figures[0].Unit.c_str());
    return true;
}

// A figure that is a percentile of samples, with each run's samples at
// both sizes.
struct Sampled {
    double Percentile = 0; // 0: not such a figure
    std::vector<std::vector<double>> One;
    std::vector<std::vector<double>> More;
};

// The ratio of the pooled percentiles (More over One) and its 95% interval
// from resampling whole runs with replacement, the same runs at both sizes.
// Whole runs: the host's slow spells last many samples, so samples within a
// run are not independent; the same runs: both pools took their samples in
// turn within a run, and share its second's noise. A p99 of 200 samples is
// their third highest: W8's ratio of the two pools' p99s read 0.57 to 1.62
// over 60 runs of one build (the 10th to the 90th percentile), and a
// state's 21 runs of a 6-round run (4,200 samples a pool) still left it the
// interval 0.83-1.22.
struct PooledRatio {
    double Ratio = 0;
    double Difference = 0; // more minus one
    double Low = 0;
    double High = 0;
};

// Sets result's Low and High to the 95% interval of `statistic` over 400
// resamples, with replacement, of `count` items (count >= 1): statistic(picks,
// value) is given the resample's item indices and returns whether it had a
// value. The seed is fixed: the same data give the same interval.
template <class Statistic>
void ResampledInterval(std::size_t count, Statistic &&statistic, PooledRatio &result) {
    constexpr unsigned kResamples = 400;
    std::mt19937 random(12345);
    std::uniform_int_distribution<std::size_t> pick(0, count - 1);
    std::vector<std::size_t> picks(count);
    std::vector<double> values;
    for (unsigned i = 0; i < kResamples; ++i) {
        for (std::size_t &picked : picks) {
            picked = pick(random);
        }
        if (double value = 0; statistic(picks, value)) {
            values.push_back(value);
        }
    }
    result.Low = bench::PercentileOf(values, 2.5);
    result.High = bench::PercentileOf(values, 97.5);
}

PooledRatio RatioOfPooled(Sampled const &samples) {
    std::vector<std::vector<double>> const &one = samples.One;
    std::vector<std::vector<double>> const &more = samples.More;
    double const percentile = samples.Percentile;
    PooledRatio result;
    double const base = bench::PooledPercentile(one, percentile);
    double const top = bench::PooledPercentile(more, percentile);
    result.Ratio = base > 0 ? top / base : 0;
    result.Difference = top - base;
    if (one.empty() || one.size() != more.size()) {
        result.Low = result.High = result.Ratio;
        return result;
    }
    std::vector<std::vector<double>> ones(one.size());
    std::vector<std::vector<double>> mores(one.size());
    ResampledInterval(
        one.size(),
        [&](std::vector<std::size_t> const &picks, double &ratio) {
            for (std::size_t run = 0; run < picks.size(); ++run) {
                ones[run] = one[picks[run]];
                mores[run] = more[picks[run]];
            }
            double const resampled = bench::PooledPercentile(ones, percentile);
            if (resampled <= 0) {
                return false;
            }
            ratio = bench::PooledPercentile(mores, percentile) / resampled;
            return true;
        },
        result);
    return result;
}

// A timed figure's median ratio over a state's rounds, and its 95% interval
// from resampling the rounds: with the 6 rounds of a full run, W5s's rounds
// read 0.97 to 1.17 around a median of 1.06, so whether such a median is
// above the target's 1.05 is often not resolved, and the verdict says so.
PooledRatio MedianWithInterval(std::vector<double> const &ratios) {
    PooledRatio result;
    result.Ratio = bench::MedianOf(ratios);
    result.Low = result.High = result.Ratio;
    if (ratios.size() < 2) {
        return result;
    }
    std::vector<double> resampled(ratios.size());
    ResampledInterval(
        ratios.size(),
        [&](std::vector<std::size_t> const &picks, double &median) {
            for (std::size_t round = 0; round < picks.size(); ++round) {
                resampled[round] = ratios[picks[round]];
            }
            median = bench::MedianOf(resampled);
            return true;
        },
        result);
    return result;
}

// The verdict's note on a figure found slower: what its interval leaves open.
std::string IntervalNote(PooledRatio const &ratio, double target) {
    if (ratio.Low <= 1) {
        return Format("; its interval, %.2f-%.2f, reaches 1", ratio.Low, ratio.High);
    }
    if (ratio.Low <= target) {
        return Format("; its interval, %.2f-%.2f, reaches %.2f", ratio.Low, ratio.High, target);
    }
    return "";
}

// How many rounds of its own a workload whose two pools run in one process
// takes in each round of the run. Their state ratios are medians over
// rounds, and 6 rounds left the cheap ones intervals too wide to settle a
// 5% target (W1 1.01-1.12, W5s 0.94-1.10), and W8's pooled p99 0.83-1.22.
// Such a round takes about 1 s (W1-W6) or 6-10 s (W8, W8b), against 100 s
// or so for the workloads measured a process per pool size (the idle
// windows, T1, M1, S1), so 4 of them a round add about 8 minutes to a
// 6-round run and quadruple these figures' rounds.
unsigned PassesPerRound(bench::Sizes const &sizes) {
    return sizes.Short ? 2 : 4;
}

// One figure of one round of a --threads-pair run, at one worker and at more.
struct PairRow {
    std::string Figure;
    std::string Unit;
    unsigned Run = 0; // in a merge (--pair-merge), the run's place in the list, from 1
    unsigned Round = 0;
    double One = 0; // for a timed workload, the two CPUs' figures weighed (MeasureInterleaved)
    double More = 0;
    double OneFirstCpu = -1;  // -1: not measured per CPU
    double OneSecondCpu = -1; // -1: not measured per CPU
    double FirstShare = -1;   // the weight of the first CPU's figure; -1: one half, by default
    double Probe = 0;         // the highest of the four probes around the pair
    double Serial = 0;        // the highest of the four single-thread probes
    bool Slow = false;        // the host's state: Probe above kSlowProbeNs
    bool SerialSlow = false;  // the single-thread probe marked the round (kSerialSlowFactor)
    std::size_t Order = 0;    // the workload's place in the list: the table lists rounds by workload
    // A percentile of samples (Figure::Percentile), with each run's samples
    // at both sizes: One and More are then the percentile of the round's
    // runs pooled, and a state's ratio that of its rounds' runs.
    Sampled Samples;
};

// How a --threads-pair run was measured, as its report says; a merge has one per run.
struct PairRun {
    std::string File; // --pair-merge: the file it was read from; empty: measured now
    // The revision of the source tree it measured (revision.cmake); "" in a
    // run's file written before runs named it.
    std::string Library;
    std::string Started;
    std::string Finished;
    std::string Cpu;
    unsigned Workers = 0;
    unsigned Rounds = 0;
    unsigned Passes = 0;
    unsigned Repetitions = 0;
    double SerialBase = 0; // the lower quartile of its rounds' single-thread probes, ns
    // Whether its JSON has the samples of its figures from samples: a file
    // written before it kept them has their rounds' figures only.
    bool KeptSamples = true;
};

// The revision a run measured, as a report names it.
char const *LibraryOf(PairRun const &run) {
    return run.Library.empty() ? "not named" : run.Library.c_str();
}

// A round whose single-thread probe read this much above its run's lower
// quartile ran while the host ran single-thread code slower: its 1-worker
// figure grows more than its 2-worker one (W5: 10.3 against 5.8 ns, ratio
// 1.09 against 1.34), so its ratio is not compared with the others and stays
// out of the medians and the verdict. The quartile, not the fastest: on the
// Intel host the probe reads 7.2-9.5 ns in most rounds, with no relation to
// their ratios, and 1.3 times the single fastest reading left W5 and W5s 2 or
// 3 rounds of 6 in a full run; a slow state of up to three rounds in four is
// still seen. Each run has its own quartile, which a merge keeps.
constexpr double kSerialSlowFactor = 1.3;

// --threads-pair: ftl alone, at one worker and at `more`, round by round
// (which goes first alternates, so that drift cancels), into `rows`, with the
// host's state from the probes of both measurements. A round runs every
// workload once (those measured in one process PassesPerRound times, as
// rounds of their own), so that each workload's rounds spread over the whole
// run: the host changes state minutes apart, and rounds run back to back
// would all fall in one. False when a measurement failed (the rows so far
// are kept).
bool MeasurePair(bench::Config const &config, bench::Sizes sizes, unsigned more, unsigned rounds,
                 std::vector<bench::Workload> const &workloads, PairRun &run, std::vector<PairRow> &rows) {
    run.Started = UtcNow();
    run.Library = FTL_BENCH_REVISION;
    run.Cpu = CpuModel();
    run.Workers = more;
    run.Rounds = rounds;
    run.Passes = PassesPerRound(sizes);
    run.Repetitions = config.Repetitions;
    bench::System const ftl = bench::MakeFtlSystem("ftl", ftl::detail::Mechanisms{});
    // One of a workload's rounds (`own`: its number among them): its rows, or false when it failed.
    auto const measureRound = [&](bench::Workload const &workload,
                                  bench::Implementation const &implementation, bool together, unsigned own) {
        bench::Measurement measured[2];               // [0]: one worker, [1]: `more`
        std::vector<std::pair<double, double>> cores; // one worker on each CPU, per figure
        double firstShare = -1;
        bool const ok = together ? MeasureInterleaved(config, sizes, more, workload, implementation, own,
                                                      measured, cores, firstShare)
                                 : MeasureApart(config, sizes, more, workload, implementation, own, measured);
        if (!ok) {
            return false;
        }
        double const probe = std::max({measured[0].ProbeBefore, measured[0].ProbeAfter,
                                       measured[1].ProbeBefore, measured[1].ProbeAfter});
        double const serial = std::max({measured[0].SerialBefore, measured[0].SerialAfter,
                                        measured[1].SerialBefore, measured[1].SerialAfter});
        for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
            bench::Stats const &one = measured[0].Figures[i];
            bench::Stats const &most = measured[1].Figures[i];
            PairRow row;
            row.Figure = workload.Figures[i].Id;
            row.Unit = workload.Figures[i].Unit;
            row.Round = own + 1;
            row.One = one.Median;
            row.More = most.Median;
            if (!cores.empty()) {
                row.OneFirstCpu = cores[i].first;
                row.OneSecondCpu = cores[i].second;
                row.FirstShare = firstShare;
            }
            row.Probe = probe;
            row.Serial = serial;
            row.Slow = probe > kSlowProbeNs;
            row.Order = static_cast<std::size_t>(&workload - workloads.data());
            double const percentile = workload.Figures[i].Percentile;
            if (percentile > 0 && !one.Samples.empty() && one.Samples.size() == most.Samples.size()) {
                row.Samples = Sampled{percentile, one.Samples, most.Samples};
                row.One = bench::PooledPercentile(one.Samples, percentile);
                row.More = bench::PooledPercentile(most.Samples, percentile);
            }
            rows.push_back(std::move(row));
        }
        return true;
    };
    bool failed = false;
    for (unsigned round = 0; round < rounds && !failed; ++round) {
        for (bench::Workload const &workload : workloads) {
            bench::Implementation const *implementation = ftl.Find(workload.Id);
            if (implementation == nullptr) {
                continue;
            }
            bool const together = implementation->InterleavesPair || !workload.SelfMeasured();
            unsigned const passes = together ? run.Passes : 1;
            for (unsigned pass = 0; pass < passes && !failed; ++pass) {
                failed = !measureRound(workload, *implementation, together, round * passes + pass);
            }
            if (failed) {
                break;
            }
        }
    }
    run.Finished = UtcNow();
    std::stable_sort(rows.begin(), rows.end(),
                     [](PairRow const &a, PairRow const &b) { return a.Order < b.Order; });
    std::vector<double> serials;
    for (PairRow const &row : rows) {
        if (row.Serial > 0) {
            serials.push_back(row.Serial);
        }
    }
    run.SerialBase = bench::LowerQuartile(serials);
    for (PairRow &row : rows) {
        row.SerialSlow = run.SerialBase > 0 && row.Serial > kSerialSlowFactor * run.SerialBase;
    }
    return !failed;
}

// Writes each run's samples of a figure from samples, once per round: the
// median's row and the p99's of one round share theirs ("sample_set").
void WritePairSampleSets(std::ofstream &json, std::vector<PairRow> const &rows, std::vector<int> &setOfRow) {
    auto const writeRuns = [&json](std::vector<std::vector<double>> const &runs) {
        json << "[";
        for (std::size_t run = 0; run < runs.size(); ++run) {
            json << (run == 0 ? "[" : ", [");
            for (std::size_t i = 0; i < runs[run].size(); ++i) {
                json << (i == 0 ? "" : ",") << Exact(runs[run][i]);
            }
            json << "]";
        }
        json << "]";
    };
    setOfRow.assign(rows.size(), -1);
    int sets = 0;
    json << ",\n  \"sample_sets\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        Sampled const &samples = rows[i].Samples;
        if (samples.Percentile <= 0) {
            continue;
        }
        if (i > 0 && setOfRow[i - 1] >= 0 && rows[i - 1].Run == rows[i].Run &&
            rows[i - 1].Round == rows[i].Round && rows[i - 1].Samples.One == samples.One &&
            rows[i - 1].Samples.More == samples.More) {
            setOfRow[i] = setOfRow[i - 1];
            continue;
        }
        setOfRow[i] = sets++;
        json << (setOfRow[i] == 0 ? "\n" : ",\n") << "    {\"one\": ";
        writeRuns(samples.One);
        json << ", \"more\": ";
        writeRuns(samples.More);
        json << "}";
    }
    json << "\n  ]";
}

// The report of a --threads-pair run, or of several merged (--pair-merge):
// every row, each figure's median at both sizes and their ratio per state,
// and the target's verdict; to jsonPath too, when given. Every figure is a
// time: above 1, the extra workers made it slower. A run's JSON keeps the
// samples of its figures from samples, so that a merge can pool them; a
// merge's does not (they take a few MB a run), so that merged again with
// new runs, its runs count as runs without samples. Returns 1 when the JSON
// cannot be written, else 0.
int ReportPair(std::vector<PairRun> const &runs, std::vector<PairRow> const &rows,
               std::string const &jsonPath) {
    bool const merged = !runs.front().File.empty(); // its JSON is a merge's report
    bool const several = runs.size() > 1;           // its rounds are numbered within their runs
    unsigned const more = runs.front().Workers;
    unsigned rounds = 0;
    for (PairRun const &run : runs) {
        rounds += run.Rounds;
    }
    constexpr double kSlowerRatio = 1.05;
    // The idle figures (W7, W7s, W7t) are CPU seconds over 2 s, in the tens
    // of microseconds: a second worker's own park adds some. Below 1 ms (0.05%
    // of a core) the difference is not a slowdown anyone can see.
    constexpr double kIdleCpuFloor = 0.001;
    std::string const quartile =
        several ? "its run's lower quartile (the runs above)"
                : "the run's lower quartile (" + bench::FormatValue(runs.front().SerialBase) + " ns)";
    std::vector<unsigned> passCounts; // each run's rounds of their own: "2 or 4" when runs differ
    std::string passes;
    for (PairRun const &run : runs) {
        if (std::find(passCounts.begin(), passCounts.end(), run.Passes) == passCounts.end()) {
            passCounts.push_back(run.Passes);
            passes += (passes.empty() ? "" : " or ") + std::to_string(run.Passes);
        }
    }
    if (several) {
        std::printf(
            "ftl at 1 worker and at %u workers: %zu runs of --threads-pair merged, %u rounds in all, each\n"
            "round in the state, and with the single-thread mark, its own run measured:\n",
            more, runs.size(), rounds);
        for (std::size_t i = 0; i < runs.size(); ++i) {
            PairRun const &run = runs[i];
            std::printf("  run %zu: %s, library %s, %s to %s, %u rounds of %u passes, medians of %u "
                        "repetitions, single-thread quartile %s ns%s\n",
                        i + 1, run.File.c_str(), LibraryOf(run), run.Started.c_str(), run.Finished.c_str(),
                        run.Rounds, run.Passes, run.Repetitions, bench::FormatValue(run.SerialBase).c_str(),
                        run.KeptSamples ? ""
                                        : "; its file has no samples, so a figure from samples (W8, W8b, T1, "
                                          "M1) takes the median of its rounds' ratios in a state where it "
                                          "has a counted round");
        }
        std::printf("\n");
    } else {
        std::printf("library %s\n", LibraryOf(runs.front()));
    }
    std::printf(
        "ftl at 1 worker and at %u workers, %u round%s%s (W8, W8b: the figure of\n"
        "every run's samples pooled); state: slow when the cross-core probe (the highest of the four\n"
        "around a pair) is above %.0f ns; *: the single-thread probe read above %.1fx %s,\n"
        "and the round is left out of the medians; the pools run in one process and\n"
        "take their runs in turn (W8, W8b: samples), %s rounds of their own in each round of the run,\n"
        "except for the self-measured figures without such a fixture (W7, W7s, W7t, T1, M1, S1), which\n"
        "take one, each pool on a thread of its own; a timed workload's 1\n"
        "worker is a 1-worker pool on each of the first two CPUs (the host runs one vCPU up to 1.5x\n"
        "slower than the other for seconds at a time), their figures weighed by the share of its tasks\n"
        "the larger pool ran on the first (last columns; halves when it has more than 2 workers or ran\n"
        "fewer than %u tasks)\n\n",
        more, rounds, rounds == 1 ? "" : "s",
        several ? "" : Format(", medians of %u repetitions", runs.front().Repetitions).c_str(), kSlowProbeNs,
        kSerialSlowFactor, quartile.c_str(), passes.c_str(), static_cast<unsigned>(kWeighedTasks));
    std::printf("  %-8s %-14s %5s %12s %12s %8s %10s %10s %5s  %-25s %s\n", "figure", "unit",
                several ? "run/r" : "round", "1 worker", std::to_string(more).append(" workers").c_str(),
                "ratio", "probe ns", "1-thread", "state", "1 worker on CPU 1st / 2nd", "tasks on the 1st");
    // The target, per state: no figure whose median ratio over that state's
    // rounds (a figure from samples: the ratio of their pooled runs) is above 1.05.
    std::map<std::string, std::map<bool, std::vector<double>>> ratios;
    std::map<std::string, std::map<bool, std::vector<double>>> differences;
    // A percentile of samples: every run of the state's rounds, at each size;
    // pooled only when every counted round of the figure in that state has
    // its samples (a run written before its JSON kept them does not).
    std::map<std::string, std::map<bool, Sampled>> pools;
    std::map<std::string, std::map<bool, bool>> unsampled;
    std::map<std::string, std::string> units;
    for (PairRow const &row : rows) {
        double const ratio = row.One > 0 ? row.More / row.One : 0;
        units[row.Figure] = row.Unit;
        if (!row.SerialSlow) {
            ratios[row.Figure][row.Slow].push_back(ratio);
            differences[row.Figure][row.Slow].push_back(row.More - row.One);
            if (row.Samples.Percentile > 0) {
                Sampled &pool = pools[row.Figure][row.Slow];
                pool.Percentile = row.Samples.Percentile;
                pool.One.insert(pool.One.end(), row.Samples.One.begin(), row.Samples.One.end());
                pool.More.insert(pool.More.end(), row.Samples.More.begin(), row.Samples.More.end());
            } else {
                unsampled[row.Figure][row.Slow] = true;
            }
        }
        std::string const cores = row.OneFirstCpu < 0 ? "-"
                                                      : bench::FormatValue(row.OneFirstCpu) + " / " +
                                                            bench::FormatValue(row.OneSecondCpu);
        std::string const share = row.OneFirstCpu < 0  ? ""
                                  : row.FirstShare < 0 ? "halves"
                                                       : Format("%.0f%%", 100 * row.FirstShare);
        std::string const round = several ? Format("%u/%u", row.Run, row.Round) : std::to_string(row.Round);
        std::printf("  %-8s %-14s %5s %12s %12s %8.3f %10s %10s %5s%-1s %-25s %s\n", row.Figure.c_str(),
                    row.Unit.c_str(), round.c_str(), bench::FormatValue(row.One).c_str(),
                    bench::FormatValue(row.More).c_str(), ratio, bench::FormatValue(row.Probe).c_str(),
                    bench::FormatValue(row.Serial).c_str(), row.Slow ? "slow" : "fast",
                    row.SerialSlow ? "*" : "", cores.c_str(), share.c_str());
    }
    std::printf("\nMedian ratio per state (%u workers over 1; above 1: slower with more workers), then its\n"
                "95%% interval from resampling the state's rounds; a figure from samples (W8, W8b) is the\n"
                "ratio of the percentile of all the state's runs pooled, its interval from resampling\n"
                "whole runs. A figure found slower says when its interval reaches the target's 1.05 (or 1):\n"
                "the rounds did not resolve that miss:\n",
                more);
    std::vector<std::string> slower;
    // The W figures with no counted round in a state (the host may stay in
    // one state for a whole run, and a round the single-thread probe marks
    // is left out): the target covers both states, so it is not shown met.
    std::vector<std::string> unmeasured[2];
    std::size_t workloadFigures = 0;
    std::string medianJson;
    for (auto const &[figure, unit] : units) {
        workloadFigures += figure[0] == 'W' ? 1u : 0u;
        auto const &byState = ratios[figure];
        std::string line = "  " + figure + ":";
        medianJson += std::string(medianJson.empty() ? "\n" : ",\n") +
                      "    {\"figure\": " + bench::JsonString(figure) +
                      ", \"unit\": " + bench::JsonString(unit);
        for (bool const state : {false, true}) {
            char const *const name = state ? "slow" : "fast";
            auto const found = byState.find(state);
            if (found == byState.end()) {
                line += Format(" %s -", name);
                medianJson += Format(", \"%s\": null", name);
                if (figure[0] == 'W') {
                    unmeasured[state].push_back(figure);
                }
                continue;
            }
            PooledRatio ratio = MedianWithInterval(found->second);
            double difference = bench::MedianOf(differences.at(figure).at(state));
            std::string interval;
            auto const pool = pools.find(figure);
            bool const sampled = pool != pools.end() && pool->second.count(state) != 0;
            if (sampled && !unsampled[figure][state]) {
                Sampled const &samples = pool->second.at(state);
                ratio = RatioOfPooled(samples);
                difference = ratio.Difference;
                interval = Format(", \"pooled_runs\": %zu", samples.One.size());
            } else {
                interval = Format(", \"rounds\": %zu", found->second.size());
            }
            double const median = ratio.Ratio;
            line += Format(" %s %.3f (%.2f-%.2f)%s", name, median, ratio.Low, ratio.High,
                           sampled && unsampled[figure][state] ? " (over rounds: a run has no samples)" : "");
            interval += Format(", \"interval\": [%.6g, %.6g]", ratio.Low, ratio.High);
            // The target covers the W workloads; within 5% is run-to-run noise,
            // and so are idle-CPU differences under the floor.
            bool const idleNoise = unit == "cpu-s/2s" && difference < kIdleCpuFloor;
            bool const isSlower = figure[0] == 'W' && median > kSlowerRatio && !idleNoise;
            if (isSlower) {
                slower.push_back(figure + (state ? " (slow" : " (fast") + IntervalNote(ratio, kSlowerRatio) +
                                 ")");
            }
            medianJson += Format(", \"%s\": {\"ratio\": %.6g, \"difference\": %.6g, \"slower\": %s%s}", name,
                                 median, difference, isSlower ? "true" : "false", interval.c_str());
        }
        medianJson += "}";
        std::printf("%s\n", line.c_str());
    }
    auto const join = [](std::vector<std::string> const &items) {
        std::string list;
        for (std::string const &item : items) {
            list += (list.empty() ? "" : ", ") + item;
        }
        return list;
    };
    std::string missing;
    for (bool const state : {false, true}) {
        std::vector<std::string> const &figures = unmeasured[state];
        if (figures.empty()) {
            continue;
        }
        missing += Format("%sno round counted in the %s state", missing.empty() ? "" : "; ",
                          state ? "slow" : "fast");
        if (figures.size() < workloadFigures) {
            missing += " for " + join(figures);
        }
    }
    bool const met = slower.empty() && missing.empty();
    std::string outcome = "met";
    if (!slower.empty()) {
        outcome = "NOT met: " + join(slower) + (missing.empty() ? "" : "; and " + missing);
    } else if (!missing.empty()) {
        outcome = "not shown: " + missing;
    }
    std::string const verdict =
        Format("no workload (W1-W8) slower at %u workers than at 1 (by more than 5%%; idle CPU by more than "
               "%.3f cpu-s), in either host state: %s",
               more, kIdleCpuFloor, outcome.c_str());
    std::printf("\nPerformance target: %s\n", verdict.c_str());
    if (jsonPath.empty()) {
        return 0;
    }
    // The times read "YYYY-MM-DD HH:MM:SS UTC": as text, the earliest sorts first.
    std::string started = runs.front().Started;
    std::string finished = runs.front().Finished;
    for (PairRun const &run : runs) {
        started = std::min(started, run.Started);
        finished = std::max(finished, run.Finished);
    }
    std::ofstream json(jsonPath);
    json << "{\n  \"tool\": \"ftl_bench " << (merged ? "--pair-merge" : "--threads-pair") << "\",\n"
         << "  \"started\": " << bench::JsonString(started) << ",\n"
         << "  \"finished\": " << bench::JsonString(finished) << ",\n"
         << "  \"cpu\": " << bench::JsonString(runs.front().Cpu) << ",\n"
         << "  \"workers\": " << more << ",\n  \"rounds\": " << rounds;
    if (merged) {
        json << ",\n  \"runs\": [";
        for (std::size_t i = 0; i < runs.size(); ++i) {
            PairRun const &run = runs[i];
            json << (i == 0 ? "\n" : ",\n") << "    {\"file\": " << bench::JsonString(run.File)
                 << ", \"library\": " << bench::JsonString(run.Library)
                 << ", \"started\": " << bench::JsonString(run.Started)
                 << ", \"finished\": " << bench::JsonString(run.Finished) << ", \"rounds\": " << run.Rounds
                 << ", \"passes\": " << run.Passes << ", \"repetitions\": " << run.Repetitions
                 << Format(", \"serial_base_ns\": %.6g, \"kept_samples\": %s}", run.SerialBase,
                           run.KeptSamples ? "true" : "false");
        }
        json << "\n  ]";
    } else {
        json << ",\n  \"library\": " << bench::JsonString(runs.front().Library)
             << ",\n  \"passes\": " << runs.front().Passes
             << ",\n  \"repetitions\": " << runs.front().Repetitions
             << Format(",\n  \"serial_base_ns\": %.6g", runs.front().SerialBase);
    }
    json << ",\n  \"slow_probe_ns\": " << kSlowProbeNs
         << Format(",\n  \"serial_slow_factor\": %.6g", kSerialSlowFactor);
    std::vector<int> setOfRow(rows.size(), -1);
    if (!merged) {
        WritePairSampleSets(json, rows, setOfRow);
    }
    json << ",\n  \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        PairRow const &row = rows[i];
        json << (i == 0 ? "\n" : ",\n") << "    {\"figure\": " << bench::JsonString(row.Figure)
             << ", \"unit\": " << bench::JsonString(row.Unit)
             << (merged ? Format(", \"run\": %u", row.Run) : "") << ", \"round\": " << row.Round
             << ", \"one\": " << Exact(row.One) << ", \"more\": " << Exact(row.More)
             << Format(", \"probe_ns\": %.6g, \"serial_ns\": %.6g, \"serial_slow\": %s, \"state\": \"%s\"",
                       row.Probe, row.Serial, row.SerialSlow ? "true" : "false", row.Slow ? "slow" : "fast");
        if (row.OneFirstCpu >= 0) {
            json << Format(", \"one_first_cpu\": %.6g, \"one_second_cpu\": %.6g", row.OneFirstCpu,
                           row.OneSecondCpu);
            if (row.FirstShare >= 0) {
                json << Format(", \"first_cpu_share\": %.6g", row.FirstShare);
            }
        }
        if (setOfRow[i] >= 0) {
            json << Format(", \"percentile\": %g, \"sample_set\": %d", row.Samples.Percentile, setOfRow[i]);
        }
        json << "}";
    }
    json << "\n  ],\n  \"medians\": [" << medianJson
         << "\n  ],\n  \"target\": {\"text\": " << bench::JsonString(verdict)
         << ", \"met\": " << (met ? "true" : "false") << "}\n}\n";
    json.close();
    if (!json) {
        std::fprintf(stderr, "ftl_bench: cannot write %s\n", jsonPath.c_str());
        return 1;
    }
    std::printf("\nresults written to %s\n", jsonPath.c_str());
    return 0;
}

// --threads-pair: measures (MeasurePair), then reports (ReportPair). Returns the exit code.
int RunThreadsPair(bench::Config const &config, bench::Sizes sizes, unsigned more, unsigned rounds,
                   std::vector<bench::Workload> const &workloads, std::string const &jsonPath) {
    if (bench::kSanitizedBuild) {
        std::fprintf(stderr,
                     "ftl_bench: --threads-pair compares times, which a sanitizer build does not take\n");
        return 2;
    }
    std::vector<bench::Workload> paired;
    std::copy_if(workloads.begin(), workloads.end(), std::back_inserter(paired),
                 [](bench::Workload const &workload) { return workload.Paired; });
    if (paired.empty()) {
        std::fprintf(stderr,
                     "ftl_bench: --threads-pair: none of these workloads compares 1 worker with more\n");
        return 2;
    }
    std::vector<PairRun> runs(1);
    std::vector<PairRow> rows;
    bool const measured = MeasurePair(config, sizes, more, rounds, paired, runs.front(), rows);
    int const reported = ReportPair(runs, rows, jsonPath);
    return measured ? reported : 1;
}

// Reads the JSON of a run (ftl_bench --threads-pair --json) or of a merge
// (--pair-merge --json) and appends its runs and their rows, the rows
// numbered by their run's place among all the runs read. Throws
// std::runtime_error, naming what is wrong, when it is neither.
void ReadPairRuns(std::string const &path, std::vector<PairRun> &runs, std::vector<PairRow> &rows) {
    ftl_test::Json const file = ftl_test::ReadJsonFile(path);
    std::string const tool = file.Has("tool") ? file["tool"].Text : "";
    bool const merge = tool == "ftl_bench --pair-merge";
    if (!merge && tool != "ftl_bench --threads-pair") {
        throw std::runtime_error("not the JSON of ftl_bench --threads-pair or --pair-merge");
    }
    bool const hasSets = file.Has("sample_sets");
    // A merge lists its runs, and its rows name theirs (from 1); a run's
    // file is its own one run.
    std::size_t const first = runs.size();
    auto const readRun = [&](ftl_test::Json const &entry, std::string const &name) {
        PairRun run;
        run.File = name;
        run.Library = entry.Has("library") ? entry["library"].Text : "";
        run.Started = entry["started"].Text;
        run.Finished = entry["finished"].Text;
        run.Cpu = file["cpu"].Text;
        run.Workers = static_cast<unsigned>(file["workers"].Number);
        run.Rounds = static_cast<unsigned>(entry["rounds"].Number);
        run.Passes = entry.Has("passes") ? static_cast<unsigned>(entry["passes"].Number) : 1;
        run.Repetitions = static_cast<unsigned>(entry["repetitions"].Number);
        run.SerialBase = entry.Has("serial_base_ns") ? entry["serial_base_ns"].Number : 0;
        // A merge's JSON lists which of its runs kept their samples, but
        // has none of them.
        run.KeptSamples = hasSets;
        runs.push_back(std::move(run));
    };
    if (merge) {
        for (ftl_test::Json const &entry : file["runs"].Items) {
            readRun(entry, entry["file"].Text);
        }
    } else {
        readRun(file, path);
    }
    std::size_t const count = runs.size() - first;
    auto const readRuns = [](ftl_test::Json const &set) {
        std::vector<std::vector<double>> samples;
        for (ftl_test::Json const &one : set.Items) {
            samples.emplace_back();
            for (ftl_test::Json const &sample : one.Items) {
                samples.back().push_back(sample.Number);
            }
        }
        return samples;
    };
    std::vector<ftl_test::Json> const noSets;
    std::vector<ftl_test::Json> const &sets = hasSets ? file["sample_sets"].Items : noSets;
    for (ftl_test::Json const &entry : file["rows"].Items) {
        PairRow row;
        row.Figure = entry["figure"].Text;
        row.Unit = entry["unit"].Text;
        std::size_t const own = merge ? static_cast<std::size_t>(entry["run"].Number) : 1;
        if (own < 1 || own > count) {
            throw std::runtime_error("row " + row.Figure + " names a run the file does not list");
        }
        row.Run = static_cast<unsigned>(first + own);
        row.Round = static_cast<unsigned>(entry["round"].Number);
        row.One = entry["one"].Number;
        row.More = entry["more"].Number;
        row.Probe = entry["probe_ns"].Number;
        row.Serial = entry.Has("serial_ns") ? entry["serial_ns"].Number : 0;
        row.Slow = entry["state"].Text == "slow";
        row.SerialSlow = entry.Has("serial_slow") && entry["serial_slow"].Boolean;
        if (entry.Has("one_first_cpu")) {
            row.OneFirstCpu = entry["one_first_cpu"].Number;
            row.OneSecondCpu = entry["one_second_cpu"].Number;
            row.FirstShare = entry.Has("first_cpu_share") ? entry["first_cpu_share"].Number : -1;
        }
        if (entry.Has("sample_set")) {
            std::size_t const set = static_cast<std::size_t>(entry["sample_set"].Number);
            if (set >= sets.size()) {
                throw std::runtime_error("row " + row.Figure + " names a sample set it does not have");
            }
            row.Samples =
                Sampled{entry["percentile"].Number, readRuns(sets[set]["one"]), readRuns(sets[set]["more"])};
        }
        rows.push_back(std::move(row));
    }
}

// --pair-merge: the rounds of several --threads-pair runs (their JSON) in
// one report, so that a host state a single run missed, or visited for a
// round or two, can be counted over runs taken hours apart. Each round keeps
// the state and the single-thread mark of its own run; the figures from
// samples (W8, W8b, T1, M1) pool those of every run in the state. The runs
// must come from one host (their CPU) and one worker count. Returns the exit
// code.
int RunPairMerge(std::vector<std::string> const &files, std::string const &jsonPath) {
    std::vector<PairRun> runs;
    std::vector<PairRow> rows;
    for (std::string const &file : files) {
        std::size_t const first = runs.size();
        try {
            ReadPairRuns(file, runs, rows);
        } catch (std::exception const &error) {
            std::fprintf(stderr, "ftl_bench: --pair-merge: %s: %s\n", file.c_str(), error.what());
            return 2;
        }
        for (std::size_t i = first; i < runs.size(); ++i) {
            for (std::size_t j = 0; j < i; ++j) {
                if (runs[j].Started == runs[i].Started) {
                    std::fprintf(stderr, "ftl_bench: --pair-merge: %s and %s are the same run (started %s)\n",
                                 runs[j].File.c_str(), runs[i].File.c_str(), runs[i].Started.c_str());
                    return 2;
                }
            }
            if (runs[i].Workers != runs.front().Workers || runs[i].Cpu != runs.front().Cpu) {
                std::fprintf(stderr,
                             "ftl_bench: --pair-merge: %s compares 1 worker with %u on \"%s\", %s with %u on "
                             "\"%s\": only runs of one host and worker count merge\n",
                             runs[i].File.c_str(), runs[i].Workers, runs[i].Cpu.c_str(),
                             runs.front().File.c_str(), runs.front().Workers, runs.front().Cpu.c_str());
                return 2;
            }
        }
    }
    // The workloads in the order they first appear; a figure's workload is
    // its id's first word ("W8 p99": W8).
    std::vector<std::string> order;
    for (PairRow &row : rows) {
        std::string const workload = row.Figure.substr(0, row.Figure.find(' '));
        auto const at = std::find(order.begin(), order.end(), workload);
        row.Order = static_cast<std::size_t>(at - order.begin());
        if (at == order.end()) {
            order.push_back(workload);
        }
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](PairRow const &a, PairRow const &b) { return a.Order < b.Order; });
    return ReportPair(runs, rows, jsonPath);
}

} // namespace

int main(int argc, char **argv) {
    Options options;
    if (!ParseOptions(argc, argv, options)) {
        return 2;
    }
    if (!options.PairMerge.empty()) {
        if (options.PairRounds != 0) {
            std::fprintf(stderr, "ftl_bench: --pair-merge measures nothing; run --threads-pair on its own\n");
            return 2;
        }
        return RunPairMerge(options.PairMerge, options.JsonPath);
    }

    bench::Sizes sizes;
    sizes.Short = options.Short;
    sizes.Threads = options.Threads != 0 ? options.Threads : AllowedCpuCount();
    if (options.Short) {
        sizes.FibN = 25;
        sizes.PingPongRounds = 10000;
        sizes.IdleSeconds = 0.25;
        sizes.WakeSamples = 50;
    }
    bench::Config config;
    config.Repetitions = options.Repetitions != 0 ? options.Repetitions
                         : options.Short          ? bench::kMinRepetitions
                                                  : bench::kDefaultRepetitions;
    config.TimeoutSeconds = options.TimeoutSeconds;
    config.MemoryLimitBytes = MemoryLimit();
    unsigned const repetitions = bench::kSanitizedBuild ? 0 : config.Repetitions;

    // The systems: ftl first (the reference of every ratio), then the peers
    // this build has, then the hand-written reference.
    std::vector<std::string> names = {"ftl"};
    std::vector<bool> built = {true};
    std::vector<bench::System> systems;
    systems.push_back(bench::MakeFtlSystem("ftl", ftl::detail::Mechanisms{}));
    auto const addPeer = [&](char const *name, bool isBuilt, auto make) {
        names.emplace_back(name);
        built.push_back(isBuilt);
        if (isBuilt) {
            systems.push_back(make());
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
    names.emplace_back("reference");
    built.push_back(true);
    systems.push_back(bench::MakeReferenceSystem());
    for (std::string const &wanted : options.Systems) {
        if (!Contains(names, wanted)) {
            std::fprintf(stderr, "ftl_bench: --systems: unknown system '%s'\n", wanted.c_str());
            return 2;
        }
    }

    bench::Table table(names, built);
    std::vector<std::string> featureNames = {"all on"};
    std::vector<bench::System> featureSystems;
    if (options.Features) {
        // The control: all on, measured like the switched-off configurations
        // (beside all on): how far apart two identical pools read.
        featureNames.push_back(kControlColumn);
        featureSystems.push_back(bench::MakeFtlSystem(kControlColumn, ftl::detail::Mechanisms{}));
        for (ftl::detail::MechanismSwitch const &flag : ftl::detail::kMechanismSwitches) {
            ftl::detail::Mechanisms mechanisms;
            mechanisms.*flag.Flag = false;
            featureNames.push_back(std::string(flag.Name) + " off");
            featureSystems.push_back(bench::MakeFtlSystem(featureNames.back(), mechanisms));
        }
    }
    bench::Table featureTable(featureNames, std::vector<bool>(featureNames.size(), true));

    std::vector<Column> columns;
    for (bench::System &system : systems) {
        if (options.Systems.empty() || Contains(options.Systems, system.Name)) {
            columns.push_back(Column{std::move(system), &table});
        }
    }
    if (options.Systems.empty() || Contains(options.Systems, "ftl")) {
        for (bench::System &system : featureSystems) {
            columns.push_back(Column{std::move(system), &featureTable});
        }
    }

    std::vector<bench::Workload> workloads = bench::MakeWorkloads(sizes);
    if (!options.Filter.empty()) {
        for (std::string const &wanted : options.Filter) {
            bool const known =
                std::any_of(workloads.begin(), workloads.end(),
                            [&](bench::Workload const &workload) { return workload.Id == wanted; });
            if (!known) {
                std::fprintf(stderr, "ftl_bench: --filter: unknown workload '%s'\n", wanted.c_str());
                return 2;
            }
        }
        workloads.erase(std::remove_if(workloads.begin(), workloads.end(),
                                       [&](bench::Workload const &workload) {
                                           return !Contains(options.Filter, workload.Id);
                                       }),
                        workloads.end());
    }
    bench::System const ftlAllOn = bench::MakeFtlSystem("ftl", ftl::detail::Mechanisms{});
    for (bench::Workload const &workload : workloads) {
        for (bench::Figure const &figure : workload.Figures) {
            table.AddRow(figure, workload.Id, workload.Description);
            if (options.Features && ftlAllOn.Find(workload.Id) != nullptr && !DuplicateForFtl(workload.Id)) {
                featureTable.AddRow(figure, workload.Id, workload.Description);
            }
        }
    }

    if (options.PairRounds != 0) {
        unsigned const more = options.Threads != 0 ? options.Threads : AllowedCpuCount();
        if (more < 2) {
            std::fprintf(stderr, "ftl_bench: --threads-pair needs at least 2 workers to compare with 1\n");
            return 2;
        }
        return RunThreadsPair(config, sizes, more, options.PairRounds, workloads, options.JsonPath);
    }

    std::string const started = UtcNow();
    std::string const loadBefore = LoadAverage();
    std::fprintf(stderr, "ftl_bench: %s, load average %s; %u workers per system, %u repetitions%s\n",
                 started.c_str(), loadBefore.c_str(), sizes.Threads, repetitions,
                 options.Short ? " (--short)" : "");

    // Workload by workload, every system in turn, so that the figures a ratio
    // compares were measured minutes apart at most.
    for (bench::Workload const &workload : workloads) {
        for (Column const &column : columns) {
            bench::Implementation const *implementation = column.System.Find(workload.Id);
            if (implementation == nullptr ||
                (column.Target == &featureTable && DuplicateForFtl(workload.Id))) {
                continue;
            }
            // A mechanism switched off, on a timed workload, runs beside an
            // all-on pool in the same child, their runs in turn: from one
            // process to the next this host drifts by more than most
            // mechanisms change (the all-on cell of one full run read W1c at
            // 36 ns a task, every switched-off one at 10 to 18). Its ratio is
            // taken over that all-on pool.
            bench::Implementation const *const allOn = ftlAllOn.Find(workload.Id);
            bool const besideAllOn = column.Target == &featureTable && !workload.SelfMeasured() &&
                                     !bench::kSanitizedBuild && allOn != nullptr;
            std::fprintf(stderr, "  %-4s %-28s %s", workload.Id.c_str(), column.System.Name.c_str(),
                         besideAllOn ? "beside all on, run by run: " : "");
            bench::Measurement measurement;
            std::vector<double> pairedReference;
            if (besideAllOn) {
                std::vector<bench::Measurement> const results = bench::MeasureSideBySide(
                    config, sizes, workload, *allOn, {bench::Alongside{implementation, sizes, -1}});
                measurement = results.back();
                if (results.size() == 2) {
                    for (bench::Stats const &stats : results.front().Figures) {
                        pairedReference.push_back(stats.Median);
                    }
                }
            } else {
                measurement = bench::MeasureIsolated(config, sizes, workload, *implementation);
            }
            for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
                bench::Cell &cell = column.Target->At(workload.Figures[i].Id, column.System.Name);
                cell.Primitive = implementation->Primitive;
                cell.PairedReference = i < pairedReference.size() ? pairedReference[i] : -1;
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
                if (column.Target == &table && column.System.Name == "ftl" && options.Features) {
                    if (featureTable.Find(workload.Figures[i].Id, "all on") != nullptr) {
                        featureTable.At(workload.Figures[i].Id, "all on") = cell;
                    }
                }
            }
            if (!measurement.Ok) {
                std::fprintf(stderr, "FAILED: %s\n", measurement.Error.c_str());
                if (!measurement.ChildStderr.empty()) {
                    std::fprintf(stderr, "       its stderr:\n%s\n", measurement.ChildStderr.c_str());
                }
            } else if (bench::kSanitizedBuild) {
                std::fprintf(stderr, "checked\n");
            } else {
                std::string line;
                for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
                    bench::Stats const &stats = measurement.Figures[i];
                    line += (i == 0 ? "" : ", ") + bench::FormatValue(stats.Median) + " [" +
                            bench::FormatValue(stats.Min) + " .. " + bench::FormatValue(stats.Max) + "] " +
                            workload.Figures[i].Unit;
                    if (i < pairedReference.size()) {
                        line += " (all on: " + bench::FormatValue(pairedReference[i]) + ")";
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
        }
    }
    // The targets that compare two figures, measured once more together (see
    // MeasureTogether): {first figure, its system, second figure, its system}.
    TogetherMap together;
    struct Comparison {
        char const *First;
        char const *FirstSystem;
        char const *Second;
        char const *SecondSystem;
        char const *SecondName;
    };
    // The main table's implementation of `figure` by `system`, or nullptr.
    auto const implementationOf = [&columns,
                                   &table](std::string const &system,
                                           std::string const &figure) -> bench::Implementation const * {
        for (Column const &column : columns) {
            if (column.Target == &table && column.System.Name == system) {
                return column.System.Find(figure);
            }
        }
        return nullptr;
    };
    for (Comparison const &comparison :
         {Comparison{"W8", "ftl", "W8", "reference", "the raw futex"},
          Comparison{"W6", "ftl", "W6", "reference", "the std::thread loop"},
          Comparison{"G1", "ftl", "W1", "ftl", "W1"}, Comparison{"W1c", "ftl", "W1", "ftl", "W1"},
          Comparison{"W3c", "ftl", "W3", "ftl", "W3"},
          Comparison{"P1", "ftl", "P1h", "ftl", "AddTasks batches by hand"}}) {
        if (bench::kSanitizedBuild) {
            break;
        }
        bench::Cell const *firstCell = table.Find(comparison.First, comparison.FirstSystem);
        bench::Cell const *secondCell = table.Find(comparison.Second, comparison.SecondSystem);
        auto const workloadOf = [&workloads](char const *id) {
            return std::find_if(workloads.begin(), workloads.end(),
                                [id](bench::Workload const &workload) { return workload.Id == id; });
        };
        auto const first = workloadOf(comparison.First);
        auto const second = workloadOf(comparison.Second);
        bench::Implementation const *firstImplementation =
            implementationOf(comparison.FirstSystem, comparison.First);
        bench::Implementation const *secondImplementation =
            implementationOf(comparison.SecondSystem, comparison.Second);
        // Both measured in the table, and one unit for both (the harness
        // divides every run's time by the first workload's units).
        if (firstCell != nullptr && secondCell != nullptr &&
            firstCell->Status == bench::Cell::State::Measured &&
            secondCell->Status == bench::Cell::State::Measured && first != workloads.end() &&
            second != workloads.end() && first->UnitsPerRun == second->UnitsPerRun &&
            firstImplementation != nullptr && secondImplementation != nullptr) {
            together[comparison.First] = MeasureTogether(config, sizes, *first, *firstImplementation,
                                                         *secondImplementation, comparison.SecondName);
        }
    }
    // ftl beside a peer (see PeerTogetherMap): W1-W4 and W8 with the best
    // peer (ftl's W8 cell read 17.0 us in a full run whose --features
    // columns, minutes later, read 3.2 to 7.8), and every figure where a
    // peer's cell beat ftl's, but for a lock workload the peer ran on one
    // thread (which "no peer beats ftl" leaves out). A workload of several
    // figures (W8's median and p99) is measured once for all of them. Not an
    // idle workload: its CPU time is the whole process's.
    PeerTogetherMap peerTogether;
    {
        std::vector<std::pair<std::string, std::string>> pairs; // figure, peer
        for (char const *figure : {"W1", "W2", "W3", "W4", "W8"}) {
            if (PeerBest const best = BestPeer(table, {figure}); best.Median >= 0) {
                pairs.emplace_back(figure, best.Column);
            }
        }
        for (bench::Table::Row const &row : table.Rows()) {
            double const ftl = MedianOf(table, row.Fig.Id, "ftl");
            for (char const *peer : kPeers) {
                double const median = MedianOf(table, row.Fig.Id, peer);
                if (OneThreadCell(table.Find(row.Fig.Id, peer), sizes.Threads)) {
                    continue; // a lock that one thread took alone: the verdict leaves it out
                }
                if (ftl >= 0 && median >= 0 && median < ftl &&
                    std::find(pairs.begin(), pairs.end(), std::make_pair(row.Fig.Id, std::string(peer))) ==
                        pairs.end()) {
                    pairs.emplace_back(row.Fig.Id, peer);
                }
            }
        }
        for (auto const &[figure, peer] : pairs) {
            auto const workload = std::find_if(
                workloads.begin(), workloads.end(), [&figure = figure](bench::Workload const &candidate) {
                    return std::any_of(candidate.Figures.begin(), candidate.Figures.end(),
                                       [&figure](bench::Figure const &its) { return its.Id == figure; });
                });
            if (bench::kSanitizedBuild || workload == workloads.end() ||
                peerTogether.count(PeerKey(workload->Figures.front().Id, peer)) != 0 ||
                workload->Figures.front().Unit.rfind("cpu-s", 0) == 0) {
                continue; // not measured, measured with another of its figures, or idle
            }
            bench::Implementation const *const ours = implementationOf("ftl", workload->Id);
            bench::Implementation const *const theirs = implementationOf(peer, workload->Id);
            if (ours == nullptr || theirs == nullptr) {
                continue;
            }
            std::vector<Together> const each =
                MeasureTogetherEach(config, sizes, *workload, *ours, *theirs, peer.c_str());
            for (std::size_t i = 0; i < each.size(); ++i) {
                peerTogether[PeerKey(workload->Figures[i].Id, peer)] = each[i];
            }
        }
    }
    std::string const loadAfter = LoadAverage();
    std::string const finished = UtcNow();

    std::printf("ftl_bench: %s to %s; %s, %u workers per system (all cores: %u)\n", started.c_str(),
                finished.c_str(), CpuModel().c_str(), sizes.Threads, AllowedCpuCount());
    std::printf("load average before %s, after %s; a system's process is stopped above %.1f GB resident\n",
                loadBefore.c_str(), loadAfter.c_str(),
                static_cast<double>(config.MemoryLimitBytes) / double(1ul << 30));
    if (bench::kSanitizedBuild) {
        std::printf(
            "WARNING: this is a sanitizer build. Every workload ran once and its result was checked,\n"
            "         but timings would measure the sanitizer, so none are reported. Build without\n"
            "         FTL_SANITIZE (e.g. the `bench` or `main` preset) for figures.\n");
    } else {
        std::printf("each figure: the median of %u checked repetitions after a warm-up run%s\n", repetitions,
                    options.Short ? " (--short: smaller sizes, see the workload list)" : "");
    }
    std::printf("\nWorkloads:\n");
    for (bench::Workload const &workload : workloads) {
        std::printf("  %-4s %s\n", workload.Id.c_str(), workload.Description.c_str());
    }
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
    if (options.Features) {
        std::printf("\nftl with one scheduling mechanism off; medians, in parentheses over \"all on\"\n"
                    "(above 1: the mechanism helps on this workload); on a timed workload, over the\n"
                    "all-on pool measured beside it in the same process, their runs in turn (the \"all on\"\n"
                    "column is the main table's cell):\n\n");
        featureTable.Print(stdout, probeBase);
        std::printf("\nftl with one mechanism off, every measurement:\n");
        featureTable.PrintDetails(stdout);
    }
    std::vector<TargetVerdict> const verdicts =
        bench::kSanitizedBuild ? std::vector<TargetVerdict>{}
                               : JudgeTargets(table, sizes.Threads, together, peerTogether);
    if (!bench::kSanitizedBuild) {
        PrintTargets(stdout, verdicts);
    }

    if (!options.JsonPath.empty()) {
        std::ofstream json(options.JsonPath);
        json << "{\n  \"tool\": \"ftl_bench\",\n"
             << "  \"started\": " << bench::JsonString(started) << ",\n"
             << "  \"finished\": " << bench::JsonString(finished) << ",\n"
             << "  \"cpu\": " << bench::JsonString(CpuModel()) << ",\n"
             << "  \"cores\": " << AllowedCpuCount() << ",\n"
             << "  \"threads\": " << sizes.Threads << ",\n"
             << "  \"load_before\": " << bench::JsonString(loadBefore) << ",\n"
             << "  \"load_after\": " << bench::JsonString(loadAfter) << ",\n"
             << "  \"short\": " << (options.Short ? "true" : "false") << ",\n"
             << "  \"sanitized\": " << (bench::kSanitizedBuild ? "true" : "false") << ",\n"
             << "  \"repetitions\": " << repetitions << ",\n"
             << "  \"systems\": [";
        for (std::size_t i = 0; i < names.size(); ++i) {
            json << (i == 0 ? "" : ", ") << "{\"name\": " << bench::JsonString(names[i])
                 << ", \"built\": " << (built[i] ? "true" : "false") << "}";
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
        json << "\n  ],\n  \"targets\": [";
        for (std::size_t i = 0; i < verdicts.size(); ++i) {
            json << (i == 0 ? "\n" : ",\n") << "    {\"text\": " << bench::JsonString(verdicts[i].Text)
                 << ", \"met\": " << (verdicts[i].Met ? "true" : "false") << "}";
        }
        json << "\n  ],\n  \"results\": " << table.Json("  ");
        if (options.Features) {
            json << ",\n  \"features\": " << featureTable.Json("  ");
        }
        json << "\n}\n";
        json.close();
        if (!json) {
            std::fprintf(stderr, "ftl_bench: cannot write %s\n", options.JsonPath.c_str());
            return 1;
        }
        std::printf("\nresults written to %s\n", options.JsonPath.c_str());
    }

    std::fflush(stdout);
    if (workloads.empty()) {
        std::fprintf(stderr, "ftl_bench: no workload selected\n");
        return 1;
    }
    // ftl (as configured by default) and the reference must not fail: that
    // is an error. A peer that fails, or ftl with a mechanism switched off, is
    // a finding, reported in its cell.
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
