// Misuse: Init's error results, and the fatal errors (each run in a child
// process, whose exit and stderr are checked; see RunInChild).
//
// On POSIX the children fork from a parent with no live scheduler: each test
// case creates its schedulers in the child only, and any scheduler an
// earlier test case created in this process is destroyed (its threads
// joined).
#include "ftl/atomic_counter.h"
#include "ftl/barrier.h"
#include "ftl/fibtex.h"
#include "ftl/semaphore.h"
#include "ftl/shared_fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "ftl/thread_local.h"
#include "test_support.h"
#include "waitables/fibtex_ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

using ftl_test::ChildResult;
using ftl_test::FibCall;
using ftl_test::LambdaTask;
using ftl_test::Options;
using ftl_test::RunInChild;

namespace {

// Checks that the child died of a fatal error whose message has `phrase`.
void RequireDeath(ChildResult const &result, std::string const &phrase) {
    INFO("child stderr:\n" << result.Stderr);
    INFO("exited " << result.Exited << " code " << result.ExitCode << ", signaled " << result.Signaled
                   << " signal " << result.Signal << ", timed out " << result.TimedOut);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas(phrase));
}

} // namespace

TEST_CASE("Init reports errors as InitError values", "[misuse]") {
    SECTION("Init twice") {
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(Options(2)) == 0);
        REQUIRE(ts.Init(Options(2)) == static_cast<int>(ftl::InitError::AlreadyInitialized));
        // The scheduler is untouched and still works.
        REQUIRE(ts.GetThreadCount() == 2u);
        FibCall fib{12, 0};
        ftl::TaskCounter counter(&ts);
        ts.AddTask(ftl::Task{ftl_test::FibTask, &fib}, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(fib.Result == 144u);
    }

    SECTION("A fiber pool of size 0") {
        ftl::TaskSchedulerInitOptions options = Options(2);
        options.FiberPoolSize = 0;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == static_cast<int>(ftl::InitError::InvalidOptions));
        // A scheduler whose Init failed can be destroyed, and a new one made.
        ftl::TaskScheduler other;
        REQUIRE(other.Init(Options(2)) == 0);
    }

    SECTION("Stack and guard sizes that are absurd, or whose sum with the gap cannot be mapped") {
        std::size_t const max = std::numeric_limits<std::size_t>::max();
        std::size_t const defaultGuard = ftl::TaskSchedulerInitOptions{}.FiberStackGuardSize;
        struct Sizes {
            std::size_t Stack;
            std::size_t Guard;
        };
        Sizes const cases[] = {
            {max, defaultGuard},                    // rounding up to pages would wrap to 0
            {max - 4095, defaultGuard},             // rounds up to exactly 0
            {max - defaultGuard + 1, defaultGuard}, // stack + guard wraps
            {max / 2 + 1, max / 2 + 1},             // stack + guard wraps
            {(std::size_t{1} << 30) + 1, defaultGuard},
            {16 * 1024 - 1, defaultGuard},
            {256 * 1024, 0},
            {256 * 1024, max},
            {256 * 1024, max - 4095},
            {256 * 1024, (std::size_t{1} << 30) + 1},
        };
        // One thread makes no stack at Init, two make one: both must refuse.
        for (unsigned threads : {1u, 2u}) {
            for (Sizes const &sizes : cases) {
                CAPTURE(threads, sizes.Stack, sizes.Guard);
                ftl::TaskSchedulerInitOptions options = Options(threads);
                options.FiberStackSize = sizes.Stack;
                options.FiberStackGuardSize = sizes.Guard;
                ftl::TaskScheduler ts;
                REQUIRE(ts.Init(options) == static_cast<int>(ftl::InitError::InvalidOptions));
            }
        }
        // The bounds themselves are taken, and a large guard works.
        for (Sizes const &sizes : {Sizes{16 * 1024, 1}, Sizes{64 * 1024, 4 * 1024 * 1024}}) {
            CAPTURE(sizes.Stack, sizes.Guard);
            ftl::TaskSchedulerInitOptions options = Options(2);
            options.FiberStackSize = sizes.Stack;
            options.FiberStackGuardSize = sizes.Guard;
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(options) == 0);
            FibCall fib{12, 0};
            ftl::TaskCounter counter(&ts);
            ts.AddTask(ftl::Task{ftl_test::FibTask, &fib}, ftl::TaskPriority::Normal, &counter);
            ts.WaitForCounter(&counter);
            REQUIRE(fib.Result == 144u);
        }
    }

    SECTION("A thread that is already a worker of a live scheduler") {
        ftl::TaskScheduler first;
        REQUIRE(first.Init(Options(2)) == 0);
        ftl::TaskScheduler second;
        REQUIRE(second.Init(Options(2)) == static_cast<int>(ftl::InitError::ThreadAlreadyBound));
        REQUIRE(first.GetCurrentThreadIndex() == 0u);
    }

    SECTION("Every InitError has a message") {
        std::vector<std::string> messages;
        for (ftl::InitError error :
             {ftl::InitError::Success, ftl::InitError::AlreadyInitialized, ftl::InitError::InvalidOptions,
              ftl::InitError::ThreadCreationFailed, ftl::InitError::FiberCreationFailed,
              ftl::InitError::ThreadAlreadyBound}) {
            char const *message = ftl::InitErrorString(static_cast<int>(error));
            REQUIRE(message != nullptr);
            REQUIRE(std::strlen(message) > 0);
            messages.emplace_back(message);
        }
        std::sort(messages.begin(), messages.end());
        REQUIRE(std::unique(messages.begin(), messages.end()) == messages.end());
        REQUIRE(ftl::InitErrorString(-1000) != nullptr);
    }
}

