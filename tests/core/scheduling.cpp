// What the scheduling mechanisms must achieve: no starvation by a fiber
// ping-pong, priorities, ready fibers first, correct results with each
// measurement switch off and under every EmptyQueueBehavior (also
// changed at run time), destruction that runs every added task, Sleep-mode
// wake-ups that are never lost, and an idle scheduler that costs no CPU.
#include "behavior_name.h"
#include "ftl/atomic_counter.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using ftl_test::FibCall;
using ftl_test::FibTask;
using ftl_test::LambdaTask;
using ftl_test::Options;
using ftl_test::ParkOnce;

namespace {

// A mix of everything the scheduler does, every result checked: plain tasks,
// nested waits, producers and consumers, a contended Fibtex, pinned waits,
// value waits, and tasks added from a foreign thread meanwhile. Called on the
// Init thread.
void RunMixedWorkload(ftl::TaskScheduler &ts, unsigned fibN = 16) {
    unsigned const threads = ts.GetThreadCount();
    std::atomic<unsigned> plainRuns{0};
    std::atomic<unsigned> consumed{0};
    std::atomic<unsigned> pinnedMoved{0};
    std::atomic<unsigned> foreignRuns{0};
    std::atomic<unsigned> wrong{0};

    auto plain = [&](ftl::TaskScheduler *) { plainRuns.fetch_add(1, std::memory_order_relaxed); };
    auto consumer = [&](ftl::TaskScheduler *) { consumed.fetch_add(1, std::memory_order_relaxed); };
    auto producer = [&](ftl::TaskScheduler *taskScheduler) {
        std::vector<ftl::Task> consumers(50, LambdaTask(consumer));
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(50, consumers.data(), ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
    };

    ftl::Fibtex mutex(&ts);
    int guarded = 0;
    auto locker = [&](ftl::TaskScheduler *taskScheduler) {
        for (int i = 0; i < 30; ++i) {
            ftl::LockWrapper wrapped(mutex, ftl::FibtexLockBehavior::Spin, i % 2 == 0, 20);
            std::lock_guard<ftl::LockWrapper> lock(wrapped);
            ++guarded;
            if (i % 10 == 0) {
                ParkOnce(taskScheduler); // wait while holding it
            }
        }
    };

    auto pinned = [&](ftl::TaskScheduler *taskScheduler) {
        for (int i = 0; i < 10; ++i) {
            unsigned const before = taskScheduler->GetCurrentThreadIndex();
            ftl::AtomicFlag flag(taskScheduler, 1);
            taskScheduler->AddTask(ftl::Task{ftl_test::ClearFlag, &flag}, ftl::TaskPriority::Normal);
            taskScheduler->WaitForCounter(&flag, true);
            if (taskScheduler->GetCurrentThreadIndex() != before) {
                pinnedMoved.fetch_add(1);
            }
        }
    };

    ftl::FullAtomicCounter value(&ts);
    auto valueWaiter = [&](ftl::TaskScheduler *taskScheduler) {
        value.FetchAdd(1);
        taskScheduler->WaitForCounter(&value, 40); // 20 waiters, then 20 adds
        if (value.Load() < 40) {
            wrong.fetch_add(1);
        }
    };
    auto valueAdder = [&](ftl::TaskScheduler *taskScheduler) {
        taskScheduler->WaitForCounter(&value, 20);
        ftl::TaskCounter counter(taskScheduler);
        auto add = [&](ftl::TaskScheduler *) { value.FetchAdd(1); };
        std::vector<ftl::Task> adds(20, LambdaTask(add));
        taskScheduler->AddTasks(20, adds.data(), ftl::TaskPriority::High, &counter);
        taskScheduler->WaitForCounter(&counter);
    };

    FibCall fib{fibN, 0};
    ftl::TaskCounter all(&ts);
    std::vector<ftl::Task> tasks(400, LambdaTask(plain));
    tasks.insert(tasks.end(), 10, LambdaTask(producer));
    tasks.insert(tasks.end(), 8, LambdaTask(locker));
    tasks.insert(tasks.end(), 6, LambdaTask(pinned));
    tasks.insert(tasks.end(), 20, LambdaTask(valueWaiter));
    tasks.push_back(LambdaTask(valueAdder));
    tasks.push_back(ftl::Task{FibTask, &fib});
    // Interleave the kinds, and use both priorities.
    std::rotate(tasks.begin(), tasks.begin() + 200, tasks.end());
    ts.AddTasks(static_cast<unsigned>(tasks.size() / 2), tasks.data(), ftl::TaskPriority::Normal, &all);
    ts.AddTasks(static_cast<unsigned>(tasks.size() - tasks.size() / 2), tasks.data() + tasks.size() / 2,
                ftl::TaskPriority::High, &all);

    auto foreignTask = [&](ftl::TaskScheduler *) { foreignRuns.fetch_add(1, std::memory_order_relaxed); };
    ftl::TaskCounter foreignCounter(&ts);
    std::thread foreign([&] {
        for (int i = 0; i < 200; ++i) {
            ts.AddTask(LambdaTask(foreignTask), ftl::TaskPriority::Normal, &foreignCounter);
        }
    });
    ts.WaitForCounter(&all);
    foreign.join();
    ts.WaitForCounter(&foreignCounter);

    CAPTURE(threads);
    REQUIRE(plainRuns.load() == 400u);
    REQUIRE(consumed.load() == 10u * 50u);
    REQUIRE(guarded == 8 * 30);
    REQUIRE(pinnedMoved.load() == 0);
    REQUIRE(value.Load() == 40u);
    REQUIRE(wrong.load() == 0);
    std::uint64_t previous = 0;
    std::uint64_t expected = 1; // fib(1)
    for (unsigned n = 1; n < fibN; ++n) {
        expected += previous;
        previous = expected - previous;
    }
    REQUIRE(fib.Result == expected); // 987 for fib(16)
    REQUIRE(foreignRuns.load() == 200u);
}

} // namespace

TEST_CASE("A ping-pong of fibers cannot starve a queued task", "[scheduling]") {
    // One thread: the ping-pong pair always has a ready fiber, so only the
    // tick's turn for the task deques lets the third task in. A liveness
    // rule: it holds with any measurement switch off (the last value: none).
    auto const off = GENERATE(range(0u, ftl::detail::kNumMechanismSwitches + 1));
    ftl::detail::Mechanisms mechanisms;
    if (off < ftl::detail::kNumMechanismSwitches) {
        mechanisms.*ftl::detail::kMechanismSwitches[off].Flag = false;
    }
    CAPTURE(off < ftl::detail::kNumMechanismSwitches ? ftl::detail::kMechanismSwitches[off].Name : "none");
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(1), mechanisms) == 0);

    constexpr unsigned kRounds = 2000;
    std::atomic<unsigned> exchanges{0};
    std::atomic<unsigned> thirdRanAt{0};
    std::atomic<bool> thirdRan{false};
    ftl::AtomicFlag pingTurn(&ts, 0); // clear: ping may go
    ftl::AtomicFlag pongTurn(&ts, 1);
    ftl::FullAtomicCounter turn(&ts);
    bool const flags = GENERATE(true, false);
    bool const thirdFirst = GENERATE(true, false);
    CAPTURE(flags, thirdFirst);

    auto ping = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned r = 0; r < kRounds; ++r) {
            if (flags) {
                taskScheduler->WaitForCounter(&pingTurn);
                pingTurn.Set();
                exchanges.fetch_add(1);
                pongTurn.Clear();
            } else {
                taskScheduler->WaitForCounter(&turn, 2 * r);
                exchanges.fetch_add(1);
                turn.Store(2 * r + 1);
            }
        }
    };
    auto pong = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned r = 0; r < kRounds; ++r) {
            if (flags) {
                taskScheduler->WaitForCounter(&pongTurn);
                pongTurn.Set();
                exchanges.fetch_add(1);
                pingTurn.Clear();
            } else {
                taskScheduler->WaitForCounter(&turn, 2 * r + 1);
                exchanges.fetch_add(1);
                turn.Store(2 * r + 2);
            }
        }
    };
    auto third = [&](ftl::TaskScheduler *) {
        thirdRanAt.store(exchanges.load());
        thirdRan.store(true);
    };

    ftl::TaskCounter counter(&ts);
    if (thirdFirst) {
        ts.AddTask(LambdaTask(third), ftl::TaskPriority::Normal, &counter);
    }
    ftl::Task const pair[2] = {LambdaTask(ping), LambdaTask(pong)};
    ts.AddTasks(2, pair, ftl::TaskPriority::Normal, &counter);
    if (!thirdFirst) {
        ts.AddTask(LambdaTask(third), ftl::TaskPriority::Normal, &counter);
    }
    ts.WaitForCounter(&counter);

    REQUIRE(exchanges.load() == 2 * kRounds);
    REQUIRE(thirdRan.load());
    INFO("the third task ran after " << thirdRanAt.load() << " of " << 2 * kRounds << " exchanges");
    REQUIRE(thirdRanAt.load() < 2 * kRounds);
}

