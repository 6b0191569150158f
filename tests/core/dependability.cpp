// Nothing freed under a waker, nothing lost, nothing accepted silently: a
// thread outside the scheduler that ends the Init thread's wait while the
// scheduler is destroyed right after, a wait group reused in one stack slot,
// counters destroyed by the waiter their operation released, AddTasks that
// throws, and the counter misuse that is a fatal error. The use-after-free
// cases are caught by the ASan and TSan builds (they run these rounds too);
// the plain build checks what every round computed.
#include "ftl/atomic_counter.h"
#include "ftl/condition_variable.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "ftl/wait_group.h"
#include "test_support.h"

#include <atomic>
#include <climits>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using ftl_test::ChildResult;
using ftl_test::Options;
using ftl_test::RunInChild;

namespace {

// A small scheduler that starts fast: the rounds below make thousands.
ftl::TaskSchedulerInitOptions SmallOptions(unsigned threads) {
    ftl::TaskSchedulerInitOptions options = Options(threads);
    options.FiberPoolSize = 8;
    options.FiberStackSize = 64 * 1024;
    return options;
}

unsigned Rounds(unsigned plain) {
    return ftl_test::kSlowBuild ? plain / 2 : plain;
}

void RequireFatal(ChildResult const &result, std::string const &phrase) {
    INFO("child stderr:\n" << result.Stderr);
    INFO("exited " << result.Exited << " code " << result.ExitCode << ", signaled " << result.Signaled
                   << " signal " << result.Signal << ", timed out " << result.TimedOut);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas("ftl: fatal error:"));
    REQUIRE(result.StderrHas(phrase));
}

enum class Waitable { Counter, Flag, FullCounter, Fibtex, ConditionVariable };

// One round: the Init thread waits on a waitable that a thread outside the
// scheduler releases, then destroys the scheduler at once. Returns what the
// outside thread's operation saw, which must be the value before it.
//
// The waker runs on the Init thread's CPU (worker 0 is pinned there): its
// wake then lets the Init thread preempt it, and the destruction runs while
// the waker is still inside its wake (Scheduler::YieldToWoken's case).
unsigned OutsideWakeThenDestroy(Waitable kind, unsigned threads) {
    std::optional<ftl::TaskScheduler> ts;
    ts.emplace();
    REQUIRE(ts->Init(SmallOptions(threads)) == 0);
    std::atomic<unsigned> seen{UINT_MAX};
#if defined(__linux__)
    int const initCpu = sched_getcpu();
    auto const onInitCpu = [initCpu] {
        if (initCpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(static_cast<unsigned>(initCpu), &set);
            pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        }
    };
#else
    auto const onInitCpu = [] {};
#endif
    std::thread waker;
    switch (kind) {
    case Waitable::Counter: {
        ftl::TaskCounter counter(&*ts);
        counter.Add(1);
        waker = std::thread([&] {
            onInitCpu();
            counter.Decrement();
            seen.store(1);
        });
        ts->WaitForCounter(&counter);
        break;
    }
    case Waitable::Flag: {
        ftl::AtomicFlag flag(&*ts, 1);
        waker = std::thread([&] {
            onInitCpu();
            seen.store(flag.Clear() ? 1u : 0u);
        });
        ts->WaitForCounter(&flag);
        break;
    }
    case Waitable::FullCounter: {
        ftl::FullAtomicCounter counter(&*ts, 0);
        waker = std::thread([&] {
            onInitCpu();
            seen.store(counter.FetchAdd(3));
        });
        ts->WaitForCounter(&counter, 3);
        break;
    }
    case Waitable::Fibtex: {
        ftl::Fibtex mutex(&*ts);
        std::atomic<bool> held{false};
        waker = std::thread([&] {
            onInitCpu();
            mutex.lock();
            held.store(true);
            std::this_thread::yield();
            mutex.unlock();
            seen.store(1);
        });
        while (!held.load()) {
            std::this_thread::yield();
        }
        mutex.lock();
        mutex.unlock();
        break;
    }
    case Waitable::ConditionVariable: {
        ftl::Fibtex mutex(&*ts);
        ftl::ConditionVariable ready(&*ts);
        bool done = false;
        waker = std::thread([&] {
            onInitCpu();
            // The notify under the lock: the waiter may destroy the
            // condition variable as soon as it sees `done` and the lock.
            std::lock_guard<ftl::Fibtex> lock(mutex);
            done = true;
            ready.notify_one();
            seen.store(1);
        });
        std::unique_lock<ftl::Fibtex> lock(mutex);
        ready.wait(lock, [&] { return done; });
        break;
    }
    }
    ts.reset(); // while the waker may still be inside its wake
    waker.join();
    return seen.load();
}

