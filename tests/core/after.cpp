// Tasks after tasks (AddTaskAfter): the task starts only once every
// prerequisite counter has reached 0, exactly once, whoever brings the last
// one there (a worker's finish, a thread outside the scheduler); its counter
// covers it from the call on; a chain of them holds no fiber per link and
// never runs one link inside another; the drain at destruction runs one
// still waiting for its prerequisites' tasks.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <vector>

using ftl_test::Options;

namespace {

// Tasks that each add one to `done`, after a little work so that they are
// still running when the task after them is added.
void AddCounting(ftl::TaskScheduler &ts, unsigned count, std::atomic<unsigned> &done,
                 ftl::TaskCounter &counter) {
    ts.AddTasks(
        count,
        [&done](unsigned i) {
            volatile unsigned spin = 0;
            for (unsigned k = 0; k < 200 * (i % 4); ++k) {
                spin = spin + k;
            }
            done.fetch_add(1, std::memory_order_relaxed);
        },
        ftl::TaskPriority::Normal, &counter);
}

} // namespace

TEST_CASE("A task after two counters starts once both reached 0, and once", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    unsigned const rounds = ftl_test::kSlowBuild ? 100 : 500;
    constexpr unsigned kA = 7;
    constexpr unsigned kB = 3;
    unsigned early = 0;
    unsigned ran = 0;
    for (unsigned round = 0; round < rounds; ++round) {
        std::atomic<unsigned> doneA{0};
        std::atomic<unsigned> doneB{0};
        std::atomic<unsigned> seenA{0};
        std::atomic<unsigned> seenB{0};
        std::atomic<unsigned> runs{0};
        ftl::TaskCounter a(&ts);
        ftl::TaskCounter b(&ts);
        ftl::TaskCounter after(&ts);
        AddCounting(ts, kA, doneA, a);
        AddCounting(ts, kB, doneB, b);
        ts.AddTaskAfter(
            {&a, &b},
            [&] {
                seenA.store(doneA.load(std::memory_order_relaxed), std::memory_order_relaxed);
                seenB.store(doneB.load(std::memory_order_relaxed), std::memory_order_relaxed);
                runs.fetch_add(1, std::memory_order_relaxed);
            },
            round % 2 == 0 ? ftl::TaskPriority::Normal : ftl::TaskPriority::High, &after);
        ts.WaitForCounter(&after);
        early += seenA.load() != kA || seenB.load() != kB ? 1u : 0u;
        ran += runs.load();
        // The prerequisites are 0 by now; waits on them return at once.
        ts.WaitForCounter(&a);
        ts.WaitForCounter(&b);
    }
    CHECK(early == 0);
    CHECK(ran == rounds);
}

