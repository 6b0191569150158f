// The randomized stress round: one scheduler, one seed, every primitive at
// once, every result checked.
//
// A round starts a TaskScheduler with the round's thread count (its initial
// EmptyQueueBehavior and, now and then, a scheduling feature switched off,
// drawn from the seed) and runs one or more waves. Each wave builds a random
// plan from the seed (std::mt19937_64) and runs these workloads side by side:
//
//   - task DAGs: tasks add children (several levels deep), some children
//     shared by two parents (a parent waits on a child it did not add through
//     the child's AtomicFlag), some tracked by hand (TaskCounter::Add and
//     Decrement); every node's result is compared with a sequential
//     computation of the same DAG;
//   - counter walks: a FullAtomicCounter is stepped through a random path of
//     distinct values by a chain of tasks (FetchAdd, FetchSub, Store,
//     CompareExchange), while fibers wait for chosen values on it; a step off a
//     value waits until every fiber waiting for that value resumed, so no wait
//     can be missed and each waiter must see exactly its value;
//   - tallies: tasks FetchAdd / CompareExchange one counter while fibers wait
//     for its final value;
//   - Fibtex groups: plain (non-atomic) sums updated under two Fibtexes
//     through lock_guard, unique_lock, LockWrapper (each lock behaviour),
//     std::scoped_lock of both, and sections that wait while holding the lock;
//     every entry records the order it saw, checked at the end;
//   - AtomicFlag gates: racing Set and Clear (exactly one of each wins),
//     waiters released by the clear;
//   - a thread outside the scheduler that adds tasks and switches the
//     EmptyQueueBehavior while the work runs (DAG tasks and the main thread
//     switch it too).
//
// When a wave's work is done, the behaviour goes to Sleep and wake-latency
// probes run: tasks added while every worker sleeps, timed from AddTask to
// their first instruction. After the last wave the main thread adds tasks and
// destroys the scheduler at once; the destructor must run them all.
//
// Every task counts itself by kind; a round fails when any kind ran a
// different number of times than the plan says, or any check failed. Waits
// are pinned or not at random; a pinned wait must resume on its thread.
//
// Tasks never throw and never abort on a failed check: they record it, and
// the round reports every failure after its waits.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ftl_stress {

#if defined(__SANITIZE_THREAD__)
#define FTL_STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FTL_STRESS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FTL_STRESS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FTL_STRESS_ASAN 1
#endif
#endif
#ifndef FTL_STRESS_TSAN
#define FTL_STRESS_TSAN 0
#endif
#ifndef FTL_STRESS_ASAN
#define FTL_STRESS_ASAN 0
#endif

constexpr bool kThreadSanitizer = FTL_STRESS_TSAN != 0;
constexpr bool kAddressSanitizer = FTL_STRESS_ASAN != 0;
constexpr bool kSanitizedBuild = kThreadSanitizer || kAddressSanitizer;

// The defaults of a round's size. Measured on 2 cores at 2 threads, a round
// then takes 0.5-1 s in a RelWithDebInfo build (6 waves at scale 1), 0.3-0.5 s
// under ASan (3 waves; ASan costs this workload little) and 0.4-1.3 s under
// TSan (1 wave at scale 0.25; TSan runs it ~20 times slower).
// The workload size multiplier:
double DefaultScale();
// The number of waves (workload mixes run one after another):
unsigned DefaultWaves();

// What each task of a round is, for counting.
enum class TaskKind : unsigned {
    Root,          // the workload roots the main thread adds
    DagNode,       //
    WalkStep,      // steps of a counter walk
    WalkWaiter,    //
    TallyAdder,    //
    TallyWaiter,   //
    LockWorker,    // Fibtex sections
    LockChild,     // waited for while a Fibtex is held
    FlagSetter,    //
    FlagWaiter,    //
    FlagClearer,   //
    Helper,        // children that only make a wait park
    Outside,       // added by the thread outside the scheduler
    OutsideChild,  // added by those
    Probe,         // wake-latency probes
    ProbeLauncher, //
    Drain,         // added just before the scheduler is destroyed
    DrainChild,    //
    Count
};
constexpr unsigned kTaskKindCount = static_cast<unsigned>(TaskKind::Count);
char const *TaskKindName(TaskKind kind);

// Task counts of the round in progress. Tasks count themselves here, so a
// watchdog on another thread can report how far a hung round got.
struct RoundMonitor {
    std::array<std::atomic<std::uint64_t>, kTaskKindCount> Run{};
    std::array<std::atomic<std::uint64_t>, kTaskKindCount> Expected{};
    // What the main thread is doing (a string literal).
    std::atomic<char const *> Phase{"idle"};

    void Reset();
    std::uint64_t TotalRun() const;
    std::uint64_t TotalExpected() const;
    // One line per kind whose count differs from the plan (all kinds if `all`).
    std::string Describe(bool all) const;
};

struct RoundOptions {
    std::uint64_t Seed = 1;
    unsigned Threads = 2;
    double Scale = 1.0;
    // Each wave plans a new workload mix from the round's seed and runs it to
    // the end on the same scheduler.
    unsigned Waves = 1;
};

struct RoundReport {
    std::uint64_t Seed = 0;
    unsigned Threads = 0;
    double Seconds = 0;
    std::uint64_t TasksExpected = 0;
    std::uint64_t TasksRun = 0;
    // Everything that went wrong (the first few of each kind of check).
    std::vector<std::string> Failures;
    // Wake latencies in microseconds: probes added from outside the scheduler
    // and probes added by a task while the other workers slept.
    std::vector<double> WakeLatencyUs;
    // The workload mix: the scheduler's settings, then one line per wave.
    std::string Plan;

    bool Passed() const { return Failures.empty() && TasksRun == TasksExpected; }
    std::int64_t TasksLost() const {
        return static_cast<std::int64_t>(TasksExpected) - static_cast<std::int64_t>(TasksRun);
    }
};

// Runs one round. Returns once the round's scheduler is destroyed.
RoundReport RunRound(RoundOptions const &options, RoundMonitor &monitor);

} // namespace ftl_stress
