// FullAtomicCounter (std::atomic-like operations, waits for any value) and
// AtomicFlag (waits until clear).
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <limits>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

TEST_CASE("FullAtomicCounter operations return what std::atomic would", "[atomic_counter]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);

    ftl::FullAtomicCounter counter(&ts, 7);
    REQUIRE(counter.Load() == 7u);
    counter.Store(10);
    REQUIRE(counter.Load(std::memory_order_relaxed) == 10u);
    REQUIRE(counter.FetchAdd(5) == 10u);
    REQUIRE(counter.Load() == 15u);
    REQUIRE(counter.FetchSub(3, std::memory_order_release) == 15u);
    REQUIRE(counter.Load(std::memory_order_acquire) == 12u);
    REQUIRE_FALSE(counter.CompareExchange(11, 20));
    REQUIRE(counter.Load() == 12u);
    REQUIRE(counter.CompareExchange(12, 20, std::memory_order_acq_rel));
    REQUIRE(counter.Load() == 20u);

    // The value wraps modulo 2^32 like unsigned arithmetic.
    counter.Store(0);
    REQUIRE(counter.FetchSub(1) == 0u);
    REQUIRE(counter.Load() == std::numeric_limits<unsigned>::max());
    REQUIRE(counter.FetchAdd(2) == std::numeric_limits<unsigned>::max());
    REQUIRE(counter.Load() == 1u);

    // The wrap did not disturb waiting: a wait for a held value returns at
    // once, and a wait for another value is released by a change.
    ts.WaitForCounter(&counter, 1);
    counter.Store(std::numeric_limits<unsigned>::max());
    ts.WaitForCounter(&counter, std::numeric_limits<unsigned>::max(), true);
    auto bump = [&](ftl::TaskScheduler *) { counter.FetchAdd(1); };
    ts.AddTask(LambdaTask(bump), ftl::TaskPriority::Normal);
    ts.WaitForCounter(&counter, 0);
    REQUIRE(counter.Load() == 0u);
}

TEST_CASE("FullAtomicCounter waits for several values while others FetchAdd", "[atomic_counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // The adders run in phases of 10 FetchAdd(1) each. A phase starts only
    // after every waiter for the previous phase's value resumed, so a waiter
    // can never miss its value, and each waiter sees exactly its value when
    // it resumes: a wake-up for any other value is an error.
    constexpr unsigned kTargets[] = {10, 20, 30};
    constexpr unsigned kWaitersPerTarget = 6;
    ftl::FullAtomicCounter value(&ts);
    ftl::FullAtomicCounter resumed(&ts);
    std::atomic<unsigned> wrongValue{0};

    struct Waiter {
        ftl::FullAtomicCounter *Value;
        ftl::FullAtomicCounter *Resumed;
        std::atomic<unsigned> *WrongValue;
        unsigned Target;
    };
    std::vector<Waiter> waiters;
    for (unsigned target : kTargets) {
        for (unsigned i = 0; i < kWaitersPerTarget; ++i) {
            waiters.push_back(Waiter{&value, &resumed, &wrongValue, target});
        }
    }
    auto waitTask = [](ftl::TaskScheduler *taskScheduler, void *arg) {
        auto *waiter = static_cast<Waiter *>(arg);
        taskScheduler->WaitForCounter(waiter->Value, waiter->Target);
        if (waiter->Value->Load() != waiter->Target) {
            waiter->WrongValue->fetch_add(1);
        }
        waiter->Resumed->FetchAdd(1);
    };
    auto add = [&](ftl::TaskScheduler *) { value.FetchAdd(1); };
    auto driver = [&](ftl::TaskScheduler *taskScheduler) {
        std::vector<ftl::Task> adders(10, LambdaTask(add));
        for (unsigned phase = 1; phase <= 3; ++phase) {
            ftl::TaskCounter addersDone(taskScheduler);
            taskScheduler->AddTasks(10, adders.data(), ftl::TaskPriority::Normal, &addersDone);
            taskScheduler->WaitForCounter(&addersDone);
            taskScheduler->WaitForCounter(&resumed, phase * kWaitersPerTarget);
        }
    };

    std::vector<ftl::Task> tasks;
    for (Waiter &waiter : waiters) {
        tasks.push_back(ftl::Task{waitTask, &waiter});
    }
    ftl::TaskCounter done(&ts);
    ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::High, &done);
    ts.AddTask(LambdaTask(driver), ftl::TaskPriority::Normal, &done);
    // The Init thread waits for the last value too.
    ts.WaitForCounter(&value, 30);
    ts.WaitForCounter(&done);

    REQUIRE(resumed.Load() == 3 * kWaitersPerTarget);
    REQUIRE(wrongValue.load() == 0);
    REQUIRE(value.Load() == 30u);
}