TEST_CASE("A wait on a destroyed counter aborts, from a task or another thread", "[misuse]") {
    bool const outside = GENERATE(true, false);
    CAPTURE(outside);
    ChildResult const result = RunInChild([outside] {
        ftl::TaskScheduler ts;
        ts.Init(Options(2));
        // Storage that outlives the counter, so the check reads a dead object
        // rather than another one.
        alignas(ftl::AtomicFlag) unsigned char storage[sizeof(ftl::AtomicFlag)];
        auto *flag = ::new (storage) ftl::AtomicFlag(&ts, 1);
        flag->Clear();
        flag->~AtomicFlag();
        if (outside) {
            std::thread([&] { ts.WaitForCounter(flag); }).join();
        } else {
            ts.WaitForCounter(flag);
        }
    });
    RequireDeath(result, "on a counter that was destroyed");
}

TEST_CASE("Unlocking a Fibtex the fiber does not hold aborts", "[misuse]") {
    SECTION("Held by another fiber") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::Fibtex mutex(&ts);
            mutex.lock(); // held by the Init thread's fiber
            auto unlocker = [&](ftl::TaskScheduler *) { mutex.unlock(); };
            ftl::TaskCounter counter(&ts);
            ts.AddTask(LambdaTask(unlocker), ftl::TaskPriority::Normal, &counter);
            ts.WaitForCounter(&counter);
        });
        RequireDeath(result, "not hold");
    }

    SECTION("Not locked at all") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::Fibtex mutex(&ts);
            mutex.unlock();
        });
        RequireDeath(result, "not locked");
    }
}

TEST_CASE("Unlocking a Fibtex twice aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskScheduler ts;
        ts.Init(Options(2));
        ftl::Fibtex mutex(&ts);
        auto twice = [&](ftl::TaskScheduler *) {
            mutex.lock();
            mutex.unlock();
            mutex.unlock();
        };
        ftl::TaskCounter counter(&ts);
        ts.AddTask(LambdaTask(twice), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    });
    RequireDeath(result, "twice");
}

