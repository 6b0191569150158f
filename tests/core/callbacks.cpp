// EventCallbacks: each callback counted (callbacks run on many threads, so
// with atomics) against what the scheduler did.
#include "ftl/callbacks.h"
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

namespace {

constexpr unsigned kMaxThreads = 16;
constexpr unsigned kMaxPoolFibers = 4096;

struct Recorder {
    std::atomic<unsigned> ThreadsCreatedCalls{0};
    std::atomic<unsigned> ThreadsCreatedCount{0};
    std::atomic<unsigned> FibersCreatedCalls{0};
    std::atomic<unsigned> FibersCreatedCount{0};

    std::array<std::atomic<unsigned>, kMaxThreads> Started{};
    std::array<std::atomic<unsigned>, kMaxThreads> Ended{};
    std::mutex Mutex;
    std::map<unsigned, std::thread::id> StartedOn;
    std::map<unsigned, std::thread::id> EndedOn;

    std::atomic<unsigned> Attaches{0};
    std::atomic<unsigned> Detaches{0};
    std::atomic<unsigned> MidTaskDetaches{0};
    // Mid-task detaches of one chosen fiber.
    std::atomic<unsigned> WatchedFiber{ftl::kInvalidIndex};
    std::atomic<unsigned> WatchedMidTaskDetaches{0};
    // Per fiber: attaches minus detaches, which must stay 0 or 1.
    std::array<std::atomic<int>, kMaxPoolFibers> PoolFiberState{};
    std::atomic<unsigned> Unbalanced{0};
    std::atomic<unsigned> BadIndex{0};
    // The largest index reported, which must be below the pool's size.
    std::atomic<unsigned> MaxIndex{0};

    std::atomic<int> *FiberState(unsigned fiberIndex) {
        unsigned seen = MaxIndex.load();
        while (seen < fiberIndex && !MaxIndex.compare_exchange_weak(seen, fiberIndex)) {
        }
        return fiberIndex < kMaxPoolFibers ? &PoolFiberState[fiberIndex] : nullptr;
    }
};

Recorder &Of(void *context) {
    return *static_cast<Recorder *>(context);
}

void OnThreadsCreated(void *context, unsigned threadCount) {
    Of(context).ThreadsCreatedCalls.fetch_add(1);
    Of(context).ThreadsCreatedCount.store(threadCount);
}

void OnFibersCreated(void *context, unsigned fiberCount) {
    Of(context).FibersCreatedCalls.fetch_add(1);
    Of(context).FibersCreatedCount.store(fiberCount);
}

void OnThreadEvent(Recorder &recorder, unsigned threadIndex, bool started) {
    if (threadIndex >= kMaxThreads) {
        recorder.BadIndex.fetch_add(1);
        return;
    }
    (started ? recorder.Started : recorder.Ended)[threadIndex].fetch_add(1);
    std::lock_guard<std::mutex> lock(recorder.Mutex);
    (started ? recorder.StartedOn : recorder.EndedOn)[threadIndex] = std::this_thread::get_id();
}

void OnWorkerThreadStarted(void *context, unsigned threadIndex) {
    OnThreadEvent(Of(context), threadIndex, true);
}

void OnWorkerThreadEnded(void *context, unsigned threadIndex) {
    OnThreadEvent(Of(context), threadIndex, false);
}

void OnFiberAttached(void *context, unsigned fiberIndex) {
    Recorder &recorder = Of(context);
    recorder.Attaches.fetch_add(1);
    std::atomic<int> *state = recorder.FiberState(fiberIndex);
    if (state == nullptr) {
        recorder.BadIndex.fetch_add(1);
    } else if (state->fetch_add(1) != 0) {
        recorder.Unbalanced.fetch_add(1); // attached twice without a detach
    }
}

void OnFiberDetached(void *context, unsigned fiberIndex, bool isMidTask) {
    Recorder &recorder = Of(context);
    recorder.Detaches.fetch_add(1);
    if (isMidTask) {
        recorder.MidTaskDetaches.fetch_add(1);
        if (fiberIndex == recorder.WatchedFiber.load()) {
            recorder.WatchedMidTaskDetaches.fetch_add(1);
        }
    }
    std::atomic<int> *state = recorder.FiberState(fiberIndex);
    if (state == nullptr) {
        recorder.BadIndex.fetch_add(1);
    } else if (state->fetch_sub(1) != 1) {
        recorder.Unbalanced.fetch_add(1); // detached without being attached
    }
}

ftl::EventCallbacks AllCallbacks(Recorder &recorder) {
    ftl::EventCallbacks callbacks;
    callbacks.Context = &recorder;
    callbacks.OnThreadsCreated = OnThreadsCreated;
    callbacks.OnFibersCreated = OnFibersCreated;
    callbacks.OnWorkerThreadStarted = OnWorkerThreadStarted;
    callbacks.OnWorkerThreadEnded = OnWorkerThreadEnded;
    callbacks.OnFiberAttached = OnFiberAttached;
    callbacks.OnFiberDetached = OnFiberDetached;
    return callbacks;
}

} // namespace

