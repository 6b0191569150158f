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

namespace {

// A chain of tasks, each adding the next pinned to the worker it runs on
// and waiting for it; each child counts itself, and whether it started on
// the thread it was pinned to.
struct PinnedLink {
    ftl::TaskScheduler *Scheduler;
    unsigned Depth;
    std::atomic<unsigned> *WrongThread;
    std::atomic<unsigned> *Links;
};

void PinnedChainLink(ftl::TaskScheduler *ts, void *arg) {
    auto *link = static_cast<PinnedLink *>(arg);
    link->Links->fetch_add(1);
    if (link->Depth == 0) {
        return;
    }
    unsigned const thread = ts->GetCurrentThreadIndex();
    struct Child {
        PinnedLink Link;
        unsigned Thread;
    } child{{ts, link->Depth - 1, link->WrongThread, link->Links}, thread};
    ftl::TaskCounter counter(ts);
    ts->AddPinnedTask(thread,
                      ftl::Task{[](ftl::TaskScheduler *t, void *a) {
                                    auto *c = static_cast<Child *>(a);
                                    if (t->GetCurrentThreadIndex() != c->Thread) {
                                        c->Link.WrongThread->fetch_add(1);
                                    }
                                    PinnedChainLink(t, &c->Link);
                                },
                                &child},
                      ftl::TaskPriority::Normal, &counter);
    ts->WaitForCounter(&counter);
}

} // namespace

namespace {

// Runs a chain of `depth` links, each pinning the next to its own thread,
// on `threads` workers; checks every link ran on its thread and returns the
// peak of fibers in use.
unsigned RunPinnedChain(unsigned threads, unsigned depth) {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    std::atomic<unsigned> wrongThread{0};
    std::atomic<unsigned> links{0};
    PinnedLink first{&ts, depth, &wrongThread, &links};
    ftl::TaskCounter counter(&ts);
    ts.AddTask(ftl::Task{PinnedChainLink, &first}, ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    REQUIRE(links.load() == depth + 1);
    REQUIRE(wrongThread.load() == 0);
    return ts.GetStats().FibersPeak;
}

} // namespace

TEST_CASE("A child pinned to the waiting task's own thread runs inline, on that thread", "[inline][pinned]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    // No link parked for its child: a few fibers, not one per link. (A link
    // may still park when the worker's loop must first take another item,
    // e.g. the global queue's turn: hence not exactly 1.)
    CHECK(RunPinnedChain(threads, 64) <= 2 + threads);
}

TEST_CASE("A pinned child runs inline only after the pinned tasks queued before it", "[inline][pinned]") {
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(1)) == 0);
    std::vector<int> order;
    auto record = [&](int what) { order.push_back(what); };
    ftl::TaskCounter other(&ts);
    auto parent = [&](ftl::TaskScheduler *t) {
        // Another counter's pinned task first: the wait must not run its own
        // child ahead of it.
        t->AddPinnedTask(
            0, [&] { record(1); }, ftl::TaskPriority::Normal, &other);
        ftl::TaskCounter children(t);
        t->AddPinnedTask(
            0, [&] { record(2); }, ftl::TaskPriority::Normal, &children);
        t->WaitForCounter(&children);
        record(3);
    };
    ftl::TaskCounter counter(&ts);
    ts.AddTask(LambdaTask(parent), ftl::TaskPriority::Normal, &counter);
    ts.WaitForCounter(&counter);
    ts.WaitForCounter(&other);
    REQUIRE(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("A chain of children pinned to their parent's thread needs no fiber per link", "[inline][pinned]") {
    // The tree of the black-box run at one worker: without the inline run,
    // each link parks and the chain holds one fiber per link. The stack
    // share rule moves a link to a fresh fiber every few dozen links (each
    // inline run needs 3/4 of the stack free): far fewer than one per link.
    constexpr unsigned kDepth = 200;
    CHECK(RunPinnedChain(1, kDepth) < kDepth / 4);
}
