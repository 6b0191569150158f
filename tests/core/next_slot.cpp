// The next slot (the NextSlot mechanism): a fiber that a running task
// readies waits on that task's worker and runs there as soon as the task
// waits or ends, with no other worker woken for it. These tests pin down
// what it buys (two fibers handing a value back and forth stay on one
// worker) and what it must never cost (a task that readies a fiber and goes
// on running does not keep it from a worker that looks for work).
#include "ftl/atomic_counter.h"
#include "ftl/stats.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "scheduler/mechanisms.h"
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <vector>

using ftl_test::LambdaTask;
using ftl_test::Options;

namespace {

// Two tasks hand a FullAtomicCounter back and forth `rounds` times (the
// benchmark's W4); each records the worker it runs on after every wait.
// Returns how many hand-offs crossed to the other worker.
unsigned PingPongMoves(ftl::detail::Mechanisms const &mechanisms, unsigned rounds) {
    ftl::TaskScheduler ts;
    REQUIRE(ftl::detail::InitWithMechanisms(ts, Options(2), mechanisms) == 0);
    ftl::FullAtomicCounter value(&ts, 0);
    // where[v]: the worker that wrote value v + 1 (each side writes after its wait).
    std::vector<unsigned> where(2 * rounds, ~0u);
    auto side = [&](ftl::TaskScheduler *t, unsigned first) {
        for (unsigned i = 0; i < rounds; ++i) {
            unsigned const mine = 2 * i + first;
            t->WaitForCounter(&value, mine);
            where[mine] = t->GetCurrentThreadIndex();
            value.FetchAdd(1);
        }
    };
    auto ping = [&](ftl::TaskScheduler *t) { side(t, 0); };
    auto pong = [&](ftl::TaskScheduler *t) { side(t, 1); };
    ftl::TaskCounter counter(&ts);
    ts.AddTask(LambdaTask(ping), ftl::TaskPriority::Normal, &counter);
    ts.AddTask(LambdaTask(pong), ftl::TaskPriority::Normal, &counter);
    // A value wait: the Init thread's fiber parks instead of running one of
    // the sides inline, where its waits would be pinned to worker 0.
    ts.WaitForCounter(&value, 2 * rounds);
    ts.WaitForCounter(&counter);
    REQUIRE(value.Load() == 2 * rounds);
    unsigned moves = 0;
    for (unsigned v = 1; v < 2 * rounds; ++v) {
        REQUIRE(where[v] < 2);
        if (where[v] != where[v - 1]) {
            ++moves;
        }
    }
    return moves;
}

bool WaitsOn(ftl::TaskScheduler &ts, void const *object) {
    for (ftl::WaitingFiber const &fiber : ts.GetWaitingFibers()) {
        if (fiber.Object == object) {
            return true;
        }
    }
    return false;
}

void SpinFor(std::chrono::microseconds duration) {
    auto const until = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < until) {
    }
}

} // namespace

TEST_CASE("Two fibers handing a value back and forth stay on one worker", "[next-slot]") {
    // Every hand-off readies the other side, and the readier waits right
    // after: with the slot, the readied fiber runs next on the same worker.
    // The first hand-offs may cross (the two tasks can start on different
    // workers, and a searching worker may take a fill it saw twice), but
    // after that the pair has no reason to leave its worker.
    constexpr unsigned kRounds = 4000;
    unsigned const moves = PingPongMoves(ftl::detail::Mechanisms{}, kRounds);
    CAPTURE(moves);
    CHECK(moves <= kRounds / 20);
}

TEST_CASE("Without the next slot, a value hand-off still completes on two workers", "[next-slot]") {
    ftl::detail::Mechanisms mechanisms;
    mechanisms.NextSlot = false;
    unsigned const moves = PingPongMoves(mechanisms, 2000);
    CHECK(moves < 2 * 2000);
}

TEST_CASE("A searching worker takes a fiber whose readier goes on running", "[next-slot]") {
    // Worker 0 runs a task that readies a waiting fiber (into its own next
    // slot) and then keeps running until that fiber has run. Worker 1 is
    // searching for work at that moment: it must take the fiber from the
    // slot, or the task would wait for ever.
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(2)) == 0);
    for (unsigned round = 0; round < 20; ++round) {
        ftl::AtomicFlag gate(&ts, 1);
        std::atomic<bool> waiting{false};
        std::atomic<bool> readied{false};
        std::atomic<bool> ran{false};
        std::atomic<unsigned> ranOn{~0u};
        std::atomic<bool> timedOut{false};
        auto waiter = [&](ftl::TaskScheduler *t) {
            waiting.store(true);
            t->WaitForCounter(&gate);
            ranOn.store(t->GetCurrentThreadIndex());
            ran.store(true);
        };
        auto readier = [&](ftl::TaskScheduler *) {
            // Until the waiter's fiber is parked on the gate, and a while
            // more for its registration, which follows the switch off its
            // stack (a clear before it readies the fiber on worker 1 at
            // once: still correct, but it tests nothing).
            while (!waiting.load() || !WaitsOn(ts, &gate)) {
            }
            SpinFor(std::chrono::microseconds(200));
            gate.Clear(); // the waiter goes to this worker's next slot
            readied.store(true);
            auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (!ran.load()) {
                if (std::chrono::steady_clock::now() > deadline) {
                    timedOut.store(true);
                    return;
                }
            }
        };
        auto searcher = [&](ftl::TaskScheduler *) {
            // Ends right after the clear: worker 1 then searches for work.
            while (!readied.load()) {
            }
        };
        ftl::TaskCounter counter(&ts);
        ts.AddPinnedTask(1, LambdaTask(waiter), ftl::TaskPriority::Normal, &counter);
        ts.AddPinnedTask(1, LambdaTask(searcher), ftl::TaskPriority::Normal, &counter);
        ts.AddPinnedTask(0, LambdaTask(readier), ftl::TaskPriority::Normal, &counter);
        ts.WaitForCounter(&counter);
        REQUIRE_FALSE(timedOut.load());
        REQUIRE(ran.load());
        CHECK(ranOn.load() == 1);
    }
}
