// The performance targets: what ftl holds itself to on the workloads of
// workloads.h, against the peers measured in the same run and against its
// own figures. One entry per target, in the order the verdicts are printed:
// ftl_bench judges each on a run's medians (JudgeTargets, verdicts.cpp; the
// second-worker target at the end of --threads-pair, threads_pair.cpp), and
// benchmarks/plot.py writes the README's table of targets from this one,
// beside the latest run's verdicts.
//
// plot.py reads kTargets as text: keep each entry's first five fields (Name,
// Kind, Figures, Threshold, Text) in that order, as a string literal, a
// TargetKind enumerator, a braced list of string literals, a number and a
// string literal.
#pragma once

#include <array>

namespace bench {

// How a target compares. A verdict line starts with the figure it judges
// ("W1: ..."), one line per figure, or for a target over every figure with
// its own words.
enum class TargetKind {
    // ftl's median at least Threshold times faster than the best peer's.
    FasterThanBestPeer,
    // ftl's median at most Threshold ns above ftl's own on the Against figure.
    NsAboveOwn,
    // ftl's median at most Threshold times ftl's own on the Against figure.
    TimesOwn,
    // ftl's median at most Threshold times the best peer's.
    TimesBestPeer,
    // A lock: ftl's median at most Threshold times the fastest peer's on any
    // of the Against figures, both contended (a cell whose busiest thread ran
    // nearly every task measured no contention).
    ContendedLock,
    // ftl's median at most Threshold times the hand-written reference's.
    TimesReference,
    // ftl's median below Threshold.
    Below,
    // ftl's median at most Threshold late; the Against figure (its p99) is
    // printed beside it.
    LateAtMost,
    // No figure where a peer's median beats ftl's.
    NoPeerFaster,
    // ftl_bench --threads-pair: no W figure at more workers above Threshold
    // times its figure at one worker, in either host state.
    SecondWorkerNoSlower,
};

// Up to three figure ids (see workloads.cpp); the unused ones are nullptr.
using TargetFigures = std::array<char const *, 3>;

// How a verdict line names the two sides of a comparison, where its kind
// serves targets that name them differently.
struct TargetWording {
    char const *Subject = "";    // ftl's side: "a TaskGraph node"
    char const *Other = "";      // what it is compared with: "a W1 task", "std::thread loop"
    char const *OtherState = ""; // the other side in "(ftl measured in the fast state, the loop in ...)"
    char const *Unit = "";       // "ns per element"
    int RatioDecimals = 2;
};

struct Target {
    char const *Name; // the README's name for it
    TargetKind Kind;
    TargetFigures Figures; // the figures judged, a verdict line each
    double Threshold;
    char const *Text; // the target in words, as the README lists it (AsciiDoc)
    // Per judged figure, the figure it is compared with (NsAboveOwn,
    // TimesOwn, LateAtMost); ContendedLock: the figures whose peer cells count.
    TargetFigures Against = {};
    TargetWording Wording = {};
};

// Idle CPU time is read from getrusage: below a millisecond per 2 s (0.05%
// of a core, a second parked thread's own cost) a difference is noise, not a
// win or a slowdown.
constexpr double kIdleCpuNoise = 0.001;

inline constexpr Target kTargets[] = {
    {"Task throughput",
     TargetKind::FasterThanBestPeer,
     {"W1", "W2", "W3"},
     1.5,
     "W1, W2, W3: at least 1.5x faster than the best peer"},
    {"Closure tasks",
     TargetKind::NsAboveOwn,
     {"W1c", "W3c"},
     2.0,
     "W1c, W3c: a closure task costs at most 2 ns more than a lineage `Task` (W1, W3)",
     {"W1", "W3"},
     {"a closure task", "a lineage Task"}},
    {"Task graph",
     TargetKind::TimesOwn,
     {"G1"},
     1.0,
     "G1: a `TaskGraph` node costs no more than a W1 task",
     {"W1"},
     {"a TaskGraph node", "a W1 task", "", "ns"}},
    {"Tasks after tasks",
     TargetKind::TimesOwn,
     {"A1"},
     2.0,
     "A1: a task added with `AddTaskAfter` costs at most 2x a W1 task, added and run",
     {"W1"},
     {"an AddTaskAfter task", "a W1 task", "", "ns"}},
    {"A chain with no fibers",
     TargetKind::Below,
     {"A2 fibers"},
     1,
     "A2: a chain of 100,000 tasks, each `AddTaskAfter` the one before, adds no fiber to the pool's peak",
     {},
     {"", "", "", "fibers added"}},
    {"Cancellation",
     TargetKind::Below,
     {"C1 cancel"},
     1000,
     "C1: cancelling a counter of 1,000,000 queued tasks returns within 1 ms",
     {},
     {"", "", "", "us"}},
    {"Cancelled wait",
     TargetKind::Below,
     {"C1 wait"},
     10,
     "C1: the wait on that counter returns within 10 ms of the cancel, none of the tasks run",
     {},
     {"", "", "", "ms"}},
    {"Parallel loop",
     TargetKind::TimesOwn,
     {"P1"},
     1.05,
     "P1: `ParallelFor` at most 1.05x the same loop batched by hand with `AddTasks` (P1h)",
     {"P1h"},
     {"ParallelFor", "AddTasks batches by hand (P1h)", "", "ns per element"}},
    {"Waiting for a value",
     TargetKind::TimesBestPeer,
     {"W4"},
     0.5,
     "W4: at most half the best peer's round trip",
     {},
     {"", "", "", "ns"}},
    {"Contended mutex",
     TargetKind::ContendedLock,
     {"W5"},
     1.0,
     "W5: `Fibtex` no slower than the fastest peer mutex, both contended",
     {"W5", "W5b"}},
    {"Plain parallel work",
     TargetKind::TimesReference,
     {"W6"},
     1.05,
     "W6: within 5% of the hand-written `std::thread` loop",
     {},
     {"", "std::thread loop", "the loop", "ms", 3}},
    {"Idle CPU",
     TargetKind::Below,
     {"W7", "W7s", "W7t"},
     0.02,
     "W7, W7s, W7t: an idle scheduler uses under 0.02 cpu-s over 2 s, also when its only pending work is a "
     "`SleepFor` and a timed wait (W7t)",
     {},
     {"", "", "", "cpu-s over 2 s idle"}},
    {"Timers",
     TargetKind::LateAtMost,
     {"T1"},
     1000,
     "T1: a 1 ms `SleepFor` or timed wait runs its task again at most 1 ms late at the median",
     {"T1 p99"},
     {"a 1 ms timer runs its task", "", "", "us"}},
    {"Wake latency",
     TargetKind::TimesReference,
     {"W8"},
     1.5,
     "W8: median wake latency within 1.5x of a raw futex wake",
     {},
     {"", "raw futex wake", "the futex", "us"}},
    {"No peer faster",
     TargetKind::NoPeerFaster,
     {},
     1.0,
     "No figure where a peer beats ftl (leaving out, as for W5, a lock workload that the peer ran on one "
     "thread)"},
    {"A second worker",
     TargetKind::SecondWorkerNoSlower,
     {},
     1.05,
     "A second worker never makes a workload slower: at 2 workers each W1-W8 figure is at most its 1-worker "
     "figure, in both host states (5% is run-to-run noise; for the idle figures, 0.001 cpu-s per 2 s)"},
};

// The target of a kind that only one target has (SecondWorkerNoSlower); the
// first target when none has it, so that a user checks its Kind in a
// static_assert.
constexpr Target const &TargetOfKind(TargetKind kind) {
    for (Target const &target : kTargets) {
        if (target.Kind == kind) {
            return target;
        }
    }
    return kTargets[0];
}

} // namespace bench
