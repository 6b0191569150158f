// Waits beyond the lineage: timed waits on every counter type (from a task,
// from the Init thread, from a thread that is not a worker), SleepFor, Yield,
// and threads that are not workers blocking on counters and on a Fibtex.
// Deadlines are checked loosely (a lower bound, and an upper bound far above
// it): the figures for their precision come from the benchmark suite.
#include "ftl/atomic_counter.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using ftl_test::Options;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// Generous: a loaded 2-core machine under ThreadSanitizer may be slow to
// run a woken fiber, but never seconds late.
constexpr auto kLate = milliseconds(2000);

double MsSince(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

enum class Where { Task, InitThread, OtherThread };
char const *Name(Where where) {
    return where == Where::Task ? "task" : where == Where::InitThread ? "Init thread" : "other thread";
}

// Runs body(taskScheduler) on a task, on the Init thread, or on a thread
// that is not a worker, and returns when it has.
template <class Body>
void RunOn(ftl::TaskScheduler &ts, Where where, Body body) {
    switch (where) {
    case Where::Task: {
        ftl::TaskCounter done(&ts);
        ts.AddTask([&body](ftl::TaskScheduler *taskScheduler) { body(taskScheduler); },
                   ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
        break;
    }
    case Where::InitThread:
        body(&ts);
        break;
    case Where::OtherThread: {
        ftl_test::OutsideThreads outside(&ts);
        outside.Start([&] { body(&ts); });
        outside.Join();
        break;
    }
    }
}

} // namespace

TEST_CASE("A timed wait returns false at its deadline and leaves no waiter behind", "[waits]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    Where const where = GENERATE(Where::Task, Where::InitThread, Where::OtherThread);
    CAPTURE(threads, Name(where));
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::vector<double> elapsed;
    std::vector<bool> results;
    RunOn(ts, where, [&](ftl::TaskScheduler *taskScheduler) {
        // Each counter is destroyed right after its wait: a waiter left on
        // its list would abort the destructor.
        ftl::AtomicFlag flag(taskScheduler, 1);
        auto start = Clock::now();
        results.push_back(taskScheduler->WaitForCounter(&flag, milliseconds(20)));
        elapsed.push_back(MsSince(start));

        ftl::FullAtomicCounter value(taskScheduler, 3);
        start = Clock::now();
        results.push_back(taskScheduler->WaitForCounter(&value, 7, milliseconds(20)));
        elapsed.push_back(MsSince(start));

        ftl::TaskCounter counter(taskScheduler);
        counter.Add(1); // by hand: nobody will lower it
        start = Clock::now();
        results.push_back(taskScheduler->WaitForCounter(&counter, milliseconds(20)));
        elapsed.push_back(MsSince(start));
        counter.Decrement();

        // A timeout of 0 only looks.
        start = Clock::now();
        results.push_back(taskScheduler->WaitForCounter(&flag, std::chrono::nanoseconds(0)));
        elapsed.push_back(MsSince(start));
        flag.Clear();
    });
    REQUIRE(results == std::vector<bool>{false, false, false, false});
    for (std::size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        REQUIRE(elapsed[i] >= 19.0);
        REQUIRE(elapsed[i] < std::chrono::duration<double, std::milli>(kLate).count());
    }
}

TEST_CASE("A timed wait returns true when the target comes first", "[waits]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    Where const where = GENERATE(Where::Task, Where::InitThread, Where::OtherThread);
    CAPTURE(threads, Name(where));
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    std::vector<bool> results;
    std::atomic<unsigned> ran{0};
    RunOn(ts, where, [&](ftl::TaskScheduler *taskScheduler) {
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(
            50,
            [&ran](ftl::TaskScheduler *inner, unsigned) {
                inner->SleepFor(milliseconds(1));
                ran.fetch_add(1);
            },
            ftl::TaskPriority::Normal, &counter);
        results.push_back(taskScheduler->WaitForCounter(&counter, std::chrono::seconds(30)));
        results.push_back(ran.load() == 50);

        ftl::AtomicFlag flag(taskScheduler, 1);
        ftl::FullAtomicCounter value(taskScheduler, 0);
        taskScheduler->AddTask(
            [&flag, &value](ftl::TaskScheduler *inner) {
                inner->SleepFor(milliseconds(2));
                value.Store(5);
                flag.Clear();
            },
            ftl::TaskPriority::High);
        results.push_back(taskScheduler->WaitForCounter(&flag, std::chrono::seconds(30)));
        results.push_back(taskScheduler->WaitForCounter(&value, 5, std::chrono::seconds(30)));
    });
    REQUIRE(results == std::vector<bool>{true, true, true, true});
}

TEST_CASE("A timed wait returns by its deadline while a child of its counter runs long", "[waits]") {
    // The wait does not run the child itself: another worker fires the timer
    // and resumes the waiting task while the child still runs. (The task
    // runs on a pool fiber: the Init thread waits on a flag, which it cannot
    // help with. A task the Init thread ran inline would be pinned to it.)
    unsigned const threads = GENERATE(2u, 3u, 8u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<bool> childDone{false};
    std::atomic<bool> timedOut{false};
    std::atomic<bool> childDoneAtTimeout{true};
    ftl::AtomicFlag outer(&ts, 1);
    ts.AddTask(
        [&](ftl::TaskScheduler *taskScheduler) {
            ftl::TaskCounter children(taskScheduler);
            taskScheduler->AddTask(
                [&childDone] {
                    ftl_test::BusyMicros(400000);
                    childDone.store(true);
                },
                ftl::TaskPriority::Normal, &children);
            timedOut.store(!taskScheduler->WaitForCounter(&children, milliseconds(30)));
            childDoneAtTimeout.store(childDone.load());
            taskScheduler->WaitForCounter(&children);
            outer.Clear();
        },
        ftl::TaskPriority::Normal);
    ts.WaitForCounter(&outer);
    REQUIRE(timedOut.load());
    REQUIRE_FALSE(childDoneAtTimeout.load());
    REQUIRE(childDone.load());
}

TEST_CASE("SleepFor parks the task while its worker runs other work", "[waits]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // Every worker sleeps in a task at once; the other tasks still run (at
    // one thread: only because the sleeper parked).
    std::atomic<unsigned> othersBeforeWake{0};
    std::atomic<unsigned> others{0};
    std::atomic<unsigned> awake{0};
    std::vector<double> slept(threads);
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        threads,
        [&](ftl::TaskScheduler *taskScheduler, unsigned i) {
            auto const start = Clock::now();
            taskScheduler->SleepFor(milliseconds(30));
            slept[i] = MsSince(start);
            othersBeforeWake.store(others.load());
            awake.fetch_add(1);
        },
        ftl::TaskPriority::High, &counter);
    ts.AddTasks(
        200, [&others](unsigned) { others.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(awake.load() == threads);
    REQUIRE(others.load() == 200u);
    REQUIRE(othersBeforeWake.load() == 200u);
    for (double ms : slept) {
        REQUIRE(ms >= 29.0);
        REQUIRE(ms < 30 + std::chrono::duration<double, std::milli>(kLate).count());
    }

    // On the Init thread and on another thread.
    auto start = Clock::now();
    ts.SleepFor(milliseconds(10));
    REQUIRE(MsSince(start) >= 9.0);
    std::thread([&] {
        auto const outsideStart = Clock::now();
        ts.SleepFor(milliseconds(10));
        REQUIRE(MsSince(outsideStart) >= 9.0);
    }).join();
}

TEST_CASE("Yield lets the work queued on its worker run first", "[waits]") {
    // One thread, so everything queued is queued here.
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);
    std::atomic<unsigned> queuedRan{0};
    std::vector<unsigned> seenAfterYield;
    ftl::TaskCounter counter(&ts);
    ts.AddTask(
        [&](ftl::TaskScheduler *taskScheduler) {
            for (int round = 0; round < 3; ++round) {
                taskScheduler->AddTasks(
                    10, [&queuedRan](unsigned) { queuedRan.fetch_add(1); },
                    round % 2 == 0 ? ftl::TaskPriority::High : ftl::TaskPriority::Normal, &counter);
                taskScheduler->Yield();
                seenAfterYield.push_back(queuedRan.load());
            }
        },
        ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(seenAfterYield == std::vector<unsigned>{10, 20, 30});

    // The Init thread yields to its worker's queue too, and a thread that is
    // not a worker just yields.
    ftl::TaskCounter more(&ts);
    ts.AddTasks(
        5, [&queuedRan](unsigned) { queuedRan.fetch_add(1); }, ftl::TaskPriority::Normal, &more);
    ts.Yield();
    REQUIRE(queuedRan.load() == 35u);
    ts.WaitForCounter(&more);
    std::thread([&] { ts.Yield(); }).join();
}

TEST_CASE("Threads that are not workers block on counters until the target", "[waits]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kOutside = 4;
    ftl::AtomicFlag gate(&ts, 1);
    ftl::FullAtomicCounter stage(&ts, 0);
    std::atomic<unsigned> passedGate{0};
    std::atomic<unsigned> sawStage{0};
    std::atomic<unsigned> ownTasksRan{0};
    std::atomic<unsigned> early{0};
    ftl_test::OutsideThreads outside(&ts);
    for (unsigned i = 0; i < kOutside; ++i) {
        outside.Start([&] {
            // Its own tasks, waited for on this thread.
            ftl::TaskCounter mine(&ts);
            ts.AddTasks(
                20, [&ownTasksRan](unsigned) { ownTasksRan.fetch_add(1); }, ftl::TaskPriority::Normal, &mine);
            ts.WaitForCounter(&mine);
            // A flag and a value that tasks set later.
            ts.WaitForCounter(&gate);
            if (stage.Load() < 1) {
                early.fetch_add(1);
            }
            passedGate.fetch_add(1);
            ts.WaitForCounter(&stage, 2);
            sawStage.fetch_add(1);
        });
    }
    // Fibers wait on the same flag meanwhile.
    ftl::TaskCounter fibers(&ts);
    std::atomic<unsigned> fibersPassed{0};
    ts.AddTasks(
        16,
        [&](ftl::TaskScheduler *taskScheduler, unsigned) {
            taskScheduler->WaitForCounter(&gate);
            fibersPassed.fetch_add(1);
        },
        ftl::TaskPriority::Normal, &fibers);
    ts.AddTask(
        [&](ftl::TaskScheduler *taskScheduler) {
            taskScheduler->SleepFor(milliseconds(5));
            stage.Store(1);
            gate.Clear();
            taskScheduler->SleepFor(milliseconds(5));
            stage.Store(2);
        },
        ftl::TaskPriority::High, &fibers);
    outside.Join();
    ts.WaitForCounter(&fibers);
    REQUIRE(ownTasksRan.load() == kOutside * 20);
    REQUIRE(passedGate.load() == kOutside);
    REQUIRE(sawStage.load() == kOutside);
    REQUIRE(early.load() == 0);
    REQUIRE(fibersPassed.load() == 16u);
}

TEST_CASE("An exception reaches a waiter on a thread that is not a worker", "[waits][errors]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    std::string caught;
    std::thread([&] {
        ftl::TaskCounter counter(&ts);
        ts.AddTask([] { throw std::runtime_error("from a task"); }, ftl::TaskPriority::Normal, &counter);
        try {
            ts.WaitForCounter(&counter);
        } catch (std::runtime_error const &error) {
            caught = error.what();
        }
    }).join();
    REQUIRE(caught == "from a task");
}

TEST_CASE("A Fibtex contended by tasks and other threads keeps a counter exact", "[waits][fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    long guarded = 0; // guarded by mutex
    constexpr int kPerTask = 200;
    constexpr int kPerThread = 2000;
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        32,
        [&](ftl::TaskScheduler *taskScheduler, unsigned) {
            for (int i = 0; i < kPerTask; ++i) {
                std::lock_guard<ftl::Fibtex> lock(mutex);
                ++guarded;
                if (i % 50 == 0) {
                    taskScheduler->Yield(); // hold it across a switch now and then
                }
            }
        },
        ftl::TaskPriority::Normal, &counter);
    ftl_test::OutsideThreads outside(&ts);
    for (int t = 0; t < 3; ++t) {
        outside.Start([&] {
            for (int i = 0; i < kPerThread; ++i) {
                std::lock_guard<ftl::Fibtex> lock(mutex); // blocks this thread when contended
                ++guarded;
            }
        });
    }
    outside.Join();
    ts.WaitForCounter(&counter);
    std::lock_guard<ftl::Fibtex> lock(mutex);
    REQUIRE(guarded == 32L * kPerTask + 3L * kPerThread);
}
