// The randomized stress round (see stress_core.h for what it runs).
//
// Layout of this file: randomness and the round context; then one section per
// workload (its plan, its tasks, its verification); then Workloads, one wave's
// mix planned from the seed, run side by side and checked; then RunRound,
// which runs the waves on one scheduler and checks the task counts.
//
// Rules every workload follows, so that a round can only fail through a
// library fault:
//   - A wait for a FullAtomicCounter value is only started when that value
//     cannot pass unseen: a walk holds each waited-for value until its waiters
//     acknowledged it, and a tally's waiters wait for the final value only.
//   - A fiber that holds Fibtex A never waits (so lock_spin_infinite on A
//     always ends: A's holder is running). Fibtex B is held across waits and
//     is never taken by spinning forever.
//   - Every task's argument outlives the task: each workload's objects live
//     until the main thread waited for all of its tasks.
#include "stress_core.h"

#include "behavior_name.h"

#include "ftl/atomic_counter.h"
#include "ftl/fibtex.h"
#include "ftl/task.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

// The printf dialect of Fail's vsnprintf. MinGW's `printf` format attribute
// checks against msvcrt's printf, which lacks %zu; libstdc++ has MinGW's
// own C99 stdio in use, so check against that.
#if defined(__MINGW32__)
#define FTL_STRESS_PRINTF __MINGW_PRINTF_FORMAT
#else
#define FTL_STRESS_PRINTF printf
#endif

namespace ftl_stress {

double DefaultScale() {
    return kThreadSanitizer ? 0.25 : 1.0;
}

unsigned DefaultWaves() {
    return kThreadSanitizer ? 1 : kAddressSanitizer ? 3 : 6;
}

char const *TaskKindName(TaskKind kind) {
    switch (kind) {
    case TaskKind::Root:
        return "workload roots";
    case TaskKind::DagNode:
        return "dag nodes";
    case TaskKind::WalkStep:
        return "walk steps";
    case TaskKind::WalkWaiter:
        return "walk waiters";
    case TaskKind::TallyAdder:
        return "tally adders";
    case TaskKind::TallyWaiter:
        return "tally waiters";
    case TaskKind::LockWorker:
        return "fibtex workers";
    case TaskKind::LockChild:
        return "fibtex children";
    case TaskKind::FlagSetter:
        return "flag setters";
    case TaskKind::FlagWaiter:
        return "flag waiters";
    case TaskKind::FlagClearer:
        return "flag clearers";
    case TaskKind::Helper:
        return "park helpers";
    case TaskKind::Outside:
        return "outside tasks";
    case TaskKind::OutsideChild:
        return "outside children";
    case TaskKind::Probe:
        return "latency probes";
    case TaskKind::ProbeLauncher:
        return "probe launchers";
    case TaskKind::Drain:
        return "drain tasks";
    case TaskKind::DrainChild:
        return "drain children";
    case TaskKind::Count:
        break;
    }
    return "?";
}

void RoundMonitor::Reset() {
    for (unsigned i = 0; i < kTaskKindCount; ++i) {
        Run[i].store(0, std::memory_order_relaxed);
        Expected[i].store(0, std::memory_order_relaxed);
    }
    Phase.store("idle", std::memory_order_relaxed);
}

std::uint64_t RoundMonitor::TotalRun() const {
    std::uint64_t total = 0;
    for (auto const &count : Run) {
        total += count.load(std::memory_order_relaxed);
    }
    return total;
}

std::uint64_t RoundMonitor::TotalExpected() const {
    std::uint64_t total = 0;
    for (auto const &count : Expected) {
        total += count.load(std::memory_order_relaxed);
    }
    return total;
}

std::string RoundMonitor::Describe(bool all) const {
    std::string text;
    for (unsigned i = 0; i < kTaskKindCount; ++i) {
        std::uint64_t const run = Run[i].load(std::memory_order_relaxed);
        std::uint64_t const expected = Expected[i].load(std::memory_order_relaxed);
        if (!all && run == expected) {
            continue;
        }
        char line[160];
        std::snprintf(line, sizeof(line), "    %-17s run %10" PRIu64 " of %10" PRIu64 "%s\n",
                      TaskKindName(static_cast<TaskKind>(i)), run, expected, run == expected ? "" : "  <--");
        text += line;
    }
    return text;
}

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Randomness

std::uint64_t SplitMix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The plan's random source. Bounded draws use a plain modulo (the bias is
// irrelevant here) instead of std::uniform_int_distribution, whose results
// differ between standard libraries: a seed must mean the same plan
// everywhere.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : m_engine(seed) {}

    std::uint64_t Next() { return m_engine(); }
    unsigned Next32() { return static_cast<unsigned>(m_engine() >> 32); }
    // Uniform in [0, n); n > 0.
    unsigned Below(unsigned n) { return static_cast<unsigned>(m_engine() % n); }
    // Uniform in [lo, hi]; lo <= hi.
    unsigned Range(unsigned lo, unsigned hi) { return lo + Below(hi - lo + 1); }
    bool Percent(unsigned percent) { return Below(100) < percent; }
    ftl::TaskPriority Priority() { return Percent(50) ? ftl::TaskPriority::High : ftl::TaskPriority::Normal; }
    // A seed for a sub-generator, so each workload's plan does not shift when
    // another workload's plan changes.
    std::uint64_t Fork(std::uint64_t salt) { return SplitMix(m_engine() ^ salt); }

    template <class T>
    void Shuffle(std::vector<T> &items) {
        for (std::size_t i = items.size(); i > 1; --i) {
            std::size_t const j = static_cast<std::size_t>(m_engine() % i);
            std::swap(items[i - 1], items[j]);
        }
    }

private:
    std::mt19937_64 m_engine;
};

constexpr ftl::EmptyQueueBehavior kBehaviors[] = {
    ftl::EmptyQueueBehavior::Sleep, ftl::EmptyQueueBehavior::Yield, ftl::EmptyQueueBehavior::Spin};

// Sleep half the time: Spin and Yield workers keep a core busy, and with 8
// threads on 2 cores a long Spin stretch slows the round down a lot.
unsigned RandomBehaviorIndex(Rng &rng) {
    unsigned const roll = rng.Below(10);
    return roll < 5 ? 0u : roll < 8 ? 1u : 2u;
}

// A small computation whose result depends on every step, so the work cannot
// be skipped and a DAG node's value checks that it ran.
std::uint64_t LeafValue(std::uint64_t weight, unsigned work) {
    std::uint64_t x = weight;
    for (unsigned i = 0; i < work; ++i) {
        x = SplitMix(x + i);
    }
    return x;
}

double MicrosBetween(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::micro>(to - from).count();
}

// ---------------------------------------------------------------------------
// The round context: the scheduler, the task counts and the failures.

class Round {
public:
    Round(RoundMonitor &monitor, unsigned threads, double scale)
        : Threads(threads), Monitor(monitor), m_scale(scale) {}

    ftl::TaskScheduler *Ts = nullptr;
    unsigned const Threads;
    RoundMonitor &Monitor;
    // The fiber pool's size, as Init made it and as it grew (by callback).
    std::atomic<unsigned> Fibers{0};

    // A workload size scaled for this build, at least 1.
    unsigned Scaled(unsigned n) const {
        double const scaled = static_cast<double>(n) * m_scale;
        return scaled < 1.0 ? 1u : static_cast<unsigned>(scaled);
    }

    void Ran(TaskKind kind) {
        Monitor.Run[static_cast<unsigned>(kind)].fetch_add(1, std::memory_order_relaxed);
    }
    void Expect(TaskKind kind, std::uint64_t count) {
        Monitor.Expected[static_cast<unsigned>(kind)].fetch_add(count, std::memory_order_relaxed);
    }

    __attribute__((format(FTL_STRESS_PRINTF, 2, 3))) void Fail(char const *format, ...) {
        unsigned const index = m_failureCount.fetch_add(1, std::memory_order_relaxed);
        if (index >= kMaxMessages) {
            return;
        }
        char message[512];
        va_list args;
        va_start(args, format);
        std::vsnprintf(message, sizeof(message), format, args);
        va_end(args);
        // A std::mutex is fine in a task: it is never held across a wait.
        std::lock_guard<std::mutex> lock(m_mutex);
        m_failures.emplace_back(message);
    }

    std::vector<std::string> Failures() {
        std::lock_guard<std::mutex> lock(m_mutex);
        std::vector<std::string> failures = m_failures;
        unsigned const count = m_failureCount.load(std::memory_order_relaxed);
        if (count > kMaxMessages) {
            failures.push_back("... and " + std::to_string(count - kMaxMessages) + " more failures");
        }
        return failures;
    }

    // The calling worker's index, checked to be a worker of this scheduler.
    unsigned ThreadIndex(char const *where) {
        unsigned const index = Ts->GetCurrentThreadIndex();
        if (index >= Threads) {
            Fail("%s: GetCurrentThreadIndex() is %u on a scheduler of %u threads", where, index, Threads);
        }
        return index;
    }

    // After a wait that began on thread `before`: a pinned wait must resume
    // there.
    void AfterWait(unsigned before, bool pinned, char const *where) {
        unsigned const after = ThreadIndex(where);
        if (pinned && after != before) {
            Fail("%s: a pinned wait began on thread %u and resumed on thread %u", where, before, after);
        }
    }

    void WaitTasks(ftl::TaskCounter &counter, bool pinned, char const *where) {
        unsigned const before = ThreadIndex(where);
        Ts->WaitForCounter(&counter, pinned);
        AfterWait(before, pinned, where);
    }

    void WaitFlag(ftl::AtomicFlag &flag, bool pinned, char const *where) {
        unsigned const before = ThreadIndex(where);
        Ts->WaitForCounter(&flag, pinned);
        AfterWait(before, pinned, where);
        if (flag.IsSet()) {
            Fail("%s: a wait on an AtomicFlag returned while the flag is set", where);
        }
    }

    void WaitValue(ftl::FullAtomicCounter &counter, unsigned value, bool pinned, char const *where) {
        unsigned const before = ThreadIndex(where);
        Ts->WaitForCounter(&counter, value, pinned);
        AfterWait(before, pinned, where);
    }

private:
    static constexpr unsigned kMaxMessages = 40;

    double const m_scale;
    std::atomic<unsigned> m_failureCount{0};
    std::mutex m_mutex;
    std::vector<std::string> m_failures;
};

// Makes the calling fiber park once: a helper task clears the flag it waits
// on. The helper runs only after this fiber left its thread when there is one
// thread; with more it may clear the flag first, and the wait returns at once.
struct ParkRequest {
    Round *R;
    ftl::AtomicFlag Flag;
};

void HelperTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    auto *request = static_cast<ParkRequest *>(arg);
    // Count before clearing: once the flag is clear the request (on the
    // waiter's stack) may be gone.
    request->R->Ran(TaskKind::Helper);
    request->Flag.Clear();
}

void ParkOnce(Round &round, bool pinned, ftl::TaskPriority priority, char const *where) {
    ParkRequest request{&round, ftl::AtomicFlag(round.Ts, 1)};
    round.Ts->AddTask(ftl::Task{HelperTask, &request}, priority);
    round.WaitFlag(request.Flag, pinned, where);
}

// Adds `tasks` with one AddTasks call or one AddTask each.
void AddAll(ftl::TaskScheduler *ts, std::vector<ftl::Task> const &tasks, ftl::TaskPriority priority,
            ftl::TaskCounter *counter, bool batch) {
    if (tasks.empty()) {
        return;
    }
    if (batch) {
        ts->AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), priority, counter);
        return;
    }
    for (ftl::Task const &task : tasks) {
        ts->AddTask(task, priority, counter);
    }
}