namespace {

// A chain of local tasks, each adding the next, until the outside task has
// run or `kLimitAfterAdd` links after it was added (the chain never ends
// before the outside thread got to add it, however slowly it is scheduled).
struct Chain {
    ftl::TaskCounter *Counter = nullptr;
    std::atomic<unsigned> Links{0};
    std::atomic<bool> OutsideRan{false};
    std::atomic<unsigned> OutsideRanAt{0};
    std::atomic<unsigned> OutsideAddedAt{0}; // 0: not added yet
    // The link count once AddTask returned: the task is queued by then.
    std::atomic<unsigned> OutsideQueuedBy{0};
    static constexpr unsigned kLimitAfterAdd = 200000;
};

void ChainLink(ftl::TaskScheduler *ts, void *arg) {
    auto *chain = static_cast<Chain *>(arg);
    unsigned const link = chain->Links.fetch_add(1, std::memory_order_relaxed) + 1;
    unsigned const addedAt = chain->OutsideAddedAt.load(std::memory_order_acquire);
    bool const limitReached = addedAt != 0 && link - addedAt >= Chain::kLimitAfterAdd;
    if (!limitReached && !chain->OutsideRan.load(std::memory_order_acquire)) {
        ts->AddTask({ChainLink, chain}, ftl::TaskPriority::High, chain->Counter);
    }
}

} // namespace