namespace {

// A Fibtex at an address the parent knows too (a forked child's is the
// same), for the messages that name it.
alignas(ftl::Fibtex) unsigned char g_namedFibtex[sizeof(ftl::Fibtex)];

std::string NamedFibtexText() {
    char text[64];
    std::snprintf(text, sizeof text, "a Fibtex (0x%" PRIxPTR ")",
                  reinterpret_cast<std::uintptr_t>(g_namedFibtex));
    return text;
}

} // namespace

// A Fibtex belongs to the task that locked it: a task that returns holding
// one would leave it to whatever runs next on its fiber (or in its inline
// loop), which could unlock it as its own.
TEST_CASE("A task that ends holding a Fibtex aborts and names the lock and the task", "[misuse]") {
    int const kind = GENERATE(0, 1, 2, 3);
    char const *const kinds[] = {"a task", "a child run inline", "a task that waited while holding it",
                                 "a task holding two"};
    CAPTURE(kinds[kind]);
    ChildResult const result = RunInChild(
        [kind] {
            ftl::TaskScheduler ts;
            ts.Init(Options(kind == 2 ? 3 : 1));
            auto *mutex = ::new (g_namedFibtex) ftl::Fibtex(&ts);
            ftl::Fibtex other(&ts);
            std::atomic<unsigned> ended{0};
            auto holder = [&](ftl::TaskScheduler *taskScheduler) {
                mutex->lock();
                if (kind == 2) {
                    ftl::TaskCounter counter(taskScheduler);
                    auto nothing = [](ftl::TaskScheduler *) {};
                    taskScheduler->AddPinnedTask(2, LambdaTask(nothing), ftl::TaskPriority::Normal, &counter);
                    taskScheduler->WaitForCounter(&counter);
                }
                if (kind == 3) {
                    other.lock();
                }
                ended.fetch_add(1);
            };
            auto parent = [&](ftl::TaskScheduler *taskScheduler) {
                ftl::TaskCounter counter(taskScheduler);
                taskScheduler->AddTask(LambdaTask(holder), ftl::TaskPriority::Normal, &counter);
                taskScheduler->WaitForCounter(&counter);
            };
            // What the task's end used to allow: the next task unlocks it.
            auto next = [&](ftl::TaskScheduler *) { mutex->unlock(); };
            ftl::TaskCounter counter(&ts);
            if (kind == 1) {
                ts.AddTask(LambdaTask(parent), ftl::TaskPriority::Normal, &counter);
            } else {
                ts.AddPinnedTask(1 % ts.GetThreadCount(), LambdaTask(holder), ftl::TaskPriority::Normal,
                                 &counter);
            }
            ts.WaitForCounter(&counter);
            ts.AddTask(LambdaTask(next), ftl::TaskPriority::Normal, &counter);
            ts.WaitForCounter(&counter);
            std::fprintf(stderr, "no fatal error: %u tasks ended\n", ended.load());
        },
        std::chrono::seconds(10));
    if (kind == 3) {
        RequireDeath(result, "ftl: fatal error: a task ended holding 2 Fibtexes: task function 0x");
    } else {
        RequireDeath(result,
                     "ftl: fatal error: a task ended holding " + NamedFibtexText() + ": task function 0x");
    }
    REQUIRE(result.StderrHas(", on fiber "));
    REQUIRE(result.StderrHas(kind == 1 ? ", run inline" : " of worker "));
}

