// What the API promises not to allocate, checked by counting every call of
// the global operator new while the promised path runs (after a warm-up):
// - AddTask with a closure of up to 48 bytes (and AddTasks with one);
// - a TaskGraph run after the first, pinned nodes included;
// - ParallelFor, every form (the index form's split-off halves take slots of
//   the closure pool, like a 24-byte closure).
// A program of its own, because it replaces operator new for the whole
// process. Exits non-zero on a failed check.
//
// At one thread the runs repeat exactly, so the count must be 0. With more,
// which worker's deque or closure list holds how much varies from run to
// run, and one may still grow to a new peak after the warm-up (a doubling of
// a deque, a chunk of closure slots): a few such allocations are allowed,
// never one per task (5,000 tasks, 5,120 nodes per measurement).
#include "ftl/parallel_for.h"
#include "ftl/task_counter.h"
#include "ftl/task_graph.h"
#include "ftl/task_scheduler.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <new>
#include <vector>

namespace {

std::atomic<bool> g_counting{false};
std::atomic<unsigned long> g_allocations{0};

void *Allocate(std::size_t size) {
    if (g_counting.load(std::memory_order_relaxed)) {
        g_allocations.fetch_add(1, std::memory_order_relaxed);
    }
    void *p = std::malloc(size == 0 ? 1 : size);
    if (p == nullptr) {
        std::abort();
    }
    return p;
}

int g_failures = 0;

// Allocations allowed while the structures of several workers may still
// reach a new peak (see the top of the file).
constexpr unsigned long kGrowthAllowance = 8;

unsigned long Allowed(unsigned threads) {
    return threads == 1 ? 0 : kGrowthAllowance;
}

void Check(bool ok, char const *what, unsigned long allocations) {
    std::printf("%s: %s (%lu allocations)\n", ok ? "ok" : "FAILED", what, allocations);
    g_failures += ok ? 0 : 1;
}

// A closure of 40 bytes: in a slot of the closure pool.
struct Payload {
    std::array<std::uint64_t, 4> Values;
    std::atomic<std::uint64_t> *Sum;
};

void AddClosures(ftl::TaskScheduler *ts, std::atomic<std::uint64_t> *sum, unsigned count) {
    ftl::TaskCounter counter(ts);
    for (unsigned i = 0; i < count; ++i) {
        Payload const payload{{i, 1, 2, 3}, sum};
        ts->AddTask([payload] { payload.Sum->fetch_add(payload.Values[0] + payload.Values[3]); },
                    ftl::TaskPriority::Normal, &counter);
    }
    ts->AddTasks(
        count, [payload = Payload{{1, 1, 1, 1}, sum}](unsigned) { payload.Sum->fetch_add(1); },
        ftl::TaskPriority::Normal, &counter);
    ts->WaitForCounter(&counter);
}

// Every form of ParallelFor once; returns the elements visited.
std::uint64_t ParallelForRound(ftl::TaskScheduler *ts, std::vector<std::uint64_t> &values,
                               std::list<std::uint64_t> &list) {
    std::atomic<std::uint64_t> visited{0};
    ftl::ParallelFor(ts, std::size_t{0}, values.size(), [&](std::size_t i) {
        values[i] += 1;
        visited.fetch_add(1, std::memory_order_relaxed);
    });
    ftl::ParallelFor(ts, 0, static_cast<int>(values.size()), [&](int first, int last) {
        for (int i = first; i < last; ++i) {
            values[static_cast<std::size_t>(i)] += 1;
        }
        visited.fetch_add(static_cast<std::uint64_t>(last - first), std::memory_order_relaxed);
    });
    auto const visit = [&visited](ftl::TaskScheduler *, std::uint64_t *value) {
        *value += 1;
        visited.fetch_add(1, std::memory_order_relaxed);
    };
    ftl::ParallelFor(ts, values, 64, visit, ftl::TaskPriority::Normal);
    ftl::ParallelFor(ts, list, 64, visit, ftl::TaskPriority::High);
    return visited.load();
}

} // namespace