TEST_CASE("Event callbacks are called as documented", "[callbacks]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    Recorder recorder;
    constexpr unsigned kPoolSize = 64;
    bool midTaskTimedOut = false;
    unsigned fiberCount = 0;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.FiberPoolSize = kPoolSize;
        options.Callbacks = AllCallbacks(recorder);
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);

        REQUIRE(recorder.ThreadsCreatedCalls.load() == 1u);
        REQUIRE(recorder.ThreadsCreatedCount.load() == threads);
        // Init returns only once every worker thread has started.
        for (unsigned i = 1; i < threads; ++i) {
            REQUIRE(recorder.Started[i].load() == 1u);
        }
        REQUIRE(recorder.FibersCreatedCalls.load() == 1u);
        REQUIRE(recorder.FibersCreatedCount.load() == kPoolSize);
        // The Init thread is fiber 0 and each worker thread i runs fiber i:
        // one attach per thread so far, each index once.
        REQUIRE(recorder.Attaches.load() == threads);
        REQUIRE(recorder.Detaches.load() == 0u);
        for (unsigned i = 0; i < threads; ++i) {
            CAPTURE(i);
            REQUIRE(recorder.PoolFiberState[i].load() == 1);
        }

        // A task that surely parks mid-task: the task that releases it waits
        // until that fiber's mid-task detach was reported (at one thread it
        // can only run after the park anyway). Bounded, so a missing report
        // fails instead of hanging.
        ftl::AtomicFlag flag(&ts, 1);
        auto release = [&](ftl::TaskScheduler *) {
            midTaskTimedOut = !ftl_test::SpinUntil(
                [&] { return recorder.WatchedMidTaskDetaches.load() >= 1; }, std::chrono::milliseconds(5000));
            flag.Clear();
        };
        auto parker = [&](ftl::TaskScheduler *taskScheduler) {
            recorder.WatchedFiber.store(taskScheduler->GetCurrentFiberIndex());
            taskScheduler->AddTask(LambdaTask(release), ftl::TaskPriority::High);
            taskScheduler->WaitForCounter(&flag);
        };
        // And an ordinary workload with waits, for the attach/detach balance.
        std::atomic<unsigned> ran{0};
        auto child = [&](ftl::TaskScheduler *) { ran.fetch_add(1); };
        auto parent = [&](ftl::TaskScheduler *taskScheduler) {
            for (int i = 0; i < 5; ++i) {
                std::vector<ftl::Task> children(4, LambdaTask(child));
                ftl::TaskCounter counter(taskScheduler);
                taskScheduler->AddTasks(4, children.data(), ftl::TaskPriority::Normal, &counter);
                taskScheduler->WaitForCounter(&counter);
            }
        };
        ftl::TaskCounter counter(&ts);
        ts.AddTask(LambdaTask(parker), ftl::TaskPriority::Normal, &counter);
        std::vector<ftl::Task> parents(20, LambdaTask(parent));
        ts.AddTasks(20, parents.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load() == 20u * 5u * 4u);
        REQUIRE(recorder.WatchedMidTaskDetaches.load() >= 1u);
        fiberCount = ts.GetFiberCount();
    }
    REQUIRE(recorder.MaxIndex.load() < fiberCount);
    REQUIRE_FALSE(midTaskTimedOut);

    // Worker threads 1..threads-1 each started and ended once, on a thread of
    // their own; the Init thread (index 0) reports neither.
    REQUIRE(recorder.BadIndex.load() == 0);
    REQUIRE(recorder.Started[0].load() == 0u);
    REQUIRE(recorder.Ended[0].load() == 0u);
    for (unsigned i = 1; i < kMaxThreads; ++i) {
        CAPTURE(i);
        unsigned const expected = i < threads ? 1u : 0u;
        REQUIRE(recorder.Started[i].load() == expected);
        REQUIRE(recorder.Ended[i].load() == expected);
    }
    std::lock_guard<std::mutex> lock(recorder.Mutex);
    for (auto const &entry : recorder.StartedOn) {
        CAPTURE(entry.first);
        REQUIRE(entry.second != std::this_thread::get_id());
        REQUIRE(recorder.EndedOn.at(entry.first) == entry.second);
        for (auto const &other : recorder.StartedOn) {
            REQUIRE((other.first == entry.first) == (other.second == entry.second));
        }
    }

    // Every attach was matched by one detach, fiber by fiber.
    REQUIRE(recorder.Attaches.load() > 0u);
    REQUIRE(recorder.Attaches.load() == recorder.Detaches.load());
    REQUIRE(recorder.Unbalanced.load() == 0);
    unsigned stillAttached = 0;
    for (auto const &state : recorder.PoolFiberState) {
        stillAttached += state.load() != 0 ? 1u : 0u;
    }
    REQUIRE(stillAttached == 0);
}

TEST_CASE("Only the callbacks that are set are called", "[callbacks]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    Recorder recorder;
    {
        ftl::TaskSchedulerInitOptions options = Options(threads);
        options.Callbacks.Context = &recorder;
        options.Callbacks.OnWorkerThreadEnded = OnWorkerThreadEnded;
        options.Callbacks.OnFiberDetached = OnFiberDetached;
        ftl::TaskScheduler ts;
        REQUIRE(ts.Init(options) == 0);
        ftl::TaskCounter counter(&ts);
        std::atomic<unsigned> ran{0};
        auto work = [&](ftl::TaskScheduler *taskScheduler) {
            ftl_test::ParkOnce(taskScheduler);
            ran.fetch_add(1);
        };
        std::vector<ftl::Task> tasks(16, LambdaTask(work));
        ts.AddTasks(16, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load() == 16u);
        REQUIRE(recorder.ThreadsCreatedCalls.load() == 0u);
        REQUIRE(recorder.Attaches.load() == 0u);
    }
    REQUIRE(recorder.Detaches.load() > 0u);
    unsigned ended = 0;
    for (auto const &count : recorder.Ended) {
        ended += count.load();
    }
    REQUIRE(ended == threads - 1);
}
