// FiberPool (source/fiber/fiber_pool.h), checked against its header's
// contract: indices lie in [0, Size()), index 0 (the Init thread's own fiber)
// is never handed out, [1, numWorkers) are the worker threads' first fibers
// (AcquireFirst) and the only stacks Init makes; later stacks are made lazily
// as fibers are handed out (Made() grows only then); released fibers are
// reused before fresh ones, from any worker's list; the Grow policy raises
// Size() only when every index below it is in use and reports the new size
// through OnFiberPoolGrown; the Fatal policy's dry pool aborts with a message
// naming the size; concurrent Acquire/Release never hands one fiber to two
// workers and loses none. The fibers are never switched to: no scheduler runs.
#include "fiber/fiber_pool.h"
#include "platform/platform.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

using ftl::FiberPoolPolicy;
using ftl::detail::Fiber;
using ftl::detail::FiberPool;
using ftl_test::ChildResult;
using ftl_test::RunInChild;

namespace {

constexpr std::size_t kStackSize = 32 * 1024;
constexpr std::size_t kGuardSize = 64 * 1024;

[[noreturn]] void NeverEntered(void * /*message*/) {
    std::abort(); // these fibers are never switched to
}

// What OnFiberPoolGrown reported.
struct GrowthLog {
    std::vector<unsigned> Sizes;
};

void OnGrown(void *context, unsigned fiberCount) {
    static_cast<GrowthLog *>(context)->Sizes.push_back(fiberCount);
}

// A pool initialized for the test, destroyed (DestroyAll) at its end.
class TestPool {
public:
    TestPool(unsigned size, unsigned numWorkers, FiberPoolPolicy policy) {
        ftl::EventCallbacks callbacks;
        callbacks.Context = &Growth;
        callbacks.OnFiberPoolGrown = OnGrown;
        InitOk = Pool.Init(size, numWorkers, kStackSize, kGuardSize, policy, callbacks, NeverEntered,
                           &ThreadFiber);
    }
    ~TestPool() { Pool.DestroyAll(); }
    TestPool(TestPool const &) = delete;
    TestPool &operator=(TestPool const &) = delete;

    Fiber ThreadFiber;
    GrowthLog Growth;
    FiberPool Pool;
    bool InitOk = false;
};

// Whether a fiber's stack bounds are known before it first runs: not with
// the Win32 fiber backend, where the system makes the stack and the fiber
// learns its bounds once it runs (source/fiber/switch_win32.cpp).
#if FTL_FIBER_WIN32
constexpr bool kStackKnownBeforeRun = false;
#else
constexpr bool kStackKnownBeforeRun = true;
#endif

// A fiber as handed out: a made stack, not the thread's fiber, free, set up
// to start at the entry given to Init.
bool LooksFresh(Fiber const *fiber, Fiber const *threadFiber) {
    return fiber != nullptr && fiber != threadFiber && fiber->Mapping != nullptr &&
           (fiber->StackLow != nullptr || !kStackKnownBeforeRun) && fiber->StackSize >= kStackSize &&
           fiber->Entry == NeverEntered && !fiber->IsThreadFiber &&
           fiber->State.load() == ftl::detail::FiberState::Free;
}

void RequireFatal(ChildResult const &result, std::initializer_list<std::string> phrases) {
    INFO("child stderr:\n" << result.Stderr);
    INFO("exited " << result.Exited << " code " << result.ExitCode << ", signaled " << result.Signaled
                   << " signal " << result.Signal << ", timed out " << result.TimedOut);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas("fatal error"));
    for (std::string const &phrase : phrases) {
        REQUIRE(result.StderrHas(phrase));
    }
}

} // namespace

TEST_CASE("FiberPool: Init makes only the worker threads' first fibers", "[internal][fiber_pool]") {
    TestPool test(16, 4, FiberPoolPolicy::Grow);
    FiberPool &pool = test.Pool;
    REQUIRE(test.InitOk);
    REQUIRE(pool.Size() == 16);
    REQUIRE(pool.Made() == 4); // index 0 (the thread's own) and [1, 4)

    for (unsigned worker = 1; worker < 4; ++worker) {
        Fiber *first = pool.AcquireFirst(worker);
        REQUIRE(LooksFresh(first, &test.ThreadFiber));
        REQUIRE(first->Index == worker);
    }
    REQUIRE(pool.Made() == 4);

    // Fresh hand-outs start after the first fibers, one stack at a time.
    Fiber *fiber = pool.Acquire(0);
    REQUIRE(LooksFresh(fiber, &test.ThreadFiber));
    REQUIRE(fiber->Index == 4);
    REQUIRE(pool.Made() == 5);
    fiber = pool.Acquire(2);
    REQUIRE(fiber->Index == 5);
    REQUIRE(pool.Made() == 6);
    REQUIRE(pool.Size() == 16);
    REQUIRE(test.Growth.Sizes.empty());

    pool.DestroyAll();
    REQUIRE(pool.Size() == 0);
    REQUIRE(pool.Made() == 0);
}