TEST_CASE("The global queue is not starved by local work", "[scheduling]") {
    // One worker runs an endless chain of local High-priority tasks. A task
    // added from an outside thread goes to the global queue, which the worker
    // checks every GlobalIntervalPolicy::Interval() items (at most 255): it must run long
    // before the chain would end on its own.
    ftl::detail::Mechanisms mechanisms;
    mechanisms.AdaptiveGlobalInterval = GENERATE(true, false);
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(1), mechanisms) == 0);

    Chain chain;
    ftl::TaskCounter counter(&ts);
    chain.Counter = &counter;
    ts.AddTask({ChainLink, &chain}, ftl::TaskPriority::High, &counter);

    std::thread outside([&ts, &chain] {
        // Add it once the chain is well under way.
        while (chain.Links.load(std::memory_order_relaxed) < 1000) {
            std::this_thread::yield();
        }
        chain.OutsideAddedAt.store(std::max(1u, chain.Links.load(std::memory_order_relaxed)),
                                   std::memory_order_release);
        ts.AddTask({[](ftl::TaskScheduler *, void *arg) {
                        auto *c = static_cast<Chain *>(arg);
                        c->OutsideRanAt.store(c->Links.load(std::memory_order_relaxed),
                                              std::memory_order_relaxed);
                        c->OutsideRan.store(true, std::memory_order_release);
                    },
                    &chain},
                   ftl::TaskPriority::Normal);
        chain.OutsideQueuedBy.store(chain.Links.load(std::memory_order_relaxed), std::memory_order_relaxed);
    });
    ts.WaitForCounter(&counter);
    outside.join();
    // The outside task is not counted by `counter`; the chain stops once it ran.
    REQUIRE(chain.OutsideRan.load());
    INFO("added at link " << chain.OutsideAddedAt.load() << ", queued by link "
                          << chain.OutsideQueuedBy.load() << ", ran at link " << chain.OutsideRanAt.load());
    // Within a few intervals of 255 items of being queued for sure (AddTask
    // returned; under emulation the add itself spans thousands of links);
    // without the interval it would run only after kLimitAfterAdd links.
    long const ranAfterQueued =
        static_cast<long>(chain.OutsideRanAt.load()) - static_cast<long>(chain.OutsideQueuedBy.load());
    REQUIRE(ranAfterQueued < 5000);
}