// A lock by the holder itself waits for itself forever: on a thread outside
// the scheduler's tasks nothing reports it, so the lock does, once it finds
// the lock held.
TEST_CASE("A recursive Fibtex lock aborts instead of hanging", "[misuse]") {
    int const where = GENERATE(0, 1, 2, 3, 4, 5);
    char const *const places[] = {"the Init thread, a worker",      "the Init thread before Init",
                                  "a thread outside the scheduler", "a task",
                                  "a task, lock_spin_infinite",     "a thread with no scheduler, lock_spin"};
    CAPTURE(places[where]);
    ChildResult const result = RunInChild(
        [where] {
            ftl::TaskScheduler ts;
            if (where != 1 && where != 5) {
                ts.Init(Options(2));
            }
            auto *mutex = ::new (g_namedFibtex) ftl::Fibtex(where == 5 ? nullptr : &ts);
            auto twice = [&] {
                mutex->lock();
                if (where == 4) {
                    mutex->lock_spin_infinite();
                } else if (where == 5) {
                    mutex->lock_spin(false, 10);
                } else {
                    mutex->lock();
                }
            };
            if (where == 2) {
                std::thread(twice).join();
            } else if (where == 3 || where == 4) {
                auto task = [&](ftl::TaskScheduler *) { twice(); };
                ftl::TaskCounter counter(&ts);
                ts.AddTask(LambdaTask(task), ftl::TaskPriority::Normal, &counter);
                ts.WaitForCounter(&counter);
            } else {
                twice();
            }
        },
        std::chrono::seconds(10));
    RequireDeath(result, "ftl: fatal error: Fibtex::lock by the task or thread that already holds it (a "
                         "recursive lock): Fibtex 0x");
    char address[32];
    std::snprintf(address, sizeof address, "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(g_namedFibtex));
    REQUIRE(result.StderrHas(address));
}

TEST_CASE("Destroying a locked Fibtex aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskScheduler ts;
        ts.Init(Options(1));
        auto *mutex = new ftl::Fibtex(&ts);
        mutex->lock();
        delete mutex;
    });
    RequireDeath(result, "locked");
}

TEST_CASE("Destroying a Fibtex while a fiber waits for it aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskScheduler ts;
        ts.Init(Options(2));
        auto *mutex = new ftl::Fibtex(&ts);
        mutex->lock();
        auto waiter = [mutex](ftl::TaskScheduler *) { std::lock_guard<ftl::Fibtex> lock(*mutex); };
        ftl::TaskCounter counter(&ts);
        ts.AddTask(ftl_test::LambdaTask(waiter), ftl::TaskPriority::Normal, &counter);
        // Until the task's node is on the Fibtex's list (its spin is over and
        // its registration ran).
        while (!ftl::detail::FibtexOps::HasWaiters(*mutex)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        delete mutex;
    });
    RequireDeath(result, "destroyed while fibers wait");
}

TEST_CASE("AddTaskAfter with a prerequisite destroyed first, or none at all, aborts", "[misuse][after]") {
    SECTION("destroyed before the task started") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(2));
            auto *gate = new ftl::TaskCounter(&ts, 1);
            ts.AddTaskAfter(
                {gate}, [] {}, ftl::TaskPriority::Normal);
            delete gate;
        });
        RequireDeath(result, "AddTaskAfter task(s) still wait on it");
    }
    SECTION("nullptr") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(2));
            ftl::TaskCounter ready(&ts);
            ts.AddTaskAfter(
                {&ready, nullptr}, [] {}, ftl::TaskPriority::Normal);
        });
        RequireDeath(result, "AddTaskAfter: prerequisite 1 is nullptr");
    }
    SECTION("the task's own counter") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(2));
            ftl::TaskCounter counter(&ts);
            ts.AddTaskAfter(
                {&counter}, [] {}, ftl::TaskPriority::Normal, &counter);
        });
        RequireDeath(result, "AddTaskAfter: prerequisite 0 is the task's own counter");
    }
}

