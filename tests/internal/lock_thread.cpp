// The calling thread's LockThreadState (ftl/detail/lock_thread.h), which
// Fibtex's inlined lock and unlock read: CurrentLockThread() names the
// calling thread's own t_lockThread on plain threads, which lock a Fibtex
// made with no scheduler and keep a plain count exact, and on workers; a
// task that waits and resumes on another thread reads, in its own frame,
// the state of the thread it is on now, not the one it left; a task's
// identity stays the same across its waits; and a child run inline on its
// waiting parent's fiber has an identity of its own: it does not count as
// the holder of its parent's Fibtex, which the parent holds across the wait
// and unlocks after it.
#include "waitables/lock_thread.h"
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"
#include "test_support.h"
#include "waitables/fibtex_ops.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

namespace {

// &t_lockThread through a call the optimizer cannot see into: read on the
// thread the caller runs on now, even after a switch.
__attribute__((noinline)) ftl::detail::LockThreadState *OwnLockThread() {
    asm volatile("" ::: "memory");
    return &ftl::detail::t_lockThread;
}

} // namespace

TEST_CASE("Each thread finds its own lock state", "[fibtex]") {
    // No scheduler: a Fibtex for threads only, which block when contended.
    ftl::Fibtex mutex(nullptr);
    constexpr unsigned kThreads = 4;
    constexpr unsigned kLocks = 20000;
    std::uint64_t count = 0; // guarded by mutex
    std::vector<ftl::detail::LockThreadState *> found(kThreads, nullptr);
    std::vector<unsigned> wrong(kThreads, 0);
    std::vector<std::thread> threads;
    // No thread ends before all have looked: a thread that ended may leave
    // its thread-local storage to the next one (Windows does).
    std::atomic<unsigned> looked{0};
    for (unsigned i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            found[i] = ftl::detail::CurrentLockThread();
            for (unsigned lock = 0; lock < kLocks; ++lock) {
                std::lock_guard<ftl::Fibtex> guard(mutex);
                ++count;
                // A thread that is no worker is its own identity.
                wrong[i] += ftl::detail::CurrentTaskIdentity() == found[i] ? 0u : 1u;
            }
            wrong[i] += found[i] == OwnLockThread() ? 0u : 1u;
            looked.fetch_add(1);
            while (looked.load() < kThreads) {
                std::this_thread::yield();
            }
        });
    }
    for (std::thread &thread : threads) {
        thread.join();
    }
    CHECK(count == std::uint64_t(kThreads) * kLocks);
    REQUIRE(ftl::detail::CurrentLockThread() == OwnLockThread());
    std::set<ftl::detail::LockThreadState *> const distinct(found.begin(), found.end());
    CHECK(distinct.size() == kThreads);
    CHECK(distinct.count(ftl::detail::CurrentLockThread()) == 0);
    for (unsigned i = 0; i < kThreads; ++i) {
        CAPTURE(i);
        CHECK(wrong[i] == 0);
    }
}

