// FiberInbox (source/queue/fiber_inbox.h), checked against its header's
// contract: any thread pushes, only the owner pops; fibers come out in the
// order they were readied (FIFO, also across the owner's taken batch and
// later pushes); Pop returns nullptr and LooksEmpty is true when nothing is
// queued; and with several threads pushing while the owner pops, no fiber is
// lost or popped twice and each pusher's fibers come out in its push order.
#include "queue/fiber_inbox.h"
#include "fiber/fiber.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

using ftl::detail::Fiber;
using ftl::detail::FiberInbox;

namespace {

// `count` fibers whose Index is their position, plus `base`.
std::unique_ptr<Fiber[]> MakeFibers(unsigned count, unsigned base = 0) {
    std::unique_ptr<Fiber[]> fibers(new Fiber[count]);
    for (unsigned i = 0; i < count; ++i) {
        fibers[i].Index = base + i;
    }
    return fibers;
}

// Pops until empty; the Index of each fiber popped, in order. Each popped
// fiber's link must be cleared (it may be pushed again).
std::vector<unsigned> PopAll(FiberInbox &inbox, unsigned &linked) {
    std::vector<unsigned> indices;
    while (Fiber *fiber = inbox.Pop()) {
        indices.push_back(fiber->Index);
        linked += fiber->NextReady != nullptr ? 1u : 0u;
    }
    return indices;
}

} // namespace

TEST_CASE("FiberInbox: an empty inbox pops nothing", "[internal][inbox]") {
    FiberInbox inbox;
    REQUIRE(inbox.LooksEmpty());
    REQUIRE(inbox.Pop() == nullptr);
    REQUIRE(inbox.LooksEmpty());
}

TEST_CASE("FiberInbox pops fibers in the order they were pushed", "[internal][inbox]") {
    std::unique_ptr<Fiber[]> fibers = MakeFibers(8);
    FiberInbox inbox;
    unsigned linked = 0;

    SECTION("all pushed, then all popped") {
        for (unsigned i = 0; i < 5; ++i) {
            inbox.Push(&fibers[i]);
            REQUIRE_FALSE(inbox.LooksEmpty());
        }
        REQUIRE(PopAll(inbox, linked) == std::vector<unsigned>{0, 1, 2, 3, 4});
    }
    SECTION("pushes between pops, while the owner holds a taken batch") {
        inbox.Push(&fibers[0]);
        inbox.Push(&fibers[1]);
        inbox.Push(&fibers[2]);
        REQUIRE(inbox.Pop() == &fibers[0]); // takes 0, 1, 2 as a batch
        inbox.Push(&fibers[3]);
        inbox.Push(&fibers[4]);
        REQUIRE(inbox.Pop() == &fibers[1]);
        REQUIRE(inbox.Pop() == &fibers[2]);
        REQUIRE_FALSE(inbox.LooksEmpty());
        REQUIRE(inbox.Pop() == &fibers[3]);
        inbox.Push(&fibers[5]);
        REQUIRE(PopAll(inbox, linked) == std::vector<unsigned>{4, 5});
    }
    SECTION("a popped fiber may be pushed again") {
        inbox.Push(&fibers[6]);
        inbox.Push(&fibers[7]);
        Fiber *first = inbox.Pop();
        REQUIRE(first == &fibers[6]);
        REQUIRE(first->NextReady == nullptr);
        inbox.Push(first);
        REQUIRE(PopAll(inbox, linked) == std::vector<unsigned>{7, 6});
    }
    REQUIRE(linked == 0);
    REQUIRE(inbox.LooksEmpty());
    REQUIRE(inbox.Pop() == nullptr);
}

TEST_CASE("FiberInbox loses no fiber to concurrent pushers and keeps each pusher's order",
          "[internal][inbox]") {
    unsigned const pushers = GENERATE(1u, 3u);
    unsigned const perPusher = ftl_test::kThreadSanitizer ? 50000 : 200000;
    unsigned const total = pushers * perPusher;
    std::vector<std::unique_ptr<Fiber[]>> fibers;
    for (unsigned p = 0; p < pushers; ++p) {
        fibers.push_back(MakeFibers(perPusher, p * perPusher));
    }
    FiberInbox inbox;
    std::vector<std::thread> threads;
    for (unsigned p = 0; p < pushers; ++p) {
        threads.emplace_back([&, p] {
            for (unsigned i = 0; i < perPusher; ++i) {
                inbox.Push(&fibers[p][i]);
                if (i % 1024 == 0) {
                    std::this_thread::yield(); // let the owner in while pushes go on
                }
            }
        });
    }

    // The owner pops while they push.
    std::vector<unsigned> times(total, 0);
    std::vector<unsigned> lastOf(pushers, 0);
    std::vector<bool> anyOf(pushers, false);
    unsigned outOfOrder = 0;
    unsigned linked = 0;
    unsigned popped = 0;
    unsigned emptyPolls = 0;
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (popped < total && std::chrono::steady_clock::now() < deadline) {
        Fiber *fiber = inbox.Pop();
        if (fiber == nullptr) {
            ++emptyPolls;
            std::this_thread::yield();
            continue;
        }
        ++popped;
        unsigned const index = fiber->Index;
        ++times[index];
        linked += fiber->NextReady != nullptr ? 1u : 0u;
        unsigned const pusher = index / perPusher;
        if (anyOf[pusher] && index <= lastOf[pusher]) {
            ++outOfOrder;
        }
        anyOf[pusher] = true;
        lastOf[pusher] = index;
    }
    for (std::thread &thread : threads) {
        thread.join();
    }
    bool const emptyAfter = inbox.LooksEmpty() && inbox.Pop() == nullptr;

    INFO(pushers << " pushers, " << emptyPolls << " empty polls");
    REQUIRE(popped == total);
    REQUIRE(static_cast<unsigned>(std::count(times.begin(), times.end(), 1u)) == total);
    REQUIRE(outOfOrder == 0);
    REQUIRE(linked == 0);
    REQUIRE(emptyAfter);
}