// ---------------------------------------------------------------------------
// Task DAGs
//
// Each node's task adds the children it owns (in one or two groups, of
// either priority, batched or not, one of them possibly tracked by hand),
// does its own work, waits for its children through a TaskCounter and for the
// children it shares with another parent through their Done flags, then
// combines the results: value = LeafValue(weight, work) + sum of (k+1) *
// input[k]. Children always have larger indices than their parents, so the
// sequential check evaluates the nodes in reverse order.

struct Dag;

struct DagNode {
    Dag *Owner = nullptr;
    unsigned Index = 0;
    unsigned Depth = 0;
    std::uint64_t Weight = 0;
    unsigned Work = 0;
    std::vector<unsigned> Spawned; // children this node adds
    std::vector<unsigned> Awaited; // children another node adds; waited for through their Done flag
    std::vector<unsigned> Inputs;  // Spawned and Awaited, in the order their results are combined
    std::size_t FirstGroup = 0;    // Spawned[0, FirstGroup) are added before the node's own work
    ftl::TaskPriority FirstPriority = ftl::TaskPriority::Normal;
    ftl::TaskPriority SecondPriority = ftl::TaskPriority::Normal;
    bool Batch = false;
    bool PinnedWait = false;
    bool ManualLast = false; // the last spawned child is counted with TaskCounter::Add / Decrement
    bool ParkFirst = false;
    int SwitchTo = -1; // index into kBehaviors
    int ClearsMilestone = -1;
    std::unique_ptr<ftl::AtomicFlag> Done; // for nodes that some other node awaits
    // Set by the parent before it adds this node when the parent tracks it by
    // hand; published to the task by AddTask.
    ftl::TaskCounter *ManualCounter = nullptr;

    std::uint64_t Expected = 0;
    std::uint64_t Result = 0; // written by the node's task, read by its parents after their waits
    std::atomic<unsigned> Runs{0};
};

struct Dag {
    Round *R = nullptr;
    unsigned Id = 0;
    char const *Shape = "";
    std::vector<std::unique_ptr<DagNode>> Nodes;
    std::vector<std::unique_ptr<ftl::AtomicFlag>> *Milestones = nullptr;
    unsigned MaxDepth = 0;
};

void DagNodeTask(ftl::TaskScheduler *ts, void *arg);

void AddDagChildren(ftl::TaskScheduler *ts, DagNode &node, std::size_t begin, std::size_t end,
                    ftl::TaskPriority priority, ftl::TaskCounter &counter) {
    Dag &dag = *node.Owner;
    std::vector<ftl::Task> tasks;
    DagNode *manual = nullptr;
    for (std::size_t i = begin; i < end; ++i) {
        DagNode *child = dag.Nodes[node.Spawned[i]].get();
        if (node.ManualLast && i + 1 == node.Spawned.size()) {
            manual = child;
            continue;
        }
        tasks.push_back(ftl::Task{DagNodeTask, child});
    }
    AddAll(ts, tasks, priority, &counter, node.Batch);
    if (manual != nullptr) {
        // Raised before the child exists, so the wait cannot see 0 early.
        counter.Add(1);
        manual->ManualCounter = &counter;
        ts->AddTask(ftl::Task{DagNodeTask, manual}, priority);
    }
}

void DagNodeTask(ftl::TaskScheduler *ts, void *arg) {
    DagNode &node = *static_cast<DagNode *>(arg);
    Dag &dag = *node.Owner;
    Round &round = *dag.R;
    round.Ran(TaskKind::DagNode);
    round.ThreadIndex("dag node");
    if (node.Runs.fetch_add(1, std::memory_order_relaxed) != 0) {
        round.Fail("dag %u node %u ran more than once", dag.Id, node.Index);
    }
    ftl::TaskCounter *const manual = node.ManualCounter;

    if (node.ParkFirst) {
        ParkOnce(round, node.PinnedWait, node.FirstPriority, "dag node parking");
    }
    ftl::TaskCounter children(ts);
    AddDagChildren(ts, node, 0, node.FirstGroup, node.FirstPriority, children);
    if (node.SwitchTo >= 0) {
        ts->SetEmptyQueueBehavior(kBehaviors[node.SwitchTo]);
    }
    std::uint64_t value = LeafValue(node.Weight, node.Work);
    AddDagChildren(ts, node, node.FirstGroup, node.Spawned.size(), node.SecondPriority, children);
    if (node.ClearsMilestone >= 0) {
        if (!(*dag.Milestones)[static_cast<std::size_t>(node.ClearsMilestone)]->Clear()) {
            round.Fail("milestone %d was already clear", node.ClearsMilestone);
        }
    }

    if (!node.Spawned.empty()) {
        round.WaitTasks(children, node.PinnedWait, "dag node waiting for its children");
    }
    for (unsigned const index : node.Awaited) {
        round.WaitFlag(*dag.Nodes[index]->Done, node.PinnedWait, "dag node waiting for a shared child");
    }
    for (std::size_t k = 0; k < node.Inputs.size(); ++k) {
        DagNode const &input = *dag.Nodes[node.Inputs[k]];
        unsigned const runs = input.Runs.load(std::memory_order_relaxed);
        if (runs != 1) {
            round.Fail("dag %u node %u: input %u has run %u times after the wait", dag.Id, node.Index,
                       input.Index, runs);
        }
        // A plain read: the wait made the input's write visible.
        value += (k + 1) * input.Result;
    }
    node.Result = value;
    if (node.Done != nullptr && !node.Done->Clear()) {
        round.Fail("dag %u node %u: its Done flag was already clear", dag.Id, node.Index);
    }
    if (manual != nullptr) {
        // Last: once it reaches 0 the parent may return and destroy the counter.
        manual->Decrement();
    }
}

// How a DAG grows: its depth and fan-out limits, how often a node is a leaf,
// and which frontier node grows next (the oldest: breadth first, bushy; the
// newest: depth first, long branches; any: a mix).
enum class GrowthOrder { Oldest, Newest, Random };

struct DagShape {
    char const *Name;
    unsigned MaxDepth;
    unsigned MinFan; // of a node that is not a leaf
    unsigned MaxFan;
    unsigned LeafPercent;
    GrowthOrder Order;
};

DagShape RandomDagShape(Rng &rng) {
    switch (rng.Below(4)) {
    case 0:
        return DagShape{"bushy", rng.Range(4, 6), 4, rng.Range(6, 12), 10, GrowthOrder::Oldest};
    case 1:
        return DagShape{"deep", rng.Range(12, 40), 2, 3, 35, GrowthOrder::Newest};
    case 2:
        // One long chain of waits: every node but the last holds a fiber.
        return DagShape{"chain", rng.Range(50, 400), 1, 1, 0, GrowthOrder::Newest};
    default:
        return DagShape{"mixed", rng.Range(8, 16), 1, rng.Range(3, 6), 15, GrowthOrder::Random};
    }
}

// `parentsLeft`: how many nodes with children (each may hold a parked fiber)
// the DAG may have.
std::unique_ptr<Dag> PlanDag(Round &round, Rng &rng, unsigned id, unsigned budget, unsigned &parentsLeft,
                             std::vector<std::unique_ptr<ftl::AtomicFlag>> *milestones) {
    auto dag = std::make_unique<Dag>();
    dag->R = &round;
    dag->Id = id;
    dag->Milestones = milestones;
    DagShape const shape = RandomDagShape(rng);
    dag->Shape = shape.Name;
    unsigned const maxWork = rng.Range(0, 600);
    unsigned const sharedPercent = rng.Range(0, 15);

    auto newNode = [&](unsigned depth) {
        auto node = std::make_unique<DagNode>();
        node->Owner = dag.get();
        node->Index = static_cast<unsigned>(dag->Nodes.size());
        node->Depth = depth;
        dag->MaxDepth = std::max(dag->MaxDepth, depth);
        dag->Nodes.push_back(std::move(node));
        return dag->Nodes.back()->Index;
    };

    // Grow a tree from the frontier, in the shape's order, until the budget
    // is spent or every branch ended. Children get larger indices than parents.
    std::deque<unsigned> frontier{newNode(0)};
    while (!frontier.empty()) {
        std::size_t pick = 0;
        switch (shape.Order) {
        case GrowthOrder::Oldest:
            pick = 0; // the frontier is in creation order
            break;
        case GrowthOrder::Newest:
            pick = frontier.size() - 1;
            break;
        case GrowthOrder::Random:
            pick = rng.Below(static_cast<unsigned>(frontier.size()));
            break;
        }
        unsigned const parent = frontier[pick];
        if (pick == 0) {
            frontier.pop_front();
        } else {
            frontier[pick] = frontier.back();
            frontier.pop_back();
        }
        unsigned const depth = dag->Nodes[parent]->Depth;
        unsigned const room = budget - static_cast<unsigned>(dag->Nodes.size());
        if (depth >= shape.MaxDepth || room == 0 || parentsLeft == 0) {
            continue;
        }
        // Keep growing while the tree is small, so a DAG does not die out early.
        bool const mustGrow = parent == 0 || (frontier.empty() && dag->Nodes.size() < budget / 2);
        unsigned fan =
            (!mustGrow && rng.Percent(shape.LeafPercent)) ? 0 : rng.Range(shape.MinFan, shape.MaxFan);
        fan = std::min(fan, room);
        parentsLeft -= fan != 0 ? 1 : 0;
        for (unsigned i = 0; i < fan; ++i) {
            unsigned const child = newNode(depth + 1);
            dag->Nodes[parent]->Spawned.push_back(child);
            frontier.push_back(child);
        }
    }

    std::size_t const count = dag->Nodes.size();
    // Shared children: a node also waits for a later node it did not add.
    // Waits always go from a lower index to a higher one, so they cannot form
    // a cycle.
    for (std::size_t i = 0; i + 2 < count; ++i) {
        if (!rng.Percent(sharedPercent)) {
            continue;
        }
        DagNode &node = *dag->Nodes[i];
        unsigned const extra = rng.Range(1, 2);
        for (unsigned e = 0; e < extra; ++e) {
            unsigned const target = rng.Range(static_cast<unsigned>(i) + 1, static_cast<unsigned>(count) - 1);
            if (std::find(node.Spawned.begin(), node.Spawned.end(), target) != node.Spawned.end() ||
                std::find(node.Awaited.begin(), node.Awaited.end(), target) != node.Awaited.end()) {
                continue;
            }
            node.Awaited.push_back(target);
            if (dag->Nodes[target]->Done == nullptr) {
                dag->Nodes[target]->Done = std::make_unique<ftl::AtomicFlag>(round.Ts, 1);
            }
        }
    }

    for (auto &nodePtr : dag->Nodes) {
        DagNode &node = *nodePtr;
        node.Weight = rng.Next();
        node.Work = rng.Percent(30) ? 0 : rng.Range(0, maxWork);
        node.Inputs = node.Spawned;
        node.Inputs.insert(node.Inputs.end(), node.Awaited.begin(), node.Awaited.end());
        rng.Shuffle(node.Inputs);
        node.FirstGroup = node.Spawned.empty() ? 0 : rng.Range(0, static_cast<unsigned>(node.Spawned.size()));
        node.FirstPriority = rng.Priority();
        node.SecondPriority = rng.Priority();
        node.Batch = rng.Percent(50);
        node.PinnedWait = rng.Percent(30);
        node.ManualLast = !node.Spawned.empty() && rng.Percent(10);
        node.ParkFirst = rng.Percent(2);
    }
    // The sequential computation of the same DAG.
    for (std::size_t i = count; i-- > 0;) {
        DagNode &node = *dag->Nodes[i];
        std::uint64_t value = LeafValue(node.Weight, node.Work);
        for (std::size_t k = 0; k < node.Inputs.size(); ++k) {
            value += (k + 1) * dag->Nodes[node.Inputs[k]]->Expected;
        }
        node.Expected = value;
    }
    round.Expect(TaskKind::DagNode, count);
    for (auto const &node : dag->Nodes) {
        round.Expect(TaskKind::Helper, node->ParkFirst ? 1 : 0);
    }
    return dag;
}