TEST_CASE("High-priority tasks run before Normal ones", "[scheduling]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);

    std::atomic<unsigned> sequence{0};
    std::vector<unsigned> highOrder(20);
    std::vector<unsigned> normalOrder(20);
    std::atomic<unsigned> nextHigh{0};
    std::atomic<unsigned> nextNormal{0};
    auto high = [&](ftl::TaskScheduler *) { highOrder[nextHigh.fetch_add(1)] = sequence.fetch_add(1); };
    auto normal = [&](ftl::TaskScheduler *) { normalOrder[nextNormal.fetch_add(1)] = sequence.fetch_add(1); };
    std::vector<ftl::Task> highTasks(20, LambdaTask(high));
    std::vector<ftl::Task> normalTasks(20, LambdaTask(normal));

    // From the Init thread, and again from inside a task.
    bool const fromTask = GENERATE(false, true);
    CAPTURE(fromTask);
    auto add = [&](ftl::TaskScheduler *taskScheduler) {
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTasks(20, normalTasks.data(), ftl::TaskPriority::Normal, &counter);
        taskScheduler->AddTasks(20, highTasks.data(), ftl::TaskPriority::High, &counter);
        taskScheduler->WaitForCounter(&counter);
    };
    if (fromTask) {
        ftl::TaskCounter counter(&ts);
        ts.AddTask(LambdaTask(add), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    } else {
        add(&ts);
    }

    REQUIRE(sequence.load() == 40u);
    unsigned const lastHigh = *std::max_element(highOrder.begin(), highOrder.end());
    unsigned const firstNormal = *std::min_element(normalOrder.begin(), normalOrder.end());
    REQUIRE(lastHigh < firstNormal);
}

TEST_CASE("A readied fiber runs before new tasks", "[scheduling]") {
    // docs/design.adoc, invariant 3 (Mechanisms::ReadyFibersFirst, on by
    // default), at one thread where the order is deterministic.
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);

    std::atomic<unsigned> sequence{0};
    std::atomic<unsigned> resumedAt{0};
    std::atomic<unsigned> firstFreshAt{~0u};
    ftl::AtomicFlag flag(&ts, 1);
    ftl::TaskCounter freshCounter(&ts);
    auto fresh = [&](ftl::TaskScheduler *) {
        unsigned const at = sequence.fetch_add(1);
        unsigned seen = firstFreshAt.load();
        while (at < seen && !firstFreshAt.compare_exchange_weak(seen, at)) {
        }
    };
    std::vector<ftl::Task> freshTasks(10, LambdaTask(fresh));
    auto releaser = [&](ftl::TaskScheduler *taskScheduler) {
        flag.Clear(); // readies the waiter, then new work arrives
        taskScheduler->AddTasks(10, freshTasks.data(), ftl::TaskPriority::High, &freshCounter);
    };
    // The releaser can run only once the waiter parked: one thread.
    auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
        taskScheduler->AddTask(LambdaTask(releaser), ftl::TaskPriority::High);
        taskScheduler->WaitForCounter(&flag);
        resumedAt.store(sequence.fetch_add(1));
    };
    ftl::TaskCounter counter(&ts);
    ts.AddTask(LambdaTask(waiter), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    ts.WaitForCounter(&freshCounter);

    REQUIRE(sequence.load() == 11u);
    REQUIRE(resumedAt.load() < firstFreshAt.load());
}

