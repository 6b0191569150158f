// A small benchmark harness.
//
// A workload is one job to measure, described once (its name, its unit and how
// many units one run does), with one Runner per implementation of it: ftl
// first, and beside it any peer (a thread pool, another fiber library) doing
// the same job. Each runner is measured the same way:
//
//   1. one warm-up run, whose time is thrown away (first touches of memory,
//      fiber stacks and caches);
//   2. `Repetitions` timed runs (at least 5).
//
// After every run, the warm-up included, the runner's Check must pass before
// the run's time counts: a benchmark that lost work must fail, not report a
// flattering figure. The report gives the median per unit with the minimum and
// maximum beside it, and, when a workload has several runners, each one's
// median relative to the first runner's.
//
// In a sanitizer build the runners still run (and are checked) once each, but
// no figures are reported: they would measure the sanitizer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
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

// The outcome of checking one run.
struct Verdict {
    bool Ok = true;
    std::string Error;

    static Verdict Pass() { return Verdict{}; }
    static Verdict Fail(std::string error) { return Verdict{false, std::move(error)}; }
};

// One implementation of a workload. Run does the work and returns once all of
// it is done; Check inspects what the run produced (and resets whatever the
// next run needs reset). Only Run is timed.
struct Runner {
    std::string Peer;
    std::function<void()> Run;
    std::function<Verdict()> Check;
};

struct Workload {
    std::string Id;          // short, e.g. "W1"
    std::string Description; // what one run does
    std::string Unit;        // e.g. "ns/task"
    double UnitsPerRun;      // the run's time in ns is divided by this
    std::vector<Runner> Runners;
};

struct Config {
    unsigned Repetitions = 15;
    std::string Filter; // run only workloads whose Id or Description contains this
};

struct Row {
    std::string WorkloadId;
    std::string Description;
    std::string Peer;
    std::string Unit;
    bool Ok = false;
    std::string Error;
    double Median = 0;
    double Min = 0;
    double Max = 0;
    double Ratio = 0; // Median over the first runner's Median; 0 when not applicable
    unsigned Repetitions = 0;
};

