// Source compatibility with the lineage: the fiber and thread events a
// profiler written for FiberTaskingLib relies on. Fiber indices index its
// arrays, so every index is below the pool's size; the thread that called
// Init is fiber 0; each worker thread attaches exactly one fiber when it
// starts and detaches it when it ends; a wait that parks shows as a mid-task
// detach followed by the attach of the fiber that runs next.
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <mutex>
#include <ostream>
#include <vector>

namespace {

struct Event {
    bool Attached;
    unsigned Fiber;
    bool MidTask;
    bool operator==(Event const &other) const {
        return Attached == other.Attached && Fiber == other.Fiber && MidTask == other.MidTask;
    }
};

std::ostream &operator<<(std::ostream &out, Event const &event) {
    return out << (event.Attached ? "attach " : "detach ") << event.Fiber
               << (event.MidTask ? " (mid-task)" : "");
}

// Every fiber event, in the order the one thread reported them.
struct EventLog {
    std::mutex Mutex;
    std::vector<Event> Events;
    std::atomic<unsigned> ThreadEvents{0};
};

void LogAttach(void *context, unsigned fiberIndex) {
    auto *log = static_cast<EventLog *>(context);
    std::lock_guard<std::mutex> lock(log->Mutex);
    log->Events.push_back(Event{true, fiberIndex, false});
}

void LogDetach(void *context, unsigned fiberIndex, bool isMidTask) {
    auto *log = static_cast<EventLog *>(context);
    std::lock_guard<std::mutex> lock(log->Mutex);
    log->Events.push_back(Event{false, fiberIndex, isMidTask});
}

void CountThreadEvent(void *context, unsigned) {
    static_cast<EventLog *>(context)->ThreadEvents.fetch_add(1);
}

void ClearFlag(ftl::TaskScheduler *, void *arg) {
    static_cast<ftl::AtomicFlag *>(arg)->Clear();
}

void Count(ftl::TaskScheduler *, void *arg) {
    static_cast<std::atomic<int> *>(arg)->fetch_add(1);
}

ftl::TaskSchedulerInitOptions OneThreadOptions(EventLog &log) {
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = 1;
    options.FiberPoolSize = 20;
    options.Behavior = ftl::EmptyQueueBehavior::Yield;
    options.Callbacks.Context = &log;
    options.Callbacks.OnFiberAttached = LogAttach;
    options.Callbacks.OnFiberDetached = LogDetach;
    options.Callbacks.OnWorkerThreadStarted = CountThreadEvent;
    options.Callbacks.OnWorkerThreadEnded = CountThreadEvent;
    return options;
}

} // namespace

TEST_CASE("Fiber events of a wait that parks, on one thread", "[compat]") {
    EventLog log;
    {
        ftl::TaskScheduler taskScheduler;
        REQUIRE(taskScheduler.Init(OneThreadOptions(log)) == 0);
        {
            std::lock_guard<std::mutex> lock(log.Mutex);
            REQUIRE(log.Events == std::vector<Event>{{true, 0, false}});
        }
        // A flag cleared by a task: the wait cannot run the task itself, so
        // the Init thread's fiber parks and the pool's first free fiber runs
        // the task, then hands the thread back.
        ftl::AtomicFlag flag(&taskScheduler, 1);
        taskScheduler.AddTask(ftl::Task{ClearFlag, &flag}, ftl::TaskPriority::Low);
        taskScheduler.WaitForCounter(&flag);
        REQUIRE_FALSE(flag.IsSet());
    }
    std::vector<Event> const expected = {
        {true, 0, false},  // Init: the calling thread becomes fiber 0
        {false, 0, true},  // its wait parks it
        {true, 1, false},  // fiber 1 runs the task
        {false, 1, false}, // and leaves for the readied fiber 0
        {true, 0, false},  // the wait returns
        {false, 0, false}, // the destructor
    };
    REQUIRE(log.Events == expected);
    REQUIRE(log.ThreadEvents.load() == 0u); // one thread: no worker thread started
}

TEST_CASE("With fiber callbacks a wait for its own tasks parks, as in the lineage", "[compat]") {
    // Without them the wait would run the tasks on its own fiber (see the
    // next test); a profiler told of fiber switches sees the fibers that
    // really run them instead, the lineage's sequence (FiberTaskingLib's
    // "Fiber Event Callbacks" case).
    EventLog log;
    std::atomic<int> ran{0};
    {
        ftl::TaskScheduler taskScheduler;
        REQUIRE(taskScheduler.Init(OneThreadOptions(log)) == 0);
        ftl::TaskCounter counter(&taskScheduler);
        ftl::Task const tasks[3] = {{Count, &ran}, {Count, &ran}, {Count, &ran}};
        taskScheduler.AddTasks(3, tasks, ftl::TaskPriority::Low, &counter);
        taskScheduler.WaitForCounter(&counter);
        REQUIRE(ran.load() == 3);
    }
    std::vector<Event> const expected = {
        {true, 0, false},  {false, 0, true}, {true, 1, false},
        {false, 1, false}, {true, 0, false}, {false, 0, false},
    };
    REQUIRE(log.Events == expected);
}