TEST_CASE("Each mechanism switched off still gives correct results", "[scheduling]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    // One switch off, or (the last value) all of them.
    auto const which = GENERATE(range(0u, ftl::detail::kNumMechanismSwitches + 1));
    bool const all = which == ftl::detail::kNumMechanismSwitches;
    CAPTURE(threads, all ? "all of them" : ftl::detail::kMechanismSwitches[which].Name);

    ftl::detail::Mechanisms mechanisms;
    for (unsigned i = 0; i < ftl::detail::kNumMechanismSwitches; ++i) {
        if (all || i == which) {
            mechanisms.*ftl::detail::kMechanismSwitches[i].Flag = false;
        }
    }
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(threads), mechanisms) == 0);
    // With ReadyFibersFirst and InlineChildren off, every Fibonacci node
    // parks on a fiber of its own while new nodes start first: fib(16) grows
    // the pool to 2,000 fibers, and ThreadSanitizer spends about 4 ms making
    // each one. fib(12) keeps the same shape at a tenth of the fibers.
    unsigned const fibN = ftl_test::kThreadSanitizer ? 12 : 16;
    RunMixedWorkload(ts, fibN);
    RunMixedWorkload(ts, fibN);
}

TEST_CASE("Every EmptyQueueBehavior runs the mixed workload", "[scheduling]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    ftl::EmptyQueueBehavior const behavior = GENERATE(
        ftl::EmptyQueueBehavior::Spin, ftl::EmptyQueueBehavior::Yield, ftl::EmptyQueueBehavior::Sleep);
    CAPTURE(threads, ftl_test::BehaviorName(behavior));
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads, behavior)) == 0);
    REQUIRE(ts.GetEmptyQueueBehavior() == behavior);
    RunMixedWorkload(ts);
    // Idle a moment in this mode, then work again.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RunMixedWorkload(ts);
}

TEST_CASE("SetEmptyQueueBehavior while work is flowing", "[scheduling]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads, ftl::EmptyQueueBehavior::Sleep)) == 0);

    std::atomic<bool> stop{false};
    std::thread switcher([&] {
        ftl::EmptyQueueBehavior const cycle[] = {
            ftl::EmptyQueueBehavior::Spin, ftl::EmptyQueueBehavior::Sleep, ftl::EmptyQueueBehavior::Yield,
            ftl::EmptyQueueBehavior::Sleep};
        for (unsigned i = 0; !stop.load(); ++i) {
            ts.SetEmptyQueueBehavior(cycle[i % 4]);
            std::this_thread::sleep_for(std::chrono::microseconds(700));
        }
    });
    for (int i = 0; i < 4; ++i) {
        RunMixedWorkload(ts);
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // let workers idle in whatever mode
    }
    stop.store(true);
    switcher.join();

    // Sleep -> Spin -> Sleep with nothing to do: parked workers follow the
    // switch to Spin, and spinning ones park again after the switch back.
    ts.SetEmptyQueueBehavior(ftl::EmptyQueueBehavior::Sleep);
    REQUIRE(ts.GetEmptyQueueBehavior() == ftl::EmptyQueueBehavior::Sleep);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ts.SetEmptyQueueBehavior(ftl::EmptyQueueBehavior::Spin);
    REQUIRE(ts.GetEmptyQueueBehavior() == ftl::EmptyQueueBehavior::Spin);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    RunMixedWorkload(ts);
    ts.SetEmptyQueueBehavior(ftl::EmptyQueueBehavior::Sleep);
    REQUIRE(ts.GetEmptyQueueBehavior() == ftl::EmptyQueueBehavior::Sleep);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    double const before = ftl_test::ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    double const used = ftl_test::ProcessCpuSeconds() - before;
    INFO("CPU seconds used in 0.5 s idle after switching back to Sleep: " << used);
    REQUIRE(used < 0.025);
    RunMixedWorkload(ts);
}

