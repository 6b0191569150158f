// Fibtex and LockWrapper: mutual exclusion under every lock behaviour, pinned
// and not; a holder that waits; more blocked fibers than threads; try_lock.
#include "ftl/fibtex.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "platform/platform.h"
#include "scheduler/mechanisms.h"
#include "test_support.h"
#include "waitables/fibtex_ops.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

namespace {

enum class LockMode {
    LockGuard,  // std::lock_guard<ftl::Fibtex>
    UniqueLock, // std::unique_lock<ftl::Fibtex>, unlocked and relocked once
    Traditional,
    TraditionalPinned,
    Spin,
    SpinPinned,
    SpinInfinite,
    SpinInfinitePinned,
};

char const *Name(LockMode mode) {
    switch (mode) {
    case LockMode::LockGuard:
        return "lock_guard<Fibtex>";
    case LockMode::UniqueLock:
        return "unique_lock<Fibtex>";
    case LockMode::Traditional:
        return "LockWrapper Traditional";
    case LockMode::TraditionalPinned:
        return "LockWrapper Traditional pinned";
    case LockMode::Spin:
        return "LockWrapper Spin";
    case LockMode::SpinPinned:
        return "LockWrapper Spin pinned";
    case LockMode::SpinInfinite:
        return "LockWrapper SpinInfinite";
    case LockMode::SpinInfinitePinned:
        return "LockWrapper SpinInfinite pinned";
    }
    return "?";
}

bool IsPinned(LockMode mode) {
    return mode == LockMode::TraditionalPinned || mode == LockMode::SpinPinned ||
           mode == LockMode::SpinInfinitePinned;
}

// What the tasks share: a plain int guarded by the Fibtex, and checks.
struct Shared {
    explicit Shared(ftl::TaskScheduler *ts) : Mutex(ts) {}
    ftl::Fibtex Mutex;
    int Value = 0;
    std::atomic<unsigned> Inside{0};
    std::atomic<unsigned> Overlaps{0};    // two fibers inside at once
    std::atomic<unsigned> PinnedMoved{0}; // a pinned lock resumed on another thread
};

// The critical section: a non-atomic increment plus an exclusion check, with
// a little work so that other fibers find the lock taken.
void Critical(Shared &shared) {
    if (shared.Inside.fetch_add(1, std::memory_order_relaxed) != 0) {
        shared.Overlaps.fetch_add(1);
    }
    int const value = shared.Value;
    for (volatile int spin = 0; spin < 200; spin = spin + 1) {
    }
    shared.Value = value + 1;
    shared.Inside.fetch_sub(1, std::memory_order_relaxed);
}

void LockedIncrement(ftl::TaskScheduler *ts, Shared &shared, LockMode mode) {
    unsigned const before = ts->GetCurrentThreadIndex();
    auto wrapper = [&](ftl::FibtexLockBehavior behavior) {
        // Few spin iterations, so that Spin really falls through to parking.
        return ftl::LockWrapper(shared.Mutex, behavior, IsPinned(mode), 10);
    };
    auto checkPin = [&] {
        if (IsPinned(mode) && ts->GetCurrentThreadIndex() != before) {
            shared.PinnedMoved.fetch_add(1);
        }
    };
    switch (mode) {
    case LockMode::LockGuard: {
        std::lock_guard<ftl::Fibtex> lock(shared.Mutex);
        Critical(shared);
        break;
    }
    case LockMode::UniqueLock: {
        std::unique_lock<ftl::Fibtex> lock(shared.Mutex);
        Critical(shared);
        lock.unlock();
        lock.lock();
        Critical(shared);
        break;
    }
    case LockMode::Traditional:
    case LockMode::TraditionalPinned: {
        ftl::LockWrapper wrapped = wrapper(ftl::FibtexLockBehavior::Traditional);
        std::lock_guard<ftl::LockWrapper> lock(wrapped);
        checkPin();
        Critical(shared);
        break;
    }
    case LockMode::Spin:
    case LockMode::SpinPinned: {
        ftl::LockWrapper wrapped = wrapper(ftl::FibtexLockBehavior::Spin);
        std::lock_guard<ftl::LockWrapper> lock(wrapped);
        checkPin();
        Critical(shared);
        break;
    }
    case LockMode::SpinInfinite:
    case LockMode::SpinInfinitePinned: {
        ftl::LockWrapper wrapped = wrapper(ftl::FibtexLockBehavior::SpinInfinite);
        std::lock_guard<ftl::LockWrapper> lock(wrapped);
        checkPin();
        Critical(shared);
        break;
    }
    }
}

} // namespace

TEST_CASE("Fibtex keeps a plain counter exact under contention", "[fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    LockMode const mode = GENERATE(LockMode::LockGuard, LockMode::UniqueLock, LockMode::Traditional,
                                   LockMode::TraditionalPinned, LockMode::Spin, LockMode::SpinPinned,
                                   LockMode::SpinInfinite, LockMode::SpinInfinitePinned);
    CAPTURE(threads, Name(mode));
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kTasks = 32;
    constexpr unsigned kIterations = 300;
    Shared shared(&ts);
    auto work = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned i = 0; i < kIterations; ++i) {
            LockedIncrement(taskScheduler, shared, mode);
        }
    };
    std::vector<ftl::Task> tasks(kTasks, LambdaTask(work));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
    // The Init thread's fiber contends too.
    for (unsigned i = 0; i < kIterations; ++i) {
        LockedIncrement(&ts, shared, mode);
    }
    ts.WaitForCounter(&counter);

    int const perCall = mode == LockMode::UniqueLock ? 2 : 1;
    REQUIRE(shared.Value == static_cast<int>((kTasks + 1) * kIterations) * perCall);
    REQUIRE(shared.Overlaps.load() == 0);
    REQUIRE(shared.PinnedMoved.load() == 0);
}

