// WaitList, WaitNode, WaitListGuard, Append, PopFront and TakeMatching
// (source/wait/wait_list.h), checked against their contract: the list is FIFO;
// Head and Tail stay consistent (Tail is the last node, both null when
// empty) through every operation; TakeMatching unlinks exactly the nodes
// waiting for the target (at the head, in the middle, at the tail, all or
// none) and returns them as a chain in list order with their count; and the
// guard excludes concurrent surgery (threads appending and taking under it
// lose no node, and a plain counter changed under it stays exact).
#include "wait/wait_list.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

using ftl::detail::Append;
using ftl::detail::PopFront;
using ftl::detail::TakeMatching;
using ftl::detail::WaitList;
using ftl::detail::WaitListGuard;
using ftl::detail::WaitNode;

namespace {

// The nodes from the head on. Also checks that Tail is the last of them (or
// null, with Head, when the list is empty).
std::vector<WaitNode *> Walk(WaitList const &list, bool &tailOk) {
    std::vector<WaitNode *> nodes;
    for (WaitNode *node = list.Head; node != nullptr; node = node->Next) {
        nodes.push_back(node);
    }
    tailOk = nodes.empty() ? list.Tail == nullptr : list.Tail == nodes.back() && list.Tail->Next == nullptr;
    return nodes;
}

// The chain TakeMatching returned, in order.
std::vector<WaitNode *> Chain(WaitNode *first) {
    std::vector<WaitNode *> nodes;
    for (WaitNode *node = first; node != nullptr; node = node->Next) {
        nodes.push_back(node);
    }
    return nodes;
}

// A list of nodes with the given targets, appended in order.
struct Fixture {
    explicit Fixture(std::vector<unsigned> const &targets) : Nodes(targets.size()) {
        for (std::size_t i = 0; i < targets.size(); ++i) {
            Nodes[i].Target = targets[i];
            Append(List, &Nodes[i]);
        }
    }
    std::vector<WaitNode *> Pointers(std::vector<std::size_t> const &positions) {
        std::vector<WaitNode *> nodes;
        for (std::size_t position : positions) {
            nodes.push_back(&Nodes[position]);
        }
        return nodes;
    }

    std::vector<WaitNode> Nodes;
    WaitList List;
};

} // namespace

TEST_CASE("WaitList: Append and PopFront keep FIFO order and Tail consistent", "[internal][wait_list]") {
    WaitList list;
    bool tailOk = false;
    REQUIRE(Walk(list, tailOk).empty());
    REQUIRE(tailOk);
    REQUIRE(PopFront(list) == nullptr);

    WaitNode nodes[4];
    nodes[0].Next = &nodes[3]; // a stale link is overwritten by Append
    Append(list, &nodes[0]);
    REQUIRE(list.Head == &nodes[0]);
    REQUIRE(list.Tail == &nodes[0]);
    REQUIRE(nodes[0].Next == nullptr);
    Append(list, &nodes[1]);
    Append(list, &nodes[2]);
    REQUIRE(Walk(list, tailOk) == std::vector<WaitNode *>{&nodes[0], &nodes[1], &nodes[2]});
    REQUIRE(tailOk);

    REQUIRE(PopFront(list) == &nodes[0]);
    REQUIRE(nodes[0].Next == nullptr); // unlinked
    Append(list, &nodes[3]);
    REQUIRE(Walk(list, tailOk) == std::vector<WaitNode *>{&nodes[1], &nodes[2], &nodes[3]});
    REQUIRE(tailOk);
    REQUIRE(PopFront(list) == &nodes[1]);
    REQUIRE(PopFront(list) == &nodes[2]);
    REQUIRE(PopFront(list) == &nodes[3]);
    REQUIRE(list.Head == nullptr);
    REQUIRE(list.Tail == nullptr);
    REQUIRE(PopFront(list) == nullptr);

    // Usable again once empty.
    Append(list, &nodes[2]);
    REQUIRE(Walk(list, tailOk) == std::vector<WaitNode *>{&nodes[2]});
    REQUIRE(tailOk);
    REQUIRE(PopFront(list) == &nodes[2]);
    REQUIRE(list.Tail == nullptr);
}