TEST_CASE("FiberPool: a single worker's pool makes no stack at Init", "[internal][fiber_pool]") {
    TestPool test(4, 1, FiberPoolPolicy::Fatal);
    REQUIRE(test.InitOk);
    REQUIRE(test.Pool.Made() == 1);
    REQUIRE(test.Pool.Acquire(0)->Index == 1);
    REQUIRE(test.Pool.Made() == 2);
}

TEST_CASE("FiberPool hands out each index from 1 to size - 1 once and reuses released fibers first",
          "[internal][fiber_pool]") {
    unsigned const size = 40;
    TestPool test(size, 1, FiberPoolPolicy::Fatal);
    FiberPool &pool = test.Pool;
    REQUIRE(test.InitOk);

    std::vector<Fiber *> held;
    std::set<unsigned> indices;
    for (unsigned i = 1; i < size; ++i) {
        Fiber *fiber = pool.Acquire(0);
        REQUIRE(LooksFresh(fiber, &test.ThreadFiber));
        REQUIRE(fiber->Index == i); // fresh ones in index order
        REQUIRE(pool.Made() == i + 1);
        held.push_back(fiber);
        indices.insert(fiber->Index);
    }
    REQUIRE(indices.size() == size - 1);
    REQUIRE(*indices.begin() == 1);
    REQUIRE(*indices.rbegin() == size - 1);
    REQUIRE(pool.Made() == size);

    // Every index is in use; released ones come back (and only they), with
    // no new stack.
    std::set<unsigned> const released = {3, 17, 39};
    for (unsigned index : released) {
        pool.Release(held[index - 1], 0);
    }
    std::set<unsigned> reacquired;
    for (std::size_t i = 0; i < released.size(); ++i) {
        Fiber *fiber = pool.Acquire(0);
        REQUIRE(fiber == held[fiber->Index - 1]);
        reacquired.insert(fiber->Index);
    }
    REQUIRE(reacquired == released);
    REQUIRE(pool.Made() == size);
    REQUIRE(pool.Size() == size);
}

TEST_CASE("FiberPool: a fiber released on one worker is reused by another before a fresh one",
          "[internal][fiber_pool]") {
    TestPool test(64, 3, FiberPoolPolicy::Grow);
    FiberPool &pool = test.Pool;
    REQUIRE(test.InitOk);
    REQUIRE(pool.Made() == 3);

    // More than a worker keeps for itself: some go to the shared list.
    std::vector<Fiber *> held;
    for (int i = 0; i < 40; ++i) {
        held.push_back(pool.Acquire(2));
    }
    REQUIRE(pool.Made() == 43);
    std::set<Fiber *> released(held.begin(), held.end());
    for (Fiber *fiber : held) {
        pool.Release(fiber, 2);
    }
    // Worker 1 (and worker 0) find all of them, and only then a fresh one.
    std::set<Fiber *> reacquired;
    for (int i = 0; i < 40; ++i) {
        reacquired.insert(pool.Acquire(i % 2 == 0 ? 1u : 0u));
    }
    REQUIRE(reacquired == released);
    REQUIRE(pool.Made() == 43);
    Fiber *fresh = pool.Acquire(1);
    REQUIRE(fresh->Index == 43);
    REQUIRE(pool.Made() == 44);
    REQUIRE(test.Growth.Sizes.empty());

    // A worker's first fiber, once released, is reused like any other.
    Fiber *first = pool.AcquireFirst(1);
    REQUIRE(first->Index == 1);
    pool.Release(first, 1);
    REQUIRE(pool.Acquire(0) == first);
    REQUIRE(pool.Made() == 44);
}