TEST_CASE("A Fibtex holder may wait while it holds the lock", "[fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    // Only behaviours that park: a fiber spinning forever while the holder is
    // parked could take the last thread the holder needs to resume on.
    LockMode const mode = GENERATE(LockMode::LockGuard, LockMode::Traditional, LockMode::TraditionalPinned,
                                   LockMode::Spin, LockMode::SpinPinned);
    bool const pinnedWait = GENERATE(false, true);
    CAPTURE(threads, Name(mode), pinnedWait);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kTasks = 24;
    constexpr unsigned kIterations = 20;
    Shared shared(&ts);
    std::atomic<unsigned> childRuns{0};
    auto child = [&](ftl::TaskScheduler *) { childRuns.fetch_add(1, std::memory_order_relaxed); };
    ftl::Task const childTask = LambdaTask(child);
    auto holder = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned i = 0; i < kIterations; ++i) {
            ftl::LockWrapper wrapped(shared.Mutex,
                                     mode == LockMode::Spin || mode == LockMode::SpinPinned
                                         ? ftl::FibtexLockBehavior::Spin
                                         : ftl::FibtexLockBehavior::Traditional,
                                     IsPinned(mode), 10);
            std::lock_guard<ftl::LockWrapper> lock(wrapped);
            Critical(shared);
            // Wait while holding; the fiber stays the owner wherever it
            // resumes, so the unlock below is legal on any thread.
            unsigned const before = taskScheduler->GetCurrentThreadIndex();
            ftl::TaskCounter counter(taskScheduler);
            ftl::Task const children[2] = {childTask, childTask};
            taskScheduler->AddTasks(2, children, ftl::TaskPriority::High, &counter);
            taskScheduler->WaitForCounter(&counter, pinnedWait);
            if (pinnedWait && taskScheduler->GetCurrentThreadIndex() != before) {
                shared.PinnedMoved.fetch_add(1);
            }
            Critical(shared);
        }
    };
    // Contenders that do not wait inside.
    auto contender = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned i = 0; i < kIterations; ++i) {
            LockedIncrement(taskScheduler, shared, mode);
        }
    };
    std::vector<ftl::Task> tasks;
    for (unsigned i = 0; i < kTasks; ++i) {
        tasks.push_back(i % 2 == 0 ? LambdaTask(holder) : LambdaTask(contender));
    }
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    REQUIRE(shared.Value == static_cast<int>(kTasks / 2 * kIterations * 2 + kTasks / 2 * kIterations));
    REQUIRE(childRuns.load() == kTasks / 2 * kIterations * 2);
    REQUIRE(shared.Overlaps.load() == 0);
    REQUIRE(shared.PinnedMoved.load() == 0);
}

TEST_CASE("More fibers block on one Fibtex than there are threads", "[fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kBlocked = 200;
    Shared shared(&ts);
    ftl::AtomicFlag release(&ts, 1);
    ftl::FullAtomicCounter arrived(&ts);
    std::atomic<unsigned> blockedDone{0};
    // Holds the lock until every other task has arrived at its lock(); the
    // others start only once it holds it.
    ftl::AtomicFlag holding(&ts, 1);
    auto holder = [&](ftl::TaskScheduler *taskScheduler) {
        std::lock_guard<ftl::Fibtex> lock(shared.Mutex);
        Critical(shared);
        holding.Clear();
        taskScheduler->WaitForCounter(&release);
    };
    auto blocked = [&](ftl::TaskScheduler *) {
        arrived.FetchAdd(1);
        std::lock_guard<ftl::Fibtex> lock(shared.Mutex);
        Critical(shared);
        blockedDone.fetch_add(1);
    };
    ftl::TaskCounter holderDone(&ts);
    ts.AddTask(LambdaTask(holder), ftl::TaskPriority::High, &holderDone);
    ts.WaitForCounter(&holding);
    std::vector<ftl::Task> tasks(kBlocked, LambdaTask(blocked));
    ftl::TaskCounter done(&ts);
    ts.AddTasks(kBlocked, tasks.data(), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&arrived, kBlocked);
    REQUIRE(blockedDone.load() == 0);
    release.Clear();
    ts.WaitForCounter(&done);
    ts.WaitForCounter(&holderDone);

    REQUIRE(blockedDone.load() == kBlocked);
    REQUIRE(shared.Value == static_cast<int>(kBlocked + 1));
    REQUIRE(shared.Overlaps.load() == 0);
}

TEST_CASE("Fibtex try_lock and locking outside the scheduler's threads", "[fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);

    SECTION("try_lock on the Init thread") {
        REQUIRE(mutex.try_lock());
        REQUIRE_FALSE(mutex.try_lock()); // not recursive
        mutex.unlock();
        REQUIRE(mutex.try_lock());
        mutex.unlock();
        {
            std::unique_lock<ftl::Fibtex> lock(mutex, std::try_to_lock);
            REQUIRE(lock.owns_lock());
            std::unique_lock<ftl::Fibtex> second(mutex, std::try_to_lock);
            REQUIRE_FALSE(second.owns_lock());
        }
        ftl::LockWrapper wrapped(mutex, ftl::FibtexLockBehavior::Spin);
        REQUIRE(wrapped.try_lock());
        REQUIRE_FALSE(mutex.try_lock());
        wrapped.unlock();
        REQUIRE(mutex.try_lock());
        mutex.unlock();
    }

    SECTION("try_lock fails while a parked task holds it") {
        ftl::AtomicFlag release(&ts, 1);
        ftl::AtomicFlag holding(&ts, 1);
        std::atomic<unsigned> failedTries{0};
        std::atomic<unsigned> triesAfter{0};
        auto holder = [&](ftl::TaskScheduler *taskScheduler) {
            std::lock_guard<ftl::Fibtex> lock(mutex);
            holding.Clear();
            taskScheduler->WaitForCounter(&release);
        };
        auto trier = [&](ftl::TaskScheduler *) {
            if (!mutex.try_lock()) {
                failedTries.fetch_add(1);
            } else {
                mutex.unlock();
            }
        };
        ftl::TaskCounter holderDone(&ts);
        ts.AddTask(LambdaTask(holder), ftl::TaskPriority::Normal, &holderDone);
        ts.WaitForCounter(&holding);
        REQUIRE_FALSE(mutex.try_lock());
        std::vector<ftl::Task> tries(10, LambdaTask(trier));
        ftl::TaskCounter triesDone(&ts);
        ts.AddTasks(10, tries.data(), ftl::TaskPriority::Normal, &triesDone);
        ts.WaitForCounter(&triesDone);
        REQUIRE(failedTries.load() == 10u);
        release.Clear();
        ts.WaitForCounter(&holderDone);
        auto trierAfter = [&](ftl::TaskScheduler *) {
            if (mutex.try_lock()) {
                triesAfter.fetch_add(1);
                mutex.unlock();
            }
        };
        ftl::TaskCounter afterDone(&ts);
        ts.AddTask(LambdaTask(trierAfter), ftl::TaskPriority::Normal, &afterDone);
        ts.WaitForCounter(&afterDone);
        REQUIRE(triesAfter.load() == 1u);
    }

    SECTION("A foreign thread may try_lock, lock uncontended and spin") {
        Shared shared(&ts);
        std::thread foreign([&] {
            if (shared.Mutex.try_lock()) {
                Critical(shared);
                shared.Mutex.unlock();
            }
            shared.Mutex.lock(); // uncontended: no park needed
            Critical(shared);
            shared.Mutex.unlock();
            for (unsigned i = 0; i < 200; ++i) {
                shared.Mutex.lock_spin_infinite();
                Critical(shared);
                shared.Mutex.unlock();
            }
        });
        foreign.join();
        REQUIRE(shared.Value == 202);

        // Again, now contending with tasks: the foreign thread only spins.
        auto work = [&](ftl::TaskScheduler *taskScheduler) {
            for (unsigned i = 0; i < 100; ++i) {
                LockedIncrement(taskScheduler, shared, LockMode::Traditional);
            }
        };
        std::vector<ftl::Task> tasks(8, LambdaTask(work));
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(8, tasks.data(), ftl::TaskPriority::Normal, &counter);
        std::thread spinner([&] {
            ftl::LockWrapper wrapped(shared.Mutex, ftl::FibtexLockBehavior::SpinInfinite);
            for (unsigned i = 0; i < 200; ++i) {
                std::lock_guard<ftl::LockWrapper> lock(wrapped);
                Critical(shared);
            }
        });
        ts.WaitForCounter(&counter);
        spinner.join();
        REQUIRE(shared.Value == 202 + 800 + 200);
        REQUIRE(shared.Overlaps.load() == 0);
    }
}