TEST_CASE("Destruction runs every task already added", "[scheduling]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    std::atomic<unsigned> plainRuns{0};
    std::atomic<unsigned> childRuns{0};
    std::atomic<unsigned> grandchildRuns{0};
    std::atomic<unsigned> waitersDone{0};
    std::atomic<unsigned> foreignRuns{0};
    {
        auto ts = std::make_unique<ftl::TaskScheduler>();
        REQUIRE(ts->Init(Options(threads)) == 0);

        auto plain = [&](ftl::TaskScheduler *) {
            ftl_test::BusyMicros(20);
            plainRuns.fetch_add(1);
        };
        auto grandchild = [&](ftl::TaskScheduler *) { grandchildRuns.fetch_add(1); };
        auto child = [&](ftl::TaskScheduler *taskScheduler) {
            childRuns.fetch_add(1);
            taskScheduler->AddTask(LambdaTask(grandchild), ftl::TaskPriority::Normal);
        };
        auto spawner = [&](ftl::TaskScheduler *taskScheduler) {
            std::vector<ftl::Task> children(20, LambdaTask(child));
            taskScheduler->AddTasks(20, children.data(), ftl::TaskPriority::High); // no counter, no wait
        };
        auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
            for (int i = 0; i < 5; ++i) {
                ParkOnce(taskScheduler);
            }
            FibCall fib{10, 0};
            ftl::TaskCounter counter(taskScheduler);
            taskScheduler->AddTask(ftl::Task{FibTask, &fib}, ftl::TaskPriority::Normal, &counter);
            taskScheduler->WaitForCounter(&counter);
            if (fib.Result == 55) {
                waitersDone.fetch_add(1);
            }
        };
        auto foreign = [&](ftl::TaskScheduler *) { foreignRuns.fetch_add(1); };

        std::vector<ftl::Task> plains(1000, LambdaTask(plain));
        ts->AddTasks(1000, plains.data(), ftl::TaskPriority::Normal);
        std::vector<ftl::Task> spawners(50, LambdaTask(spawner));
        ts->AddTasks(50, spawners.data(), ftl::TaskPriority::Normal);
        std::vector<ftl::Task> waiters(20, LambdaTask(waiter));
        ts->AddTasks(20, waiters.data(), ftl::TaskPriority::High);
        std::thread([&] {
            for (int i = 0; i < 100; ++i) {
                ts->AddTask(LambdaTask(foreign), ftl::TaskPriority::Normal);
            }
        }).join();
        // No wait: the destructor must run all of it.
        ts.reset();
    }
    REQUIRE(plainRuns.load() == 1000u);
    REQUIRE(childRuns.load() == 50u * 20u);
    REQUIRE(grandchildRuns.load() == 50u * 20u);
    REQUIRE(waitersDone.load() == 20u);
    REQUIRE(foreignRuns.load() == 100u);
}

TEST_CASE("Sleep-mode wake-ups are never lost", "[scheduling]") {
    // The CTest timeout turns a lost wake-up (a hang) into a failure.
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads, ftl::EmptyQueueBehavior::Sleep)) == 0);

    // Beside another build, 10,000 took 34 s of the 60 s timeout under
    // ThreadSanitizer and 16-21 s in the plain build: 5,000, and 2,000
    // where code runs several times slower.
    unsigned const kIterations = ftl_test::kSlowBuild ? 2000 : 5000;
    std::atomic<unsigned> ran{0};
    auto one = [&](ftl::TaskScheduler *) { ran.fetch_add(1, std::memory_order_relaxed); };
    ftl::Task const oneTask = LambdaTask(one);
    // Most iterations back to back; a few after a real idle period (workers
    // parked), some after a short, varying pause (workers half-way through
    // parking).
    auto pause = [](unsigned i) {
        if (i % 1000 == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } else if (i % 16 == 0) {
            ftl_test::BusyMicros(i % 64);
        }
    };

    SECTION("The Init thread adds a task and waits for it") {
        for (unsigned i = 0; i < kIterations; ++i) {
            pause(i);
            ftl::TaskCounter counter(&ts);
            ts.AddTask(oneTask, ftl::TaskPriority::Normal, &counter);
            ts.WaitForCounter(&counter);
        }
        REQUIRE(ran.load() == kIterations);
    }

    SECTION("A foreign thread adds a task while the Init thread is parked") {
        // The task clears the flag the Init thread waits on; the foreign
        // thread goes on only once the Init thread is waiting for the next.
        ftl::AtomicFlag flag(&ts);
        std::atomic<unsigned> armed{0};
        std::atomic<bool> failed{false};
        auto clear = [&](ftl::TaskScheduler *) {
            ran.fetch_add(1, std::memory_order_relaxed);
            flag.Clear();
        };
        std::thread foreign([&] {
            for (unsigned i = 0; i < kIterations; ++i) {
                if (!ftl_test::SpinUntil([&] { return armed.load() > i; },
                                         std::chrono::milliseconds(20000))) {
                    failed.store(true);
                    return;
                }
                pause(i);
                ts.AddTask(LambdaTask(clear), ftl::TaskPriority::Normal);
            }
        });
        for (unsigned i = 0; i < kIterations && !failed.load(); ++i) {
            flag.Set();
            armed.store(i + 1);
            ts.WaitForCounter(&flag);
        }
        foreign.join();
        REQUIRE_FALSE(failed.load());
        REQUIRE(ran.load() == kIterations);
    }
}