TEST_CASE("FiberPool Grow policy grows only when every index is in use and reports the new size",
          "[internal][fiber_pool]") {
    unsigned const initial = 4;
    TestPool test(initial, 2, FiberPoolPolicy::Grow);
    FiberPool &pool = test.Pool;
    REQUIRE(test.InitOk);
    Fiber *first = pool.AcquireFirst(1);
    REQUIRE(first->Index == 1);

    std::set<unsigned> indices = {1};
    unsigned size = pool.Size();
    unsigned growths = 0;
    // Hold every fiber; each time the pool runs dry it must grow.
    while (growths < 3) {
        Fiber *fiber = pool.Acquire(0);
        REQUIRE(fiber != nullptr);
        REQUIRE(indices.insert(fiber->Index).second); // never one already held
        if (test.Growth.Sizes.size() != growths) {
            INFO("growth " << growths << " from " << size);
            // Grown exactly when all of [1, size) was in use, once, to what
            // Size() says; the new fiber is the first of the new range.
            REQUIRE(test.Growth.Sizes.size() == growths + 1);
            REQUIRE(indices.size() == size);
            REQUIRE(fiber->Index == size);
            REQUIRE(test.Growth.Sizes.back() == pool.Size());
            REQUIRE(pool.Size() > size);
            size = pool.Size();
            ++growths;
        }
        REQUIRE(fiber->Index < pool.Size());
        REQUIRE(pool.Made() == indices.size() + 1);
        REQUIRE(indices.size() < 1000); // it must have grown long before
    }
    REQUIRE(*indices.begin() == 1);
    REQUIRE(*indices.rbegin() == indices.size());
    REQUIRE(test.Growth.Sizes.size() == 3);
    REQUIRE(test.Growth.Sizes[0] > initial);
    REQUIRE(test.Growth.Sizes[1] > test.Growth.Sizes[0]);
    REQUIRE(test.Growth.Sizes[2] > test.Growth.Sizes[1]);
}

TEST_CASE("FiberPool Fatal policy: a dry pool aborts with a message naming its size",
          "[internal][fiber_pool]") {
    // Size 6 with 2 workers: index 1 is worker 1's first fiber, so Acquire
    // hands out [2, 6), four fibers, and the fifth finds the pool dry.
    auto const acquire = [](unsigned count) {
        return RunInChild([count] {
            TestPool test(6, 2, FiberPoolPolicy::Fatal);
            if (!test.InitOk) {
                std::_Exit(3);
            }
            for (unsigned i = 0; i < count; ++i) {
                Fiber *fiber = test.Pool.Acquire(i % 2);
                if (fiber == nullptr || fiber->Index < 2 || fiber->Index >= 6) {
                    std::_Exit(4);
                }
            }
        });
    };
    ChildResult const fits = acquire(4);
    INFO("child stderr:\n" << fits.Stderr);
    REQUIRE(fits.Exited);
    REQUIRE(fits.ExitCode == 0);

    RequireFatal(acquire(5), {"ran dry", "all 6 fibers", "FiberPoolSize = 6", "FiberPoolPolicy::Fatal"});
}

TEST_CASE("FiberPool Grow policy: a pool at its limit aborts with a message naming it, before the system "
          "refuses a stack",
          "[internal][fiber_pool]") {
    // Every fiber held: the pool grows to its limit, which on Linux the
    // mapping limit (vm.max_map_count) sets: an ftl message naming the
    // fiber count and what to raise, never a refused stack.
    if (ftl_test::kThreadSanitizer || ftl_test::kCpuEmulated || ftl_test::kWine) {
        // ThreadSanitizer maps a trace of its own for every fiber, and an
        // emulator maps the guest's memory its own way: there the process
        // runs out of mappings before the pool's limit, in their code.
        WARN("skipped: the mapping budget is the sanitizer's or the emulator's here");
        return;
    }
    ChildResult const result = RunInChild(
        [] {
            TestPool test(16, 1, FiberPoolPolicy::Grow);
            if (!test.InitOk) {
                std::_Exit(3);
            }
            for (;;) {
                test.Pool.Acquire(0);
            }
        },
        std::chrono::seconds(60));
    INFO("child stderr:\n" << result.Stderr);
    REQUIRE_FALSE(result.StderrHas("the system refused"));
    if (ftl::detail::MappingLimit() != 0) {
        unsigned const limit = static_cast<unsigned>(std::min<std::size_t>(
            (ftl::detail::MappingLimit() - ftl::detail::MappingLimit() / 8) / 2, 65536));
        RequireFatal(result, {"ran dry", "all " + std::to_string(limit) + " fibers are in use",
                              "vm.max_map_count = " + std::to_string(ftl::detail::MappingLimit())});
    } else {
        RequireFatal(result, {"ran dry", "all 65536 fibers are in use", "Raise FiberPoolSize"});
    }
}

