// Semaphore, Event, Barrier and SharedFibtex: what each lets through, from
// tasks and from a thread outside the scheduler, at 1, 2, 3 and 8 threads.
#include "ftl/barrier.h"
#include "ftl/event.h"
#include "ftl/semaphore.h"
#include "ftl/shared_fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

using ftl_test::Options;

namespace {

// Raises `now` for the length of a scope and keeps the most seen in `most`.
struct Inside {
    Inside(std::atomic<unsigned> &now, std::atomic<unsigned> &most) : Now(now) {
        unsigned const seen = now.fetch_add(1) + 1;
        unsigned before = most.load();
        while (seen > before && !most.compare_exchange_weak(before, seen)) {
        }
    }
    ~Inside() { Now.fetch_sub(1); }
    std::atomic<unsigned> &Now;
};

} // namespace

TEST_CASE("A Semaphore lets as many in as it has units, from tasks and a thread outside", "[primitives]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Semaphore semaphore(&ts, 2);
    std::atomic<unsigned> now{0};
    std::atomic<unsigned> most{0};
    std::atomic<unsigned> done{0};
    auto critical = [&] {
        semaphore.acquire();
        {
            Inside const inside(now, most);
            ts.Yield();
        }
        done.fetch_add(1);
        semaphore.release();
    };
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        200, [&](unsigned) { critical(); }, ftl::TaskPriority::Normal, &counter);
    std::thread outside([&] {
        for (unsigned i = 0; i < 20; ++i) {
            semaphore.acquire();
            {
                Inside const inside(now, most);
                std::this_thread::yield();
            }
            done.fetch_add(1);
            semaphore.release();
        }
    });
    ts.WaitForCounter(&counter);
    outside.join();
    CHECK(done.load() == 220);
    CHECK(most.load() <= 2);
    CHECK(most.load() >= 1);
    // Both units back: two takes succeed, a third does not, a timed one
    // times out, and a release lets it in.
    CHECK(semaphore.try_acquire());
    CHECK(semaphore.try_acquire());
    CHECK_FALSE(semaphore.try_acquire());
    CHECK_FALSE(semaphore.try_acquire_for(std::chrono::milliseconds(2)));
    semaphore.release(2);
    CHECK(semaphore.try_acquire_for(std::chrono::milliseconds(2)));
    CHECK(semaphore.try_acquire());
    CHECK_FALSE(semaphore.try_acquire());
}

TEST_CASE("An auto-reset Event releases one wait per Set, a manual one every wait until Reset",
          "[primitives]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    ftl::Event single(&ts, false);
    // A Set with no waiter stays for exactly one wait.
    single.Set();
    single.Set();
    CHECK(single.WaitFor(std::chrono::milliseconds(1)));
    CHECK_FALSE(single.WaitFor(std::chrono::milliseconds(1)));
    // Waiters: each Set releases one of them.
    constexpr unsigned kWaiters = 6;
    std::atomic<unsigned> through{0};
    std::atomic<unsigned> waiting{0};
    ftl::TaskCounter waiters(&ts);
    ts.AddTasks(
        kWaiters,
        [&](unsigned) {
            waiting.fetch_add(1);
            single.Wait();
            through.fetch_add(1);
        },
        ftl::TaskPriority::Normal, &waiters);
    std::thread outsideWaiter([&] {
        waiting.fetch_add(1);
        single.Wait();
        through.fetch_add(1);
    });
    ftl::TaskCounter setter(&ts);
    ts.AddTask(
        [&] {
            while (waiting.load() != kWaiters + 1) {
                ts.Yield();
            }
            // One Set at a time, each seen through before the next: a Set
            // made while the event is still set from one no wait has taken
            // yet would change nothing.
            for (unsigned i = 0; i < kWaiters + 1; ++i) {
                single.Set();
                while (through.load() != i + 1) {
                    ts.Yield();
                }
            }
        },
        ftl::TaskPriority::Normal, &setter);
    ts.WaitForCounter(&setter);
    ts.WaitForCounter(&waiters);
    outsideWaiter.join();
    CHECK(through.load() == kWaiters + 1);
    CHECK_FALSE(single.WaitFor(std::chrono::milliseconds(1)));

    ftl::Event manual(&ts, true);
    std::atomic<unsigned> released{0};
    ftl::TaskCounter all(&ts);
    ts.AddTasks(
        kWaiters,
        [&](unsigned) {
            manual.Wait();
            released.fetch_add(1);
        },
        ftl::TaskPriority::Normal, &all);
    ts.AddTask([&] { manual.Set(); }, ftl::TaskPriority::Normal, &all);
    ts.WaitForCounter(&all);
    CHECK(released.load() == kWaiters);
    CHECK(manual.WaitFor(std::chrono::milliseconds(1))); // stays set
    manual.Wait();
    manual.Reset();
    CHECK_FALSE(manual.WaitFor(std::chrono::milliseconds(1)));
}