TEST_CASE("A task keeps its identity across waits and a child run inline has one of its own", "[fibtex]") {
    unsigned const threads = GENERATE(1u, 2u);
    // Children run inline (the parent's fiber runs them while it waits) or
    // not (the parent parks and may resume on the other worker).
    bool const inlineChildren = GENERATE(true, false);
    CAPTURE(threads, inlineChildren);
    ftl::detail::Mechanisms mechanisms;
    mechanisms.InlineChildren = inlineChildren;
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(threads), mechanisms) == 0);
    ftl::Fibtex parentLock(&ts);
    ftl::Fibtex childLock(&ts);

    constexpr unsigned kParents = 16;
    constexpr unsigned kChildren = 4;
    constexpr unsigned kWaits = 3;
    std::atomic<unsigned> lostThread{0};     // CurrentLockThread() named another thread's state
    std::atomic<unsigned> lostIdentity{0};   // a parent's identity changed across a wait
    std::atomic<unsigned> sharedIdentity{0}; // a child had its parent's identity
    std::atomic<unsigned> heldByChild{0};    // a child was taken for the holder of its parent's Fibtex
    std::atomic<unsigned> childRuns{0};
    std::atomic<unsigned> inlineRuns{0};
    std::atomic<unsigned> moved{0}; // waits after which the parent ran on another thread
    struct Parent {
        void const *Identity = nullptr;
        unsigned Fiber = 0;
    };
    auto parent = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned wait = 0; wait < kWaits; ++wait) {
            Parent const self{ftl::detail::CurrentTaskIdentity(), taskScheduler->GetCurrentFiberIndex()};
            auto child = [&](ftl::TaskScheduler *childScheduler) {
                childRuns.fetch_add(1, std::memory_order_relaxed);
                lostThread.fetch_add(ftl::detail::CurrentLockThread() == OwnLockThread() ? 0 : 1,
                                     std::memory_order_relaxed);
                // Another child runs on a fiber of its own: the parent's is
                // busy waiting, unless it runs this child inline.
                if (childScheduler->GetCurrentFiberIndex() == self.Fiber) {
                    inlineRuns.fetch_add(1, std::memory_order_relaxed);
                }
                sharedIdentity.fetch_add(ftl::detail::CurrentTaskIdentity() == self.Identity ? 1 : 0,
                                         std::memory_order_relaxed);
                // The parent holds parentLock: a child is another task.
                heldByChild.fetch_add(ftl::detail::FibtexOps::HeldByCaller(parentLock) ? 1 : 0,
                                      std::memory_order_relaxed);
                std::lock_guard<ftl::Fibtex> lock(childLock);
            };
            // Read in this frame, before and after the wait: a thread
            // pointer kept across the wait would name the thread left.
            ftl::detail::LockThreadState const *const stateBefore = ftl::detail::CurrentLockThread();
            unsigned const thread = taskScheduler->GetCurrentThreadIndex();
            // Held across the wait: the unlock below, perhaps on another
            // thread, checks the identity the lock recorded here.
            std::lock_guard<ftl::Fibtex> lock(parentLock);
            std::vector<ftl::Task> const children(kChildren, LambdaTask(child));
            ftl::TaskCounter counter(taskScheduler);
            taskScheduler->AddTasks(kChildren, children.data(), ftl::TaskPriority::Normal, &counter);
            taskScheduler->WaitForCounter(&counter);
            ftl::detail::LockThreadState const *const stateAfter = ftl::detail::CurrentLockThread();
            bool const movedNow = taskScheduler->GetCurrentThreadIndex() != thread;
            moved.fetch_add(movedNow ? 1 : 0, std::memory_order_relaxed);
            lostThread.fetch_add(stateAfter == OwnLockThread() && movedNow == (stateAfter != stateBefore) ? 0
                                                                                                          : 1,
                                 std::memory_order_relaxed);
            lostIdentity.fetch_add(ftl::detail::CurrentTaskIdentity() == self.Identity ? 0 : 1,
                                   std::memory_order_relaxed);
            lostIdentity.fetch_add(ftl::detail::FibtexOps::HeldByCaller(parentLock) ? 0 : 1,
                                   std::memory_order_relaxed);
        }
    };
    ftl::Task const parentTask = LambdaTask(parent);
    std::vector<ftl::Task> const parents(kParents, parentTask);
    // Rounds until a parent has resumed on another thread, where one can.
    bool const canMove = threads > 1 && !inlineChildren;
    unsigned rounds = 0;
    do {
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kParents, parents.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        ++rounds;
    } while (canMove && moved.load() == 0 && rounds < 50);

    CAPTURE(rounds, moved.load());
    CHECK(childRuns.load() == rounds * kParents * kWaits * kChildren);
    CHECK(lostThread.load() == 0);
    CHECK(lostIdentity.load() == 0);
    CHECK(sharedIdentity.load() == 0);
    CHECK(heldByChild.load() == 0);
    if (canMove) {
        CHECK(moved.load() > 0);
    }
    if (threads == 1 && inlineChildren) {
        // One worker: the waiting parent runs its children itself, inline.
        CHECK(inlineRuns.load() == rounds * kParents * kWaits * kChildren);
    }
    if (!inlineChildren) {
        CHECK(inlineRuns.load() == 0);
    }
}