namespace {

// Starts a thread outside the scheduler that takes `mutex`, and returns once
// it holds it. The thread keeps it until 20 ms after `started` is set, sets
// `value` to 1 and unlocks.
std::thread HoldForLongAfterStart(ftl::Fibtex &mutex, std::atomic<bool> &started, int &value) {
    std::atomic<bool> held{false};
    std::thread holder([&mutex, &started, &value, &held] {
        mutex.lock();
        held.store(true);
        while (!started.load()) {
            std::this_thread::yield();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        value = 1;
        mutex.unlock();
    });
    while (!held.load()) {
        std::this_thread::yield();
    }
    return holder;
}

} // namespace

// A waiter that had to wait long makes the next contended lock_spin() start
// with rare looks (so a holder that relocks at once keeps the lock on its
// core); an uncontended lock leaves that alone.
TEST_CASE("A long contended wait makes the next waiter look rarely", "[fibtex]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    ftl::Fibtex mutex(&ts);
    unsigned const maxLevel = ftl::detail::FibtexOps::MaxBackoffLevel();
    REQUIRE(maxLevel > 1);
    REQUIRE(ftl::detail::FibtexOps::BackoffStart(mutex) == 0);

    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        std::atomic<bool> started{false};
        std::atomic<bool> waiterDone{false};
        int value = 0;
        // Far longer than the waiter's climb to its rarest looks
        // (2^maxLevel - 1 pauses, microseconds).
        std::thread holder = HoldForLongAfterStart(mutex, started, value);
        int seen = 0;
        auto waiter = [&](ftl::TaskScheduler *) {
            started.store(true);
            // Enough looks never to park: the wait is all spinning.
            mutex.lock_spin(false, 1u << 30);
            seen = value;
            mutex.unlock();
            waiterDone.store(true);
        };
        ftl::TaskCounter done(&ts);
        ts.AddTask(LambdaTask(waiter), ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
        holder.join();
        REQUIRE(waiterDone.load());
        REQUIRE(seen == 1);
        // It found the lock free at a look after the most pauses; the next
        // contended lock starts one level below.
        REQUIRE(ftl::detail::FibtexOps::BackoffStart(mutex) == maxLevel - 1);

        // An uncontended lock does not write the line's hint.
        mutex.lock();
        mutex.unlock();
        REQUIRE(ftl::detail::FibtexOps::BackoffStart(mutex) == maxLevel - 1);
    }
}

// A waiter that finds the holder taking the lock again and again while it
// waits (a hot lock: sections back to back) makes the next contended
// lock_spin() start one level higher, above the climb's usual top and up to
// the hot top; a long wait on a single section brings it one level down.
TEST_CASE("Waits on a lock its holder keeps relocking make the next waiter look more rarely", "[fibtex]") {
    // Without hand-offs, which end such a wait after 40 us, before the
    // looks climb that far.
    ftl::detail::Mechanisms mechanisms;
    mechanisms.LockHandOff = false;
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(2), mechanisms) == 0);
    ftl::Fibtex mutex(&ts);
    unsigned const maxLevel = ftl::detail::FibtexOps::MaxBackoffLevel();
    unsigned const hotLevel = ftl::detail::FibtexOps::MaxHotBackoffLevel();
    REQUIRE(hotLevel > maxLevel);

    std::atomic<bool> stop{false};
    std::uint64_t value = 0; // guarded by mutex
    std::uint64_t hammered = 0;
    // A thread outside the scheduler takes the lock back as soon as it lets
    // it go.
    std::thread hammer([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            std::lock_guard<ftl::Fibtex> lock(mutex);
            ++value;
            ++hammered;
        }
    });
    unsigned highest = 0;
    std::uint64_t waited = 0;
    auto waiter = [&](ftl::TaskScheduler *) {
        auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (highest <= maxLevel && std::chrono::steady_clock::now() < deadline) {
            mutex.lock_spin(false, 1u << 30); // never parks
            ++value;
            ++waited;
            unsigned const start = ftl::detail::FibtexOps::BackoffStart(mutex);
            highest = start > highest ? start : highest;
            mutex.unlock();
        }
    };
    ftl::TaskCounter done(&ts);
    ts.AddTask(LambdaTask(waiter), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&done);
    stop.store(true);
    hammer.join();
    CAPTURE(waited, hammered, highest);
    REQUIRE(value == waited + hammered);
    REQUIRE(highest > maxLevel);
    REQUIRE(highest <= hotLevel);

    // One long section: no relock during the wait, so the next start is one
    // level below the one the wait found the lock free at: its start, when
    // that is past maxLevel (the climb does not go above it), else maxLevel.
    // The start is not always still past maxLevel here: the hammer's own
    // waits, for the waiter's sections, each walk it down a level, and a
    // hammer that parked spins again after its wake (seen under qemu, where
    // spins are short: a start of 6).
    unsigned const start = ftl::detail::FibtexOps::BackoffStart(mutex);
    unsigned const expected = (start > maxLevel ? start : maxLevel) - 1;
    std::atomic<bool> started{false};
    int written = 0;
    std::thread holder = HoldForLongAfterStart(mutex, started, written);
    auto single = [&](ftl::TaskScheduler *) {
        started.store(true);
        mutex.lock_spin(false, 1u << 30);
        mutex.unlock();
    };
    ftl::TaskCounter singleDone(&ts);
    ts.AddTask(LambdaTask(single), ftl::TaskPriority::Normal, &singleDone);
    ts.WaitForCounter(&singleDone);
    holder.join();
    REQUIRE(written == 1);
    CAPTURE(start);
    REQUIRE(ftl::detail::FibtexOps::BackoffStart(mutex) == expected);
}

