// TaskCounter: raised by AddTasks, lowered as each task finishes, waited on
// until 0; manual Add/Decrement; any number of waiters; destruction right
// after a wait returned.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

namespace {

struct Slot {
    unsigned Value;
    unsigned Round;
};

void WriteSlot(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *slot = static_cast<Slot *>(arg);
    // Plain writes: the wait on the counter must make them visible.
    slot->Value = slot->Value * 3 + 1;
    ++slot->Round;
}

void Decrement(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    static_cast<ftl::TaskCounter *>(arg)->Decrement();
}

} // namespace

TEST_CASE("TaskCounter waits for every task added with it, round after round", "[counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kTasks = 1000;
    std::vector<Slot> slots(kTasks, Slot{0, 0});
    std::vector<ftl::Task> tasks(kTasks);
    for (unsigned i = 0; i < kTasks; ++i) {
        slots[i].Value = i;
        tasks[i] = ftl::Task{WriteSlot, &slots[i]};
    }
    // One counter, reused: each round's wait covers exactly that round.
    ftl::TaskCounter counter(&ts);
    for (unsigned round = 1; round <= 5; ++round) {
        CAPTURE(round);
        ts.AddTasks(kTasks / 2, tasks.data(), ftl::TaskPriority::High, &counter);
        ts.AddTasks(kTasks / 2, tasks.data() + kTasks / 2, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        unsigned wrong = 0;
        for (unsigned i = 0; i < kTasks; ++i) {
            unsigned expected = i;
            for (unsigned r = 0; r < round; ++r) {
                expected = expected * 3 + 1;
            }
            if (slots[i].Round != round || slots[i].Value != expected) {
                ++wrong;
            }
        }
        REQUIRE(wrong == 0);
    }
}

TEST_CASE("TaskCounter with an initial value, Add and Decrement by hand", "[counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    SECTION("A counter already at 0 returns at once") {
        ftl::TaskCounter counter(&ts);
        ts.WaitForCounter(&counter);
        ts.WaitForCounter(&counter, true);
        std::atomic<unsigned> returned{0};
        auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
            ftl::TaskCounter local(taskScheduler);
            taskScheduler->WaitForCounter(&local);
            taskScheduler->WaitForCounter(&counter);
            returned.fetch_add(1);
        };
        std::vector<ftl::Task> tasks(20, LambdaTask(waiter));
        ftl::TaskCounter done(&ts);
        ts.AddTasks(20, tasks.data(), ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
        REQUIRE(returned.load() == 20u);
    }

    SECTION("Initial value, released by Decrement") {
        ftl::TaskCounter counter(&ts, 3);
        std::atomic<unsigned> before{0};
        auto decrement = [&](ftl::TaskScheduler *) {
            before.fetch_add(1, std::memory_order_relaxed);
            counter.Decrement();
        };
        std::vector<ftl::Task> tasks(3, LambdaTask(decrement));
        ts.AddTasks(3, tasks.data(), ftl::TaskPriority::Normal); // no counter: they lower it by hand
        ts.WaitForCounter(&counter);
        REQUIRE(before.load(std::memory_order_relaxed) == 3u);
    }

    SECTION("Add raises it, tasks added with it raise it further") {
        ftl::TaskCounter counter(&ts);
        counter.Add(5);
        std::atomic<unsigned> ran{0};
        auto work = [&](ftl::TaskScheduler *) {
            ftl_test::BusyMicros(50);
            ran.fetch_add(1, std::memory_order_relaxed);
        };
        std::vector<ftl::Task> tasks(10, LambdaTask(work));
        ts.AddTasks(10, tasks.data(), ftl::TaskPriority::Normal, &counter);
        std::vector<ftl::Task> decrements(5, ftl::Task{Decrement, &counter});
        ts.AddTasks(5, decrements.data(), ftl::TaskPriority::Normal);
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load(std::memory_order_relaxed) == 10u);
    }
}

TEST_CASE("Many fibers wait on one TaskCounter", "[counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // fiberSlots is accepted and ignored: 1 slot, 64 waiters.
    ftl::TaskCounter slow(&ts, 0, 1);
    constexpr unsigned kSlowTasks = 4;
    constexpr unsigned kWaiters = 64;
    std::atomic<unsigned> slowDone{0};
    std::atomic<unsigned> early{0};
    std::atomic<unsigned> resumed{0};
    auto slowTask = [&](ftl::TaskScheduler *) {
        ftl_test::BusyMicros(2000);
        slowDone.fetch_add(1);
    };
    auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
        taskScheduler->WaitForCounter(&slow);
        if (slowDone.load() != kSlowTasks) {
            early.fetch_add(1);
        }
        resumed.fetch_add(1);
    };
    std::vector<ftl::Task> slowTasks(kSlowTasks, LambdaTask(slowTask));
    ts.AddTasks(kSlowTasks, slowTasks.data(), ftl::TaskPriority::Normal, &slow);
    std::vector<ftl::Task> waiters(kWaiters, LambdaTask(waiter));
    ftl::TaskCounter done(&ts);
    ts.AddTasks(kWaiters, waiters.data(), ftl::TaskPriority::High, &done);
    ts.WaitForCounter(&slow); // the Init thread waits on it too
    REQUIRE(slowDone.load() == kSlowTasks);
    ts.WaitForCounter(&done);
    REQUIRE(resumed.load() == kWaiters);
    REQUIRE(early.load() == 0);
}

TEST_CASE("A TaskCounter may be destroyed as soon as its wait returned", "[counter]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // Each round's counter lives on the waiting fiber's stack and dies right
    // after the wait, while the task that released it may still be
    // returning from its decrement on another thread.
    std::atomic<unsigned> children{0};
    auto child = [&](ftl::TaskScheduler *) { children.fetch_add(1, std::memory_order_relaxed); };
    ftl::Task const childTask = LambdaTask(child);
    constexpr unsigned kRounds = 500;
    auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned round = 0; round < kRounds; ++round) {
            ftl::TaskCounter counter(taskScheduler);
            taskScheduler->AddTask(childTask, ftl::TaskPriority::High, &counter);
            taskScheduler->WaitForCounter(&counter);
        }
    };
    std::vector<ftl::Task> tasks(8, LambdaTask(waiter));
    ftl::TaskCounter done(&ts);
    ts.AddTasks(8, tasks.data(), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&done);
    REQUIRE(children.load() == 8 * kRounds);
}
