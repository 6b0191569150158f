// --threads-pair and --pair-merge (threads_pair.h): ftl at one worker
// against ftl at more, measured round by round with the host's state, and
// reported per state with the second-worker target's verdict.
#include "threads_pair.h"

#include "host.h"
#include "json_reader.h"
#include "systems.h"
#include "targets.h"
#include "verdicts.h"

#include "ftl_bench_revision.h" // FTL_BENCH_REVISION (revision.cmake)

#include "scheduler/mechanisms.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bench {
namespace {

// The shortest text that reads back as exactly `value`: a --threads-pair
// run's JSON keeps what a merge computes its figures from (--pair-merge).
std::string Exact(double value) {
    char text[32];
    std::to_chars_result const written = std::to_chars(text, text + sizeof text, value);
    return std::string(text, written.ptr);
}

// --threads-pair: one child process at one worker and one at `more`, in an
// order that alternates with the round. False when either failed.
bool MeasureApart(Config const &config, Sizes sizes, unsigned more, Workload const &workload,
                  Implementation const &implementation, unsigned round, Measurement (&measured)[2]) {
    for (unsigned turn = 0; turn < 2; ++turn) {
        unsigned const which = (round + turn) % 2;
        sizes.Threads = which == 0 ? 1 : more;
        std::fprintf(stderr, "  %-4s round %u, %u worker%s: ", workload.Id.c_str(), round + 1, sizes.Threads,
                     sizes.Threads == 1 ? "" : "s");
        measured[which] = MeasureIsolated(config, sizes, workload, implementation);
        if (!measured[which].Ok) {
            std::fprintf(stderr, "FAILED: %s\n", measured[which].Error.c_str());
            return false;
        }
        std::fprintf(stderr, "%s %s\n", FormatValue(measured[which].Figures[0].Median).c_str(),
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

bool MeasureInterleaved(Config const &config, Sizes sizes, unsigned more, Workload const &workload,
                        Implementation const &implementation, unsigned round, Measurement (&measured)[2],
                        std::vector<std::pair<double, double>> &cores, double &firstShare) {
    sizes.Threads = 1;
    std::vector<Alongside> alongside;
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
            alongside.push_back(Alongside{&implementation, sizes, 1});
        }
        alongside.push_back(Alongside{&implementation, sizes, -1});
        alongside.back().Sizes.Threads = more;
    }
    std::fprintf(stderr, "  %-4s round %u, 1 worker%s and %u, %s by %s: ", workload.Id.c_str(), round + 1,
                 eachCpu ? " (each of 2 CPUs)" : "", more, workload.SelfMeasured() ? "sample" : "run",
                 workload.SelfMeasured() ? "sample" : "run");
    std::vector<Measurement> const results =
        MeasureSideBySide(config, sizes, workload, implementation, alongside);
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
        std::vector<Stats> const &second = results[1].Figures;
        for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
            cores.emplace_back(measured[0].Figures[i].Median, second[i].Median);
            measured[0].Figures[i].Median = weight * cores[i].first + (1 - weight) * cores[i].second;
        }
        std::fprintf(stderr, "%s (%s, %s; %s) and ", FormatValue(measured[0].Figures[0].Median).c_str(),
                     FormatValue(cores[0].first).c_str(), FormatValue(cores[0].second).c_str(),
                     firstShare < 0 ? "halves" : Format("%.0f%% on the first", 100 * firstShare).c_str());
    } else {
        std::fprintf(stderr, "%s and ", FormatValue(measured[0].Figures[0].Median).c_str());
    }
    std::fprintf(stderr, "%s %s\n", FormatValue(measured[1].Figures[0].Median).c_str(),
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
    result.Low = PercentileOf(values, 2.5);
    result.High = PercentileOf(values, 97.5);
}

PooledRatio RatioOfPooled(Sampled const &samples) {
    std::vector<std::vector<double>> const &one = samples.One;
    std::vector<std::vector<double>> const &more = samples.More;
    double const percentile = samples.Percentile;
    PooledRatio result;
    double const base = PooledPercentile(one, percentile);
    double const top = PooledPercentile(more, percentile);
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
            double const resampled = PooledPercentile(ones, percentile);
            if (resampled <= 0) {
                return false;
            }
            ratio = PooledPercentile(mores, percentile) / resampled;
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
    result.Ratio = MedianOf(ratios);
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
            median = MedianOf(resampled);
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
unsigned PassesPerRound(Sizes const &sizes) {
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

// The rows of one pair measurement of `workload`, one per figure, into
// `rows`: measured[0] at one worker, measured[1] at more; `cores`, one worker
// on each CPU per figure (empty: not measured so).
void AppendPairRows(Workload const &workload, std::size_t order, unsigned own,
                    Measurement const (&measured)[2], std::vector<std::pair<double, double>> const &cores,
                    double firstShare, std::vector<PairRow> &rows) {
    double const probe = std::max(
        {measured[0].ProbeBefore, measured[0].ProbeAfter, measured[1].ProbeBefore, measured[1].ProbeAfter});
    double const serial = std::max({measured[0].SerialBefore, measured[0].SerialAfter,
                                    measured[1].SerialBefore, measured[1].SerialAfter});
    for (std::size_t i = 0; i < workload.Figures.size(); ++i) {
        Stats const &one = measured[0].Figures[i];
        Stats const &most = measured[1].Figures[i];
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
        row.Order = order;
        double const percentile = workload.Figures[i].Percentile;
        if (percentile > 0 && !one.Samples.empty() && one.Samples.size() == most.Samples.size()) {
            row.Samples = Sampled{percentile, one.Samples, most.Samples};
            row.One = PooledPercentile(one.Samples, percentile);
            row.More = PooledPercentile(most.Samples, percentile);
        }
        rows.push_back(std::move(row));
    }
}

// One of a workload's rounds (`own`: its number among them), in one process
// (`together`) or a process per pool size: its rows, or false when it failed.
// `order` is the workload's place in the list.
bool MeasurePairRound(Config const &config, Sizes const &sizes, unsigned more, Workload const &workload,
                      std::size_t order, Implementation const &implementation, bool together, unsigned own,
                      std::vector<PairRow> &rows) {
    Measurement measured[2];                      // [0]: one worker, [1]: `more`
    std::vector<std::pair<double, double>> cores; // one worker on each CPU, per figure
    double firstShare = -1;
    bool const ok = together ? MeasureInterleaved(config, sizes, more, workload, implementation, own,
                                                  measured, cores, firstShare)
                             : MeasureApart(config, sizes, more, workload, implementation, own, measured);
    if (ok) {
        AppendPairRows(workload, order, own, measured, cores, firstShare, rows);
    }
    return ok;
}

// Marks the rounds whose single-thread probe read above kSerialSlowFactor
// times the run's lower quartile of it.
void MarkSerialSlow(PairRun &run, std::vector<PairRow> &rows) {
    std::vector<double> serials;
    for (PairRow const &row : rows) {
        if (row.Serial > 0) {
            serials.push_back(row.Serial);
        }
    }
    run.SerialBase = LowerQuartile(serials);
    for (PairRow &row : rows) {
        row.SerialSlow = run.SerialBase > 0 && row.Serial > kSerialSlowFactor * run.SerialBase;
    }
}

// --threads-pair: ftl alone, at one worker and at `more`, round by round
// (which goes first alternates, so that drift cancels), into `rows`, with the
// host's state from the probes of both measurements. A round runs every
// workload once (those measured in one process PassesPerRound times, as
// rounds of their own), so that each workload's rounds spread over the whole
// run: the host changes state minutes apart, and rounds run back to back
// would all fall in one. False when a measurement failed (the rows so far
// are kept).
bool MeasurePair(Config const &config, Sizes sizes, unsigned more, unsigned rounds,
                 std::vector<Workload> const &workloads, PairRun &run, std::vector<PairRow> &rows) {
    run.Started = UtcNow();
    run.Library = FTL_BENCH_REVISION;
    run.Cpu = CpuModel();
    run.Workers = more;
    run.Rounds = rounds;
    run.Passes = PassesPerRound(sizes);
    run.Repetitions = config.Repetitions;
    System const ftl = MakeFtlSystem("ftl", ftl::detail::Mechanisms{});
    bool failed = false;
    for (unsigned round = 0; round < rounds && !failed; ++round) {
        for (std::size_t order = 0; order < workloads.size(); ++order) {
            Workload const &workload = workloads[order];
            Implementation const *implementation = ftl.Find(workload.Id);
            if (implementation == nullptr) {
                continue;
            }
            bool const together = implementation->InterleavesPair || !workload.SelfMeasured();
            unsigned const passes = together ? run.Passes : 1;
            for (unsigned pass = 0; pass < passes && !failed; ++pass) {
                failed = !MeasurePairRound(config, sizes, more, workload, order, *implementation, together,
                                           round * passes + pass, rows);
            }
            if (failed) {
                break;
            }
        }
    }
    run.Finished = UtcNow();
    std::stable_sort(rows.begin(), rows.end(),
                     [](PairRow const &a, PairRow const &b) { return a.Order < b.Order; });
    MarkSerialSlow(run, rows);
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

// The target a --threads-pair run judges (targets.h): at more workers, no W
// figure above its Threshold times its 1-worker figure. The idle figures
// (W7, W7s, W7t) are CPU seconds over 2 s, in the tens of microseconds: a
// second worker's own park adds some, and below kIdleCpuNoise the
// difference is not a slowdown anyone can see.
constexpr Target const &kSecondWorker = TargetOfKind(TargetKind::SecondWorkerNoSlower);
static_assert(kSecondWorker.Kind == TargetKind::SecondWorkerNoSlower,
              "kTargets lists the second-worker target");

// The runs a merge reports, one line each.
void PrintMergedRuns(std::vector<PairRun> const &runs, unsigned more, unsigned rounds) {
    std::printf(
        "ftl at 1 worker and at %u workers: %zu runs of --threads-pair merged, %u rounds in all, each\n"
        "round in the state, and with the single-thread mark, its own run measured:\n",
        more, runs.size(), rounds);
    for (std::size_t i = 0; i < runs.size(); ++i) {
        PairRun const &run = runs[i];
        std::printf("  run %zu: %s, library %s, %s to %s, %u rounds of %u passes, medians of %u "
                    "repetitions, single-thread quartile %s ns%s\n",
                    i + 1, run.File.c_str(), LibraryOf(run), run.Started.c_str(), run.Finished.c_str(),
                    run.Rounds, run.Passes, run.Repetitions, FormatValue(run.SerialBase).c_str(),
                    run.KeptSamples ? ""
                                    : "; its file has no samples, so a figure from samples (W8, W8b, T1, "
                                      "M1) takes the median of its rounds' ratios in a state where it "
                                      "has a counted round");
    }
    std::printf("\n");
}

// The report's first lines: the runs, how a row was measured, and the
// rows' column names.
void PrintPairLegend(std::vector<PairRun> const &runs, unsigned more, unsigned rounds) {
    bool const several = runs.size() > 1; // its rounds are numbered within their runs
    std::string const quartile =
        several ? "its run's lower quartile (the runs above)"
                : "the run's lower quartile (" + FormatValue(runs.front().SerialBase) + " ns)";
    std::vector<unsigned> passCounts; // each run's rounds of their own: "2 or 4" when runs differ
    std::string passes;
    for (PairRun const &run : runs) {
        if (std::find(passCounts.begin(), passCounts.end(), run.Passes) == passCounts.end()) {
            passCounts.push_back(run.Passes);
            passes += (passes.empty() ? "" : " or ") + std::to_string(run.Passes);
        }
    }
    if (several) {
        PrintMergedRuns(runs, more, rounds);
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
}

void PrintPairRow(PairRow const &row, bool several) {
    double const ratio = row.One > 0 ? row.More / row.One : 0;
    std::string const cores =
        row.OneFirstCpu < 0 ? "-" : FormatValue(row.OneFirstCpu) + " / " + FormatValue(row.OneSecondCpu);
    std::string const share = row.OneFirstCpu < 0  ? ""
                              : row.FirstShare < 0 ? "halves"
                                                   : Format("%.0f%%", 100 * row.FirstShare);
    std::string const round = several ? Format("%u/%u", row.Run, row.Round) : std::to_string(row.Round);
    std::printf("  %-8s %-14s %5s %12s %12s %8.3f %10s %10s %5s%-1s %-25s %s\n", row.Figure.c_str(),
                row.Unit.c_str(), round.c_str(), FormatValue(row.One).c_str(), FormatValue(row.More).c_str(),
                ratio, FormatValue(row.Probe).c_str(), FormatValue(row.Serial).c_str(),
                row.Slow ? "slow" : "fast", row.SerialSlow ? "*" : "", cores.c_str(), share.c_str());
}

// The rounds that count, per figure and host state (false: fast, true:
// slow). The target, per state: no figure whose median ratio over that
// state's rounds (a figure from samples: the ratio of their pooled runs) is
// above its threshold.
struct StateRounds {
    std::map<std::string, std::map<bool, std::vector<double>>> Ratios;
    std::map<std::string, std::map<bool, std::vector<double>>> Differences;
    // A percentile of samples: every run of the state's rounds, at each size;
    // pooled only when every counted round of the figure in that state has
    // its samples (a run written before its JSON kept them does not).
    std::map<std::string, std::map<bool, Sampled>> Pools;
    std::map<std::string, std::map<bool, bool>> Unsampled;
    std::map<std::string, std::string> Units;
};

// Counts a row into its state's rounds, unless the single-thread probe
// marked it.
void CountRound(PairRow const &row, StateRounds &rounds) {
    rounds.Units[row.Figure] = row.Unit;
    if (row.SerialSlow) {
        return;
    }
    double const ratio = row.One > 0 ? row.More / row.One : 0;
    rounds.Ratios[row.Figure][row.Slow].push_back(ratio);
    rounds.Differences[row.Figure][row.Slow].push_back(row.More - row.One);
    if (row.Samples.Percentile > 0) {
        Sampled &pool = rounds.Pools[row.Figure][row.Slow];
        pool.Percentile = row.Samples.Percentile;
        pool.One.insert(pool.One.end(), row.Samples.One.begin(), row.Samples.One.end());
        pool.More.insert(pool.More.end(), row.Samples.More.begin(), row.Samples.More.end());
    } else {
        rounds.Unsampled[row.Figure][row.Slow] = true;
    }
}

// Each figure's ratio per state, as the report prints and writes it, and
// what the target's verdict reads from them.
struct StateMedians {
    std::string Json; // the entries of "medians"
    std::vector<std::string> Slower;
    // The W figures with no counted round in a state (the host may stay in
    // one state for a whole run, and a round the single-thread probe marks
    // is left out): the target covers both states, so it is not shown met.
    std::vector<std::string> Unmeasured[2];
    std::size_t WorkloadFigures = 0;
};

// One state's median ratio of `figure`, onto its line of the report, its
// JSON entry and the verdict's lists.
void AddStateMedian(std::string const &figure, std::string const &unit, bool state, StateRounds &rounds,
                    std::string &line, StateMedians &medians) {
    char const *const name = state ? "slow" : "fast";
    auto const &byState = rounds.Ratios[figure];
    auto const found = byState.find(state);
    if (found == byState.end()) {
        line += Format(" %s -", name);
        medians.Json += Format(", \"%s\": null", name);
        if (figure[0] == 'W') {
            medians.Unmeasured[state].push_back(figure);
        }
        return;
    }
    PooledRatio ratio = MedianWithInterval(found->second);
    double difference = MedianOf(rounds.Differences.at(figure).at(state));
    std::string interval;
    auto const pool = rounds.Pools.find(figure);
    bool const sampled = pool != rounds.Pools.end() && pool->second.count(state) != 0;
    if (sampled && !rounds.Unsampled[figure][state]) {
        Sampled const &samples = pool->second.at(state);
        ratio = RatioOfPooled(samples);
        difference = ratio.Difference;
        interval = Format(", \"pooled_runs\": %zu", samples.One.size());
    } else {
        interval = Format(", \"rounds\": %zu", found->second.size());
    }
    double const median = ratio.Ratio;
    line += Format(" %s %.3f (%.2f-%.2f)%s", name, median, ratio.Low, ratio.High,
                   sampled && rounds.Unsampled[figure][state] ? " (over rounds: a run has no samples)" : "");
    interval += Format(", \"interval\": [%.6g, %.6g]", ratio.Low, ratio.High);
    // The target covers the W workloads; within its threshold is run-to-run
    // noise, and so are idle-CPU differences under kIdleCpuNoise.
    bool const idleNoise = unit == "cpu-s/2s" && difference < kIdleCpuNoise;
    bool const isSlower = figure[0] == 'W' && median > kSecondWorker.Threshold && !idleNoise;
    if (isSlower) {
        medians.Slower.push_back(figure + (state ? " (slow" : " (fast") +
                                 IntervalNote(ratio, kSecondWorker.Threshold) + ")");
    }
    medians.Json += Format(", \"%s\": {\"ratio\": %.6g, \"difference\": %.6g, \"slower\": %s%s}", name,
                           median, difference, isSlower ? "true" : "false", interval.c_str());
}

// Prints each figure's median ratio per state, and returns them.
StateMedians PrintStateMedians(StateRounds &rounds, unsigned more) {
    std::printf("\nMedian ratio per state (%u workers over 1; above 1: slower with more workers), then its\n"
                "95%% interval from resampling the state's rounds; a figure from samples (W8, W8b) is the\n"
                "ratio of the percentile of all the state's runs pooled, its interval from resampling\n"
                "whole runs. A figure found slower says when its interval reaches the target's %.2f (or 1):\n"
                "the rounds did not resolve that miss:\n",
                more, kSecondWorker.Threshold);
    StateMedians medians;
    for (auto const &[figure, unit] : rounds.Units) {
        medians.WorkloadFigures += figure[0] == 'W' ? 1u : 0u;
        std::string line = "  " + figure + ":";
        medians.Json += std::string(medians.Json.empty() ? "\n" : ",\n") +
                        "    {\"figure\": " + JsonString(figure) + ", \"unit\": " + JsonString(unit);
        for (bool const state : {false, true}) {
            AddStateMedian(figure, unit, state, rounds, line, medians);
        }
        medians.Json += "}";
        std::printf("%s\n", line.c_str());
    }
    return medians;
}

// "a, b, c"
std::string JoinWithCommas(std::vector<std::string> const &items) {
    std::string list;
    for (std::string const &item : items) {
        list += (list.empty() ? "" : ", ") + item;
    }
    return list;
}

// The second-worker target's verdict on the state medians.
TargetVerdict PairVerdict(StateMedians const &medians, unsigned more) {
    std::string missing;
    for (bool const state : {false, true}) {
        std::vector<std::string> const &figures = medians.Unmeasured[state];
        if (figures.empty()) {
            continue;
        }
        missing += Format("%sno round counted in the %s state", missing.empty() ? "" : "; ",
                          state ? "slow" : "fast");
        if (figures.size() < medians.WorkloadFigures) {
            missing += " for " + JoinWithCommas(figures);
        }
    }
    bool const met = medians.Slower.empty() && missing.empty();
    std::string outcome = "met";
    if (!medians.Slower.empty()) {
        outcome = "NOT met: " + JoinWithCommas(medians.Slower) + (missing.empty() ? "" : "; and " + missing);
    } else if (!missing.empty()) {
        outcome = "not shown: " + missing;
    }
    return TargetVerdict{
        Format(
            "no workload (W1-W8) slower at %u workers than at 1 (by more than %.0f%%; idle CPU by more than "
            "%.3f cpu-s), in either host state: %s",
            more, (kSecondWorker.Threshold - 1) * 100, kIdleCpuNoise, outcome.c_str()),
        met};
}

// The report's JSON up to its rows: the run, or the merge and its runs.
void WritePairRuns(std::ofstream &json, std::vector<PairRun> const &runs, unsigned rounds) {
    bool const merged = !runs.front().File.empty(); // its JSON is a merge's report
    // The times read "YYYY-MM-DD HH:MM:SS UTC": as text, the earliest sorts first.
    std::string started = runs.front().Started;
    std::string finished = runs.front().Finished;
    for (PairRun const &run : runs) {
        started = std::min(started, run.Started);
        finished = std::max(finished, run.Finished);
    }
    json << "{\n  \"tool\": \"ftl_bench " << (merged ? "--pair-merge" : "--threads-pair") << "\",\n"
         << "  \"started\": " << JsonString(started) << ",\n"
         << "  \"finished\": " << JsonString(finished) << ",\n"
         << "  \"cpu\": " << JsonString(runs.front().Cpu) << ",\n"
         << "  \"workers\": " << runs.front().Workers << ",\n  \"rounds\": " << rounds;
    if (merged) {
        json << ",\n  \"runs\": [";
        for (std::size_t i = 0; i < runs.size(); ++i) {
            PairRun const &run = runs[i];
            json << (i == 0 ? "\n" : ",\n") << "    {\"file\": " << JsonString(run.File)
                 << ", \"library\": " << JsonString(run.Library)
                 << ", \"started\": " << JsonString(run.Started)
                 << ", \"finished\": " << JsonString(run.Finished) << ", \"rounds\": " << run.Rounds
                 << ", \"passes\": " << run.Passes << ", \"repetitions\": " << run.Repetitions
                 << Format(", \"serial_base_ns\": %.6g, \"kept_samples\": %s}", run.SerialBase,
                           run.KeptSamples ? "true" : "false");
        }
        json << "\n  ]";
    } else {
        json << ",\n  \"library\": " << JsonString(runs.front().Library)
             << ",\n  \"passes\": " << runs.front().Passes
             << ",\n  \"repetitions\": " << runs.front().Repetitions
             << Format(",\n  \"serial_base_ns\": %.6g", runs.front().SerialBase);
    }
    json << ",\n  \"slow_probe_ns\": " << kSlowProbeNs
         << Format(",\n  \"serial_slow_factor\": %.6g", kSerialSlowFactor);
}

// The report's rows; setOfRow: each row's sample set (-1: none).
void WritePairRows(std::ofstream &json, std::vector<PairRow> const &rows, std::vector<int> const &setOfRow,
                   bool merged) {
    json << ",\n  \"rows\": [";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        PairRow const &row = rows[i];
        json << (i == 0 ? "\n" : ",\n") << "    {\"figure\": " << JsonString(row.Figure)
             << ", \"unit\": " << JsonString(row.Unit) << (merged ? Format(", \"run\": %u", row.Run) : "")
             << ", \"round\": " << row.Round << ", \"one\": " << Exact(row.One)
             << ", \"more\": " << Exact(row.More)
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
    json << "\n  ]";
}

// The report as JSON; false when the file cannot be written. A run's JSON
// keeps the samples of its figures from samples, so that a merge can pool
// them; a merge's does not (they take a few MB a run), so that merged again
// with new runs, its runs count as runs without samples.
bool WritePairJson(std::string const &path, std::vector<PairRun> const &runs,
                   std::vector<PairRow> const &rows, unsigned rounds, StateMedians const &medians,
                   TargetVerdict const &verdict) {
    bool const merged = !runs.front().File.empty();
    std::ofstream json(path);
    WritePairRuns(json, runs, rounds);
    std::vector<int> setOfRow(rows.size(), -1);
    if (!merged) {
        WritePairSampleSets(json, rows, setOfRow);
    }
    WritePairRows(json, rows, setOfRow, merged);
    json << ",\n  \"medians\": [" << medians.Json
         << "\n  ],\n  \"target\": {\"text\": " << JsonString(verdict.Text)
         << ", \"met\": " << (verdict.Met ? "true" : "false") << "}\n}\n";
    json.close();
    return static_cast<bool>(json);
}

// The report of a --threads-pair run, or of several merged (--pair-merge):
// every row, each figure's median at both sizes and their ratio per state,
// and the target's verdict; to jsonPath too, when given. Every figure is a
// time: above 1, the extra workers made it slower. Returns 1 when the JSON
// cannot be written, else 0.
int ReportPair(std::vector<PairRun> const &runs, std::vector<PairRow> const &rows,
               std::string const &jsonPath) {
    bool const several = runs.size() > 1; // its rounds are numbered within their runs
    unsigned const more = runs.front().Workers;
    unsigned rounds = 0;
    for (PairRun const &run : runs) {
        rounds += run.Rounds;
    }
    PrintPairLegend(runs, more, rounds);
    StateRounds counted;
    for (PairRow const &row : rows) {
        CountRound(row, counted);
        PrintPairRow(row, several);
    }
    StateMedians const medians = PrintStateMedians(counted, more);
    TargetVerdict const verdict = PairVerdict(medians, more);
    std::printf("\nPerformance target: %s\n", verdict.Text.c_str());
    if (jsonPath.empty()) {
        return 0;
    }
    if (!WritePairJson(jsonPath, runs, rows, rounds, medians, verdict)) {
        std::fprintf(stderr, "ftl_bench: cannot write %s\n", jsonPath.c_str());
        return 1;
    }
    std::printf("\nresults written to %s\n", jsonPath.c_str());
    return 0;
}

// One run of a report's JSON: `entry` is the file itself for a run's, an
// entry of its "runs" for a merge's.
PairRun ReadPairRun(ftl_test::Json const &file, ftl_test::Json const &entry, std::string const &name) {
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
    run.KeptSamples = file.Has("sample_sets");
    return run;
}

// One pool's samples of a sample set: each run's.
std::vector<std::vector<double>> ReadSamples(ftl_test::Json const &set) {
    std::vector<std::vector<double>> samples;
    for (ftl_test::Json const &one : set.Items) {
        samples.emplace_back();
        for (ftl_test::Json const &sample : one.Items) {
            samples.back().push_back(sample.Number);
        }
    }
    return samples;
}

// One row of a report's JSON, numbered by its run's place among all the
// runs read: the file's runs are those after the first `first`, `count` of
// them. Throws std::runtime_error when it names a run or a sample set the
// file does not have.
PairRow ReadPairRow(ftl_test::Json const &entry, bool merge, std::size_t first, std::size_t count,
                    std::vector<ftl_test::Json> const &sets) {
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
        row.Samples = Sampled{entry["percentile"].Number, ReadSamples(sets[set]["one"]),
                              ReadSamples(sets[set]["more"])};
    }
    return row;
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
    // A merge lists its runs, and its rows name theirs (from 1); a run's
    // file is its own one run.
    std::size_t const first = runs.size();
    if (merge) {
        for (ftl_test::Json const &entry : file["runs"].Items) {
            runs.push_back(ReadPairRun(file, entry, entry["file"].Text));
        }
    } else {
        runs.push_back(ReadPairRun(file, file, path));
    }
    std::size_t const count = runs.size() - first;
    std::vector<ftl_test::Json> const noSets;
    std::vector<ftl_test::Json> const &sets = file.Has("sample_sets") ? file["sample_sets"].Items : noSets;
    for (ftl_test::Json const &entry : file["rows"].Items) {
        rows.push_back(ReadPairRow(entry, merge, first, count, sets));
    }
}

// Checks that the runs from the first `first` on are not runs already read,
// and come from the host and worker count of the first run; says why not.
bool PairRunsMerge(std::vector<PairRun> const &runs, std::size_t first) {
    for (std::size_t i = first; i < runs.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
            if (runs[j].Started == runs[i].Started) {
                std::fprintf(stderr, "ftl_bench: --pair-merge: %s and %s are the same run (started %s)\n",
                             runs[j].File.c_str(), runs[i].File.c_str(), runs[i].Started.c_str());
                return false;
            }
        }
        if (runs[i].Workers != runs.front().Workers || runs[i].Cpu != runs.front().Cpu) {
            std::fprintf(stderr,
                         "ftl_bench: --pair-merge: %s compares 1 worker with %u on \"%s\", %s with %u on "
                         "\"%s\": only runs of one host and worker count merge\n",
                         runs[i].File.c_str(), runs[i].Workers, runs[i].Cpu.c_str(),
                         runs.front().File.c_str(), runs.front().Workers, runs.front().Cpu.c_str());
            return false;
        }
    }
    return true;
}

// Orders the rows by workload, the workloads in the order they first
// appear; a figure's workload is its id's first word ("W8 p99": W8).
void OrderByWorkload(std::vector<PairRow> &rows) {
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
}

} // namespace

int RunThreadsPair(Config const &config, Sizes sizes, unsigned more, unsigned rounds,
                   std::vector<Workload> const &workloads, std::string const &jsonPath) {
    if (kSanitizedBuild) {
        std::fprintf(stderr,
                     "ftl_bench: --threads-pair compares times, which a sanitizer build does not take\n");
        return 2;
    }
    std::vector<Workload> paired;
    std::copy_if(workloads.begin(), workloads.end(), std::back_inserter(paired),
                 [](Workload const &workload) { return workload.Paired; });
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
        if (!PairRunsMerge(runs, first)) {
            return 2;
        }
    }
    OrderByWorkload(rows);
    return ReportPair(runs, rows, jsonPath);
}

} // namespace bench
