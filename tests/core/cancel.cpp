// Cancellation (TaskCounter::Cancel): a cancelled counter's tasks that have
// not started never run, and their closures are destroyed before the wait on
// the counter returns; the count still reaches 0 and the wait returns
// normally, a kept exception dropped; tasks added after Cancel are skipped
// until a wait returns, and the counter is usable again after it; a running
// task sees IsCurrentTaskCancelled; a task after a cancelled prerequisite
// still runs; a TaskGraph run ends early through its done counter.
#include "ftl/task_counter.h"
#include "ftl/task_graph.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

using ftl_test::Options;

namespace {

// Occupies every worker but the calling one with a task that spins until
// Release, so that tasks the caller queues on its own deque stay there.
class Blockers {
public:
    Blockers(ftl::TaskScheduler &ts, unsigned threads) : m_ts(ts), m_counter(&ts) {
        for (unsigned i = 1; i < threads; ++i) {
            m_ts.AddTask(
                [this] {
                    m_started.fetch_add(1);
                    while (!m_release.load()) {
                        std::this_thread::yield();
                    }
                },
                ftl::TaskPriority::High, &m_counter);
        }
        REQUIRE(ftl_test::SpinUntil([&] { return m_started.load() == threads - 1; }));
    }
    ~Blockers() { Release(); }
    void Release() {
        if (!m_release.exchange(true)) {
            m_ts.WaitForCounter(&m_counter);
        }
    }

private:
    ftl::TaskScheduler &m_ts;
    ftl::TaskCounter m_counter;
    std::atomic<unsigned> m_started{0};
    std::atomic<bool> m_release{false};
};

} // namespace