void VerifyDag(Round &round, Dag const &dag) {
    unsigned reported = 0;
    for (auto const &nodePtr : dag.Nodes) {
        DagNode const &node = *nodePtr;
        unsigned const runs = node.Runs.load(std::memory_order_relaxed);
        if (runs != 1 || node.Result != node.Expected) {
            if (++reported <= 5) {
                round.Fail("dag %u (%s) node %u (depth %u, %zu inputs): ran %u times, result %016" PRIx64
                           ", sequential %016" PRIx64,
                           dag.Id, dag.Shape, node.Index, node.Depth, node.Inputs.size(), runs, node.Result,
                           node.Expected);
            }
        }
        if (node.Done != nullptr && node.Done->IsSet()) {
            round.Fail("dag %u node %u: Done flag still set", dag.Id, node.Index);
        }
    }
}

// ---------------------------------------------------------------------------
// Counter walks
//
// A FullAtomicCounter steps through Path[0], Path[1], ... (distinct values,
// some of them across the 2^32 wrap) by a chain of step tasks, each adding the
// next. Step s moves Path[s-1] -> Path[s] with FetchAdd, FetchSub, Store or
// CompareExchange, sometimes after a CompareExchange that must fail. Waiters
// wait for chosen path values; before step s the stepper waits (on a second
// counter, Acks) until every waiter whose value is Path[s-1] or earlier has
// resumed and acknowledged. So a waiter can never miss its value, and it must
// see exactly its value when it resumes.

enum class StepOp : unsigned char { FetchAdd, FetchSub, Store, CompareExchange };

struct Walk;

struct WalkWaiter {
    Walk *Owner = nullptr;
    unsigned Index = 0;
    unsigned Target = 0; // an index into Path
    bool Pinned = false;
    std::atomic<unsigned> Runs{0};
};

struct WalkStep {
    Walk *Owner = nullptr;
    unsigned First = 0; // this task does steps [First, Last)
    unsigned Last = 0;
    WalkStep *Next = nullptr;
    ftl::TaskPriority NextPriority = ftl::TaskPriority::Normal;
};

struct WaiterChunk {
    std::size_t Begin;
    std::size_t End;
    ftl::TaskPriority Priority;
    bool Batch;
};

struct Walk {
    Round *R = nullptr;
    unsigned Id = 0;
    std::vector<unsigned> Path;
    std::vector<StepOp> Ops;            // Ops[s] for step s >= 1
    std::vector<unsigned char> BadCas;  // step s first tries a CompareExchange that must fail
    std::vector<unsigned char> PinAcks; // step s waits for the acknowledgements pinned
    std::vector<unsigned> AcksNeeded;   // waiters whose target index is <= s
    std::vector<std::unique_ptr<WalkWaiter>> Waiters;
    std::vector<std::unique_ptr<WalkStep>> Steps;
    std::vector<WaiterChunk> Chunks;
    std::size_t EarlyChunks = 0; // chunks added before the chain starts
    bool ParkBetween = false;
    bool PinnedRootWaits = false;
    ftl::TaskPriority FirstStepPriority = ftl::TaskPriority::Normal;
    std::unique_ptr<ftl::FullAtomicCounter> Value;
    std::unique_ptr<ftl::FullAtomicCounter> Acks;
    ftl::TaskCounter *Chain = nullptr; // the root's counter for the step chain, while the root runs
};

void WalkStepTask(ftl::TaskScheduler *ts, void *arg) {
    WalkStep &step = *static_cast<WalkStep *>(arg);
    Walk &walk = *step.Owner;
    Round &round = *walk.R;
    round.Ran(TaskKind::WalkStep);
    for (unsigned s = step.First; s < step.Last; ++s) {
        unsigned const from = walk.Path[s - 1];
        unsigned const to = walk.Path[s];
        // Hold `from` until its waiters resumed. No acknowledgement for a
        // later value can come first (those waiters are not released yet), so
        // this wait cannot miss its value either.
        round.WaitValue(*walk.Acks, walk.AcksNeeded[s - 1], walk.PinAcks[s] != 0,
                        "walk step waiting for acks");
        unsigned const acks = walk.Acks->Load();
        if (acks != walk.AcksNeeded[s - 1]) {
            round.Fail("walk %u step %u: waited for %u acknowledgements, counter holds %u", walk.Id, s,
                       walk.AcksNeeded[s - 1], acks);
        }
        if (walk.BadCas[s] != 0) {
            unsigned const wrong = from ^ (1u << (s % 32));
            if (walk.Value->CompareExchange(wrong, to)) {
                round.Fail("walk %u step %u: CompareExchange(%u, %u) succeeded on value %u", walk.Id, s,
                           wrong, to, from);
            }
        }
        unsigned before = 0;
        bool ok = true;
        switch (walk.Ops[s]) {
        case StepOp::FetchAdd:
            before = walk.Value->FetchAdd(to - from);
            break;
        case StepOp::FetchSub:
            before = walk.Value->FetchSub(from - to);
            break;
        case StepOp::Store:
            before = walk.Value->Load();
            walk.Value->Store(to);
            break;
        case StepOp::CompareExchange:
            before = from;
            ok = walk.Value->CompareExchange(from, to);
            break;
        }
        if (before != from || !ok) {
            round.Fail("walk %u step %u (%u -> %u, op %u): found value %u%s", walk.Id, s, from, to,
                       static_cast<unsigned>(walk.Ops[s]), before, ok ? "" : " (CompareExchange failed)");
        }
    }
    if (step.Next != nullptr) {
        // Added with the chain's counter before this task finishes, so the
        // counter cannot reach 0 between two steps.
        ts->AddTask(ftl::Task{WalkStepTask, step.Next}, step.NextPriority, walk.Chain);
    }
}

void WalkWaiterTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    WalkWaiter &waiter = *static_cast<WalkWaiter *>(arg);
    Walk &walk = *waiter.Owner;
    Round &round = *walk.R;
    round.Ran(TaskKind::WalkWaiter);
    if (waiter.Runs.fetch_add(1, std::memory_order_relaxed) != 0) {
        round.Fail("walk %u waiter %u ran more than once", walk.Id, waiter.Index);
    }
    unsigned const target = walk.Path[waiter.Target];
    round.WaitValue(*walk.Value, target, waiter.Pinned, "walk waiter");
    unsigned const seen = walk.Value->Load();
    if (seen != target) {
        round.Fail("walk %u waiter %u: waited for %u (path index %u), resumed at %u", walk.Id, waiter.Index,
                   target, waiter.Target, seen);
    }
    walk.Acks->FetchAdd(1);
}

void WalkRootTask(ftl::TaskScheduler *ts, void *arg) {
    Walk &walk = *static_cast<Walk *>(arg);
    Round &round = *walk.R;
    round.Ran(TaskKind::Root);
    ftl::TaskCounter waiters(ts);
    ftl::TaskCounter chain(ts);
    walk.Chain = &chain;
    auto addChunk = [&](WaiterChunk const &chunk) {
        std::vector<ftl::Task> tasks;
        for (std::size_t i = chunk.Begin; i < chunk.End; ++i) {
            tasks.push_back(ftl::Task{WalkWaiterTask, walk.Waiters[i].get()});
        }
        AddAll(ts, tasks, chunk.Priority, &waiters, chunk.Batch);
    };
    for (std::size_t c = 0; c < walk.EarlyChunks; ++c) {
        addChunk(walk.Chunks[c]);
    }
    if (!walk.Steps.empty()) {
        ts->AddTask(ftl::Task{WalkStepTask, walk.Steps.front().get()}, walk.FirstStepPriority, &chain);
    }
    if (walk.ParkBetween) {
        ParkOnce(round, walk.PinnedRootWaits, walk.FirstStepPriority, "walk root parking");
    }
    for (std::size_t c = walk.EarlyChunks; c < walk.Chunks.size(); ++c) {
        addChunk(walk.Chunks[c]);
    }
    round.WaitTasks(waiters, walk.PinnedRootWaits, "walk root waiting for its waiters");
    round.WaitTasks(chain, walk.PinnedRootWaits, "walk root waiting for its steps");
    walk.Chain = nullptr;
}

std::unique_ptr<Walk> PlanWalk(Round &round, Rng &rng, unsigned id) {
    auto walk = std::make_unique<Walk>();
    walk->R = &round;
    walk->Id = id;
    unsigned const steps = rng.Range(round.Scaled(100), round.Scaled(750));

    // The path: mostly +1 and -1 steps, some jumps anywhere, and starts near
    // the wrap-around now and then.
    std::set<unsigned> used;
    unsigned value = rng.Percent(30) ? 0u - rng.Range(1, 40) : rng.Next32();
    walk->Path.push_back(value);
    used.insert(value);
    while (walk->Path.size() <= steps) {
        unsigned next = value;
        unsigned const roll = rng.Below(100);
        if (roll < 50) {
            next = value + 1;
        } else if (roll < 65) {
            next = value - 1;
        } else if (roll < 80) {
            next = value + rng.Range(2, 1000);
        } else {
            next = rng.Next32();
        }
        while (used.count(next) != 0) {
            next = rng.Next32();
        }
        used.insert(next);
        walk->Path.push_back(next);
        value = next;
    }
    walk->Ops.resize(walk->Path.size());
    walk->BadCas.resize(walk->Path.size());
    walk->PinAcks.resize(walk->Path.size());
    for (std::size_t s = 1; s < walk->Path.size(); ++s) {
        walk->Ops[s] = static_cast<StepOp>(rng.Below(4));
        walk->BadCas[s] = rng.Percent(15) ? 1 : 0;
        walk->PinAcks[s] = rng.Percent(25) ? 1 : 0;
    }

    // Waiters: more than the threads, some pinned, mostly on distinct values,
    // some on the same value, one on the first value and one on the last.
    unsigned const waiterCount = rng.Range(round.Threads + 2, std::max(round.Threads + 2, 48u));
    std::vector<unsigned> targets;
    targets.push_back(0);
    targets.push_back(steps);
    while (targets.size() < waiterCount) {
        if (rng.Percent(15)) {
            targets.push_back(targets[rng.Below(static_cast<unsigned>(targets.size()))]);
        } else {
            targets.push_back(rng.Range(0, steps));
        }
    }
    rng.Shuffle(targets);
    for (unsigned i = 0; i < targets.size(); ++i) {
        auto waiter = std::make_unique<WalkWaiter>();
        waiter->Owner = walk.get();
        waiter->Index = i;
        waiter->Target = targets[i];
        waiter->Pinned = rng.Percent(30);
        walk->Waiters.push_back(std::move(waiter));
    }
    walk->AcksNeeded.assign(walk->Path.size(), 0);
    for (unsigned const target : targets) {
        for (std::size_t s = target; s < walk->Path.size(); ++s) {
            ++walk->AcksNeeded[s];
        }
    }
    for (std::size_t begin = 0; begin < targets.size();) {
        std::size_t const end = std::min(targets.size(), begin + rng.Range(1, 8));
        walk->Chunks.push_back(WaiterChunk{begin, end, rng.Priority(), rng.Percent(50)});
        begin = end;
    }
    walk->EarlyChunks = rng.Range(0, static_cast<unsigned>(walk->Chunks.size()));

    // The step chain: each task does 1 to 4 steps.
    for (unsigned first = 1; first <= steps;) {
        unsigned const last = std::min(steps + 1, first + rng.Range(1, 4));
        auto step = std::make_unique<WalkStep>();
        step->Owner = walk.get();
        step->First = first;
        step->Last = last;
        step->NextPriority = rng.Priority();
        if (!walk->Steps.empty()) {
            walk->Steps.back()->Next = step.get();
        }
        walk->Steps.push_back(std::move(step));
        first = last;
    }
    walk->ParkBetween = rng.Percent(50);
    walk->PinnedRootWaits = rng.Percent(30);
    walk->FirstStepPriority = rng.Priority();
    walk->Value = std::make_unique<ftl::FullAtomicCounter>(round.Ts, walk->Path[0]);
    walk->Acks = std::make_unique<ftl::FullAtomicCounter>(round.Ts, 0);

    round.Expect(TaskKind::Root, 1);
    round.Expect(TaskKind::WalkStep, walk->Steps.size());
    round.Expect(TaskKind::WalkWaiter, walk->Waiters.size());
    round.Expect(TaskKind::Helper, walk->ParkBetween ? 1 : 0);
    return walk;
}

