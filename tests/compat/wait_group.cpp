// WaitGroup, the counter of today's FiberTaskingLib API: lineage tasks and
// closures added with a WaitGroup *, Add/Done by hand, Wait from a task, the
// Init thread and a thread that is not a worker, reuse across rounds, and
// the lineage calls that pass nullptr or 0 as the counter.
#include "ftl/wait_group.h"
#include "ftl/task.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

using ftl_test::Options;

namespace {

// Whether g.Decrement() compiles: it must not, a group is lowered by Add and
// Done only.
template <class T, class = void>
struct HasDecrement : std::false_type {};
template <class T>
struct HasDecrement<T, std::void_t<decltype(std::declval<T &>().Decrement())>> : std::true_type {};
static_assert(!HasDecrement<ftl::WaitGroup>::value, "WaitGroup exposes the lineage's Add, Done and Wait");
static_assert(HasDecrement<ftl::TaskCounter>::value, "the check above can see a Decrement");

void AddOne(ftl::TaskScheduler *, void *arg) {
    static_cast<std::atomic<unsigned> *>(arg)->fetch_add(1);
}

} // namespace

TEST_CASE("A WaitGroup waits for its tasks and for every Add without a Done", "[compat][wait_group]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    ftl::WaitGroup wg(&ts);
    for (int round = 0; round < 3; ++round) {
        ftl::Task tasks[10];
        for (ftl::Task &task : tasks) {
            task = {AddOne, &ran};
        }
        ts.AddTasks(10, tasks, ftl::TaskPriority::Normal, &wg);
        ts.AddTask({AddOne, &ran}, ftl::TaskPriority::High, &wg);
        ts.AddTasks(
            5, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &wg);
        // Work tracked by hand: a task that waits on the group's second
        // round is held back by one Add until a task calls Done.
        wg.Add(2);
        ts.AddTask(
            [&] {
                ran.fetch_add(1);
                wg.Done();
                wg.Add(-1);
            },
            ftl::TaskPriority::Normal);
        wg.Wait();
        REQUIRE(ran.load() == 17u * static_cast<unsigned>(round + 1));
    }
    // Wait from a task (pinned and not) and from a thread that is not a worker.
    ftl::WaitGroup outer(&ts);
    ts.AddTask(
        [&](ftl::TaskScheduler *inner) {
            ftl::WaitGroup mine(inner);
            inner->AddTasks(
                20, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &mine);
            mine.Wait(true);
            inner->AddTasks(
                20, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &mine);
            mine.Wait();
        },
        ftl::TaskPriority::Normal, &outer);
    outer.Wait();
    REQUIRE(ran.load() == 51u + 40u);
    ftl_test::OutsideThreads outside(&ts);
    outside.Start([&] {
        ftl::WaitGroup fromThread(&ts);
        ts.AddTasks(
            30, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &fromThread);
        fromThread.Wait();
    });
    outside.Join();
    REQUIRE(ran.load() == 51u + 40u + 30u);
}

TEST_CASE("A WaitGroup's Wait rethrows an exception from one of its tasks", "[compat][wait_group][errors]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    ftl::WaitGroup wg(&ts);
    ts.AddTask([] { throw std::runtime_error("from the group"); }, ftl::TaskPriority::Normal, &wg);
    std::string caught;
    try {
        wg.Wait();
    } catch (std::runtime_error const &error) {
        caught = error.what();
    }
    REQUIRE(caught == "from the group");
    std::atomic<unsigned> ran{0};
    ts.AddTask({AddOne, &ran}, ftl::TaskPriority::Normal, &wg);
    wg.Wait();
    REQUIRE(ran.load() == 1u);
}

TEST_CASE("Lineage calls passing nullptr or 0 as the counter still compile and run", "[compat]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    std::atomic<unsigned> ran{0};
    ftl::Task const task{AddOne, &ran};
    ftl::Task const tasks[2] = {task, task};
    ts.AddTask(task, ftl::TaskPriority::Normal, nullptr);
    ts.AddTask(task, ftl::TaskPriority::Normal, 0);
    ts.AddTask(task, ftl::TaskPriority::Normal, NULL);
    ts.AddTasks(2, tasks, ftl::TaskPriority::Normal, nullptr);
    ts.AddTasks(2, tasks, ftl::TaskPriority::Normal, 0);
    ts.AddPinnedTask(0, task, ftl::TaskPriority::Normal, nullptr);
    ts.AddTask([&ran] { ran.fetch_add(1); }, ftl::TaskPriority::Normal, nullptr);
    ts.AddTasks(
        2, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, 0);
    REQUIRE(ftl_test::SpinUntil([&] {
        ts.Yield();
        return ran.load() == 3u + 4u + 1u + 1u + 2u;
    }));
}

TEST_CASE("A WaitGroup brought below zero aborts", "[compat][wait_group][misuse]") {
    auto const result = ftl_test::RunInChild([] {
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(1)) == 0);
        ftl::WaitGroup wg(&ts);
        wg.Add(1);
        wg.Done();
        wg.Done();
    });
    INFO(result.Stderr);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas("below 0"));
}
