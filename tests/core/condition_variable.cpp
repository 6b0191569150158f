// ConditionVariable: waits park tasks (or block threads that are not
// workers) until a notify; no notify is lost between giving up the Fibtex
// and waiting; wait_for ends at its deadline; notify_one wakes one waiter,
// notify_all every one; misuse ends in a clear error.
#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

using ftl_test::Options;
using std::chrono::milliseconds;

TEST_CASE("A bounded queue of tasks and threads passes every item exactly once", "[condition_variable]") {
    // Producers and consumers on a queue of capacity 4: each side waits on
    // its own condition while the queue is full or empty. Tasks and threads
    // that are not workers on both sides.
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    ftl::ConditionVariable notFull(&ts);
    ftl::ConditionVariable notEmpty(&ts);
    std::deque<unsigned> queue; // guarded by mutex
    constexpr unsigned kCapacity = 4;
    constexpr unsigned kProducers = 6; // 4 tasks, 2 threads
    constexpr unsigned kPerProducer = ftl_test::kThreadSanitizer ? 200 : 1000;
    constexpr unsigned kConsumers = 6; // 4 tasks, 2 threads
    constexpr unsigned kTotal = kProducers * kPerProducer;
    std::atomic<unsigned> consumedCount{0};
    std::vector<std::atomic<unsigned>> seen(kTotal);
    std::atomic<unsigned> overfull{0};

    auto produce = [&](unsigned producer) {
        for (unsigned i = 0; i < kPerProducer; ++i) {
            std::unique_lock<ftl::Fibtex> lock(mutex);
            notFull.wait(lock, [&] { return queue.size() < kCapacity; });
            if (queue.size() >= kCapacity) {
                overfull.fetch_add(1);
            }
            queue.push_back(producer * kPerProducer + i);
            notEmpty.notify_one();
        }
    };
    // A consumer takes items until it takes the end marker (kTotal).
    auto consume = [&] {
        for (;;) {
            std::unique_lock<ftl::Fibtex> lock(mutex);
            notEmpty.wait(lock, [&] { return !queue.empty(); });
            unsigned const item = queue.front();
            queue.pop_front();
            notFull.notify_one();
            if (item == kTotal) {
                return;
            }
            seen[item].fetch_add(1);
            consumedCount.fetch_add(1);
        }
    };

    ftl::TaskCounter producers(&ts);
    ftl::TaskCounter consumers(&ts);
    ts.AddTasks(
        4, [&](unsigned i) { produce(i); }, ftl::TaskPriority::Normal, &producers);
    ts.AddTasks(
        4, [&](unsigned) { consume(); }, ftl::TaskPriority::Normal, &consumers);
    ftl_test::OutsideThreads outsideProducers(&ts);
    ftl_test::OutsideThreads outsideConsumers(&ts);
    outsideProducers.Start([&] { produce(4); });
    outsideProducers.Start([&] { produce(5); });
    outsideConsumers.Start(consume);
    outsideConsumers.Start(consume);
    ts.WaitForCounter(&producers);
    outsideProducers.Join();
    // Every item is in; one end marker per consumer.
    for (unsigned c = 0; c < kConsumers; ++c) {
        std::unique_lock<ftl::Fibtex> lock(mutex);
        notFull.wait(lock, [&] { return queue.size() < kCapacity; });
        queue.push_back(kTotal);
        notEmpty.notify_one();
    }
    outsideConsumers.Join();
    ts.WaitForCounter(&consumers);
    REQUIRE(consumedCount.load() == kTotal);
    REQUIRE(overfull.load() == 0);
    unsigned wrong = 0;
    for (auto const &count : seen) {
        wrong += count.load() != 1 ? 1u : 0u;
    }
    REQUIRE(wrong == 0);
    std::lock_guard<ftl::Fibtex> lock(mutex);
    REQUIRE(queue.empty());
}

TEST_CASE("notify_one wakes one waiter and notify_all every waiter", "[condition_variable]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    ftl::ConditionVariable cv(&ts);
    unsigned waiting = 0; // guarded by mutex
    unsigned tickets = 0; // guarded by mutex: each notify_one hands one out
    std::atomic<unsigned> woken{0};
    constexpr unsigned kWaiters = 10;
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        kWaiters,
        [&](unsigned) {
            std::unique_lock<ftl::Fibtex> lock(mutex);
            ++waiting;
            cv.wait(lock); // no predicate: returns only when a notify chose it
            woken.fetch_add(1);
            if (tickets > 0) {
                --tickets;
            }
        },
        ftl::TaskPriority::Normal, &counter);
    auto waitingCount = [&] {
        std::lock_guard<ftl::Fibtex> lock(mutex);
        return waiting;
    };
    while (waitingCount() != kWaiters) {
        ts.Yield();
    }
    // notify_one three times: exactly three wake (nobody else can).
    for (int i = 0; i < 3; ++i) {
        std::lock_guard<ftl::Fibtex> lock(mutex);
        ++tickets;
        cv.notify_one();
    }
    ts.SleepFor(milliseconds(20));
    REQUIRE(woken.load() == 3u);
    cv.notify_all();
    ts.WaitForCounter(&counter);
    REQUIRE(woken.load() == kWaiters);
    REQUIRE(tickets == 0u);
}