TEST_CASE("Destroying a counter while a fiber waits on it aborts", "[misuse]") {
    int const kind = GENERATE(0, 1, 2);
    char const *const kinds[] = {"AtomicFlag", "TaskCounter", "FullAtomicCounter"};
    CAPTURE(kinds[kind]);
    ChildResult const result = RunInChild([kind] {
        ftl::TaskScheduler ts;
        ts.Init(Options(1));
        auto *flag = new ftl::AtomicFlag(&ts, 1);
        auto *counter = new ftl::TaskCounter(&ts, 1);
        auto *value = new ftl::FullAtomicCounter(&ts, 0);
        // One thread: the destroyer runs only once the waiter has parked.
        auto destroyer = [&](ftl::TaskScheduler *) {
            switch (kind) {
            case 0:
                delete flag;
                break;
            case 1:
                delete counter;
                break;
            default:
                delete value;
                break;
            }
        };
        auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
            taskScheduler->AddTask(LambdaTask(destroyer), ftl::TaskPriority::High);
            switch (kind) {
            case 0:
                taskScheduler->WaitForCounter(flag);
                break;
            case 1:
                taskScheduler->WaitForCounter(counter);
                break;
            default:
                taskScheduler->WaitForCounter(value, 1);
                break;
            }
        };
        ftl::TaskCounter done(&ts);
        ts.AddTask(LambdaTask(waiter), ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
    });
    RequireDeath(result, "destroyed");
}

TEST_CASE("FiberPoolPolicy::Fatal aborts naming the pool size", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskSchedulerInitOptions options = Options(2);
        options.FiberPoolSize = 37;
        options.PoolPolicy = ftl::FiberPoolPolicy::Fatal;
        ftl::TaskScheduler ts;
        ts.Init(options);
        ftl::AtomicFlag flag(&ts, 1);
        auto waiter = [&](ftl::TaskScheduler *taskScheduler) { taskScheduler->WaitForCounter(&flag); };
        std::vector<ftl::Task> tasks(100, LambdaTask(waiter));
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(100, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter); // never released: the pool runs dry first
    });
    RequireDeath(result, "pool");
    REQUIRE(result.StderrHas("37"));
}

TEST_CASE("ThreadLocal used outside the scheduler's threads aborts", "[misuse]") {
    ChildResult const result = RunInChild([] {
        ftl::TaskScheduler ts;
        ts.Init(Options(2));
        ftl::ThreadLocal<int> local(&ts);
        *local = 1; // the Init thread is worker 0: fine
        std::thread([&] { *local = 2; }).join();
    });
    RequireDeath(result, "not a worker");
}

TEST_CASE("Misusing a SharedFibtex, a Barrier or a Semaphore aborts with a clear error", "[misuse]") {
    SECTION("unlock_shared without a shared lock") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::SharedFibtex lock(&ts);
            lock.lock();
            lock.unlock_shared();
        });
        RequireDeath(result, "no reader holds it (a writer does)");
    }
    SECTION("unlock with no writer") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::SharedFibtex lock(&ts);
            lock.lock_shared();
            lock.unlock();
        });
        RequireDeath(result, "no writer holds it (1 reader(s) do)");
    }
    SECTION("an arrival after every participant dropped out") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::Barrier barrier(&ts, 1);
            barrier.arrive_and_drop();
            barrier.arrive_and_wait();
        });
        RequireDeath(result, "dropped to 0");
    }
    SECTION("a negative initial count") {
        ChildResult const result = RunInChild([] {
            ftl::TaskScheduler ts;
            ts.Init(Options(1));
            ftl::Semaphore semaphore(&ts, -1);
        });
        RequireDeath(result, "initial count of -1");
    }
}

TEST_CASE("The death-test runner tells a clean exit from a death", "[misuse]") {
    ChildResult const clean = RunInChild([] { std::fputs("just a message\n", stderr); });
    REQUIRE(clean.Exited);
    REQUIRE(clean.ExitCode == 0);
    REQUIRE_FALSE(clean.Died());
    REQUIRE(clean.StderrHas("JUST A MESSAGE"));

    ChildResult const aborted = RunInChild([] {
        std::fputs("about to abort\n", stderr);
        std::abort();
    });
    REQUIRE(aborted.Died());
    REQUIRE(aborted.Aborted());
    REQUIRE(aborted.StderrHas("about to abort"));
}