TEST_CASE("WaitList: TakeMatching removes exactly the nodes waiting for the target",
          "[internal][wait_list]") {
    struct Case {
        char const *Name;
        std::vector<unsigned> Targets;
        unsigned Target;
        std::vector<std::size_t> Taken; // positions, in list order
    };
    std::vector<Case> const cases = {
        {"head", {7, 1, 2}, 7, {0}},
        {"middle", {1, 7, 2}, 7, {1}},
        {"tail", {1, 2, 7}, 7, {2}},
        {"head, middle and tail", {7, 1, 7, 2, 7}, 7, {0, 2, 4}},
        {"a run at the head", {7, 7, 1, 2}, 7, {0, 1}},
        {"a run at the tail", {1, 2, 7, 7}, 7, {2, 3}},
        {"every node", {7, 7, 7}, 7, {0, 1, 2}},
        {"the only node", {7}, 7, {0}},
        {"none", {1, 2, 3}, 7, {}},
        {"an empty list", {}, 7, {}},
        {"target 0", {0, 3, 0, 3}, 0, {0, 2}},
    };
    for (Case const &c : cases) {
        INFO(c.Name);
        Fixture fixture(c.Targets);
        unsigned count = 12345;
        WaitNode *taken = TakeMatching(fixture.List, c.Target, count);
        REQUIRE(count == c.Taken.size());
        std::vector<WaitNode *> const chain = Chain(taken);
        REQUIRE(chain == fixture.Pointers(c.Taken));

        // The rest stays in order, with a consistent Tail.
        std::vector<std::size_t> rest;
        for (std::size_t i = 0; i < c.Targets.size(); ++i) {
            if (std::find(c.Taken.begin(), c.Taken.end(), i) == c.Taken.end()) {
                rest.push_back(i);
            }
        }
        bool tailOk = false;
        REQUIRE(Walk(fixture.List, tailOk) == fixture.Pointers(rest));
        REQUIRE(tailOk);

        // Appending and popping still work on what is left.
        WaitNode extra;
        extra.Target = c.Target;
        Append(fixture.List, &extra);
        std::vector<WaitNode *> expected = fixture.Pointers(rest);
        expected.push_back(&extra);
        REQUIRE(Walk(fixture.List, tailOk) == expected);
        REQUIRE(tailOk);
        // Taking the target again takes only the new node.
        REQUIRE(TakeMatching(fixture.List, c.Target, count) == &extra);
        REQUIRE(count == 1);
        REQUIRE(extra.Next == nullptr);
        REQUIRE(Walk(fixture.List, tailOk) == fixture.Pointers(rest));
        REQUIRE(tailOk);
        for (std::size_t position : rest) {
            REQUIRE(PopFront(fixture.List) == &fixture.Nodes[position]);
        }
        REQUIRE(fixture.List.Head == nullptr);
        REQUIRE(fixture.List.Tail == nullptr);
    }
}

TEST_CASE("WaitListGuard: threads appending under the guard lose no node", "[internal][wait_list]") {
    unsigned const threads = 4;
    unsigned const perThread = ftl_test::kThreadSanitizer ? 20000 : 50000;
    std::vector<std::unique_ptr<WaitNode[]>> nodes;
    for (unsigned t = 0; t < threads; ++t) {
        nodes.emplace_back(new WaitNode[perThread]);
        for (unsigned i = 0; i < perThread; ++i) {
            nodes[t][i].Target = t;
        }
    }
    WaitList list;
    unsigned guarded = 0; // plain: only the guard keeps it exact
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            for (unsigned i = 0; i < perThread; ++i) {
                WaitListGuard guard(list);
                Append(list, &nodes[t][i]);
                ++guarded;
            }
        });
    }
    for (std::thread &worker : workers) {
        worker.join();
    }
    REQUIRE(guarded == threads * perThread);
    bool tailOk = false;
    std::vector<WaitNode *> const all = Walk(list, tailOk);
    REQUIRE(tailOk);
    REQUIRE(all.size() == threads * perThread);
    // Each thread's nodes, in its order.
    std::vector<unsigned> next(threads, 0);
    unsigned outOfOrder = 0;
    for (WaitNode *node : all) {
        unsigned const t = node->Target;
        if (t >= threads || node != &nodes[t][next[t]]) {
            ++outOfOrder;
            continue;
        }
        ++next[t];
    }
    REQUIRE(outOfOrder == 0);
    for (unsigned t = 0; t < threads; ++t) {
        REQUIRE(next[t] == perThread);
    }
    REQUIRE(list.Lock.load() == 0); // the last guard unlocked it
}