TEST_CASE("Cancel skips a counter's queued tasks and destroys their closures before the wait returns",
          "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    auto owner = std::make_shared<int>(0); // each closure holds a copy
    ftl::TaskCounter counter(&ts);
    {
        Blockers blockers(ts, threads);
        std::array<char, 200> big{};
        auto lineage = [&ran](ftl::TaskScheduler *) { ran.fetch_add(1); };
        for (unsigned i = 0; i < 100; ++i) {
            // In a pool slot, on the heap, shared by an AddTasks call, and a
            // lineage Task.
            ts.AddTask([&ran, owner] { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
            ts.AddTask([&ran, owner, big] { ran.fetch_add(1u + static_cast<unsigned>(big[0])); },
                       ftl::TaskPriority::High, &counter);
            ts.AddTasks(
                10, [&ran, owner](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
            ts.AddTask(ftl_test::LambdaTask(lineage), ftl::TaskPriority::Normal, &counter);
        }
        CHECK(owner.use_count() == 1 + 100 * 3);
        CHECK_FALSE(counter.IsCancelled());
        counter.Cancel();
        CHECK(counter.IsCancelled());
    }
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == 0);
    CHECK(owner.use_count() == 1);
    // The wait ended the cancellation: the counter runs tasks again.
    CHECK_FALSE(counter.IsCancelled());
    ts.AddTasks(
        50, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == 50);
}

TEST_CASE("Tasks added after Cancel are skipped until a wait on the counter returns", "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    ftl::TaskCounter counter(&ts);
    counter.Cancel();
    // From the Init thread, from a task, and from a thread outside.
    ts.AddTasks(
        100, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    ftl::TaskCounter adder(&ts);
    ts.AddTask(
        [&] {
            ts.AddTasks(
                100, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
        },
        ftl::TaskPriority::Normal, &adder);
    ts.WaitForCounter(&adder);
    std::thread outside([&] {
        ts.AddTasks(
            100, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    });
    outside.join();
    CHECK(counter.IsCancelled());
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == 0);
    CHECK_FALSE(counter.IsCancelled());
    ts.AddTasks(
        100, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == 100);
}

TEST_CASE("A running task sees its counter cancelled, and the wait returns without its exception",
          "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    CHECK_FALSE(ts.IsCurrentTaskCancelled()); // outside any task
    ftl::TaskCounter counter(&ts);
    ftl::TaskCounter other(&ts);
    std::atomic<bool> started{false};
    std::atomic<bool> sawCancel{false};
    std::atomic<bool> otherSaw{true};
    std::atomic<unsigned> childrenSaw{0};
    ts.AddTask(
        [&] {
            // A child run inline by this wait reports its own counter.
            ftl::TaskCounter children(&ts);
            ts.AddTasks(
                4, [&](unsigned) { childrenSaw.fetch_add(ts.IsCurrentTaskCancelled() ? 1 : 0); },
                ftl::TaskPriority::Normal, &children);
            ts.WaitForCounter(&children);
            started.store(true);
            auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!ts.IsCurrentTaskCancelled() && std::chrono::steady_clock::now() < deadline) {
                ts.Yield();
            }
            sawCancel.store(ts.IsCurrentTaskCancelled());
            throw std::runtime_error("after the cancel");
        },
        ftl::TaskPriority::Normal, &counter);
    // The cancel comes from a task of another counter (at one thread, the
    // two take turns through their yields).
    ts.AddTask(
        [&] {
            while (!started.load()) {
                ts.Yield();
            }
            counter.Cancel();
            otherSaw.store(ts.IsCurrentTaskCancelled());
        },
        ftl::TaskPriority::Normal, &other);
    CHECK_NOTHROW(ts.WaitForCounter(&counter));
    ts.WaitForCounter(&other);
    CHECK(sawCancel.load());
    CHECK_FALSE(otherSaw.load());
    CHECK(childrenSaw.load() == 0);
    // Not cancelled: the exception reaches the waiter.
    ts.AddTask([] { throw std::runtime_error("kept"); }, ftl::TaskPriority::Normal, &counter);
    CHECK_THROWS_AS(ts.WaitForCounter(&counter), std::runtime_error);
}

TEST_CASE("A task after a cancelled counter still runs; one with a cancelled counter does not", "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    ftl::TaskCounter first(&ts);
    ftl::TaskCounter after(&ts);
    ftl::TaskCounter skipped(&ts);
    {
        Blockers blockers(ts, threads);
        ts.AddTasks(
            10, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &first);
        ts.AddTaskAfter(
            {&first}, [&ran] { ran.fetch_add(100); }, ftl::TaskPriority::Normal, &after);
        skipped.Cancel();
        ts.AddTaskAfter(
            {&first}, [&ran] { ran.fetch_add(1000); }, ftl::TaskPriority::Normal, &skipped);
        first.Cancel();
    }
    ts.WaitForCounter(&after);
    ts.WaitForCounter(&skipped);
    ts.WaitForCounter(&first);
    CHECK(ran.load() == 100);
}

TEST_CASE("A TaskGraph run ends early when its done counter is cancelled, and runs whole next time",
          "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskGraph graph(&ts);
    ftl::TaskCounter done(&ts);
    std::atomic<bool> cancel{true};
    std::atomic<unsigned> ran{0};
    // A root that cancels the run, then a chain and a fan-out after it.
    ftl::TaskGraph::Node root = graph.Add([&] {
        ran.fetch_add(1);
        if (cancel.load()) {
            done.Cancel();
        }
    });
    ftl::TaskGraph::Node previous = root;
    for (unsigned i = 0; i < 20; ++i) {
        ftl::TaskGraph::Node link = graph.Add([&ran] { ran.fetch_add(1); });
        previous.Precede(link);
        previous = link;
    }
    for (unsigned i = 0; i < 50; ++i) {
        root.Precede(graph.Add([&ran] { ran.fetch_add(1); }));
    }
    graph.Run(&done);
    ts.WaitForCounter(&done);
    CHECK(ran.load() == 1);
    cancel.store(false);
    graph.Run(&done);
    ts.WaitForCounter(&done);
    CHECK(ran.load() == 1 + 71);
}

TEST_CASE("Cancelling a counter of many queued tasks skips every one", "[cancel]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    unsigned const tasks = ftl_test::kSlowBuild ? 20000 : 200000;
    std::atomic<unsigned> ran{0};
    ftl::TaskCounter counter(&ts);
    {
        Blockers blockers(ts, threads);
        for (unsigned i = 0; i < tasks; i += 1000) {
            ts.AddTasks(
                1000, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
        }
        counter.Cancel();
    }
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == 0);
    // Usable again at once.
    ts.AddTasks(
        tasks, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    CHECK(ran.load() == tasks);
}