void *operator new(std::size_t size) {
    return Allocate(size);
}
void *operator new[](std::size_t size) {
    return Allocate(size);
}
void operator delete(void *p) noexcept {
    std::free(p);
}
void operator delete[](void *p) noexcept {
    std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
    std::free(p);
}

int main() {
    static_assert(sizeof(Payload) <= 48, "the payload must fit a closure slot");
    for (unsigned threads : {1u, 2u, 3u}) {
        std::printf("threads %u\n", threads);
        ftl::TaskScheduler ts;
        ftl::TaskSchedulerInitOptions options;
        options.ThreadPoolSize = threads;
        if (ts.Init(options) != 0) {
            return 2;
        }
        std::atomic<std::uint64_t> sum{0};
        constexpr unsigned kCount = 1000;
        // Warm-up: the deques, the closure pool and the fibers reach their size.
        for (int round = 0; round < 3; ++round) {
            AddClosures(&ts, &sum, kCount);
        }
        g_allocations.store(0);
        g_counting.store(true);
        for (int round = 0; round < 5; ++round) {
            AddClosures(&ts, &sum, kCount);
        }
        g_counting.store(false);
        std::uint64_t const perRound = kCount * (kCount - 1) / 2 + 3ull * kCount + kCount;
        Check(sum.load() == 8 * perRound, "closures ran, each once", 0);
        Check(g_allocations.load() <= Allowed(threads),
              "AddTask/AddTasks with 40-byte closures allocate nothing (beyond growth to a new peak)",
              g_allocations.load());

        ftl::TaskGraph graph(&ts);
        std::atomic<unsigned> ran{0};
        auto root = graph.Add([&ran] { ran.fetch_add(1); });
        auto sink = graph.Add([&ran] { ran.fetch_add(1); });
        for (unsigned i = 0; i < 500; ++i) {
            auto node = graph.Add([&ran] { ran.fetch_add(1); });
            root.Precede(node);
            node.Precede(sink);
            if (i % 50 == 0) {
                auto chained = graph.Add([&ran] { ran.fetch_add(1); });
                node.Precede(chained);
                chained.Precede(sink);
            }
        }
        // A node pinned to each thread: its start goes through that
        // worker's queue of pinned tasks.
        for (unsigned t = 0; t < threads; ++t) {
            auto pinned = graph.Add([&ran] { ran.fetch_add(1); });
            pinned.PinTo(t);
            root.Precede(pinned);
            pinned.Precede(sink);
        }
        ftl::TaskCounter done(&ts);
        for (int round = 0; round < 3; ++round) { // the first builds; the others warm the queues
            graph.Run(&done);
            ts.WaitForCounter(&done);
        }
        g_allocations.store(0);
        g_counting.store(true);
        for (int round = 0; round < 10; ++round) {
            graph.Run(&done);
            ts.WaitForCounter(&done);
        }
        g_counting.store(false);
        Check(ran.load() == 13 * graph.Size(), "every graph node ran in every run", 0);
        Check(g_allocations.load() <= Allowed(threads),
              "TaskGraph runs after the first allocate nothing (beyond growth to a new peak)",
              g_allocations.load());

        std::vector<std::uint64_t> values(20000, 0);
        std::list<std::uint64_t> list(2000, 0);
        std::uint64_t const perLoopRound = 3 * values.size() + list.size();
        std::uint64_t visited = 0;
        for (int round = 0; round < 3; ++round) {
            visited += ParallelForRound(&ts, values, list);
        }
        g_allocations.store(0);
        g_counting.store(true);
        for (int round = 0; round < 10; ++round) {
            visited += ParallelForRound(&ts, values, list);
        }
        g_counting.store(false);
        bool allOnce = visited == 13 * perLoopRound;
        for (std::uint64_t value : values) {
            allOnce = allOnce && value == 3 * 13;
        }
        for (std::uint64_t value : list) {
            allOnce = allOnce && value == 13;
        }
        Check(allOnce, "ParallelFor visited every element once per call", 0);
        Check(g_allocations.load() <= Allowed(threads),
              "ParallelFor allocates nothing per call, in every form (beyond growth to a new peak)",
              g_allocations.load());
    }
    return g_failures == 0 ? 0 : 1;
}