// `busy` threads spin meanwhile: the kernel then preempts the waker at any
// point of its wake, the destroying thread's chance to run under it.
void OutsideWakeRounds(unsigned threads, Waitable kind, unsigned rounds, unsigned busy) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> spinners;
    for (unsigned i = 0; i < busy; ++i) {
        spinners.emplace_back([&stop] {
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
    }
    unsigned right = 0;
    for (unsigned round = 0; round < rounds; ++round) {
        unsigned const seen = OutsideWakeThenDestroy(kind, threads);
        right += kind == Waitable::FullCounter ? (seen == 0 ? 1u : 0u) : (seen == 1 ? 1u : 0u);
    }
    stop.store(true);
    for (std::thread &spinner : spinners) {
        spinner.join();
    }
    REQUIRE(right == rounds);
}

} // namespace

TEST_CASE("A thread outside the scheduler that ends the Init thread's wait, then the scheduler is destroyed",
          "[dependability]") {
    unsigned const threads = GENERATE(1u, 2u);
    auto const kind = GENERATE(Waitable::Counter, Waitable::Flag, Waitable::FullCounter, Waitable::Fibtex,
                               Waitable::ConditionVariable);
    OutsideWakeRounds(threads, kind, Rounds(100), 1);
}

// The stress label's long form (tests/CMakeLists.txt).
TEST_CASE("1,000 rounds of an outside thread ending the Init thread's wait, then destruction",
          "[.stress][dependability]") {
    auto const kind = GENERATE(Waitable::Counter, Waitable::Flag, Waitable::FullCounter, Waitable::Fibtex,
                               Waitable::ConditionVariable);
    // Under an emulator (qemu, wine) a round costs tens of times more.
    OutsideWakeRounds(2, kind, ftl_test::kCpuEmulated || ftl_test::kWine ? 100 : 1000, 2);
}

TEST_CASE("A task of one scheduler ends a wait of another, which is destroyed right after",
          "[dependability]") {
    // Scheduler B lives on a thread of its own; its task lowers a counter of
    // scheduler A, whose Init thread then destroys A.
    ftl::TaskScheduler b;
    std::atomic<ftl::TaskCounter *> toLower{nullptr};
    std::atomic<unsigned> lowered{0};
    std::atomic<bool> stop{false};
    std::atomic<int> bInit{1};
    std::thread bThread([&] {
        bInit.store(b.Init(SmallOptions(1))); // checked by the main thread: Catch2 asserts from one
        if (bInit.load() != 0) {
            return;
        }
        while (!stop.load()) {
            ftl::TaskCounter *counter = toLower.exchange(nullptr);
            if (counter == nullptr) {
                std::this_thread::yield();
                continue;
            }
            ftl::TaskCounter done(&b);
            b.AddTask([counter, &lowered] { counter->Decrement(), lowered.fetch_add(1); },
                      ftl::TaskPriority::Normal, &done);
            b.WaitForCounter(&done);
        }
        b.~TaskScheduler();
        new (&b) ftl::TaskScheduler();
    });
    while (bInit.load() == 1) {
        std::this_thread::yield();
    }
    REQUIRE(bInit.load() == 0);
    unsigned const rounds = Rounds(200);
    for (unsigned round = 0; round < rounds; ++round) {
        std::optional<ftl::TaskScheduler> a;
        a.emplace();
        REQUIRE(a->Init(SmallOptions(2)) == 0);
        ftl::TaskCounter counter(&*a);
        counter.Add(1);
        toLower.store(&counter);
        a->WaitForCounter(&counter);
        a.reset();
    }
    stop.store(true);
    bThread.join();
    REQUIRE(lowered.load() == rounds);
}

TEST_CASE("Wait groups waited on by outside threads, each round's group in the same stack slot",
          "[dependability][wait_group]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    // Two tasks a group, one on each worker, each long enough that the
    // waiter has registered before they end: their Done() calls come close
    // together, and the first sees the waiter.
    constexpr unsigned kTasks = 2;
    unsigned const rounds = Rounds(1000);
    std::atomic<unsigned> total{0};
    auto outside = [&] {
        for (unsigned round = 0; round < rounds; ++round) {
            ftl::WaitGroup group(&ts);
            std::atomic<unsigned> ran{0};
            group.Add(kTasks);
            ts.AddTasks(
                kTasks,
                [&](unsigned) {
                    ftl_test::BusyMicros(20);
                    ran.fetch_add(1);
                    group.Done();
                },
                ftl::TaskPriority::Normal);
            group.Wait();
            total.fetch_add(ran.load());
        }
    };
    // A thread that spins meanwhile: the kernel then preempts a worker
    // between a Done()'s decrement and the rest of it.
    std::atomic<bool> stop{false};
    std::thread spinner([&stop] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
    });
    std::thread first(outside);
    std::thread second(outside);
    first.join();
    second.join();
    stop.store(true);
    spinner.join();
    REQUIRE(total.load() == 2 * rounds * kTasks);
}