namespace {

// Rounds of a holder (a task pinned to worker 1) that keeps a hot lock until
// the waiter (pinned to worker 0) is well into its wait, then ends its task;
// checks who took the lock, in order, and how many of the waiter's
// acquisitions came at a look the watch brought forward: at least half of
// them with the watch (natively: see kEmulated), none without. The waiter starts far above the hot
// levels (2^16 pauses between looks), so that its own look comes long after
// the holder's worker ran out of work, even where pauses are short (qemu)
// or that is slow (TSan). holderStealsAfter: the waiter first adds a task
// to its own worker's deque, which the holder's worker, its task done,
// steals and runs for 10 ms (it goes idle only long after); else the
// holder's worker has nothing more to do and goes idle.
void CheckWatchedLooks(bool holderStealsAfter) {
    constexpr unsigned kRounds = 10;
    constexpr unsigned kRareLevel = 16;
    for (bool const watch : {true, false}) {
        CAPTURE(watch);
        ftl::detail::Mechanisms mechanisms;
        mechanisms.LockWatchesIdle = watch;
        // The watch alone: a hand-off (LockHandOff) gives the waiter the
        // lock at the holder's unlock whenever its looks come often enough
        // to ask in time (qemu's pauses are short).
        mechanisms.LockHandOff = false;
        ftl::TaskScheduler ts;
        REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(2), mechanisms) == 0);
        ftl::Fibtex mutex(&ts);
        std::uint64_t const before = ftl::detail::FibtexOps::WatchedLookAcquisitions(&ts);
        unsigned value = 0;          // guarded by mutex
        std::vector<unsigned> order; // who took the lock, in order (guarded by mutex)
        std::atomic<unsigned> busyRuns{0};
        for (unsigned round = 0; round < kRounds; ++round) {
            ftl::detail::FibtexOps::SetBackoffStart(mutex, kRareLevel);
            std::atomic<bool> held{false};
            std::atomic<bool> waiting{false};
            ftl::TaskCounter done(&ts);
            auto holder = [&](ftl::TaskScheduler *) {
                mutex.lock();
                order.push_back(1);
                held.store(true);
                while (!waiting.load()) {
                    std::this_thread::yield();
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                ++value;
                mutex.unlock();
            };
            // Added on the waiter's worker, which spins in lock_spin until it
            // has the lock: only the holder's worker can take it before then.
            auto busy = [&](ftl::TaskScheduler *) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                busyRuns.fetch_add(1);
            };
            auto waiter = [&](ftl::TaskScheduler *taskScheduler) {
                while (!held.load()) {
                    std::this_thread::yield();
                }
                if (holderStealsAfter) {
                    taskScheduler->AddTask(busy, ftl::TaskPriority::Normal, &done);
                }
                waiting.store(true);
                mutex.lock_spin(false, 1u << 30); // never parks
                order.push_back(0);
                ++value;
                mutex.unlock();
            };
            ts.AddPinnedTask(1, holder, ftl::TaskPriority::Normal, &done);
            ts.AddPinnedTask(0, waiter, ftl::TaskPriority::Normal, &done);
            ts.WaitForCounter(&done);
        }
        REQUIRE(value == 2 * kRounds);
        REQUIRE(busyRuns.load() == (holderStealsAfter ? kRounds : 0u));
        REQUIRE(order.size() == 2 * kRounds);
        for (unsigned i = 0; i < order.size(); ++i) {
            REQUIRE(order[i] == (i % 2 == 0 ? 1u : 0u));
        }
        std::uint64_t const early = ftl::detail::FibtexOps::WatchedLookAcquisitions(&ts) - before;
        CAPTURE(early);
        if (watch) {
            if (!ftl_test::kEmulated) {
                REQUIRE(early >= kRounds / 2);
            }
        } else {
            REQUIRE(early == 0);
        }
    }
}

} // namespace

// Between its rare looks at a hot lock, a waiter watches the workers run out
// of work of their own (the LockWatchesIdle mechanism): when the holder's
// task ends and its worker finds nothing more to do, the waiter looks at
// once rather than at its next look.
TEST_CASE("A waiter on a hot lock takes it as soon as the holder's worker goes idle", "[fibtex]") {
    CheckWatchedLooks(false);
}

// The same watch sees a worker go to steal: a thief whose stolen tasks ran
// out leaves the lock free while it steals the next ones. A waiter that
// watched idle starts alone would here take the lock at its own look, never
// at one brought forward.
TEST_CASE("A waiter on a hot lock takes it as soon as the holder's worker goes to steal", "[fibtex]") {
    CheckWatchedLooks(true);
}

