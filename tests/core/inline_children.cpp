// A TaskCounter wait runs the counter's own queued tasks on the waiting fiber
// (the InlineChildren mechanism), taking them a batch at a time. These
// tests pin down what that must never change: a child held in a batch is
// never hidden from a sibling waiting for it, a higher-priority task still
// goes first, and every task has at least 3/4 of FiberStackSize to itself.
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

TEST_CASE("A child held by an inline loop is returned before its sibling waits", "[inline]") {
    // The wait takes the newest children first, several at once. The first
    // one it runs waits for a flag that the second one clears: unless the
    // wait hands the rest of its batch back before it parks, nothing can
    // ever clear the flag.
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    constexpr unsigned kChildren = 16;
    for (unsigned round = 0; round < 50; ++round) {
        ftl::AtomicFlag flag(&ts, 1);
        std::atomic<unsigned> ran{0};
        auto waiter = [&](ftl::TaskScheduler *t) {
            t->WaitForCounter(&flag);
            ran.fetch_add(1);
        };
        auto releaser = [&](ftl::TaskScheduler *) {
            flag.Clear();
            ran.fetch_add(1);
        };
        auto plain = [&](ftl::TaskScheduler *) { ran.fetch_add(1); };
        std::vector<ftl::Task> tasks(kChildren - 2, LambdaTask(plain));
        tasks.push_back(LambdaTask(releaser)); // run second
        tasks.push_back(LambdaTask(waiter));   // run first: the newest
        ftl::TaskCounter counter(&ts);
        ts.AddTasks(kChildren, tasks.data(), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE(ran.load() == kChildren);
    }
}

TEST_CASE("A High task added by an inline child runs before the child's Normal siblings", "[inline]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);
    std::mutex mutex;
    std::vector<int> order; // child index, or -1 for the High task
    auto record = [&](int what) {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back(what);
    };
    auto high = [&](ftl::TaskScheduler *) { record(-1); };
    struct Child {
        decltype(record) *Record;
        decltype(high) *High;
        int Index;
    };
    constexpr int kChildren = 16;
    std::vector<Child> children;
    for (int i = 0; i < kChildren; ++i) {
        children.push_back(Child{&record, &high, i});
    }
    std::vector<ftl::Task> tasks;
    for (Child &child : children) {
        tasks.push_back(ftl::Task{[](ftl::TaskScheduler *t, void *arg) {
                                      auto *c = static_cast<Child *>(arg);
                                      (*c->Record)(c->Index);
                                      if (c->Index == kChildren - 1) {
                                          t->AddTask(LambdaTask(*c->High), ftl::TaskPriority::High);
                                      }
                                  },
                                  &child});
    }
    ftl::TaskCounter counter(&ts);
    ts.AddTasks(kChildren, tasks.data(), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    // One worker: the newest child runs first, adds the High task, and that
    // runs next, ahead of the batch of Normal siblings already taken.
    REQUIRE(order.size() == kChildren + 1);
    REQUIRE(order[0] == kChildren - 1);
    REQUIRE(order[1] == -1);
    for (int i = 2; i <= kChildren; ++i) {
        REQUIRE(order[static_cast<std::size_t>(i)] == kChildren - i);
    }
}

namespace {

constexpr std::size_t kSmallStack = 64 * 1024;
constexpr std::size_t kBigFrame = 40 * 1024; // more than a quarter of the stack

struct Link {
    unsigned Depth;
    std::atomic<unsigned> *Deepest;
    std::atomic<std::uint64_t> *Checksum;
};

// Fills a big frame, then adds the next link and waits for it with the
// frame still live: were the next link run inline on this fiber, it would
// start with less than 3/4 of the stack free, and its own frame would run
// into the guard page.
__attribute__((noinline)) void ChainLink(ftl::TaskScheduler *ts, void *arg) {
    auto *link = static_cast<Link *>(arg);
    volatile unsigned char frame[kBigFrame];
    std::memset(const_cast<unsigned char *>(frame), static_cast<int>(link->Depth & 0xff), sizeof(frame));
    unsigned previous = link->Deepest->load();
    while (previous < link->Depth && !link->Deepest->compare_exchange_weak(previous, link->Depth)) {
    }
    if (link->Depth > 1) {
        Link next{link->Depth - 1, link->Deepest, link->Checksum};
        ftl::TaskCounter counter(ts);
        ts->AddTask(ftl::Task{ChainLink, &next}, ftl::TaskPriority::Normal, &counter);
        ts->WaitForCounter(&counter);
    }
    link->Checksum->fetch_add(frame[0] + frame[kBigFrame - 1]);
}

} // namespace

TEST_CASE("A task run inline starts with at least 3/4 of FiberStackSize free", "[inline]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    ftl::TaskScheduler ts;
    ftl::TaskSchedulerInitOptions options = Options(threads);
    options.FiberStackSize = kSmallStack;
    REQUIRE(ts.Init(options) == 0);
    constexpr unsigned kDepth = 40;
    std::atomic<unsigned> deepest{0};
    std::atomic<std::uint64_t> checksum{0};
    Link first{kDepth, &deepest, &checksum};
    ftl::TaskCounter counter(&ts);
    ts.AddTask(ftl::Task{ChainLink, &first}, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(deepest.load() == kDepth);
    std::uint64_t expected = 0;
    for (unsigned depth = 1; depth <= kDepth; ++depth) {
        expected += 2 * (depth & 0xff);
    }
    REQUIRE(checksum.load() == expected);
}
