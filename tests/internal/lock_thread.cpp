// The calling thread's LockThreadState (ftl/detail/lock_thread.h), which
// Fibtex's inlined lock and unlock read: CurrentLockThread() names the
// calling thread's own t_lockThread on plain threads and on workers, also
// after a wait that moved the fiber to another thread; a task's identity
// stays the same across its waits, and a child run inline on its waiting
// parent's fiber has an identity of its own: it does not count as the
// holder of its parent's Fibtex, which the parent holds across the wait and
// unlocks after it.
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/worker.h"
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

__attribute__((noinline)) bool FindsOwnLockThread() {
    asm volatile("" ::: "memory");
    return ftl::detail::CurrentLockThread() == OwnLockThread();
}

} // namespace

TEST_CASE("Each thread finds its own lock state", "[fibtex]") {
    // The offset is set by the first Fibtex (or worker): make one.
    ftl::Fibtex first(nullptr);
    constexpr unsigned kThreads = 4;
    std::vector<ftl::detail::LockThreadState *> found(kThreads, nullptr);
    std::vector<int> matched(kThreads, 0);
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            found[i] = ftl::detail::CurrentLockThread();
            matched[i] = FindsOwnLockThread() ? 1 : 0;
            // A thread that is no worker is its own identity.
            first.lock();
            matched[i] += ftl::detail::CurrentTaskIdentity() == found[i] ? 1 : 0;
            first.unlock();
        });
    }
    for (std::thread &thread : threads) {
        thread.join();
    }
    REQUIRE(FindsOwnLockThread());
    std::set<ftl::detail::LockThreadState *> const distinct(found.begin(), found.end());
    CHECK(distinct.size() == kThreads);
    CHECK(distinct.count(ftl::detail::CurrentLockThread()) == 0);
    for (unsigned i = 0; i < kThreads; ++i) {
        CAPTURE(i);
        CHECK(matched[i] == 2);
    }
}

TEST_CASE("A task keeps its identity across waits and a child run inline has one of its own", "[fibtex]") {
    unsigned const threads = GENERATE(1u, 2u);
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
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
    std::atomic<unsigned> moved{0};
    struct Parent {
        void const *Identity = nullptr;
        unsigned Fiber = 0;
    };
    auto parent = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned wait = 0; wait < kWaits; ++wait) {
            Parent const self{ftl::detail::CurrentTaskIdentity(), taskScheduler->GetCurrentFiberIndex()};
            auto child = [&](ftl::TaskScheduler *childScheduler) {
                childRuns.fetch_add(1, std::memory_order_relaxed);
                lostThread.fetch_add(FindsOwnLockThread() ? 0 : 1, std::memory_order_relaxed);
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
            unsigned const thread = taskScheduler->GetCurrentThreadIndex();
            // Held across the wait: the unlock below, perhaps on another
            // thread, checks the identity the lock recorded here.
            std::lock_guard<ftl::Fibtex> lock(parentLock);
            std::vector<ftl::Task> const children(kChildren, LambdaTask(child));
            ftl::TaskCounter counter(taskScheduler);
            taskScheduler->AddTasks(kChildren, children.data(), ftl::TaskPriority::Normal, &counter);
            taskScheduler->WaitForCounter(&counter);
            lostThread.fetch_add(FindsOwnLockThread() ? 0 : 1, std::memory_order_relaxed);
            lostIdentity.fetch_add(ftl::detail::CurrentTaskIdentity() == self.Identity ? 0 : 1,
                                   std::memory_order_relaxed);
            lostIdentity.fetch_add(ftl::detail::FibtexOps::HeldByCaller(parentLock) ? 0 : 1,
                                   std::memory_order_relaxed);
            moved.fetch_add(taskScheduler->GetCurrentThreadIndex() != thread ? 1 : 0,
                            std::memory_order_relaxed);
        }
    };
    ftl::Task const parentTask = LambdaTask(parent);
    std::vector<ftl::Task> const parents(kParents, parentTask);
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kParents, parents.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);

    CHECK(childRuns.load() == kParents * kWaits * kChildren);
    CHECK(lostThread.load() == 0);
    CHECK(lostIdentity.load() == 0);
    CHECK(sharedIdentity.load() == 0);
    CHECK(heldByChild.load() == 0);
    if (threads == 1) {
        // One worker: the waiting parent runs its children itself, inline.
        CHECK(inlineRuns.load() > 0);
    }
    INFO("parents that resumed on another thread: " << moved.load());
}