inline double MedianOf(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    std::size_t const n = values.size();
    if (n == 0) {
        return 0;
    }
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Measures one runner. A failed check stops it at once.
inline Row Measure(Config const &config, Workload const &workload, Runner const &runner) {
    using Clock = std::chrono::steady_clock;
    Row row;
    row.WorkloadId = workload.Id;
    row.Description = workload.Description;
    row.Peer = runner.Peer;
    row.Unit = workload.Unit;

    unsigned const repetitions = kSanitizedBuild ? 0 : std::max(config.Repetitions, kMinRepetitions);
    std::vector<double> perUnit;
    perUnit.reserve(repetitions);
    for (unsigned i = 0; i <= repetitions; ++i) { // run 0 is the warm-up
        auto const start = Clock::now();
        runner.Run();
        auto const stop = Clock::now();
        Verdict verdict = runner.Check();
        if (!verdict.Ok) {
            row.Error = (i == 0 ? "warm-up run: " : "run " + std::to_string(i) + ": ") + verdict.Error;
            return row;
        }
        if (i > 0) {
            double const ns = std::chrono::duration<double, std::nano>(stop - start).count();
            perUnit.push_back(ns / workload.UnitsPerRun);
        }
    }
    row.Ok = true;
    row.Repetitions = repetitions;
    if (!perUnit.empty()) {
        row.Median = MedianOf(perUnit);
        row.Min = *std::min_element(perUnit.begin(), perUnit.end());
        row.Max = *std::max_element(perUnit.begin(), perUnit.end());
    }
    return row;
}

// Runs every selected workload, each runner in turn, printing progress to
// stderr so that a long run shows where it is.
inline std::vector<Row> RunAll(Config const &config, std::vector<Workload> const &workloads) {
    std::vector<Row> rows;
    for (Workload const &workload : workloads) {
        if (!config.Filter.empty() && workload.Id.find(config.Filter) == std::string::npos &&
            workload.Description.find(config.Filter) == std::string::npos) {
            continue;
        }
        std::size_t const first = rows.size();
        for (Runner const &runner : workload.Runners) {
            std::fprintf(stderr, "  running %s (%s) ...\n", workload.Id.c_str(), runner.Peer.c_str());
            rows.push_back(Measure(config, workload, runner));
        }
        if (workload.Runners.size() > 1 && rows[first].Ok && rows[first].Median > 0) {
            for (std::size_t i = first; i < rows.size(); ++i) {
                if (rows[i].Ok) {
                    rows[i].Ratio = rows[i].Median / rows[first].Median;
                }
            }
        }
    }
    return rows;
}

inline bool AllOk(std::vector<Row> const &rows) {
    return std::all_of(rows.begin(), rows.end(), [](Row const &row) { return row.Ok; });
}

inline void PrintTable(std::FILE *out, std::vector<Row> const &rows) {
    bool const anyRatio = std::any_of(rows.begin(), rows.end(), [](Row const &row) { return row.Ratio > 0; });
    int width = static_cast<int>(std::string("workload").size());
    for (Row const &row : rows) {
        width = std::max(width, static_cast<int>((row.WorkloadId + " " + row.Description).size()));
    }
    // The unit column is padded only when the ratio column follows it.
    int const unitWidth = anyRatio ? 11 : 0;
    std::fprintf(out, "%-*s  %-6s %10s %10s %10s  %-*s%s\n", width, "workload", "peer", "median", "min",
                 "max", unitWidth, "unit", anyRatio ? "  vs first" : "");
    for (Row const &row : rows) {
        std::string const name = row.WorkloadId + " " + row.Description;
        if (!row.Ok) {
            std::fprintf(out, "%-*s  %-6s FAILED: %s\n", width, name.c_str(), row.Peer.c_str(),
                         row.Error.c_str());
            continue;
        }
        if (kSanitizedBuild) {
            std::fprintf(out, "%-*s  %-6s %10s %10s %10s  %s\n", width, name.c_str(), row.Peer.c_str(), "-",
                         "-", "-", row.Unit.c_str());
            continue;
        }
        std::fprintf(out, "%-*s  %-6s %10.1f %10.1f %10.1f  %-*s", width, name.c_str(), row.Peer.c_str(),
                     row.Median, row.Min, row.Max, unitWidth, row.Unit.c_str());
        if (row.Ratio > 0) {
            std::fprintf(out, "  %8.2fx", row.Ratio);
        }
        std::fprintf(out, "\n");
    }
}

inline std::string JsonString(std::string const &text) {
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

// Writes the rows as JSON. `context` holds extra top-level fields, as
// already-encoded JSON values (e.g. {"threads", "2"}). Returns false when the
// file cannot be written.
inline bool WriteJson(std::string const &path,
                      std::vector<std::pair<std::string, std::string>> const &context,
                      std::vector<Row> const &rows) {
    std::FILE *file = std::fopen(path.c_str(), "w");
    if (file == nullptr) {
        return false;
    }
    std::fprintf(file, "{\n");
    for (auto const &[key, value] : context) {
        std::fprintf(file, "  %s: %s,\n", JsonString(key).c_str(), value.c_str());
    }
    std::fprintf(file, "  \"sanitized\": %s,\n", kSanitizedBuild ? "true" : "false");
    std::fprintf(file, "  \"results\": [");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        Row const &row = rows[i];
        std::fprintf(
            file, "%s\n    {\"workload\": %s, \"description\": %s, \"peer\": %s, \"unit\": %s, \"ok\": %s",
            i == 0 ? "" : ",", JsonString(row.WorkloadId).c_str(), JsonString(row.Description).c_str(),
            JsonString(row.Peer).c_str(), JsonString(row.Unit).c_str(), row.Ok ? "true" : "false");
        if (!row.Ok) {
            std::fprintf(file, ", \"error\": %s", JsonString(row.Error).c_str());
        } else if (!kSanitizedBuild) {
            std::fprintf(file, ", \"repetitions\": %u, \"median\": %.3f, \"min\": %.3f, \"max\": %.3f",
                         row.Repetitions, row.Median, row.Min, row.Max);
            if (row.Ratio > 0) {
                std::fprintf(file, ", \"ratio\": %.4f", row.Ratio);
            }
        }
        std::fprintf(file, "}");
    }
    std::fprintf(file, "\n  ]\n}\n");
    return std::fclose(file) == 0;
}

} // namespace bench