#if FTL_ENABLE_ASSERTS
TEST_CASE("FiberPool asserts that the thread's own fiber is never handed out or released",
          "[internal][fiber_pool]") {
    RequireFatal(RunInChild([] {
                     TestPool test(8, 2, FiberPoolPolicy::Grow);
                     test.Pool.AcquireFirst(0);
                 }),
                 {"worker 0"});
    RequireFatal(RunInChild([] {
                     TestPool test(8, 2, FiberPoolPolicy::Grow);
                     test.Pool.Release(&test.ThreadFiber, 0);
                 }),
                 {"never goes back to the pool"});
}
#endif

TEST_CASE("FiberPool: concurrent Acquire and Release hand each fiber to one worker at a time",
          "[internal][fiber_pool]") {
    // Three workers acquire and release fibers in waves, each holding
    // between 0 and 40 at a time, so that releases overflow their own lists
    // into the shared one and acquires take from every list. A fiber held by
    // two workers at once is a lost race (e.g. ABA on a list).
    unsigned const workers = 3;
    unsigned const size = 64;
    unsigned const waves = ftl_test::kThreadSanitizer ? 5000 : 100000;
    TestPool test(size, workers, FiberPoolPolicy::Grow);
    FiberPool &pool = test.Pool;
    REQUIRE(test.InitOk);
    // Far above what 120 held fibers can need.
    unsigned const maxIndex = 4096;
    std::unique_ptr<std::atomic<unsigned>[]> holder(new std::atomic<unsigned>[maxIndex]());
    std::vector<unsigned> doubles(workers, 0);
    std::vector<unsigned> bad(workers, 0);
    std::vector<unsigned> acquired(workers, 0);

    auto run = [&](unsigned worker) {
        std::vector<Fiber *> held;
        if (worker != 0) {
            held.push_back(pool.AcquireFirst(worker)); // as a worker thread starts
            holder[worker].store(worker + 1);
        }
        unsigned seed = 2654435761u * (worker + 1);
        auto random = [&seed] {
            seed = seed * 1664525u + 1013904223u;
            return seed >> 8;
        };
        for (unsigned wave = 0; wave < waves; ++wave) {
            std::size_t const target = random() % 41;
            while (held.size() < target) {
                Fiber *fiber = pool.Acquire(worker);
                if (fiber == nullptr || fiber == &test.ThreadFiber || fiber->Index == 0 ||
                    fiber->Index >= maxIndex) {
                    ++bad[worker];
                    break;
                }
                if (holder[fiber->Index].exchange(worker + 1) != 0) {
                    ++doubles[worker];
                }
                held.push_back(fiber);
                ++acquired[worker];
            }
            while (held.size() > target) {
                std::size_t const which = random() % held.size();
                Fiber *fiber = held[which];
                held[which] = held.back();
                held.pop_back();
                holder[fiber->Index].store(0); // before another worker can take it
                pool.Release(fiber, worker);
            }
        }
        for (Fiber *fiber : held) {
            holder[fiber->Index].store(0);
            pool.Release(fiber, worker);
        }
    };
    std::vector<std::thread> threads;
    for (unsigned worker = 1; worker < workers; ++worker) {
        threads.emplace_back(run, worker);
    }
    run(0);
    for (std::thread &thread : threads) {
        thread.join();
    }
    for (unsigned worker = 0; worker < workers; ++worker) {
        INFO("worker " << worker << " acquired " << acquired[worker]);
        REQUIRE(bad[worker] == 0);
        REQUIRE(doubles[worker] == 0);
        REQUIRE(acquired[worker] >= waves);
    }

    // Everything is back: the made fibers [1, Made()) come out again, each
    // once, before a fresh stack is made.
    unsigned const made = pool.Made();
    INFO("made " << made << ", size " << pool.Size() << ", growths " << test.Growth.Sizes.size());
    REQUIRE(made <= pool.Size());
    std::set<unsigned> indices;
    for (unsigned i = 1; i < made; ++i) {
        Fiber *fiber = pool.Acquire(i % workers);
        REQUIRE(fiber->Index < made);
        indices.insert(fiber->Index);
    }
    REQUIRE(indices.size() == made - 1);
    REQUIRE(pool.Made() == made);
    if (made < pool.Size()) {
        REQUIRE(pool.Acquire(0)->Index == made);
    }
}