namespace {

// Rounds of a waiter task that first takes a fresh Fibtex `runBefore` times
// in a row, then starts a thread outside the scheduler that relocks it
// section after section (for at most 10 s), then waits for it with
// lock_spin (never parks). Returns the looks, over all rounds, at which a
// waiter let the free lock be (FibtexOps::PatientLooks); checks the sum
// under the lock and that every waiter got the lock while the thread was
// still relocking it.
std::uint64_t PatientLooksOfRounds(bool patience, std::uint32_t runBefore) {
    constexpr unsigned kRounds = 5;
    ftl::detail::Mechanisms mechanisms;
    mechanisms.LockPatience = patience;
    // Patience shows only while a look finds the lock free between two
    // sections, which may take longer than a hand-off (LockHandOff) lets a
    // waiter wait.
    mechanisms.LockHandOff = false;
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(1), mechanisms) == 0);
    std::uint64_t const before = ftl::detail::FibtexOps::PatientLooks(&ts);
    for (unsigned round = 0; round < kRounds; ++round) {
        CAPTURE(round);
        ftl::Fibtex mutex(&ts);
        std::uint64_t value = 0; // guarded by mutex
        std::uint64_t relocked = 0;
        std::atomic<bool> stop{false};
        std::atomic<bool> relocking{false};
        bool gotItWhileRelocking = false;
        std::thread relocker;
        auto waiter = [&](ftl::TaskScheduler *) {
            for (std::uint32_t i = 0; i < runBefore; ++i) {
                std::lock_guard<ftl::Fibtex> lock(mutex);
                ++value;
            }
            relocker = std::thread([&] {
                auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
                    // The clock is read once every 256 sections: between the
                    // others the lock is free only from the unlock to the
                    // lock, and the waiter's looks seldom find it so.
                    for (unsigned section = 0; section < 256; ++section) {
                        std::lock_guard<ftl::Fibtex> lock(mutex);
                        ++value;
                        ++relocked;
                        relocking.store(true, std::memory_order_relaxed);
                    }
                }
                relocking.store(false);
            });
            while (!relocking.load()) {
                std::this_thread::yield();
            }
            mutex.lock_spin(false, 1u << 30);
            gotItWhileRelocking = relocking.load();
            ++value;
            stop.store(true);
            mutex.unlock();
        };
        ftl::TaskCounter done(&ts);
        ts.AddTask(LambdaTask(waiter), ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
        relocker.join();
        REQUIRE(value == runBefore + relocked + 1);
        REQUIRE(gotItWhileRelocking);
    }
    return ftl::detail::FibtexOps::PatientLooks(&ts) - before;
}

} // namespace

// A waiter whose worker has just taken the lock several times in a row lets
// a holder that keeps relocking it keep it, rather than take it between two
// of the holder's sections (the LockPatience mechanism), and still gets it
// while the holder relocks: the patience has a bound. A worker that took it
// fewer times than that, or with the mechanism off, lets no free lock be.
TEST_CASE("A waiter that relocked the lock itself lets a relocking holder keep it a while", "[fibtex]") {
    std::uint32_t const run = ftl::detail::FibtexOps::PatientRun();
    REQUIRE(run > 1);
    // A patient look needs the waiter to find the lock free between two of
    // the holder's sections. Where the holder thread is preempted between
    // them (a loaded or sanitized build), the waiter takes the lock at once,
    // as it should, and 5 rounds once showed no patient look (ThreadSanitizer,
    // under CI's parallel tests): up to 10 sets of 5 rounds, until one shows.
    std::uint64_t looks = 0;
    for (unsigned set = 0; set < 10 && looks == 0; ++set) {
        looks = PatientLooksOfRounds(true, run);
    }
    CHECK(looks >= 1);
    CHECK(PatientLooksOfRounds(true, run - 1) == 0);
    CHECK(PatientLooksOfRounds(false, run) == 0);
}

namespace {

// Counts the parks of fibers on one Fibtex (EventCallbacks::OnWaitBegin).
struct FibtexParks {
    void const *Mutex = nullptr;
    std::atomic<unsigned> Count{0};

    static void OnWaitBegin(void *context, ftl::WaitInfo const &wait) {
        auto *self = static_cast<FibtexParks *>(context);
        if (wait.Kind == ftl::WaitKind::Fibtex && wait.Object == self->Mutex) {
            self->Count.fetch_add(1, std::memory_order_relaxed);
        }
    }
    ftl::TaskSchedulerInitOptions Options(unsigned threads) {
        ftl::TaskSchedulerInitOptions options = ftl_test::Options(threads);
        options.Callbacks.Context = this;
        options.Callbacks.OnWaitBegin = &FibtexParks::OnWaitBegin;
        return options;
    }
};

} // namespace

// The unlock is a plain store and reads the parking table after it; a parker
// links itself, issues the process-wide barrier and looks at the lock again
// (fibtex.cpp). A wake-up lost between the two leaves a fiber or thread
// parked on a free lock: the wait below never ends. The window is a store
// buffer's drain, a few nanoseconds, which this test rarely if ever hits
// (without the barrier, 20 runs passed): source/models/fibtex.pml is what
// shows the barrier is needed and enough. This checks the rest: parks of
// fibers and of threads, their wakes, the sum.
TEST_CASE("Fibers and threads that park on a Fibtex all get it: no wake-up is lost", "[fibtex]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    FibtexParks parks;
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(parks.Options(threads)) == 0);
    Shared shared(&ts);
    parks.Mutex = &shared.Mutex;
    // Decided by the first Fibtex made: the barrier is used exactly where the
    // OS grants it (Linux, unless a sandbox filters membarrier), and then the
    // unlock under test is the plain store; elsewhere, the fenced one.
    bool const barrier = ftl::detail::FibtexOps::ProcessBarrierUsed();
    REQUIRE(barrier == ftl::detail::EnableProcessBarrier());
#if defined(__linux__)
    if (!barrier) {
        WARN("membarrier is not available here: the fenced unlock is tested instead of the plain store");
    }
#endif

    constexpr unsigned kTasks = 32;
    constexpr unsigned kThreads = 2;
    unsigned const iterations = ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated ? 40 : 150;
    // No spin: a lock that finds the Fibtex taken parks at once. Now and
    // then a holder lets other fibers run (Yield) or sleeps a little (a
    // thread), so that some locks surely find it taken, at any thread count.
    auto work = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned i = 0; i < iterations; ++i) {
            shared.Mutex.lock_spin(false, 0);
            Critical(shared);
            if (i % 16 == 0) {
                if (taskScheduler != nullptr) {
                    taskScheduler->Yield();
                } else {
                    std::this_thread::sleep_for(std::chrono::microseconds(50));
                }
            }
            shared.Mutex.unlock();
        }
    };
    std::vector<ftl::Task> tasks(kTasks, LambdaTask(work));
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
    std::vector<std::thread> foreign;
    for (unsigned t = 0; t < kThreads; ++t) {
        foreign.emplace_back([&] { work(nullptr); });
    }
    ts.WaitForCounter(&counter);
    for (std::thread &thread : foreign) {
        thread.join();
    }
    CAPTURE(parks.Count.load());
    REQUIRE(shared.Value == static_cast<int>((kTasks + kThreads) * iterations));
    REQUIRE(shared.Overlaps.load() == 0);
    // The test measures nothing unless fibers parked.
    REQUIRE(parks.Count.load() > 0);
}