TEST_CASE("wait_for returns false at its deadline and true on a notify", "[condition_variable]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    ftl::ConditionVariable cv(&ts);
    bool ready = false; // guarded by mutex
    using Clock = std::chrono::steady_clock;

    auto timedOut = [&](ftl::TaskScheduler *) {
        std::unique_lock<ftl::Fibtex> lock(mutex);
        auto const start = Clock::now();
        bool const result = cv.wait_for(lock, milliseconds(20), [&] { return ready; });
        double const ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        bool const holds = lock.owns_lock() && !mutex.try_lock(); // held again, by us
        return !result && ms >= 19.0 && ms < 2000.0 && holds;
    };
    // From a task, from the Init thread, from a thread that is not a worker.
    std::atomic<bool> taskOk{false};
    ftl::TaskCounter counter(&ts);
    ts.AddTask([&](ftl::TaskScheduler *inner) { taskOk.store(timedOut(inner)); }, ftl::TaskPriority::Normal,
               &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(taskOk.load());
    REQUIRE(timedOut(&ts));
    std::atomic<bool> threadOk{false};
    {
        ftl_test::OutsideThreads outside(&ts);
        outside.Start([&] { threadOk.store(timedOut(&ts)); });
        outside.Join();
    }
    REQUIRE(threadOk.load());

    // A notify before the deadline: true, long before it.
    std::atomic<bool> result{false};
    std::atomic<double> waitedMs{0};
    ts.AddTask(
        [&] {
            std::unique_lock<ftl::Fibtex> lock(mutex);
            auto const start = Clock::now();
            result.store(cv.wait_for(lock, std::chrono::seconds(30), [&] { return ready; }));
            waitedMs.store(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        },
        ftl::TaskPriority::Normal, &counter);
    ts.SleepFor(milliseconds(5));
    {
        std::lock_guard<ftl::Fibtex> lock(mutex);
        ready = true;
    }
    cv.notify_all();
    ts.WaitForCounter(&counter);
    REQUIRE(result.load());
    REQUIRE(waitedMs.load() < 10000.0);
}

TEST_CASE("Notifies racing timeouts end each wait exactly once", "[condition_variable]") {
    // Many short wait_for calls while another task notifies all the time:
    // each wait ends once (by notify or deadline) and holds the lock after.
    unsigned const threads = GENERATE(2u, 3u, 8u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    ftl::ConditionVariable cv(&ts);
    unsigned generation = 0; // guarded by mutex
    std::atomic<bool> stop{false};
    std::atomic<unsigned> waits{0};
    std::atomic<unsigned> notOwned{0};
    constexpr unsigned kWaits = ftl_test::kThreadSanitizer ? 50 : 300;
    ftl::TaskCounter waiters(&ts);
    ts.AddTasks(
        4,
        [&](unsigned) {
            for (unsigned i = 0; i < kWaits; ++i) {
                std::unique_lock<ftl::Fibtex> lock(mutex);
                unsigned const seen = generation;
                cv.wait_for(lock, std::chrono::microseconds(50 + (i % 7) * 30),
                            [&] { return generation != seen; });
                if (!lock.owns_lock()) {
                    notOwned.fetch_add(1);
                }
                ++generation; // a write under the lock: a race here would show in TSan
                waits.fetch_add(1);
            }
        },
        ftl::TaskPriority::Normal, &waiters);
    ftl::TaskCounter notifier(&ts);
    ts.AddTask(
        [&](ftl::TaskScheduler *inner) {
            while (!stop.load()) {
                {
                    std::lock_guard<ftl::Fibtex> lock(mutex);
                    ++generation;
                }
                cv.notify_one();
                inner->Yield();
            }
        },
        ftl::TaskPriority::Normal, &notifier);
    ts.WaitForCounter(&waiters);
    stop.store(true);
    ts.WaitForCounter(&notifier);
    REQUIRE(waits.load() == 4 * kWaits);
    REQUIRE(notOwned.load() == 0u);
}

TEST_CASE("ConditionVariable misuse ends in a clear error", "[condition_variable][misuse]") {
    using ftl_test::RunInChild;
    SECTION("a wait without holding the Fibtex") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(1)) == 0);
            ftl::Fibtex mutex(&ts);
            ftl::ConditionVariable cv(&ts);
            std::unique_lock<ftl::Fibtex> lock(mutex, std::defer_lock);
            cv.wait(lock);
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("needs a unique_lock holding a Fibtex"));
    }
    SECTION("destroyed while a task waits on it") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            ftl::Fibtex mutex(&ts);
            auto *cv = new ftl::ConditionVariable(&ts);
            std::atomic<bool> waiting{false};
            ts.AddTask(
                [&] {
                    std::unique_lock<ftl::Fibtex> lock(mutex);
                    waiting.store(true);
                    cv->wait(lock);
                },
                ftl::TaskPriority::Normal);
            while (!waiting.load()) {
                ts.Yield();
            }
            std::lock_guard<ftl::Fibtex> lock(mutex); // the waiter is on the list once it gave this up
            delete cv;
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("ConditionVariable was destroyed while"));
    }
}