TEST_CASE("WaitListGuard: appends, PopFront and TakeMatching under the guard keep every node once",
          "[internal][wait_list]") {
    // Three threads append nodes (Target = thread); a fourth takes them, by
    // PopFront and TakeMatching in turn, under the same guard.
    unsigned const appenders = 3;
    unsigned const perThread = ftl_test::kThreadSanitizer ? 20000 : 50000;
    unsigned const total = appenders * perThread;
    std::vector<std::unique_ptr<WaitNode[]>> nodes;
    for (unsigned t = 0; t < appenders; ++t) {
        nodes.emplace_back(new WaitNode[perThread]);
        for (unsigned i = 0; i < perThread; ++i) {
            nodes[t][i].Target = t;
        }
    }
    WaitList list;
    unsigned guarded = 0;
    std::atomic<unsigned> appendersDone{0};
    std::vector<WaitNode *> removed; // the taker's, in removal order
    unsigned miscounted = 0;         // TakeMatching's count against its chain
    unsigned wrongTarget = 0;        // a node in a chain for another target
    unsigned rounds = 0;             // the taker's turns under the guard
    std::thread taker([&] {
        unsigned &round = rounds;
        for (;;) {
            bool const last = appendersDone.load() == appenders;
            bool empty = false;
            {
                WaitListGuard guard(list);
                ++guarded;
                if (round % 2 == 0) {
                    if (WaitNode *node = PopFront(list)) {
                        removed.push_back(node);
                    }
                } else {
                    unsigned const target = round / 2 % appenders;
                    unsigned count = 0;
                    unsigned inChain = 0;
                    for (WaitNode *node = TakeMatching(list, target, count); node != nullptr;) {
                        WaitNode *next = node->Next;
                        wrongTarget += node->Target != target ? 1u : 0u;
                        removed.push_back(node);
                        ++inChain;
                        node = next;
                    }
                    miscounted += count != inChain ? 1u : 0u;
                }
                empty = list.Head == nullptr;
            }
            ++round;
            if (last && empty) {
                return;
            }
            if (round % 64 == 0) {
                std::this_thread::yield();
            }
        }
    });
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < appenders; ++t) {
        workers.emplace_back([&, t] {
            for (unsigned i = 0; i < perThread; ++i) {
                WaitListGuard guard(list);
                Append(list, &nodes[t][i]);
                ++guarded;
            }
            appendersDone.fetch_add(1);
        });
    }
    for (std::thread &worker : workers) {
        worker.join();
    }
    taker.join();

    REQUIRE(miscounted == 0);
    REQUIRE(wrongTarget == 0);
    REQUIRE(list.Head == nullptr);
    REQUIRE(list.Tail == nullptr);
    REQUIRE(removed.size() == total);
    REQUIRE(guarded == total + rounds);
    // Every node once, and each thread's nodes in its order: PopFront takes
    // the oldest node, TakeMatching all of one thread's in list order.
    std::vector<unsigned> next(appenders, 0);
    unsigned outOfOrder = 0;
    for (WaitNode *node : removed) {
        unsigned const t = node->Target;
        if (t >= appenders || next[t] >= perThread || node != &nodes[t][next[t]]) {
            ++outOfOrder;
            continue;
        }
        ++next[t];
    }
    REQUIRE(outOfOrder == 0);
    for (unsigned t = 0; t < appenders; ++t) {
        REQUIRE(next[t] == perThread);
    }
}