TEST_CASE("Without fiber callbacks a wait runs its own tasks on its own fiber", "[compat]") {
    ftl::TaskScheduler taskScheduler;
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = 1;
    REQUIRE(taskScheduler.Init(options) == 0);
    struct Seen {
        ftl::TaskScheduler *Scheduler;
        std::atomic<unsigned> OnWaiter{0};
    } seen{&taskScheduler};
    ftl::Task const task{[](ftl::TaskScheduler *ts, void *arg) {
                             auto *s = static_cast<Seen *>(arg);
                             s->OnWaiter.fetch_add(ts->GetCurrentFiberIndex() == 0 ? 1 : 0);
                         },
                         &seen};
    ftl::Task const tasks[3] = {task, task, task};
    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(3, tasks, ftl::TaskPriority::Normal, &counter);
    taskScheduler.WaitForCounter(&counter);
    REQUIRE(seen.OnWaiter.load() == 3);
}

namespace {

constexpr unsigned kThreads = 4;

struct ThreadCounts {
    std::array<std::atomic<int>, kThreads> Starts{};
    std::array<std::atomic<int>, kThreads> Ends{};
    std::array<std::atomic<int>, kThreads> Attaches{};
    std::array<std::atomic<int>, kThreads> Detaches{};
    std::atomic<int> OutOfRange{0};
    std::atomic<int> MidTask{0};
};

ThreadCounts &Counts(void *context) {
    return *static_cast<ThreadCounts *>(context);
}

void Tally(std::array<std::atomic<int>, kThreads> &slots, std::atomic<int> &outOfRange, unsigned index) {
    if (index < kThreads) {
        slots[index].fetch_add(1);
    } else {
        outOfRange.fetch_add(1);
    }
}

} // namespace

TEST_CASE("Each worker thread attaches one fiber, indexed below the thread count", "[compat]") {
    ThreadCounts counts;
    {
        ftl::TaskSchedulerInitOptions options;
        options.ThreadPoolSize = kThreads;
        options.FiberPoolSize = 20;
        options.Behavior = ftl::EmptyQueueBehavior::Yield;
        options.Callbacks.Context = &counts;
        options.Callbacks.OnWorkerThreadStarted = [](void *context, unsigned thread) {
            Tally(Counts(context).Starts, Counts(context).OutOfRange, thread);
        };
        options.Callbacks.OnWorkerThreadEnded = [](void *context, unsigned thread) {
            Tally(Counts(context).Ends, Counts(context).OutOfRange, thread);
        };
        options.Callbacks.OnFiberAttached = [](void *context, unsigned fiber) {
            Tally(Counts(context).Attaches, Counts(context).OutOfRange, fiber);
        };
        options.Callbacks.OnFiberDetached = [](void *context, unsigned fiber, bool isMidTask) {
            Tally(Counts(context).Detaches, Counts(context).OutOfRange, fiber);
            if (isMidTask) {
                Counts(context).MidTask.fetch_add(1);
            }
        };
        ftl::TaskScheduler taskScheduler;
        REQUIRE(taskScheduler.Init(options) == 0);
        REQUIRE(taskScheduler.GetFiberCount() == 20u);
    }
    REQUIRE(counts.OutOfRange.load() == 0);
    REQUIRE(counts.MidTask.load() == 0);
    // The Init thread is not a started worker thread; the others start and end once.
    REQUIRE(counts.Starts[0].load() == 0);
    REQUIRE(counts.Ends[0].load() == 0);
    for (unsigned i = 1; i < kThreads; ++i) {
        CAPTURE(i);
        REQUIRE(counts.Starts[i].load() == 1);
        REQUIRE(counts.Ends[i].load() == 1);
    }
    // Fiber 0 (the Init thread) and one fiber per worker thread, each
    // attached and detached exactly once.
    for (unsigned i = 0; i < kThreads; ++i) {
        CAPTURE(i);
        REQUIRE(counts.Attaches[i].load() == 1);
        REQUIRE(counts.Detaches[i].load() == 1);
    }
}