TEST_CASE("A Barrier holds each phase until every participant arrived, and a drop lowers the count",
          "[primitives]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    constexpr unsigned kParticipants = 5;
    constexpr unsigned kPhases = 20;
    // Task 0 drops out after phase 0: later phases have one participant fewer.
    ftl::Barrier barrier(&ts, kParticipants);
    std::vector<std::atomic<unsigned>> arrivals(kPhases);
    std::atomic<unsigned> wrong{0};
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        kParticipants - 1,
        [&](unsigned i) {
            for (unsigned phase = 0; phase < kPhases; ++phase) {
                arrivals[phase].fetch_add(1);
                if (i == 0 && phase == 0) {
                    barrier.arrive_and_drop();
                    return;
                }
                barrier.arrive_and_wait();
                // Everyone of this phase arrived before anyone left it.
                unsigned const expected = phase == 0 ? kParticipants : kParticipants - 1;
                if (arrivals[phase].load() != expected) {
                    wrong.fetch_add(1);
                }
            }
        },
        ftl::TaskPriority::Normal, &counter);
    // The last participant is a thread outside the scheduler.
    std::thread outside([&] {
        for (unsigned phase = 0; phase < kPhases; ++phase) {
            arrivals[phase].fetch_add(1);
            barrier.arrive_and_wait();
            unsigned const expected = phase == 0 ? kParticipants : kParticipants - 1;
            if (arrivals[phase].load() != expected) {
                wrong.fetch_add(1);
            }
        }
    });
    ts.WaitForCounter(&counter);
    outside.join();
    CHECK(wrong.load() == 0);
    CHECK(arrivals[0].load() == kParticipants);
    CHECK(arrivals[kPhases - 1].load() == kParticipants - 1);
}

TEST_CASE("A SharedFibtex lets readers share and a writer in alone, with std::shared_lock too",
          "[primitives]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::SharedFibtex lock(&ts);
    // Two values a writer changes together: a reader must never see them apart.
    unsigned first = 0;
    unsigned second = 0;
    std::atomic<unsigned> torn{0};
    std::atomic<unsigned> writersIn{0};
    std::atomic<unsigned> mostWriters{0};
    std::atomic<unsigned> readersIn{0};
    std::atomic<unsigned> mostReaders{0};
    std::atomic<unsigned> badMix{0};
    unsigned const tasks = ftl_test::kSlowBuild ? 400 : 2000;
    auto reader = [&] {
        std::shared_lock<ftl::SharedFibtex> const shared(lock);
        Inside const inside(readersIn, mostReaders);
        if (writersIn.load() != 0) {
            badMix.fetch_add(1);
        }
        if (first != second) {
            torn.fetch_add(1);
        }
    };
    auto writer = [&] {
        std::unique_lock<ftl::SharedFibtex> const unique(lock);
        Inside const inside(writersIn, mostWriters);
        if (readersIn.load() != 0) {
            badMix.fetch_add(1);
        }
        ++first;
        ts.Yield(); // waits with the lock held: others queue behind it
        ++second;
    };
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(
        tasks,
        [&](unsigned i) {
            if (i % 10 == 0) {
                writer();
            } else {
                reader();
            }
        },
        ftl::TaskPriority::Normal, &counter);
    std::thread outside([&] {
        for (unsigned i = 0; i < 100; ++i) {
            if (i % 10 == 0) {
                std::unique_lock<ftl::SharedFibtex> const unique(lock);
                ++first;
                ++second;
            } else {
                reader();
            }
        }
    });
    ts.WaitForCounter(&counter);
    outside.join();
    CHECK(torn.load() == 0);
    CHECK(badMix.load() == 0);
    CHECK(mostWriters.load() == 1);
    CHECK(first == tasks / 10 + 10);
    CHECK(second == first);
    // Free again: either kind takes it at once.
    CHECK(lock.try_lock());
    CHECK_FALSE(lock.try_lock_shared());
    lock.unlock();
    CHECK(lock.try_lock_shared());
    CHECK(lock.try_lock_shared());
    CHECK_FALSE(lock.try_lock());
    lock.unlock_shared();
    lock.unlock_shared();
}

TEST_CASE("A waiting writer holds back new readers of a SharedFibtex", "[primitives]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    ftl::SharedFibtex lock(&ts);
    lock.lock_shared(); // the Init thread reads
    std::atomic<bool> writerIn{false};
    ftl::TaskCounter writer(&ts);
    ts.AddTask(
        [&] {
            std::unique_lock<ftl::SharedFibtex> const unique(lock);
            writerIn.store(true);
        },
        ftl::TaskPriority::Normal, &writer);
    // Once the writer waits, a new reader cannot get in.
    bool heldBack = false;
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!heldBack && std::chrono::steady_clock::now() < deadline) {
        if (lock.try_lock_shared()) {
            lock.unlock_shared();
            std::this_thread::yield();
        } else {
            heldBack = true;
        }
    }
    CHECK(heldBack);
    CHECK_FALSE(writerIn.load());
    lock.unlock_shared();
    ts.WaitForCounter(&writer);
    CHECK(writerIn.load());
}

TEST_CASE("A Semaphore or an Event may be destroyed as soon as the wait it ended returns", "[primitives]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    // A completion signal on the waiter's stack: the releasing task may still
    // be inside release() or Set() when the wait returns (AddressSanitizer
    // reports any touch after that).
    unsigned const rounds = ftl_test::kSlowBuild ? 200 : 2000;
    ftl::TaskCounter counter(&ts);
    unsigned ended = 0;
    for (unsigned i = 0; i < rounds; ++i) {
        {
            ftl::Semaphore done(&ts, 0);
            ts.AddTask([&done] { done.release(); }, ftl::TaskPriority::Normal, &counter);
            done.acquire();
            ended += done.try_acquire() ? 0u : 1u; // the one unit was taken
        }
        {
            ftl::Event done(&ts, i % 2 == 0);
            ts.AddTask([&done] { done.Set(); }, ftl::TaskPriority::Normal, &counter);
            done.Wait();
            ended += 1;
        }
    }
    ts.WaitForCounter(&counter);
    CHECK(ended == 2 * rounds);
}