TEST_CASE("A counter destroyed by the waiter one operation released, while another that saw the waiter "
          "is on its way",
          "[dependability][atomic_counter]") {
    // Two tasks each add 1; the outside waiter waits for 2. The first add
    // saw the waiter but produced 1: it still looks at the list, and must
    // be done before the waiter's destructor frees the counter.
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    unsigned const rounds = Rounds(2000);
    unsigned reached = 0;
    std::thread outside([&] {
        for (unsigned round = 0; round < rounds; ++round) {
            auto counter = std::make_unique<ftl::FullAtomicCounter>(&ts, 0);
            ftl::FullAtomicCounter *raw = counter.get();
            ts.AddTasks(
                2, [raw](unsigned) { raw->FetchAdd(1); }, ftl::TaskPriority::Normal);
            ts.WaitForCounter(raw, 2);
            reached += raw->Load() == 2 ? 1u : 0u;
            counter.reset();
        }
    });
    outside.join();
    REQUIRE(reached == rounds);
}

#if !defined(_WIN32) // RLIMIT_AS
TEST_CASE("AddTasks whose queue cannot grow throws and leaves nothing counted", "[dependability][errors]") {
    if (ftl_test::kAddressSanitizer || ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated) {
        // The sanitizers' allocators end the process on a failed huge
        // allocation instead of throwing; an emulator (qemu) needs address
        // space of its own beyond the limit set below.
        WARN("skipped: a huge allocation ends a sanitized or emulated process");
        return;
    }
    ChildResult const result = RunInChild([] {
        // An address space of 4 GiB: the allocations below fail at once,
        // whatever the machine's overcommit.
        rlimit const limit{std::uint64_t{4} << 30, std::uint64_t{4} << 30};
        if (setrlimit(RLIMIT_AS, &limit) != 0) {
            std::_Exit(2);
        }
        ftl::TaskScheduler ts;
        if (ts.Init(Options(2)) != 0) {
            std::_Exit(3);
        }
        ftl::TaskCounter counter(&ts);
        std::atomic<unsigned> ran{0};
        // From an outside thread: the global queue must grow to hold
        // 2^31 - 1 tasks.
        std::thread outside([&] {
            try {
                ts.AddTasks(
                    ftl::TaskCounter::kMaxCount, [&ran](unsigned) { ran.fetch_add(1); },
                    ftl::TaskPriority::Normal, &counter);
                std::_Exit(4); // it did not throw
            } catch (std::bad_alloc const &) {
            }
        });
        outside.join();
        // The same from a worker (the Init thread): its own deque.
        try {
            ts.AddTasks(
                ftl::TaskCounter::kMaxCount, [&ran](unsigned) { ran.fetch_add(1); },
                ftl::TaskPriority::Normal, &counter);
            std::_Exit(5);
        } catch (std::bad_alloc const &) {
        }
        // Nothing is left counted: the wait returns at once, new tasks run,
        // and the destructor's drain ends.
        ts.WaitForCounter(&counter);
        ts.AddTasks(
            3, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        if (ran.load() != 3) {
            std::_Exit(6);
        }
    });
    INFO("child stderr:\n" << result.Stderr);
    INFO("exited " << result.Exited << " code " << result.ExitCode << ", signaled " << result.Signaled
                   << " signal " << result.Signal << ", timed out " << result.TimedOut);
    REQUIRE(result.Exited);
    REQUIRE(result.ExitCode == 0);
}

#endif

TEST_CASE("Counter arithmetic that would wrap is a fatal error", "[dependability][misuse]") {
    SECTION("TaskCounter::Decrement at 0") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ftl::TaskCounter counter(&ts);
                         counter.Decrement();
                     }),
                     "TaskCounter::Decrement brought the count below 0");
    }
    SECTION("TaskCounter::Add(-1)") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ftl::TaskCounter counter(&ts, 2);
                         counter.Add(static_cast<unsigned>(-1));
                     }),
                     "TaskCounter::Add(4294967295) on a count of 2");
    }
    SECTION("TaskCounter::Add(UINT_MAX), then a task") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ftl::TaskCounter counter(&ts);
                         counter.Add(UINT_MAX);
                         ts.AddTask([] {}, ftl::TaskPriority::Normal, &counter);
                     }),
                     "the count would pass 2147483647");
    }
    SECTION("A counter decremented by hand below the tasks still counted") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ftl::TaskCounter counter(&ts);
                         ftl::AtomicFlag ran(&ts, 1);
                         ts.AddTask([&] { ran.Clear(); }, ftl::TaskPriority::Normal, &counter);
                         counter.Decrement(); // the task has not finished
                         ts.WaitForCounter(&ran);
                         // The task's finish comes right after its body.
                         auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                         while (std::chrono::steady_clock::now() < until) {
                             ts.Yield();
                         }
                     }),
                     "a task's finish brought the count below 0");
    }
    SECTION("WaitGroup::Done past 0") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ftl::WaitGroup group(&ts);
                         group.Add(1);
                         group.Done();
                         group.Done();
                     }),
                     "WaitGroup::Add or Done brought the count below 0");
    }
    SECTION("Up to the most, Add and Decrement by hand balance and release the wait") {
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(2)) == 0);
        {
            ftl::TaskCounter most(&ts, ftl::TaskCounter::kMaxCount - 1);
            most.Add(1); // reaches the most: allowed
            REQUIRE_FALSE(ts.WaitForCounter(&most, std::chrono::milliseconds(1)));
        }
        ftl::TaskCounter counter(&ts);
        counter.Add(3);
        std::thread lower([&] {
            for (unsigned i = 0; i < 3; ++i) {
                counter.Decrement();
            }
        });
        ts.WaitForCounter(&counter);
        lower.join();
        REQUIRE(ts.WaitForCounter(&counter, std::chrono::milliseconds(0)));
    }
}