TEST_CASE("A batch of tasks that wait for each other reaches every worker", "[scheduling]") {
    // Each round adds 2 tasks per worker at once; each task waits, yielding
    // its thread, until every worker has run one of them. Only the wakes get
    // the parked workers there: the adder wakes one unless a worker searches,
    // and each worker that finds work while it is the last searcher wakes
    // the next (source/models/park.pml, LONG_ITEMS). A worker that left its
    // park on its own, for work it saw, once left as a non-searcher: then
    // nobody woke anyone for the rest, and (8 workers) 6 slept with 8 tasks
    // queued until the tasks gave up: this test failed in 4 of 10 runs of
    // 300 rounds.
    unsigned const threads = GENERATE(3u, 8u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads, ftl::EmptyQueueBehavior::Sleep)) == 0);
    unsigned const rounds = ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated ? 50 : 1000;
    std::vector<std::atomic<bool>> seen(threads);
    auto allSeen = [&] {
        return std::all_of(seen.begin(), seen.end(), [](std::atomic<bool> const &s) { return s.load(); });
    };
    std::atomic<unsigned> gaveUp{0};
    auto meet = [&](ftl::TaskScheduler *t) {
        seen[t->GetCurrentThreadIndex()].store(true);
        if (!ftl_test::SpinUntil(allSeen, std::chrono::milliseconds(2000))) {
            gaveUp.fetch_add(1);
        }
    };
    std::vector<ftl::Task> tasks(2 * threads, LambdaTask(meet));
    unsigned roundsGivenUp = 0;
    for (unsigned round = 0; round < rounds && roundsGivenUp == 0; ++round) {
        for (auto &flag : seen) {
            flag.store(false);
        }
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        roundsGivenUp += gaveUp.exchange(0) != 0 ? 1u : 0u;
    }
    CHECK(roundsGivenUp == 0);
}

TEST_CASE("An idle scheduler under Sleep uses almost no CPU", "[scheduling]") {
    // Spin may burn CPU by design; only Sleep is measured.
    ftl::TaskSchedulerInitOptions options;
    SECTION("Default options") {}
    SECTION("Sleep, 8 threads") {
        options.ThreadPoolSize = 8;
        options.Behavior = ftl::EmptyQueueBehavior::Sleep;
    }
    CAPTURE(options.ThreadPoolSize);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(options) == 0);
    REQUIRE(ts.GetEmptyQueueBehavior() == ftl::EmptyQueueBehavior::Sleep);
    // Some work first, so the workers have been through work and back.
    FibCall fib{15, 0};
    ftl::TaskCounter counter(&ts);
    ts.AddTask(ftl::Task{FibTask, &fib}, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(fib.Result == 610u);

    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // past any spin-before-park
    double const before = ftl_test::ProcessCpuSeconds();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    double const used = ftl_test::ProcessCpuSeconds() - before;
    INFO("CPU seconds used by an idle scheduler in 1 s: " << used);
    REQUIRE(used < 0.05);
}