void VerifyWalk(Round &round, Walk const &walk) {
    unsigned const value = walk.Value->Load();
    unsigned const acks = walk.Acks->Load();
    if (value != walk.Path.back() || acks != walk.Waiters.size()) {
        round.Fail("walk %u: ended at value %u (expected %u) with %u acknowledgements (expected %zu)",
                   walk.Id, value, walk.Path.back(), acks, walk.Waiters.size());
    }
    for (auto const &waiter : walk.Waiters) {
        if (waiter->Runs.load(std::memory_order_relaxed) != 1) {
            round.Fail("walk %u waiter %u ran %u times", walk.Id, waiter->Index,
                       waiter->Runs.load(std::memory_order_relaxed));
        }
    }
}

// ---------------------------------------------------------------------------
// Tallies: adders race on one FullAtomicCounter (FetchAdd, or a
// CompareExchange loop) while fibers wait for its final value. Every value up
// to the final one is produced exactly once, and the final one stays.

struct Tally;

struct TallyAdder {
    Tally *Owner = nullptr;
    bool UseCompareExchange = false;
};

struct TallyWaiter {
    Tally *Owner = nullptr;
    bool Pinned = false;
};

struct Tally {
    Round *R = nullptr;
    unsigned Id = 0;
    unsigned Initial = 0;
    unsigned PerAdder = 0;
    unsigned Total = 0; // adders * PerAdder
    std::vector<std::unique_ptr<TallyAdder>> Adders;
    std::vector<std::unique_ptr<TallyWaiter>> Waiters;
    std::vector<ftl::Task> Order; // adders and waiters, in the order the root adds them
    std::vector<ftl::TaskPriority> Priorities;
    bool PinnedRootWait = false;
    std::unique_ptr<ftl::FullAtomicCounter> Value;
};

void TallyAdderTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    TallyAdder &adder = *static_cast<TallyAdder *>(arg);
    Tally &tally = *adder.Owner;
    Round &round = *tally.R;
    round.Ran(TaskKind::TallyAdder);
    for (unsigned i = 0; i < tally.PerAdder; ++i) {
        unsigned before;
        if (adder.UseCompareExchange) {
            do {
                before = tally.Value->Load();
            } while (!tally.Value->CompareExchange(before, before + 1));
        } else {
            before = tally.Value->FetchAdd(1);
        }
        if (before - tally.Initial >= tally.Total) {
            round.Fail("tally %u: an increment found %u, outside [%u, %u + %u)", tally.Id, before,
                       tally.Initial, tally.Initial, tally.Total);
            return;
        }
    }
}

void TallyWaiterTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    TallyWaiter &waiter = *static_cast<TallyWaiter *>(arg);
    Tally &tally = *waiter.Owner;
    Round &round = *tally.R;
    round.Ran(TaskKind::TallyWaiter);
    unsigned const final = tally.Initial + tally.Total;
    round.WaitValue(*tally.Value, final, waiter.Pinned, "tally waiter");
    unsigned const seen = tally.Value->Load();
    if (seen != final) {
        round.Fail("tally %u: a waiter for the final value %u resumed at %u", tally.Id, final, seen);
    }
}

void TallyRootTask(ftl::TaskScheduler *ts, void *arg) {
    Tally &tally = *static_cast<Tally *>(arg);
    Round &round = *tally.R;
    round.Ran(TaskKind::Root);
    ftl::TaskCounter counter(ts);
    for (std::size_t i = 0; i < tally.Order.size(); ++i) {
        ts->AddTask(tally.Order[i], tally.Priorities[i], &counter);
    }
    round.WaitTasks(counter, tally.PinnedRootWait, "tally root");
}

std::unique_ptr<Tally> PlanTally(Round &round, Rng &rng, unsigned id) {
    auto tally = std::make_unique<Tally>();
    tally->R = &round;
    tally->Id = id;
    tally->Initial = rng.Percent(30) ? 0u - rng.Range(1, 1000) : rng.Next32();
    unsigned const adders = rng.Range(2, 2 * round.Threads + 3);
    tally->PerAdder = rng.Range(round.Scaled(1000), round.Scaled(10000));
    tally->Total = adders * tally->PerAdder;
    for (unsigned i = 0; i < adders; ++i) {
        auto adder = std::make_unique<TallyAdder>();
        adder->Owner = tally.get();
        adder->UseCompareExchange = rng.Percent(40);
        tally->Order.push_back(ftl::Task{TallyAdderTask, adder.get()});
        tally->Adders.push_back(std::move(adder));
    }
    unsigned const waiters = rng.Range(1, round.Threads + 8);
    for (unsigned i = 0; i < waiters; ++i) {
        auto waiter = std::make_unique<TallyWaiter>();
        waiter->Owner = tally.get();
        waiter->Pinned = rng.Percent(30);
        tally->Order.push_back(ftl::Task{TallyWaiterTask, waiter.get()});
        tally->Waiters.push_back(std::move(waiter));
    }
    rng.Shuffle(tally->Order);
    for (std::size_t i = 0; i < tally->Order.size(); ++i) {
        tally->Priorities.push_back(rng.Priority());
    }
    tally->PinnedRootWait = rng.Percent(30);
    tally->Value = std::make_unique<ftl::FullAtomicCounter>(round.Ts, tally->Initial);
    round.Expect(TaskKind::Root, 1);
    round.Expect(TaskKind::TallyAdder, adders);
    round.Expect(TaskKind::TallyWaiter, waiters);
    return tally;
}

void VerifyTally(Round &round, Tally const &tally) {
    unsigned const value = tally.Value->Load();
    if (value != tally.Initial + tally.Total) {
        round.Fail("tally %u: final value %u, expected %u + %u = %u", tally.Id, value, tally.Initial,
                   tally.Total, tally.Initial + tally.Total);
    }
}

// ---------------------------------------------------------------------------
// Fibtex groups
//
// Two Fibtexes, A and B, each guarding plain (non-atomic) data: a sum, a
// shadow that must equal twice the sum between sections, an entry count and a
// log of who entered. Each worker task runs a planned list of sections, each
// with one way of locking. A section adds its amount to the sum on entry and
// to the shadow on exit, so an overlapping holder sees shadow != 2 * sum; the
// sums and the log are checked at the end. Each worker also keeps the entry
// numbers it saw, which must increase.
//
// A is never held across a wait, so lock_spin_infinite on A always ends. B is
// held across waits (the holder adds a child and waits for it, and may resume
// on another thread and unlock there); it is only taken by locks that park.

struct LockedData {
    explicit LockedData(ftl::TaskScheduler *ts) : Mutex(ts) {}

    ftl::Fibtex Mutex;
    std::uint64_t Sum = 0;
    std::uint64_t Shadow = 0;
    std::uint64_t Entries = 0;
    std::vector<unsigned> Log;
    std::uint64_t Scratch = 0; // the result of the work done inside sections
    // The holder's worker id + 1. Atomic (relaxed) only so that the compiler
    // keeps the overlap checks; the lock is what orders the data.
    std::atomic<unsigned> Holder{0};
};

enum class LockMode : unsigned char {
    GuardA,                  // std::lock_guard<Fibtex>
    UniqueA,                 // std::unique_lock<Fibtex>
    UniqueTryA,              // unique_lock(try_to_lock), then lock() if that failed
    UniqueDeferA,            // unique_lock(defer_lock), lock(), unlock()
    UniqueRelockA,           // two sections under one unique_lock: unlock() and lock() between
    WrapTraditionalA,        // LockWrapper, FibtexLockBehavior::Traditional
    WrapSpinA,               // LockWrapper, Spin
    WrapSpinInfiniteA,       // LockWrapper, SpinInfinite
    UniqueWrapSpinInfiniteA, // unique_lock<LockWrapper>, SpinInfinite
    GuardB,                  // the B modes may wait inside the section
    UniqueB,
    WrapTraditionalB,
    WrapSpinB,
    ScopedAB, // std::scoped_lock of A and B (std::lock's try-and-back-off)
    Count
};

bool UsesA(LockMode mode) {
    return mode < LockMode::GuardB || mode == LockMode::ScopedAB;
}
bool UsesB(LockMode mode) {
    return mode >= LockMode::GuardB;
}
unsigned EntriesOf(LockMode mode) {
    return mode == LockMode::UniqueRelockA ? 2 : 1;
}
bool MayWaitInside(LockMode mode) {
    return mode >= LockMode::GuardB && mode <= LockMode::WrapSpinB;
}

struct LockSection {
    LockMode Mode = LockMode::GuardA;
    unsigned Amount = 0;
    bool Pin = false;        // LockWrapper's pinToThread, and the pin of a wait inside
    bool WaitInside = false; // B sections: add a child and wait for it while holding B
    unsigned SpinIterations = 0;
};

struct LockGroup;

struct LockWorker {
    LockGroup *Owner = nullptr;
    unsigned Id = 0;
    std::vector<LockSection> Sections;
    std::vector<std::uint64_t> SeenA; // entry numbers this worker saw, in its own order
    std::vector<std::uint64_t> SeenB;
    std::atomic<unsigned> Runs{0};
};

struct LockGroup {
    explicit LockGroup(ftl::TaskScheduler *ts) : A(ts), B(ts) {}

    Round *R = nullptr;
    unsigned Id = 0;
    LockedData A;
    LockedData B;
    std::vector<std::unique_ptr<LockWorker>> Workers;
    std::vector<ftl::TaskPriority> Priorities;
    bool Batch = false;
    bool PinnedRootWait = false;
    std::uint64_t ExpectedSumA = 0, ExpectedSumB = 0, ExpectedEntriesA = 0, ExpectedEntriesB = 0;
};

struct LockChildArg {
    Round *R;
    LockedData *Data;
    unsigned Holder;
};

void LockChildTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    LockChildArg const &child = *static_cast<LockChildArg *>(arg);
    child.R->Ran(TaskKind::LockChild);
    // The parent holds the Fibtex and waits for this task.
    unsigned const holder = child.Data->Holder.load(std::memory_order_relaxed);
    if (holder != child.Holder + 1) {
        child.R->Fail("fibtex child: B's holder is %u while worker %u holds it and waits", holder,
                      child.Holder);
    }
    if (child.Data->Mutex.try_lock()) {
        child.R->Fail("fibtex child: try_lock took a Fibtex held by a waiting fiber");
        child.Data->Mutex.unlock();
    }
}

// A stretch of work inside a section, during which an overlapping holder
// would interleave. The signal fences keep the compiler from moving the plain
// accesses of the section across it.
void SectionWindow(LockedData &data, unsigned length) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    data.Scratch = LeafValue(data.Scratch, length);
    std::atomic_signal_fence(std::memory_order_seq_cst);
}

void EnterSection(Round &round, LockedData &data, char const *name, LockWorker &worker,
                  std::vector<std::uint64_t> &seen, unsigned amount) {
    unsigned const previous = data.Holder.exchange(worker.Id + 1, std::memory_order_relaxed);
    if (previous != 0) {
        round.Fail("fibtex %s: worker %u entered while worker %u was inside", name, worker.Id, previous - 1);
    }
    if (data.Shadow != 2 * data.Sum) {
        round.Fail("fibtex %s: worker %u entered and saw shadow %" PRIu64 " != 2 * sum %" PRIu64, name,
                   worker.Id, data.Shadow, data.Sum);
    }
    // Read, work, write: an overlapping holder's update would be lost.
    std::uint64_t const sum = data.Sum;
    std::uint64_t const entry = data.Entries;
    SectionWindow(data, 16 + amount % 128);
    data.Sum = sum + amount;
    data.Entries = entry + 1;
    seen.push_back(entry);
    data.Log.push_back(worker.Id);
}

void LeaveSection(Round &round, LockedData &data, char const *name, LockWorker &worker, unsigned amount) {
    SectionWindow(data, 16 + amount % 64);
    data.Shadow += 2u * std::uint64_t(amount);
    unsigned const holder = data.Holder.exchange(0, std::memory_order_relaxed);
    if (holder != worker.Id + 1) {
        round.Fail("fibtex %s: worker %u left and found holder %u", name, worker.Id, holder);
    }
}

void SectionA(Round &round, LockGroup &group, LockWorker &worker, LockSection const &section) {
    EnterSection(round, group.A, "A", worker, worker.SeenA, section.Amount);
    LeaveSection(round, group.A, "A", worker, section.Amount);
}

void SectionB(Round &round, LockGroup &group, LockWorker &worker, LockSection const &section) {
    EnterSection(round, group.B, "B", worker, worker.SeenB, section.Amount);
    if (section.WaitInside) {
        // Hold B across a wait: the fiber parks (when the child has not run
        // yet), other fibers that want B park behind it, and this one may
        // resume on another thread and unlock there.
        LockChildArg child{&round, &group.B, worker.Id};
        ftl::TaskCounter counter(round.Ts);
        round.Ts->AddTask(ftl::Task{LockChildTask, &child}, ftl::TaskPriority::High, &counter);
        round.WaitTasks(counter, section.Pin, "fibtex B section waiting for its child");
    }
    LeaveSection(round, group.B, "B", worker, section.Amount);
}