TEST_CASE("FullAtomicCounter Store, FetchSub and CompareExchange wake waiters", "[atomic_counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    ftl::FullAtomicCounter counter(&ts, 5);
    std::atomic<unsigned> step{0};
    // One task drives the counter through 42 (Store), 40 (FetchSub) and 7
    // (CompareExchange); the Init thread waits for each value in turn, and
    // the driver only moves on once the Init thread confirmed it saw it.
    ftl::FullAtomicCounter seen(&ts);
    auto driver = [&](ftl::TaskScheduler *taskScheduler) {
        counter.Store(42);
        taskScheduler->WaitForCounter(&seen, 1);
        counter.FetchSub(2);
        taskScheduler->WaitForCounter(&seen, 2);
        if (!counter.CompareExchange(41, 7)) { // fails: the value is 40
            step.fetch_add(1);
        }
        if (counter.CompareExchange(40, 7)) {
            step.fetch_add(1);
        }
    };
    ftl::TaskCounter done(&ts);
    ts.AddTask(LambdaTask(driver), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&counter, 42);
    REQUIRE(counter.Load() == 42u);
    seen.Store(1);
    ts.WaitForCounter(&counter, 40);
    REQUIRE(counter.Load() == 40u);
    seen.Store(2);
    ts.WaitForCounter(&counter, 7);
    ts.WaitForCounter(&done);
    REQUIRE(counter.Load() == 7u);
    REQUIRE(step.load() == 2u);
}

TEST_CASE("AtomicFlag Set, Clear and IsSet return values", "[atomic_flag]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);

    ftl::AtomicFlag flag(&ts);
    REQUIRE_FALSE(flag.IsSet());
    REQUIRE(flag.Set());
    REQUIRE(flag.IsSet());
    REQUIRE_FALSE(flag.Set());
    REQUIRE(flag.IsSet(std::memory_order_relaxed));
    REQUIRE(flag.Clear());
    REQUIRE_FALSE(flag.IsSet());
    REQUIRE_FALSE(flag.Clear(std::memory_order_release));
    REQUIRE_FALSE(flag.IsSet());

    // Any non-zero initial value means set.
    ftl::AtomicFlag five(&ts, 5);
    REQUIRE(five.IsSet());
    REQUIRE(five.Clear());
    REQUIRE_FALSE(five.IsSet());
    ts.WaitForCounter(&five); // clear: returns at once
}

TEST_CASE("WaitForCounter on an AtomicFlag waits until it is clear", "[atomic_flag]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // The flag gates the waiters several times over: set, let waiters pile
    // up, clear; each waiter checks it resumed after the Clear of its round.
    constexpr unsigned kRounds = 20;
    constexpr unsigned kWaiters = 16;
    ftl::AtomicFlag flag(&ts);
    std::atomic<unsigned> clearedRound{0};
    std::atomic<unsigned> early{0};
    std::atomic<unsigned> resumed{0};
    ftl::FullAtomicCounter arrived(&ts);
    for (unsigned round = 1; round <= kRounds; ++round) {
        REQUIRE(flag.Set());
        arrived.Store(0);
        auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
            arrived.FetchAdd(1);
            taskScheduler->WaitForCounter(&flag, round % 2 == 0);
            if (clearedRound.load() != round) {
                early.fetch_add(1);
            }
            resumed.fetch_add(1);
        };
        std::vector<ftl::Task> tasks(kWaiters, LambdaTask(waiter));
        ftl::TaskCounter done(&ts);
        ts.AddTasks(kWaiters, tasks.data(), ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&arrived, kWaiters);
        clearedRound.store(round);
        REQUIRE(flag.Clear());
        ts.WaitForCounter(&done);
    }
    REQUIRE(resumed.load() == kRounds * kWaiters);
    REQUIRE(early.load() == 0);
}