// Waiters live in a table keyed by the Fibtex's address, shared by Fibtexes
// whose addresses hash alike. An unlock wakes only a waiter of its own
// Fibtex: the waiters of a held Fibtex park once each, however often a
// Fibtex in the same bucket is unlocked meanwhile with waiters of its own.
TEST_CASE("Fibtexes that share a parking bucket wake only their own waiters", "[fibtex]") {
    unsigned const threads = GENERATE(2u, 3u);
    CAPTURE(threads);
    FibtexParks parks;
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(parks.Options(threads)) == 0);

    // Two Fibtexes in one bucket: the table has far fewer buckets than 1024.
    std::vector<std::unique_ptr<Shared>> candidates;
    std::vector<Shared *> inBucket(1024, nullptr);
    Shared *held = nullptr;
    Shared *busy = nullptr;
    while (held == nullptr) {
        REQUIRE(candidates.size() < inBucket.size());
        candidates.push_back(std::make_unique<Shared>(&ts));
        unsigned const bucket = ftl::detail::FibtexOps::BucketIndex(candidates.back()->Mutex);
        REQUIRE(bucket < inBucket.size());
        if (inBucket[bucket] != nullptr) {
            held = inBucket[bucket];
            busy = candidates.back().get();
        } else {
            inBucket[bucket] = candidates.back().get();
        }
    }
    parks.Mutex = &held->Mutex;

    // The Init thread holds one; kWaiters tasks park on it.
    constexpr unsigned kWaiters = 6;
    held->Mutex.lock();
    auto waiter = [&](ftl::TaskScheduler *) {
        std::lock_guard<ftl::Fibtex> lock(held->Mutex);
        Critical(*held);
    };
    std::vector<ftl::Task> waiters(kWaiters, LambdaTask(waiter));
    ftl::TaskCounter waitersDone(&ts);
    ts.AddTasks(kWaiters, waiters.data(), ftl::TaskPriority::Normal, &waitersDone);
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (parks.Count.load() < kWaiters && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(parks.Count.load() == kWaiters);

    // Meanwhile the other Fibtex of the bucket is locked and unlocked, with
    // parks of its own (no spin), and every unlock finds waiters in the bucket.
    unsigned const iterations = ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated ? 40 : 200;
    auto worker = [&](ftl::TaskScheduler *) {
        for (unsigned i = 0; i < iterations; ++i) {
            busy->Mutex.lock_spin(false, 0);
            Critical(*busy);
            busy->Mutex.unlock();
        }
    };
    constexpr unsigned kWorkers = 8;
    std::vector<ftl::Task> workers(kWorkers, LambdaTask(worker));
    ftl::TaskCounter workersDone(&ts);
    ts.AddTasks(kWorkers, workers.data(), ftl::TaskPriority::Normal, &workersDone);
    ts.WaitForCounter(&workersDone);
    REQUIRE(busy->Value == static_cast<int>(kWorkers * iterations));
    REQUIRE(busy->Overlaps.load() == 0);
    // Nobody woke the held Fibtex's waiters: each parked once, none ran.
    REQUIRE(parks.Count.load() == kWaiters);
    REQUIRE(held->Value == 0);

    held->Mutex.unlock();
    ts.WaitForCounter(&waitersDone);
    REQUIRE(held->Value == static_cast<int>(kWaiters));
    REQUIRE(held->Overlaps.load() == 0);
}