void RunSection(Round &round, LockGroup &group, LockWorker &worker, LockSection const &section) {
    unsigned const before = round.ThreadIndex("fibtex section");
    auto checkPinnedLock = [&](char const *how) {
        // A lock with pinToThread that parked must resume on this thread.
        if (section.Pin) {
            round.AfterWait(before, true, how);
        }
    };
    ftl::Fibtex &a = group.A.Mutex;
    ftl::Fibtex &b = group.B.Mutex;
    switch (section.Mode) {
    case LockMode::GuardA: {
        std::lock_guard<ftl::Fibtex> lock(a);
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::UniqueA: {
        std::unique_lock<ftl::Fibtex> lock(a);
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::UniqueTryA: {
        std::unique_lock<ftl::Fibtex> lock(a, std::try_to_lock);
        if (!lock.owns_lock()) {
            lock.lock();
        }
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::UniqueDeferA: {
        std::unique_lock<ftl::Fibtex> lock(a, std::defer_lock);
        lock.lock();
        SectionA(round, group, worker, section);
        lock.unlock();
        if (lock.owns_lock()) {
            round.Fail("fibtex A: unique_lock still owns the lock after unlock()");
        }
        break;
    }
    case LockMode::UniqueRelockA: {
        std::unique_lock<ftl::Fibtex> lock(a);
        SectionA(round, group, worker, section);
        lock.unlock();
        lock.lock();
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::WrapTraditionalA: {
        ftl::LockWrapper wrapper(a, ftl::FibtexLockBehavior::Traditional, section.Pin);
        std::lock_guard<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex A, pinned Traditional lock");
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::WrapSpinA: {
        ftl::LockWrapper wrapper(a, ftl::FibtexLockBehavior::Spin, section.Pin, section.SpinIterations);
        std::lock_guard<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex A, pinned Spin lock");
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::WrapSpinInfiniteA: {
        ftl::LockWrapper wrapper(a, ftl::FibtexLockBehavior::SpinInfinite, section.Pin);
        std::lock_guard<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex A, SpinInfinite lock");
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::UniqueWrapSpinInfiniteA: {
        ftl::LockWrapper wrapper(a, ftl::FibtexLockBehavior::SpinInfinite, section.Pin);
        std::unique_lock<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex A, SpinInfinite unique_lock");
        SectionA(round, group, worker, section);
        break;
    }
    case LockMode::GuardB: {
        std::lock_guard<ftl::Fibtex> lock(b);
        SectionB(round, group, worker, section);
        break;
    }
    case LockMode::UniqueB: {
        std::unique_lock<ftl::Fibtex> lock(b);
        SectionB(round, group, worker, section);
        lock.unlock();
        break;
    }
    case LockMode::WrapTraditionalB: {
        ftl::LockWrapper wrapper(b, ftl::FibtexLockBehavior::Traditional, section.Pin);
        std::lock_guard<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex B, pinned Traditional lock");
        SectionB(round, group, worker, section);
        break;
    }
    case LockMode::WrapSpinB: {
        ftl::LockWrapper wrapper(b, ftl::FibtexLockBehavior::Spin, section.Pin, section.SpinIterations);
        std::lock_guard<ftl::LockWrapper> lock(wrapper);
        checkPinnedLock("fibtex B, pinned Spin lock");
        SectionB(round, group, worker, section);
        break;
    }
    case LockMode::ScopedAB: {
        std::scoped_lock<ftl::Fibtex, ftl::Fibtex> lock(a, b);
        SectionA(round, group, worker, section);
        LockSection noWait = section;
        noWait.WaitInside = false; // A is held too
        SectionB(round, group, worker, noWait);
        break;
    }
    case LockMode::Count:
        break;
    }
}

void LockWorkerTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    LockWorker &worker = *static_cast<LockWorker *>(arg);
    LockGroup &group = *worker.Owner;
    Round &round = *group.R;
    round.Ran(TaskKind::LockWorker);
    if (worker.Runs.fetch_add(1, std::memory_order_relaxed) != 0) {
        round.Fail("fibtex group %u worker %u ran more than once", group.Id, worker.Id);
    }
    for (LockSection const &section : worker.Sections) {
        RunSection(round, group, worker, section);
    }
}

void LockRootTask(ftl::TaskScheduler *ts, void *arg) {
    LockGroup &group = *static_cast<LockGroup *>(arg);
    Round &round = *group.R;
    round.Ran(TaskKind::Root);
    ftl::TaskCounter counter(ts);
    for (std::size_t i = 0; i < group.Workers.size(); ++i) {
        ts->AddTask(ftl::Task{LockWorkerTask, group.Workers[i].get()}, group.Priorities[i], &counter);
    }
    round.WaitTasks(counter, group.PinnedRootWait, "fibtex root");
}

std::unique_ptr<LockGroup> PlanLockGroup(Round &round, Rng &rng, unsigned id) {
    auto group = std::make_unique<LockGroup>(round.Ts);
    group->R = &round;
    group->Id = id;
    unsigned const workers = rng.Range(2, 2 * round.Threads + 4);
    // How often each mode is drawn: mostly A (short sections), B sections
    // wait inside a tenth of the time.
    unsigned waits = 0;
    for (unsigned w = 0; w < workers; ++w) {
        auto worker = std::make_unique<LockWorker>();
        worker->Owner = group.get();
        worker->Id = w;
        unsigned const sections = rng.Range(round.Scaled(150), round.Scaled(750));
        for (unsigned s = 0; s < sections; ++s) {
            LockSection section;
            section.Mode = static_cast<LockMode>(rng.Below(static_cast<unsigned>(LockMode::Count)));
            section.Amount = rng.Range(1, 1000);
            section.Pin = rng.Percent(30);
            section.WaitInside = MayWaitInside(section.Mode) && rng.Percent(10);
            section.SpinIterations = rng.Percent(50) ? rng.Range(0, 16) : rng.Range(100, 5000);
            unsigned const entries = EntriesOf(section.Mode);
            if (UsesA(section.Mode)) {
                group->ExpectedSumA += std::uint64_t(section.Amount) * entries;
                group->ExpectedEntriesA += entries;
            }
            if (UsesB(section.Mode)) {
                group->ExpectedSumB += section.Amount;
                group->ExpectedEntriesB += 1;
            }
            waits += section.WaitInside ? 1 : 0;
            worker->Sections.push_back(section);
        }
        group->Priorities.push_back(rng.Priority());
        group->Workers.push_back(std::move(worker));
    }
    group->PinnedRootWait = rng.Percent(30);
    round.Expect(TaskKind::Root, 1);
    round.Expect(TaskKind::LockWorker, workers);
    round.Expect(TaskKind::LockChild, waits);
    return group;
}

void VerifyLockedData(Round &round, LockGroup &group, LockedData &data, char const *name, std::uint64_t sum,
                      std::uint64_t entries, bool useA) {
    if (data.Sum != sum || data.Shadow != 2 * sum || data.Entries != entries || data.Log.size() != entries) {
        round.Fail("fibtex group %u %s: sum %" PRIu64 " (expected %" PRIu64 "), shadow %" PRIu64
                   ", entries %" PRIu64 " (expected %" PRIu64 "), log %zu",
                   group.Id, name, data.Sum, sum, data.Shadow, data.Entries, entries, data.Log.size());
    }
    // The log must hold each worker's entries exactly as often as it entered,
    // and each worker's entry numbers must increase.
    std::vector<std::uint64_t> logged(group.Workers.size(), 0);
    for (unsigned const id : data.Log) {
        if (id < logged.size()) {
            ++logged[id];
        }
    }
    for (auto const &worker : group.Workers) {
        std::vector<std::uint64_t> const &seen = useA ? worker->SeenA : worker->SeenB;
        if (logged[worker->Id] != seen.size()) {
            round.Fail("fibtex group %u %s: worker %u entered %zu times, the log says %" PRIu64, group.Id,
                       name, worker->Id, seen.size(), logged[worker->Id]);
        }
        for (std::size_t i = 0; i < seen.size(); ++i) {
            if ((i > 0 && seen[i] <= seen[i - 1]) || seen[i] >= data.Log.size() ||
                data.Log[seen[i]] != worker->Id) {
                round.Fail("fibtex group %u %s: worker %u's entry %zu saw entry number %" PRIu64
                           ", which the log does not give to it",
                           group.Id, name, worker->Id, i, seen[i]);
                break;
            }
        }
    }
    if (data.Holder.load(std::memory_order_relaxed) != 0) {
        round.Fail("fibtex group %u %s: a holder is recorded after every worker finished", group.Id, name);
    }
    if (!data.Mutex.try_lock()) {
        round.Fail("fibtex group %u %s: locked after every worker finished", group.Id, name);
    } else {
        data.Mutex.unlock();
    }
}

void VerifyLockGroup(Round &round, LockGroup &group) {
    VerifyLockedData(round, group, group.A, "A", group.ExpectedSumA, group.ExpectedEntriesA, true);
    VerifyLockedData(round, group, group.B, "B", group.ExpectedSumB, group.ExpectedEntriesB, false);
}

// ---------------------------------------------------------------------------
// AtomicFlag gates. A controller task runs gates one after another: setters
// race to Set the clear flag (exactly one must win); the controller writes
// the gate's payload and adds waiters, then clearers that race to Clear it
// (exactly one must win). A lone clearer also publishes a value before it
// clears, which its waiters must see: the clear releases, the wait acquires.

struct FlagGroup;

struct FlagRole {
    FlagGroup *Group = nullptr;
    bool Pinned = false;
};

struct FlagGate {
    unsigned Setters = 1;
    unsigned PinnedWaiters = 0;
    unsigned FreeWaiters = 0;
    unsigned Clearers = 1;
    bool ParkBeforeClearers = false;
    bool PinnedControllerWaits = false;
    ftl::TaskPriority WaiterPriority = ftl::TaskPriority::Normal;
    ftl::TaskPriority ClearerPriority = ftl::TaskPriority::Normal;
    std::uint64_t Payload = 0;
};

constexpr std::uint64_t kPublishSalt = 0x5bd1e9955bd1e995ull;

struct FlagGroup {
    Round *R = nullptr;
    unsigned Id = 0;
    std::vector<FlagGate> Gates;
    std::unique_ptr<ftl::AtomicFlag> Flag;
    FlagRole Setter, PinnedWaiter, FreeWaiter, Clearer;
    // Per gate, written by the controller while no other task of the group runs.
    std::size_t Gate = 0;
    std::uint64_t Payload = 0;
    // Written by a lone clearer before its Clear.
    std::uint64_t Published = 0;
    std::atomic<unsigned> SetWins{0};
    std::atomic<unsigned> ClearWins{0};
};

void FlagSetterTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    FlagGroup &group = *static_cast<FlagRole *>(arg)->Group;
    group.R->Ran(TaskKind::FlagSetter);
    if (group.Flag->Set()) {
        group.SetWins.fetch_add(1, std::memory_order_relaxed);
    }
}

void FlagClearerTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    FlagGroup &group = *static_cast<FlagRole *>(arg)->Group;
    group.R->Ran(TaskKind::FlagClearer);
    FlagGate const &gate = group.Gates[group.Gate];
    if (gate.Clearers == 1) {
        group.Published = gate.Payload ^ kPublishSalt;
    }
    if (group.Flag->Clear()) {
        group.ClearWins.fetch_add(1, std::memory_order_relaxed);
    }
}

void FlagWaiterTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    FlagRole const &role = *static_cast<FlagRole *>(arg);
    FlagGroup &group = *role.Group;
    Round &round = *group.R;
    round.Ran(TaskKind::FlagWaiter);
    FlagGate const &gate = group.Gates[group.Gate];
    round.WaitFlag(*group.Flag, role.Pinned, "flag waiter");
    if (group.Payload != gate.Payload) {
        round.Fail("flag group %u gate %zu: a waiter saw payload %016" PRIx64 ", expected %016" PRIx64,
                   group.Id, group.Gate, group.Payload, gate.Payload);
    }
    if (gate.Clearers == 1 && group.Published != (gate.Payload ^ kPublishSalt)) {
        round.Fail("flag group %u gate %zu: a waiter released by the clear did not see the value written "
                   "before it",
                   group.Id, group.Gate);
    }
}

void FlagControllerTask(ftl::TaskScheduler *ts, void *arg) {
    FlagGroup &group = *static_cast<FlagGroup *>(arg);
    Round &round = *group.R;
    round.Ran(TaskKind::Root);
    for (std::size_t g = 0; g < group.Gates.size(); ++g) {
        FlagGate const &gate = group.Gates[g];
        group.Gate = g;
        group.SetWins.store(0, std::memory_order_relaxed);
        group.ClearWins.store(0, std::memory_order_relaxed);
        if (group.Flag->IsSet()) {
            round.Fail("flag group %u gate %zu: the flag is set before the setters ran", group.Id, g);
        }
        {
            ftl::TaskCounter setters(ts);
            std::vector<ftl::Task> tasks(gate.Setters, ftl::Task{FlagSetterTask, &group.Setter});
            AddAll(ts, tasks, gate.WaiterPriority, &setters, true);
            round.WaitTasks(setters, gate.PinnedControllerWaits, "flag controller waiting for setters");
        }
        if (group.SetWins.load(std::memory_order_relaxed) != 1 || !group.Flag->IsSet()) {
            round.Fail("flag group %u gate %zu: %u of %u racing Set calls returned true (expected 1)",
                       group.Id, g, group.SetWins.load(std::memory_order_relaxed), gate.Setters);
        }
        group.Payload = gate.Payload;

        ftl::TaskCounter waiters(ts);
        ftl::TaskCounter clearers(ts);
        std::vector<ftl::Task> tasks(gate.PinnedWaiters, ftl::Task{FlagWaiterTask, &group.PinnedWaiter});
        tasks.insert(tasks.end(), gate.FreeWaiters, ftl::Task{FlagWaiterTask, &group.FreeWaiter});
        AddAll(ts, tasks, gate.WaiterPriority, &waiters, (g % 2) == 0);
        if (gate.ParkBeforeClearers) {
            // Let the waiters start waiting before the clear.
            ParkOnce(round, gate.PinnedControllerWaits, ftl::TaskPriority::Normal, "flag controller parking");
        }
        std::vector<ftl::Task> clear(gate.Clearers, ftl::Task{FlagClearerTask, &group.Clearer});
        AddAll(ts, clear, gate.ClearerPriority, &clearers, (g % 3) == 0);
        round.WaitTasks(waiters, gate.PinnedControllerWaits, "flag controller waiting for waiters");
        round.WaitTasks(clearers, gate.PinnedControllerWaits, "flag controller waiting for clearers");
        if (group.ClearWins.load(std::memory_order_relaxed) != 1 || group.Flag->IsSet()) {
            round.Fail("flag group %u gate %zu: %u of %u racing Clear calls returned true (expected 1)",
                       group.Id, g, group.ClearWins.load(std::memory_order_relaxed), gate.Clearers);
        }
    }
}

std::unique_ptr<FlagGroup> PlanFlagGroup(Round &round, Rng &rng, unsigned id) {
    auto group = std::make_unique<FlagGroup>();
    group->R = &round;
    group->Id = id;
    group->Flag = std::make_unique<ftl::AtomicFlag>(round.Ts, 0);
    group->Setter = FlagRole{group.get(), false};
    group->PinnedWaiter = FlagRole{group.get(), true};
    group->FreeWaiter = FlagRole{group.get(), false};
    group->Clearer = FlagRole{group.get(), false};
    unsigned const gates = rng.Range(round.Scaled(50), round.Scaled(250));
    for (unsigned g = 0; g < gates; ++g) {
        FlagGate gate;
        gate.Setters = rng.Range(1, 4);
        unsigned const waiters = rng.Range(1, round.Threads + 6);
        gate.PinnedWaiters = rng.Range(0, waiters);
        gate.FreeWaiters = waiters - gate.PinnedWaiters;
        gate.Clearers = rng.Percent(40) ? 1 : rng.Range(2, 4);
        gate.ParkBeforeClearers = rng.Percent(50);
        gate.PinnedControllerWaits = rng.Percent(30);
        gate.WaiterPriority = rng.Priority();
        gate.ClearerPriority = rng.Priority();
        gate.Payload = rng.Next();
        round.Expect(TaskKind::FlagSetter, gate.Setters);
        round.Expect(TaskKind::FlagWaiter, waiters);
        round.Expect(TaskKind::FlagClearer, gate.Clearers);
        round.Expect(TaskKind::Helper, gate.ParkBeforeClearers ? 1 : 0);
        group->Gates.push_back(gate);
    }
    round.Expect(TaskKind::Root, 1);
    return group;
}

// ---------------------------------------------------------------------------
// The outsider: a thread that is not a worker. It adds tasks (through the
// global queue) with its own TaskCounter, some of which add children, and
// switches the EmptyQueueBehavior, first between its adds and then every few
// milliseconds until the main thread stops it.

struct Outsider;

struct OutsideItem {
    Outsider *Owner = nullptr;
    unsigned Children = 0;
    ftl::TaskPriority ChildPriority = ftl::TaskPriority::Normal;
};

struct Outsider {
    Round *R = nullptr;
    std::uint64_t Seed = 0;
    std::vector<std::unique_ptr<OutsideItem>> Items;
    ftl::TaskCounter *Counter = nullptr;
    std::atomic<bool> Stop{false};
    unsigned Switches = 0; // written by the thread, read after join
};

void OutsideChildTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    Round &round = *static_cast<Round *>(arg);
    round.Ran(TaskKind::OutsideChild);
    round.ThreadIndex("outside child");
}

void OutsideTask(ftl::TaskScheduler *ts, void *arg) {
    OutsideItem &item = *static_cast<OutsideItem *>(arg);
    Round &round = *item.Owner->R;
    round.Ran(TaskKind::Outside);
    round.ThreadIndex("outside task");
    std::vector<ftl::Task> children(item.Children, ftl::Task{OutsideChildTask, &round});
    // The parent still counts, so the counter cannot reach 0 before these are added.
    AddAll(ts, children, item.ChildPriority, item.Owner->Counter, item.Children % 2 == 0);
}

void OutsiderThread(Outsider &outsider) {
    Round &round = *outsider.R;
    Rng rng(outsider.Seed);
    if (round.Ts->GetCurrentThreadIndex() != ftl::kInvalidIndex) {
        round.Fail("GetCurrentThreadIndex() on a thread outside the scheduler is %u, not kInvalidIndex",
                   round.Ts->GetCurrentThreadIndex());
    }
    for (std::size_t i = 0; i < outsider.Items.size();) {
        std::size_t const n = std::min<std::size_t>(outsider.Items.size() - i, rng.Range(1, 4));
        std::vector<ftl::Task> tasks;
        for (std::size_t k = 0; k < n; ++k) {
            tasks.push_back(ftl::Task{OutsideTask, outsider.Items[i + k].get()});
        }
        AddAll(round.Ts, tasks, rng.Priority(), outsider.Counter, rng.Percent(50));
        i += n;
        if (rng.Percent(20)) {
            std::this_thread::sleep_for(std::chrono::microseconds(rng.Range(20, 300)));
        }
        if (rng.Percent(5)) {
            round.Ts->SetEmptyQueueBehavior(kBehaviors[RandomBehaviorIndex(rng)]);
            ++outsider.Switches;
        }
    }
    while (!outsider.Stop.load(std::memory_order_acquire)) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng.Range(500, 5000)));
        round.Ts->SetEmptyQueueBehavior(kBehaviors[RandomBehaviorIndex(rng)]);
        ++outsider.Switches;
    }
}

