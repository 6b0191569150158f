// Closures as tasks (AddTask, AddTasks, AddPinnedTask) and errors at the
// waiter: each closure runs exactly once and is destroyed exactly once,
// wherever it was stored (inside the queued task, in a slot of the closure
// pool, on the heap); AddTasks runs every index once; a pinned task runs on
// its thread; an exception reaches the counter's next waiter.
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using ftl_test::Options;

namespace {

// Counts live copies, so a test can check that every closure it added was
// destroyed exactly as often as it was made.
struct Tracked {
    static std::atomic<int> Live;
    Tracked() { Live.fetch_add(1); }
    Tracked(Tracked const &) { Live.fetch_add(1); }
    Tracked(Tracked &&) noexcept { Live.fetch_add(1); }
    ~Tracked() { Live.fetch_sub(1); }
};
std::atomic<int> Tracked::Live{0};

} // namespace

TEST_CASE("Closures of every size run once and are destroyed", "[closures]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    int const liveBefore = Tracked::Live.load();

    constexpr int kRounds = 200;
    std::atomic<int> small{0};  // one pointer: inside the queued task
    std::atomic<int> withTs{0}; // called with the scheduler
    std::atomic<int> slot{0};   // a std::string and a counter: a pool slot
    std::atomic<int> heap{0};   // 256 bytes: on the heap
    std::atomic<int> moveOnly{0};
    std::atomic<unsigned> wrongScheduler{0};
    {
        ftl::TaskCounter counter(&ts);
        for (int i = 0; i < kRounds; ++i) {
            std::atomic<int> *const smallCount = &small;
            ts.AddTask([smallCount] { smallCount->fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
            ts.AddTask(
                [&withTs, &wrongScheduler, &ts](ftl::TaskScheduler *taskScheduler) {
                    if (taskScheduler != &ts) {
                        wrongScheduler.fetch_add(1);
                    }
                    withTs.fetch_add(1);
                },
                ftl::TaskPriority::High, &counter);
            std::string text = "a string long enough to live on the heap, number " + std::to_string(i);
            ts.AddTask(
                [text, &slot, tracked = Tracked()] {
                    (void)tracked;
                    if (text.size() > 40) {
                        slot.fetch_add(1);
                    }
                },
                ftl::TaskPriority::Normal, &counter);
            std::array<char, 256> big{};
            big[255] = 'x';
            ts.AddTask(
                [big, &heap, tracked = Tracked()] {
                    (void)tracked;
                    if (big[255] == 'x') {
                        heap.fetch_add(1);
                    }
                },
                ftl::TaskPriority::Normal, &counter);
            auto owned = std::make_unique<int>(i);
            ts.AddTask(
                [owned = std::move(owned), &moveOnly] {
                    if (owned != nullptr) {
                        moveOnly.fetch_add(1);
                    }
                },
                ftl::TaskPriority::Normal, &counter);
        }
        ts.WaitForCounter(&counter);
    }
    REQUIRE(small.load() == kRounds);
    REQUIRE(withTs.load() == kRounds);
    REQUIRE(slot.load() == kRounds);
    REQUIRE(heap.load() == kRounds);
    REQUIRE(moveOnly.load() == kRounds);
    REQUIRE(wrongScheduler.load() == 0);
    // Every closure (and its Tracked member) was destroyed after it ran.
    REQUIRE(Tracked::Live.load() == liveBefore);
}

TEST_CASE("AddTasks runs every index of a closure once", "[closures]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    int const liveBefore = Tracked::Live.load();

    constexpr unsigned kCount = 2000;
    std::vector<std::atomic<unsigned>> seen(kCount);
    std::vector<std::atomic<unsigned>> seenShared(kCount);
    std::atomic<unsigned> badThread{0};
    {
        ftl::TaskCounter counter(&ts);
        auto *const slots = &seen;
        // Fits in the queued task: f(i).
        ts.AddTasks(
            kCount, [slots](unsigned i) { (*slots)[i].fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
        // Shared by the count tasks (a Tracked member, so not trivially
        // copyable): f(TaskScheduler *, i).
        ts.AddTasks(
            kCount,
            [&seenShared, &badThread, tracked = Tracked()](ftl::TaskScheduler *taskScheduler, unsigned i) {
                (void)tracked;
                if (taskScheduler->GetCurrentThreadIndex() >= taskScheduler->GetThreadCount()) {
                    badThread.fetch_add(1);
                }
                seenShared[i].fetch_add(1);
            },
            ftl::TaskPriority::High, &counter);
        // Zero tasks: nothing is added, the counter stays as it is.
        ts.AddTasks(
            0, [](unsigned) {}, ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
    }
    for (unsigned i = 0; i < kCount; ++i) {
        CAPTURE(i);
        REQUIRE(seen[i].load() == 1u);
        REQUIRE(seenShared[i].load() == 1u);
    }
    REQUIRE(badThread.load() == 0);
    // The shared copy was destroyed once, after the last of its tasks.
    REQUIRE(Tracked::Live.load() == liveBefore);
}

TEST_CASE("Closures added from a thread that is not a worker run", "[closures]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> ran{0};
    ftl::TaskCounter counter(&ts);
    std::thread outside([&] {
        for (int i = 0; i < 100; ++i) {
            std::string name = "outside closure number " + std::to_string(i) + " with a long name";
            ts.AddTask([name, &ran] { ran.fetch_add(name.empty() ? 0u : 1u); }, ftl::TaskPriority::Normal,
                       &counter);
        }
        ts.AddTasks(
            100, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::High, &counter);
    });
    outside.join();
    ts.WaitForCounter(&counter);
    REQUIRE(ran.load() == 200u);
}

TEST_CASE("A pinned task runs on its thread only", "[closures][pinned]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    constexpr unsigned kPerThread = 50;
    std::vector<std::atomic<unsigned>> ranOn(threads);
    std::atomic<unsigned> wrongThread{0};
    std::atomic<unsigned> lineageRan{0};
    struct LineageArg {
        unsigned Expected;
        std::atomic<unsigned> *Wrong;
        std::atomic<unsigned> *Ran;
        ftl::TaskScheduler *Scheduler;
    };
    std::vector<LineageArg> lineageArgs;
    lineageArgs.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
        lineageArgs.push_back(LineageArg{t, &wrongThread, &lineageRan, &ts});
    }
    ftl::TaskCounter counter(&ts);
    // From a task: every thread gets kPerThread closures and one lineage Task.
    auto adder = [&](ftl::TaskScheduler *taskScheduler) {
        for (unsigned t = 0; t < threads; ++t) {
            for (unsigned i = 0; i < kPerThread; ++i) {
                taskScheduler->AddPinnedTask(
                    t,
                    [t, &ranOn, &wrongThread](ftl::TaskScheduler *inner) {
                        if (inner->GetCurrentThreadIndex() != t) {
                            wrongThread.fetch_add(1);
                        }
                        ranOn[t].fetch_add(1);
                    },
                    i % 2 == 0 ? ftl::TaskPriority::High : ftl::TaskPriority::Normal, &counter);
            }
            taskScheduler->AddPinnedTask(t,
                                         ftl::Task{[](ftl::TaskScheduler *inner, void *arg) {
                                                       auto *lineage = static_cast<LineageArg *>(arg);
                                                       if (inner->GetCurrentThreadIndex() !=
                                                           lineage->Expected) {
                                                           lineage->Wrong->fetch_add(1);
                                                       }
                                                       lineage->Ran->fetch_add(1);
                                                   },
                                                   &lineageArgs[t]},
                                         ftl::TaskPriority::Normal, &counter);
        }
    };
    ts.AddTask(adder, ftl::TaskPriority::Normal, &counter);
    // From a thread that is not a worker, to the Init thread: it runs them
    // while it waits below.
    std::thread outside([&] {
        for (unsigned i = 0; i < kPerThread; ++i) {
            ts.AddPinnedTask(
                0,
                [&ranOn, &wrongThread](ftl::TaskScheduler *inner) {
                    if (inner->GetCurrentThreadIndex() != 0) {
                        wrongThread.fetch_add(1);
                    }
                    ranOn[0].fetch_add(1);
                },
                ftl::TaskPriority::Normal, &counter);
        }
    });
    outside.join();
    ts.WaitForCounter(&counter);
    REQUIRE(wrongThread.load() == 0);
    REQUIRE(lineageRan.load() == threads);
    for (unsigned t = 0; t < threads; ++t) {
        CAPTURE(t);
        REQUIRE(ranOn[t].load() == kPerThread + (t == 0 ? kPerThread : 0));
    }
}

TEST_CASE("A pinned task for a thread that does not exist is a fatal error", "[closures][pinned][misuse]") {
    ftl_test::ChildResult const result = ftl_test::RunInChild([] {
        ftl::TaskScheduler ts;
        if (ts.Init(Options(2)) != 0) {
            return;
        }
        ts.AddPinnedTask(
            2, [] {}, ftl::TaskPriority::Normal);
    });
    INFO(result.Stderr);
    REQUIRE(result.Died());
    REQUIRE(result.StderrHas("AddPinnedTask: thread index 2, but the scheduler has 2 thread(s)"));
}

namespace {

struct FrameError : std::runtime_error {
    explicit FrameError(int frame) : std::runtime_error("frame " + std::to_string(frame)), Frame(frame) {}
    int Frame;
};

} // namespace

TEST_CASE("An exception in a task is rethrown by the wait on its counter", "[closures][errors]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    ftl::TaskCounter counter(&ts);
    std::atomic<unsigned> ran{0};
    // One throws among many that do not; every task still runs.
    ts.AddTasks(
        100,
        [&ran](unsigned i) {
            ran.fetch_add(1);
            if (i == 37) {
                throw FrameError(37);
            }
        },
        ftl::TaskPriority::Normal, &counter);
    int caught = -1;
    try {
        ts.WaitForCounter(&counter);
    } catch (FrameError const &error) {
        caught = error.Frame;
    }
    REQUIRE(caught == 37);
    REQUIRE(ran.load() == 100u);
    REQUIRE(counter.DroppedExceptions() == 0u);

    // The counter is usable again: a round without exceptions waits normally.
    ts.AddTasks(
        10, [&ran](unsigned) { ran.fetch_add(1); }, ftl::TaskPriority::Normal, &counter);
    REQUIRE_NOTHROW(ts.WaitForCounter(&counter));
    REQUIRE(ran.load() == 110u);

    // Several throw: the first kept is rethrown, the others are counted.
    ts.AddTasks(
        4, [](unsigned i) { throw FrameError(static_cast<int>(i)); }, ftl::TaskPriority::Normal, &counter);
    int rethrown = 0;
    try {
        ts.WaitForCounter(&counter);
    } catch (FrameError const &) {
        ++rethrown;
    }
    REQUIRE(rethrown == 1);
    REQUIRE(counter.DroppedExceptions() == 3u);
    REQUIRE_NOTHROW(ts.WaitForCounter(&counter));
}

TEST_CASE("An exception in a task run inline, or in a lineage Task, reaches the waiter",
          "[closures][errors]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    // A parent task waits for a child that throws (the wait runs the child
    // itself when it can); the parent catches it, then rethrows something
    // of its own to the outer waiter.
    std::atomic<int> parentCaught{-1};
    ftl::TaskCounter outer(&ts);
    ts.AddTask(
        [&parentCaught](ftl::TaskScheduler *taskScheduler) {
            ftl::TaskCounter inner(taskScheduler);
            taskScheduler->AddTask([] { throw FrameError(1); }, ftl::TaskPriority::Normal, &inner);
            try {
                taskScheduler->WaitForCounter(&inner);
            } catch (FrameError const &error) {
                parentCaught.store(error.Frame);
            }
            ftl::Task const lineage{[](ftl::TaskScheduler *, void *) { throw FrameError(2); }, nullptr};
            taskScheduler->AddTask(lineage, ftl::TaskPriority::High, &inner);
            taskScheduler->WaitForCounter(&inner); // rethrows 2 out of this task
        },
        ftl::TaskPriority::Normal, &outer);
    int outerCaught = -1;
    try {
        ts.WaitForCounter(&outer);
    } catch (FrameError const &error) {
        outerCaught = error.Frame;
    }
    REQUIRE(parentCaught.load() == 1);
    REQUIRE(outerCaught == 2);
}