TEST_CASE("Null and out-of-range arguments are fatal errors naming the call", "[dependability][misuse]") {
    SECTION("AddTasks with no array") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ts.AddTasks(4, static_cast<ftl::Task const *>(nullptr), ftl::TaskPriority::Normal);
                     }),
                     "AddTasks: 4 task(s) but no array of them");
    }
    SECTION("WaitForCounter(nullptr)") {
        auto const which = GENERATE(0, 1, 2, 3);
        RequireFatal(RunInChild([which] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         switch (which) {
                         case 0:
                             ts.WaitForCounter(static_cast<ftl::TaskCounter *>(nullptr));
                             break;
                         case 1:
                             ts.WaitForCounter(static_cast<ftl::AtomicFlag *>(nullptr));
                             break;
                         case 2:
                             ts.WaitForCounter(static_cast<ftl::FullAtomicCounter *>(nullptr), 1);
                             break;
                         default:
                             ts.WaitForCounter(static_cast<ftl::TaskCounter *>(nullptr),
                                               std::chrono::milliseconds(1));
                             break;
                         }
                     }),
                     "WaitForCounter(nullptr)");
    }
    SECTION("A TaskPriority that is none") {
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler ts;
                         REQUIRE(ts.Init(Options(1)) == 0);
                         ts.AddTask([] {}, static_cast<ftl::TaskPriority>(7));
                     }),
                     "TaskPriority(7) is not a priority");
    }
    SECTION("An EmptyQueueBehavior that is none") {
        ftl::TaskSchedulerInitOptions options = Options(1);
        options.Behavior = static_cast<ftl::EmptyQueueBehavior>(42);
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == static_cast<int>(ftl::InitError::InvalidOptions));
        RequireFatal(RunInChild([] {
                         ftl::TaskScheduler other;
                         REQUIRE(other.Init(Options(1)) == 0);
                         other.SetEmptyQueueBehavior(static_cast<ftl::EmptyQueueBehavior>(42));
                     }),
                     "EmptyQueueBehavior(42) is not a behaviour");
    }
}

TEST_CASE("Adding tasks from an outside thread while the scheduler is destroyed is a fatal error",
          "[dependability][misuse]") {
    // A task holds the destructor's drain open until the outside thread has
    // tried its add: the add surely comes while the destructor runs.
    ChildResult const result = RunInChild([] {
        std::atomic<bool> destroying{false};
        std::atomic<bool> tried{false};
        std::thread adder;
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            ts.AddTask(
                [&] {
                    while (!tried.load()) {
                        std::this_thread::yield();
                    }
                },
                ftl::TaskPriority::Normal);
            adder = std::thread([&] {
                while (!destroying.load()) {
                    std::this_thread::yield();
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                ts.AddTask([] {}, ftl::TaskPriority::Normal);
                tried.store(true); // not reached: the add above is fatal
            });
            destroying.store(true);
        }
        adder.join();
    });
    RequireFatal(result,
                 "tasks added by a thread outside the scheduler while the TaskScheduler is being destroyed");
}