// ---------------------------------------------------------------------------
// Wake-latency probes. A probe records the time from its AddTask to its
// first instruction. Outside probes are added by a thread outside the
// scheduler while every worker (the main thread, waiting, included) sleeps;
// inside probes are added by a task, which then spins, while the other
// workers sleep.

struct Probe {
    Round *R = nullptr;
    Clock::time_point AddedAt;
    double LatencyUs = 0;
    std::atomic<bool> Started{false};
    ftl::FullAtomicCounter *Done = nullptr;
};

void ProbeTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    Clock::time_point const now = Clock::now();
    Probe &probe = *static_cast<Probe *>(arg);
    probe.R->Ran(TaskKind::Probe);
    probe.LatencyUs = MicrosBetween(probe.AddedAt, now);
    ftl::FullAtomicCounter *const done = probe.Done;
    probe.Started.store(true, std::memory_order_release);
    if (done != nullptr) {
        done->FetchAdd(1);
    }
}

// How long a probe may wait for a sleeping worker before the round fails:
// far above any scheduling delay, even with 8 threads on 2 busy cores.
constexpr auto kProbeDeadline = std::chrono::seconds(2);

// Waits (outside the scheduler, or spinning inside a task) until the probe
// started; records a failure once the deadline passed, then keeps waiting.
void AwaitProbe(Round &round, Probe &probe, char const *kind, std::size_t index) {
    bool reported = false;
    while (!probe.Started.load(std::memory_order_acquire)) {
        if (!reported && Clock::now() - probe.AddedAt > kProbeDeadline) {
            round.Fail("%s probe %zu has not started %lld ms after AddTask while the scheduler was idle "
                       "(lost wake-up?)",
                       kind, index,
                       static_cast<long long>(
                           std::chrono::duration_cast<std::chrono::milliseconds>(kProbeDeadline).count()));
            reported = true;
        }
        std::this_thread::yield();
    }
}

struct ProbeLauncher {
    Round *R = nullptr;
    std::vector<std::unique_ptr<Probe>> Probes;
    std::vector<unsigned> IdleMicros;
    std::vector<ftl::TaskPriority> Priorities;
};

void ProbeLauncherTask(ftl::TaskScheduler *ts, void *arg) {
    ProbeLauncher &launcher = *static_cast<ProbeLauncher *>(arg);
    Round &round = *launcher.R;
    round.Ran(TaskKind::ProbeLauncher);
    for (std::size_t i = 0; i < launcher.Probes.size(); ++i) {
        Probe &probe = *launcher.Probes[i];
        // Block this worker (not the fiber way, on purpose) so that the other
        // workers run out of work and go to sleep.
        std::this_thread::sleep_for(std::chrono::microseconds(launcher.IdleMicros[i]));
        probe.AddedAt = Clock::now();
        ts->AddTask(ftl::Task{ProbeTask, &probe}, launcher.Priorities[i]);
        // Keep this worker busy: another one must wake up for the probe.
        AwaitProbe(round, probe, "inside", i);
    }
}

// ---------------------------------------------------------------------------
// Drain: tasks added right before the scheduler is destroyed, some adding
// children; the destructor must run them all.

struct DrainItem {
    Round *R = nullptr;
    unsigned Children = 0;
    ftl::TaskPriority Priority = ftl::TaskPriority::Normal;
};

void DrainChildTask(ftl::TaskScheduler * /*ts*/, void *arg) {
    static_cast<Round *>(arg)->Ran(TaskKind::DrainChild);
}

void DrainTask(ftl::TaskScheduler *ts, void *arg) {
    DrainItem const &item = *static_cast<DrainItem *>(arg);
    item.R->Ran(TaskKind::Drain);
    for (unsigned c = 0; c < item.Children; ++c) {
        ts->AddTask(ftl::Task{DrainChildTask, item.R}, item.Priority);
    }
}

// ---------------------------------------------------------------------------
// The round's workloads, planned from the seed and run side by side.

constexpr unsigned kMilestones = 3;
constexpr unsigned kMaxDagParents = 12000;
constexpr unsigned kOutsideProbes = 4;
constexpr unsigned kInsideProbes = 4;

class Workloads {
public:
    Workloads(Round &round, Rng &rng) : m_round(round) {
        ftl::TaskScheduler *const ts = round.Ts;
        for (unsigned m = 0; m < kMilestones; ++m) {
            m_milestones.push_back(std::make_unique<ftl::AtomicFlag>(ts, 1));
            m_milestoneBehavior.push_back(RandomBehaviorIndex(rng));
        }

        Rng dagRng(rng.Fork(0xda6));
        unsigned const dags = dagRng.Range(4, 8);
        // Every node with children can hold a parked fiber at once (in the
        // worst order), so their number bounds the fibers the wave needs. The
        // bound keeps the pool well below what a default kernel allows
        // (vm.max_map_count = 65530 mappings, two per fiber).
        for (unsigned d = 0; d < dags; ++d) {
            unsigned const budget = dagRng.Range(round.Scaled(15000), round.Scaled(50000));
            unsigned parentsLeft = round.Scaled(kMaxDagParents) / dags;
            m_dags.push_back(PlanDag(round, dagRng, d, budget, parentsLeft, &m_milestones));
        }
        // Milestones and behaviour switches go to random DAG nodes.
        auto randomNode = [&]() -> DagNode & {
            Dag &dag = *m_dags[dagRng.Below(static_cast<unsigned>(m_dags.size()))];
            return *dag.Nodes[dagRng.Below(static_cast<unsigned>(dag.Nodes.size()))];
        };
        for (unsigned m = 0; m < kMilestones;) {
            DagNode &node = randomNode();
            if (node.ClearsMilestone < 0) {
                node.ClearsMilestone = static_cast<int>(m++);
            }
        }
        unsigned const switches = dagRng.Range(2, 6);
        for (unsigned attempt = 0; attempt < 8 * switches && m_taskSwitches < switches; ++attempt) {
            DagNode &node = randomNode();
            if (node.SwitchTo < 0) {
                node.SwitchTo = static_cast<int>(RandomBehaviorIndex(dagRng));
                ++m_taskSwitches;
            }
        }

        Rng walkRng(rng.Fork(0x3a1c));
        unsigned const walks = walkRng.Range(2, 4);
        for (unsigned w = 0; w < walks; ++w) {
            m_walks.push_back(PlanWalk(round, walkRng, w));
        }
        Rng tallyRng(rng.Fork(0x7a11));
        unsigned const tallies = tallyRng.Range(1, 3);
        for (unsigned t = 0; t < tallies; ++t) {
            m_tallies.push_back(PlanTally(round, tallyRng, t));
        }
        Rng lockRng(rng.Fork(0x10c6));
        unsigned const lockGroups = lockRng.Range(1, 2);
        for (unsigned l = 0; l < lockGroups; ++l) {
            m_locks.push_back(PlanLockGroup(round, lockRng, l));
        }
        Rng flagRng(rng.Fork(0xf1a9));
        unsigned const flagGroups = flagRng.Range(1, 3);
        for (unsigned f = 0; f < flagGroups; ++f) {
            m_flags.push_back(PlanFlagGroup(round, flagRng, f));
        }

        // The roots, in a random order, in groups of one priority.
        for (auto &dag : m_dags) {
            m_roots.push_back(ftl::Task{DagNodeTask, dag->Nodes.front().get()});
        }
        for (auto &walk : m_walks) {
            m_roots.push_back(ftl::Task{WalkRootTask, walk.get()});
        }
        for (auto &tally : m_tallies) {
            m_roots.push_back(ftl::Task{TallyRootTask, tally.get()});
        }
        for (auto &group : m_locks) {
            m_roots.push_back(ftl::Task{LockRootTask, group.get()});
        }
        for (auto &group : m_flags) {
            m_roots.push_back(ftl::Task{FlagControllerTask, group.get()});
        }
        rng.Shuffle(m_roots);
        for (std::size_t i = 0; i < m_roots.size(); ++i) {
            m_rootPriorities.push_back(rng.Priority());
        }
        m_rootBatch = rng.Percent(50);
        m_pinnedMainWaits = rng.Percent(50);

        Rng outsideRng(rng.Fork(0x0475));
        m_outsider.R = &round;
        m_outsider.Seed = outsideRng.Next();
        unsigned const outsideTasks = outsideRng.Range(round.Scaled(250), round.Scaled(2000));
        for (unsigned i = 0; i < outsideTasks; ++i) {
            auto item = std::make_unique<OutsideItem>();
            item->Owner = &m_outsider;
            item->Children = outsideRng.Percent(60) ? 0 : outsideRng.Range(1, 3);
            item->ChildPriority = outsideRng.Priority();
            round.Expect(TaskKind::OutsideChild, item->Children);
            m_outsider.Items.push_back(std::move(item));
        }
        round.Expect(TaskKind::Outside, outsideTasks);

        Rng probeRng(rng.Fork(0x9b0be));
        for (unsigned p = 0; p < kOutsideProbes; ++p) {
            m_outsideProbeIdle.push_back(probeRng.Range(2000, 6000));
            m_outsideProbePriority.push_back(probeRng.Priority());
        }
        m_launcher.R = &round;
        if (round.Threads >= 2) {
            for (unsigned p = 0; p < kInsideProbes; ++p) {
                m_launcher.Probes.push_back(std::make_unique<Probe>());
                m_launcher.Probes.back()->R = &round;
                m_launcher.IdleMicros.push_back(probeRng.Range(2000, 6000));
                m_launcher.Priorities.push_back(probeRng.Priority());
            }
            round.Expect(TaskKind::ProbeLauncher, 1);
        }
        round.Expect(TaskKind::Probe, kOutsideProbes + m_launcher.Probes.size());
    }

    std::string Describe() const {
        std::size_t nodes = 0, steps = 0, walkWaiters = 0, sections = 0, gates = 0;
        unsigned maxDepth = 0;
        std::string shapes;
        for (auto const &dag : m_dags) {
            nodes += dag->Nodes.size();
            maxDepth = std::max(maxDepth, dag->MaxDepth);
            shapes += shapes.empty() ? "" : " ";
            shapes += dag->Shape;
            shapes += ":" + std::to_string(dag->Nodes.size());
        }
        for (auto const &walk : m_walks) {
            steps += walk->Path.size() - 1;
            walkWaiters += walk->Waiters.size();
        }
        for (auto const &group : m_locks) {
            for (auto const &worker : group->Workers) {
                sections += worker->Sections.size();
            }
        }
        for (auto const &group : m_flags) {
            gates += group->Gates.size();
        }
        char text[512];
        std::snprintf(text, sizeof(text),
                      "%zu dags (%s) %zu nodes depth<=%u; %zu walks %zu steps %zu waiters; %zu tallies; "
                      "%zu fibtex groups %zu sections; %zu flag groups %zu gates; %zu outside tasks",
                      m_dags.size(), shapes.c_str(), nodes, maxDepth, m_walks.size(), steps, walkWaiters,
                      m_tallies.size(), m_locks.size(), sections, m_flags.size(), gates,
                      m_outsider.Items.size());
        return text;
    }