// An unlock reads the parking table after its store, when the next owner
// may already have unlocked and deleted the Fibtex: std::mutex allows the
// last user to delete it. The delete must find no waiter left (a node still
// linked is a fatal error in the destructor), and the next Fibtex, often at
// the same address, starts with nothing left over from the last one. (Under
// ASan, an unlock that touched the Fibtex after its store would also be
// caught, when it falls in the few nanoseconds before the delete.)
TEST_CASE("A Fibtex its last user deletes right after unlocking is not touched by a late unlock",
          "[fibtex]") {
    unsigned const threads = GENERATE(2u, 3u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    struct Round {
        explicit Round(ftl::TaskScheduler *taskScheduler) : Guarded(taskScheduler) {}
        Shared Guarded;
        unsigned Finished = 0; // guarded by Guarded.Mutex
    };
    unsigned const rounds = ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated ? 20 : 200;
    constexpr unsigned kTasks = 6;
    constexpr unsigned kIterations = 20;
    std::atomic<unsigned> deleted{0};
    std::atomic<int> lastValue{0};
    std::atomic<unsigned> overlaps{0};
    for (unsigned round = 0; round < rounds; ++round) {
        auto *current = new Round(&ts);
        auto work = [&, current](ftl::TaskScheduler *) {
            for (unsigned i = 0; i + 1 < kIterations; ++i) {
                current->Guarded.Mutex.lock_spin(false, 0);
                Critical(current->Guarded);
                current->Guarded.Mutex.unlock();
            }
            current->Guarded.Mutex.lock_spin(false, 0);
            Critical(current->Guarded);
            bool const last = ++current->Finished == kTasks;
            int const value = current->Guarded.Value;
            current->Guarded.Mutex.unlock();
            if (last) {
                // Everyone else has unlocked for the last time, though their
                // unlocks may not have returned yet.
                lastValue.store(value);
                overlaps.fetch_add(current->Guarded.Overlaps.load());
                delete current;
                deleted.fetch_add(1);
            }
        };
        std::vector<ftl::Task> tasks(kTasks, LambdaTask(work));
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kTasks, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(deleted.load() == round + 1);
        REQUIRE(lastValue.load() == static_cast<int>(kTasks * kIterations));
    }
    REQUIRE(overlaps.load() == 0);
}

// The owner of a lock is the task that took it, wherever it resumes: a task
// that holds a Fibtex across a wait and resumes on another worker unlocks it
// there, and both workers' next tasks start holding nothing (a task that
// ends holding a Fibtex is a fatal error, so a count left on the worker the
// holder left, or missing where it resumed, would end the process).
TEST_CASE("A task holding a Fibtex across a wait that resumes on another worker unlocks it there",
          "[fibtex]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(3)) == 0);
    ftl::Fibtex mutex(&ts);
    ftl::AtomicFlag release(&ts, 1);
    std::atomic<bool> spinnerStarted{false};
    std::atomic<bool> resumed{false};
    unsigned lockedOn = 99;
    unsigned unlockedOn = 99;
    bool triedWhileHeld = true;
    // Pinned to worker 1; once it parks, the spinner keeps worker 1 busy
    // until it has resumed, so it resumes on another worker.
    auto holder = [&](ftl::TaskScheduler *taskScheduler) {
        mutex.lock();
        lockedOn = taskScheduler->GetCurrentThreadIndex();
        taskScheduler->WaitForCounter(&release);
        unlockedOn = taskScheduler->GetCurrentThreadIndex();
        resumed.store(true);
        mutex.unlock();
    };
    auto spinner = [&](ftl::TaskScheduler *) {
        spinnerStarted.store(true);
        triedWhileHeld = mutex.try_lock();
        while (!resumed.load()) {
            std::this_thread::yield();
        }
    };
    ftl::TaskCounter done(&ts);
    ts.AddPinnedTask(1, LambdaTask(holder), ftl::TaskPriority::Normal, &done);
    ts.AddPinnedTask(1, LambdaTask(spinner), ftl::TaskPriority::Normal, &done);
    while (!spinnerStarted.load()) {
        std::this_thread::yield();
    }
    release.Clear();
    ts.WaitForCounter(&done);
    REQUIRE(lockedOn == 1u);
    REQUIRE(unlockedOn != 1u);
    REQUIRE_FALSE(triedWhileHeld);
    // Free, and every worker's tasks can take it and end cleanly.
    std::atomic<unsigned> locked{0};
    auto again = [&](ftl::TaskScheduler *) {
        std::lock_guard<ftl::Fibtex> lock(mutex);
        locked.fetch_add(1);
    };
    ftl::TaskCounter againDone(&ts);
    for (unsigned worker = 0; worker < 3; ++worker) {
        ts.AddPinnedTask(worker, LambdaTask(again), ftl::TaskPriority::Normal, &againDone);
    }
    ts.WaitForCounter(&againDone);
    REQUIRE(locked.load() == 3u);
    REQUIRE(mutex.try_lock());
    mutex.unlock();
}

// A child run inline on its waiting parent's fiber is a task of its own: it
// does not own the parent's lock, starts holding nothing, may lock and
// unlock others (and wait while holding one), and the parent still owns its
// lock when the wait returns.
TEST_CASE("Children run inline while their parent holds a Fibtex own only their own locks", "[fibtex]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);
    ftl::Fibtex parentLock(&ts);
    ftl::Fibtex childLock(&ts);
    constexpr unsigned kChildren = 6;
    unsigned parentFiber = 0;
    std::atomic<unsigned> inlineRuns{0};
    std::atomic<unsigned> parentLockTaken{0};
    std::atomic<unsigned> childSections{0};
    std::atomic<unsigned> grandchildren{0};
    auto grandchild = [&](ftl::TaskScheduler *) { grandchildren.fetch_add(1); };
    auto child = [&](ftl::TaskScheduler *taskScheduler) {
        if (taskScheduler->GetCurrentFiberIndex() == parentFiber) {
            inlineRuns.fetch_add(1);
        }
        if (parentLock.try_lock()) {
            parentLockTaken.fetch_add(1);
            parentLock.unlock();
        }
        std::lock_guard<ftl::Fibtex> lock(childLock);
        // Held across a wait of its own, whose children run inline in turn.
        ftl::TaskCounter counter(taskScheduler);
        taskScheduler->AddTask(LambdaTask(grandchild), ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        childSections.fetch_add(1);
    };
    bool parentUnlocked = false;
    auto parent = [&](ftl::TaskScheduler *taskScheduler) {
        parentFiber = taskScheduler->GetCurrentFiberIndex();
        parentLock.lock();
        ftl::TaskCounter counter(taskScheduler);
        std::vector<ftl::Task> tasks(kChildren, LambdaTask(child));
        taskScheduler->AddTasks(kChildren, tasks.data(), ftl::TaskPriority::Normal, &counter);
        taskScheduler->WaitForCounter(&counter);
        parentLock.unlock();
        parentUnlocked = true;
    };
    ftl::TaskCounter done(&ts);
    ts.AddTask(LambdaTask(parent), ftl::TaskPriority::Normal, &done);
    ts.WaitForCounter(&done);
    REQUIRE(parentUnlocked);
    REQUIRE(inlineRuns.load() == kChildren);
    REQUIRE(parentLockTaken.load() == 0u);
    REQUIRE(childSections.load() == kChildren);
    REQUIRE(grandchildren.load() == kChildren);
    REQUIRE(parentLock.try_lock());
    parentLock.unlock();
}

// Outside any task, the stack of the thread that calls Init is one owner
// before, while and after it is worker 0.
TEST_CASE("The Init thread's own stack holds a Fibtex across Init and the scheduler's end", "[fibtex]") {
    SECTION("Locked before Init, held across waits, unlocked after Init") {
        ftl::TaskScheduler ts;
        ftl::Fibtex mutex(&ts);
        mutex.lock();
        REQUIRE(ts.Init(Options(2)) == 0);
        std::atomic<unsigned> failedTries{0};
        auto trier = [&](ftl::TaskScheduler *) {
            if (!mutex.try_lock()) {
                failedTries.fetch_add(1);
            } else {
                mutex.unlock();
            }
        };
        std::vector<ftl::Task> tries(8, LambdaTask(trier));
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(8, tries.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter); // the Init thread's fiber waits, holding it
        REQUIRE(failedTries.load() == 8u);
        mutex.unlock();
        // A task that waits for it gets it once the Init thread lets go.
        mutex.lock();
        std::atomic<unsigned> taken{0};
        auto taker = [&](ftl::TaskScheduler *) {
            std::lock_guard<ftl::Fibtex> lock(mutex);
            taken.fetch_add(1);
        };
        ftl::TaskCounter takerDone(&ts);
        ts.AddTask(LambdaTask(taker), ftl::TaskPriority::Normal, &takerDone);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        REQUIRE(taken.load() == 0u);
        mutex.unlock();
        ts.WaitForCounter(&takerDone);
        REQUIRE(taken.load() == 1u);
    }

    SECTION("Locked while worker 0, outside any task, unlocked after the scheduler is gone") {
        ftl::Fibtex mutex(nullptr);
        {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            mutex.lock();
            std::atomic<unsigned> failedTries{0};
            auto trier = [&](ftl::TaskScheduler *) {
                if (!mutex.try_lock()) {
                    failedTries.fetch_add(1);
                } else {
                    mutex.unlock();
                }
            };
            ftl::TaskCounter counter(&ts);
            ts.AddTask(LambdaTask(trier), ftl::TaskPriority::Normal, &counter);
            ts.WaitForCounter(&counter);
            REQUIRE(failedTries.load() == 1u);
        }
        mutex.unlock();
        REQUIRE(mutex.try_lock());
        mutex.unlock();
    }
}

namespace {

// Waits of a waiter that locks `locks` times, a short spell of work of its
// own between two, against a task that relocks back to back all along, each
// section 2 us long.
// `outside`: the waiter is a thread outside the scheduler, else a task (on
// another worker: two workers). Returns each wait in nanoseconds, sorted.
std::vector<std::uint64_t> WaitsAgainstRelocker(unsigned threads, bool outside, unsigned locks) {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(ftl_test::Options(threads)) == 0);
    ftl::Fibtex mutex(&ts);
    std::atomic<bool> stop{false};
    std::atomic<bool> relocking{false};
    std::uint64_t sections = 0; // under the lock
    std::vector<std::uint64_t> waits;
    waits.reserve(locks);
    auto const waiter = [&] {
        while (!relocking.load()) {
            std::this_thread::yield();
        }
        for (unsigned i = 0; i < locks; ++i) {
            ftl_test::BusyMicros(20);
            std::uint64_t const start = ftl::detail::NowNs();
            std::lock_guard<ftl::Fibtex> lock(mutex);
            waits.push_back(ftl::detail::NowNs() - start);
            ++sections;
        }
        stop.store(true);
    };
    ftl::TaskCounter done(&ts);
    // On worker 0 (the Init thread runs it while it waits), so that a waiter
    // task on worker 1 is never queued behind it.
    ts.AddPinnedTask(
        0,
        [&] {
            relocking.store(true);
            while (!stop.load(std::memory_order_relaxed)) {
                std::lock_guard<ftl::Fibtex> lock(mutex);
                ftl_test::BusyMicros(2); // a section's work: the lock is free only between two
                ++sections;
            }
        },
        ftl::TaskPriority::Normal, &done);
    if (outside) {
        std::thread thread(waiter);
        ts.WaitForCounter(&done);
        thread.join();
    } else {
        ts.AddPinnedTask(1, waiter, ftl::TaskPriority::Normal, &done);
        ts.WaitForCounter(&done);
    }
    REQUIRE(waits.size() == locks);
    REQUIRE(sections >= locks);
    std::sort(waits.begin(), waits.end());
    return waits;
}

} // namespace

// A waiter that has waited a while is handed the lock at the holder's next
// unlock: it is never starved by a holder that relocks at once. The median
// tells the two apart on any host (a task waiter's was 13 ms without the
// hand-off, 50 us with it). The worst is bounded, loosely, for a task
// waiter only: a host loaded by other tests deschedules a waiter for 100 ms
// and more, and then it is not handed the lock; a thread outside the
// scheduler may share the holder's CPU, where it runs only while the holder
// does not, and waits until the OS preempts the holder between two sections
// (2.9 s seen with two test suites running beside it; the header says so).
// The figures are printed.
TEST_CASE("A waiter is not starved by a task that relocks back to back", "[fibtex][fairness]") {
    unsigned const threads = GENERATE(1u, 2u);
    bool const outside = threads == 1 ? true : GENERATE(true, false);
    unsigned const locks = ftl_test::kSlowBuild ? 100 : 300;
    std::vector<std::uint64_t> const waits = WaitsAgainstRelocker(threads, outside, locks);
    std::uint64_t const median = waits[waits.size() / 2];
    std::uint64_t const p99 = waits[waits.size() * 99 / 100];
    std::uint64_t const worst = waits.back();
    INFO(threads << " worker(s), waiter " << (outside ? "outside" : "a task") << ": median " << median / 1000
                 << " us, p99 " << p99 / 1000 << " us, worst " << worst / 1000 << " us");
    CHECK(median < 1000u * 1000u);
    if (!outside) {
        CHECK(worst < 2000u * 1000u * 1000u);
    }
    WARN(threads << " worker(s), waiter " << (outside ? "outside" : "a task") << ": median " << median / 1000
                 << " us, p99 " << p99 / 1000 << " us, worst " << worst / 1000 << " us");
}

// Only a waiter that runs is handed the lock. Handed to a parked fiber, the
// lock would wait for that fiber to be run, while the one worker spins in
// lock_spin_infinite for it: neither would ever go on.
TEST_CASE("A lock is never handed to a parked fiber while a worker spins for it", "[fibtex][fairness]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(ftl_test::Options(1)) == 0);
    ftl::Fibtex mutex(&ts);
    std::atomic<bool> stop{false};
    std::atomic<bool> relocking{false};
    std::uint64_t sections = 0; // under the lock
    std::thread relocker([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            std::lock_guard<ftl::Fibtex> lock(mutex);
            ftl_test::BusyMicros(2);
            ++sections;
            relocking.store(true, std::memory_order_relaxed);
        }
    });
    while (!relocking.load()) {
        std::this_thread::yield();
    }
    constexpr unsigned kEach = 8;
    std::atomic<unsigned> parkers{0};
    std::atomic<unsigned> spinners{0};
    ftl::TaskCounter done(&ts);
    for (unsigned i = 0; i < kEach; ++i) {
        ts.AddTask(
            [&] {
                mutex.lock(); // spins, parks, and asks again once woken
                ++sections;
                mutex.unlock();
                parkers.fetch_add(1);
            },
            ftl::TaskPriority::Normal, &done);
        ts.AddTask(
            [&] {
                mutex.lock_spin_infinite();
                ++sections;
                mutex.unlock();
                spinners.fetch_add(1);
            },
            ftl::TaskPriority::Normal, &done);
    }
    ts.WaitForCounter(&done);
    stop.store(true);
    relocker.join();
    REQUIRE(parkers.load() == kEach);
    REQUIRE(spinners.load() == kEach);
}