TEST_CASE("A task after counters already at 0, after none, or after one counter twice, runs", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    std::atomic<unsigned> doneTwice{0};
    std::atomic<unsigned> seenTwice{0};
    ftl::TaskCounter zero(&ts);
    ftl::TaskCounter twice(&ts);
    ftl::TaskCounter after(&ts);
    ts.AddTaskAfter(
        {&zero}, [&ran] { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &after);
    ts.AddTaskAfter(
        {}, [&ran] { ran.fetch_add(10); }, ftl::TaskPriority::High, &after);
    AddCounting(ts, 5, doneTwice, twice);
    ts.AddTaskAfter(
        {&twice, &zero, &twice},
        [&] {
            seenTwice.store(doneTwice.load());
            ran.fetch_add(100);
        },
        ftl::TaskPriority::Normal, &after);
    // A lineage Task too.
    auto lineage = [&ran](ftl::TaskScheduler *) { ran.fetch_add(1000); };
    ts.AddTaskAfter({&twice}, ftl_test::LambdaTask(lineage), ftl::TaskPriority::Normal, &after);
    ts.WaitForCounter(&after);
    CHECK(ran.load() == 1111);
    CHECK(seenTwice.load() == 5);
}

TEST_CASE("A counter covers its task after tasks from the call on", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskCounter gate(&ts, 1); // held at 1 until the test lowers it
    ftl::TaskCounter after(&ts);
    std::atomic<unsigned> ran{0};
    ts.AddTaskAfter(
        {&gate}, [&ran] { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &after);
    // Not 0 while the task waits for its prerequisite.
    CHECK_FALSE(ts.WaitForCounter(&after, std::chrono::milliseconds(20)));
    CHECK(ran.load() == 0);
    gate.Decrement(); // the last prerequisite, lowered by the Init thread itself
    ts.WaitForCounter(&after);
    CHECK(ran.load() == 1);
}

TEST_CASE("A chain of tasks after tasks runs in order, one at a time, with no fiber per link", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    // Every worker has had its loop fiber, and the Init thread a wait that
    // parked (for a task that is not the counter's, so not run inline).
    {
        ftl::TaskCounter warm(&ts);
        ts.AddTasks(
            4 * threads, [](unsigned) {}, ftl::TaskPriority::Normal, &warm);
        ts.WaitForCounter(&warm);
        ftl::TaskCounter gate(&ts, 1);
        ts.AddTask([&gate] { gate.Decrement(); }, ftl::TaskPriority::Normal);
        ts.WaitForCounter(&gate);
    }
    unsigned const peakBefore = ts.GetStats().FibersPeak;
    unsigned const links = ftl_test::kSlowBuild ? 10000 : 100000;
    std::deque<ftl::TaskCounter> counters;
    std::vector<unsigned> order(links, 0);
    // Where each link's frame was, and on which fiber: a link started from
    // the one before's finish, on the same stack, would sit deeper each time.
    std::vector<std::uintptr_t> frame(links, 0);
    std::vector<unsigned> fiber(links, 0);
    std::atomic<unsigned> next{0};
    auto link = [&](unsigned i) {
        return [&, i] {
            // The frame, not a local's address: AddressSanitizer moves
            // locals to a stack of its own.
            frame[i] = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
            fiber[i] = ts.GetCurrentFiberIndex();
            order[i] = next.fetch_add(1, std::memory_order_relaxed);
        };
    };
    counters.emplace_back(&ts);
    ts.AddTask(link(0), ftl::TaskPriority::Normal, &counters.back());
    for (unsigned i = 1; i < links; ++i) {
        ftl::TaskCounter &previous = counters.back();
        counters.emplace_back(&ts);
        ts.AddTaskAfter({&previous}, link(i), ftl::TaskPriority::Normal, &counters.back());
    }
    ts.WaitForCounter(&counters.back());
    unsigned outOfOrder = 0;
    std::map<unsigned, std::pair<std::uintptr_t, std::uintptr_t>> frames; // per fiber: lowest, highest
    for (unsigned i = 0; i < links; ++i) {
        outOfOrder += order[i] != i ? 1u : 0u;
        auto const seen = frames.emplace(fiber[i], std::make_pair(frame[i], frame[i])).first;
        seen->second.first = std::min(seen->second.first, frame[i]);
        seen->second.second = std::max(seen->second.second, frame[i]);
    }
    std::uintptr_t deepest = 0;
    for (auto const &range : frames) {
        deepest = std::max(deepest, range.second.second - range.second.first);
    }
    CHECK(next.load() == links);
    CHECK(outOfOrder == 0);
    // A link run inline by the Init thread's wait sits a few frames below
    // one its loop ran; recursion would spread over megabytes.
    CHECK(deepest < 16 * 1024);
    // The Init thread's last wait may park once more than the warm-up's.
    CHECK(ts.GetStats().FibersPeak <= peakBefore + 1);
}

TEST_CASE("A task after tasks added by a thread outside the scheduler, and released by one", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    unsigned const rounds = ftl_test::kSlowBuild ? 50 : 200;
    std::atomic<unsigned> ran{0};
    std::atomic<unsigned> early{0};
    ftl::TaskCounter outsideDone(&ts, 1);
    std::thread outside([&] {
        for (unsigned round = 0; round < rounds; ++round) {
            std::atomic<unsigned> done{0};
            ftl::TaskCounter tasks(&ts);
            ftl::TaskCounter gate(&ts, 1);
            ftl::TaskCounter after(&ts);
            AddCounting(ts, 4, done, tasks);
            ts.AddTaskAfter(
                {&tasks, &gate},
                [&] {
                    early.fetch_add(done.load() != 4 ? 1 : 0);
                    ran.fetch_add(1);
                },
                ftl::TaskPriority::Normal, &after);
            if (round % 2 == 0) {
                // The tasks first: the gate is then the last prerequisite,
                // and this thread starts the task.
                ts.WaitForCounter(&tasks);
            }
            gate.Decrement();
            ts.WaitForCounter(&after);
        }
        outsideDone.Decrement();
    });
    // The Init thread is worker 0 (the only one at one thread): it runs tasks
    // while it waits.
    ts.WaitForCounter(&outsideDone);
    outside.join();
    CHECK(ran.load() == rounds);
    CHECK(early.load() == 0);
}

TEST_CASE("Destruction runs a task after tasks that still waits for its prerequisites", "[after]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    std::atomic<unsigned> done{0};
    std::atomic<unsigned> seen{0};
    {
        std::optional<ftl::TaskCounter> tasks; // outlives the scheduler
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(threads)) == 0);
        tasks.emplace(&ts);
        AddCounting(ts, 50, done, *tasks);
        ts.AddTaskAfter(
            {&*tasks}, [&] { seen.store(done.load() + 1); }, ftl::TaskPriority::Normal);
        // No wait: the scheduler's destructor runs it.
    }
    CHECK(seen.load() == 51);
}