    // The main thread's part of the run: add the roots, follow the
    // milestones (switching the behaviour at each), wait for everything.
    void Run() {
        Round &round = m_round;
        ftl::TaskScheduler *const ts = round.Ts;
        RoundMonitor &monitor = round.Monitor;

        ftl::TaskCounter all(ts);
        monitor.Phase.store("adding the workload roots", std::memory_order_relaxed);
        for (std::size_t begin = 0; begin < m_roots.size();) {
            // Runs of roots with the same priority go in one AddTasks call.
            std::size_t end = begin + 1;
            while (end < m_roots.size() && m_rootPriorities[end] == m_rootPriorities[begin]) {
                ++end;
            }
            std::vector<ftl::Task> const tasks(m_roots.begin() + static_cast<std::ptrdiff_t>(begin),
                                               m_roots.begin() + static_cast<std::ptrdiff_t>(end));
            AddAll(ts, tasks, m_rootPriorities[begin], &all, m_rootBatch);
            begin = end;
        }

        ftl::TaskCounter outside(ts);
        m_outsider.Counter = &outside;
        std::thread outsiderThread(OutsiderThread, std::ref(m_outsider));

        for (unsigned m = 0; m < kMilestones; ++m) {
            monitor.Phase.store("main thread waiting for a milestone", std::memory_order_relaxed);
            round.WaitFlag(*m_milestones[m], m_pinnedMainWaits, "main thread waiting for a milestone");
            ts->SetEmptyQueueBehavior(kBehaviors[m_milestoneBehavior[m]]);
        }
        monitor.Phase.store("main thread waiting for the workloads", std::memory_order_relaxed);
        round.WaitTasks(all, m_pinnedMainWaits, "main thread waiting for the workloads");
        CheckMainThread("the workloads");

        monitor.Phase.store("joining the outsider thread", std::memory_order_relaxed);
        m_outsider.Stop.store(true, std::memory_order_release);
        outsiderThread.join();
        monitor.Phase.store("main thread waiting for the outside tasks", std::memory_order_relaxed);
        round.WaitTasks(outside, !m_pinnedMainWaits, "main thread waiting for the outside tasks");
        CheckMainThread("the outside tasks");
        m_outsider.Counter = nullptr;
    }

    // Wake latency, with every other workload finished and the behaviour
    // Sleep: first probes added from outside while all workers sleep, then
    // (with 2 threads or more) probes added by a task while the others sleep.
    void MeasureWakeLatency(std::vector<double> &latencies) {
        Round &round = m_round;
        ftl::TaskScheduler *const ts = round.Ts;
        ts->SetEmptyQueueBehavior(ftl::EmptyQueueBehavior::Sleep);

        round.Monitor.Phase.store("wake latency: outside probes", std::memory_order_relaxed);
        ftl::FullAtomicCounter done(ts, 0);
        std::vector<std::unique_ptr<Probe>> probes;
        for (unsigned p = 0; p < kOutsideProbes; ++p) {
            probes.push_back(std::make_unique<Probe>());
            probes.back()->R = &round;
            probes.back()->Done = &done;
        }
        std::thread adder([&]() {
            for (std::size_t p = 0; p < probes.size(); ++p) {
                std::this_thread::sleep_for(std::chrono::microseconds(m_outsideProbeIdle[p]));
                probes[p]->AddedAt = Clock::now();
                ts->AddTask(ftl::Task{ProbeTask, probes[p].get()}, m_outsideProbePriority[p]);
                AwaitProbe(round, *probes[p], "outside", p);
            }
        });
        round.WaitValue(done, kOutsideProbes, false, "main thread waiting for the outside probes");
        adder.join();
        for (auto const &probe : probes) {
            latencies.push_back(probe->LatencyUs);
        }

        if (!m_launcher.Probes.empty()) {
            round.Monitor.Phase.store("wake latency: inside probes", std::memory_order_relaxed);
            ftl::TaskCounter counter(ts);
            ts->AddTask(ftl::Task{ProbeLauncherTask, &m_launcher}, ftl::TaskPriority::Normal, &counter);
            round.WaitTasks(counter, false, "main thread waiting for the probe launcher");
            for (auto const &probe : m_launcher.Probes) {
                latencies.push_back(probe->LatencyUs);
            }
        }
        CheckMainThread("the probes");
    }

    void Verify() {
        Round &round = m_round;
        for (auto const &dag : m_dags) {
            VerifyDag(round, *dag);
        }
        for (auto const &walk : m_walks) {
            VerifyWalk(round, *walk);
        }
        for (auto const &tally : m_tallies) {
            VerifyTally(round, *tally);
        }
        for (auto const &group : m_locks) {
            VerifyLockGroup(round, *group);
        }
        for (auto const &group : m_flags) {
            if (group->Flag->IsSet()) {
                round.Fail("flag group %u: set after its last gate", group->Id);
            }
        }
        for (unsigned m = 0; m < kMilestones; ++m) {
            if (m_milestones[m]->IsSet()) {
                round.Fail("milestone %u still set after every DAG finished", m);
            }
        }
    }

    unsigned OutsideSwitches() const { return m_outsider.Switches; }
    unsigned TaskSwitches() const { return m_taskSwitches; }

private:
    void CheckMainThread(char const *what) {
        unsigned const index = m_round.Ts->GetCurrentThreadIndex();
        if (index != 0) {
            m_round.Fail("the main thread resumed on thread %u after waiting for %s", index, what);
        }
    }

    Round &m_round;
    std::vector<std::unique_ptr<ftl::AtomicFlag>> m_milestones;
    std::vector<unsigned> m_milestoneBehavior;
    unsigned m_taskSwitches = 0;
    std::vector<std::unique_ptr<Dag>> m_dags;
    std::vector<std::unique_ptr<Walk>> m_walks;
    std::vector<std::unique_ptr<Tally>> m_tallies;
    std::vector<std::unique_ptr<LockGroup>> m_locks;
    std::vector<std::unique_ptr<FlagGroup>> m_flags;
    std::vector<ftl::Task> m_roots;
    std::vector<ftl::TaskPriority> m_rootPriorities;
    bool m_rootBatch = false;
    bool m_pinnedMainWaits = false;
    Outsider m_outsider;
    std::vector<unsigned> m_outsideProbeIdle;
    std::vector<ftl::TaskPriority> m_outsideProbePriority;
    ProbeLauncher m_launcher;
};

// EventCallbacks: runs inside the scheduler, so it only stores a number.
void RecordFiberCount(void *context, unsigned fiberCount) {
    static_cast<Round *>(context)->Fibers.store(fiberCount, std::memory_order_relaxed);
}

} // namespace

RoundReport RunRound(RoundOptions const &options, RoundMonitor &monitor) {
    monitor.Reset();
    RoundReport report;
    report.Seed = options.Seed;
    report.Threads = options.Threads;
    Clock::time_point const start = Clock::now();

    Rng rng(options.Seed);
    Round round(monitor, options.Threads, options.Scale);

    ftl::TaskSchedulerInitOptions init;
    init.ThreadPoolSize = options.Threads;
    // The pool keeps its default size and grows on demand: deep DAGs hold
    // thousands of waiting fibers.
    init.Callbacks.Context = &round;
    init.Callbacks.OnFibersCreated = RecordFiberCount;
    init.Callbacks.OnFiberPoolGrown = RecordFiberCount;
    init.Behavior = kBehaviors[RandomBehaviorIndex(rng)];
    // Now and then switch a scheduling mechanism off: each one changes which
    // paths the work takes.
    ftl::detail::Mechanisms mechanisms;
    std::string features;
    if (rng.Percent(30)) {
        unsigned const off = rng.Range(1, 2);
        for (unsigned i = 0; i < off; ++i) {
            ftl::detail::MechanismSwitch const &which =
                ftl::detail::kMechanismSwitches[rng.Below(ftl::detail::kNumMechanismSwitches)];
            if (mechanisms.*which.Flag) {
                mechanisms.*which.Flag = false;
                features += features.empty() ? " mechanisms off: " : ",";
                features += which.Name;
            }
        }
    }
    std::uint64_t const workloadSeed = rng.Next();
    std::uint64_t const drainSeed = rng.Next();

    // Outlive the scheduler: the destructor runs the drain tasks.
    std::vector<std::unique_ptr<DrainItem>> drain;
    {
        Rng drainRng(drainSeed);
        unsigned const count = drainRng.Range(round.Scaled(250), round.Scaled(2500));
        for (unsigned i = 0; i < count; ++i) {
            auto item = std::make_unique<DrainItem>();
            item->R = &round;
            item->Children = drainRng.Percent(50) ? 0 : drainRng.Range(1, 2);
            item->Priority = drainRng.Priority();
            round.Expect(TaskKind::DrainChild, item->Children);
            drain.push_back(std::move(item));
        }
        round.Expect(TaskKind::Drain, count);
    }
    Rng behaviorRng(drainSeed ^ 0xbe4a);
    ftl::EmptyQueueBehavior const destroyBehavior = kBehaviors[RandomBehaviorIndex(behaviorRng)];

    {
        monitor.Phase.store("Init", std::memory_order_relaxed);
        ftl::TaskScheduler ts;
        int const initResult = ftl::detail::InitWithMechanisms(ts, init, mechanisms);
        if (initResult != 0) {
            report.Failures.push_back(std::string("TaskScheduler::Init failed: ") +
                                      ftl::InitErrorString(initResult));
            return report;
        }
        round.Ts = &ts;
        if (ts.GetThreadCount() != options.Threads) {
            round.Fail("GetThreadCount() is %u, asked for %u", ts.GetThreadCount(), options.Threads);
        }
        report.Plan = std::string("start ") + ftl_test::BehaviorName(init.Behavior) + features;
        // Each wave plans a new mix and runs it to the end; between waves the
        // scheduler goes idle and must wake up for the next one.
        Rng waveRng(workloadSeed);
        for (unsigned wave = 0; wave < options.Waves; ++wave) {
            monitor.Phase.store("planning", std::memory_order_relaxed);
            Rng workloadRng(waveRng.Next());
            Workloads workloads(round, workloadRng);
            workloads.Run();
            workloads.MeasureWakeLatency(report.WakeLatencyUs);
            monitor.Phase.store("verifying", std::memory_order_relaxed);
            workloads.Verify();
            char switches[128];
            std::snprintf(switches, sizeof(switches), "; %u+%u behaviour switches (tasks+outside); %u fibers",
                          workloads.TaskSwitches(), workloads.OutsideSwitches(),
                          round.Fibers.load(std::memory_order_relaxed));
            report.Plan += "\n  wave " + std::to_string(wave) + ": " + workloads.Describe() + switches;
        }

        monitor.Phase.store("adding the drain tasks", std::memory_order_relaxed);
        ts.SetEmptyQueueBehavior(destroyBehavior);
        for (auto const &item : drain) {
            ts.AddTask(ftl::Task{DrainTask, item.get()}, item->Priority);
        }
        monitor.Phase.store("destroying the scheduler", std::memory_order_relaxed);
    }
    round.Ts = nullptr;
    monitor.Phase.store("checking", std::memory_order_relaxed);

    report.TasksExpected = monitor.TotalExpected();
    report.TasksRun = monitor.TotalRun();
    report.Failures = round.Failures();
    if (report.TasksRun != report.TasksExpected) {
        report.Failures.push_back("task counts differ from the plan:\n" + monitor.Describe(false));
    }
    report.Seconds = std::chrono::duration<double>(Clock::now() - start).count();
    monitor.Phase.store("idle", std::memory_order_relaxed);
    return report;
}

} // namespace ftl_stress
