// TaskGraph: every node runs once per run, after all of its predecessors
// (checked with per-node finish stamps); runs repeat; pinned nodes run on
// their thread; an exception cancels the rest of the run and reaches the
// waiter; a run after the first allocates nothing (tests/alloc/).
#include "ftl/task_graph.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "test_support.h"

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using ftl_test::Options;

namespace {

// A random layered DAG: node i may depend on any node before it.
struct Shape {
    unsigned Nodes;
    std::vector<std::pair<unsigned, unsigned>> Edges; // (before, after)
};

Shape RandomShape(unsigned nodes, unsigned seed) {
    Shape shape{nodes, {}};
    unsigned state = seed * 2654435761u + 1;
    auto next = [&state] {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    for (unsigned after = 1; after < nodes; ++after) {
        unsigned const edges = next() % 4;
        for (unsigned e = 0; e < edges; ++e) {
            shape.Edges.emplace_back(next() % after, after);
        }
    }
    return shape;
}

} // namespace

TEST_CASE("A graph runs every node once, after all of its predecessors, run after run", "[graph]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);

    Shape const shape = RandomShape(300, threads);
    // Each node records a stamp when it finishes and checks, when it starts,
    // that every predecessor's stamp is from this run.
    std::atomic<unsigned> clock{0};
    std::vector<std::atomic<unsigned>> finishedAt(shape.Nodes);
    std::vector<std::atomic<unsigned>> runs(shape.Nodes);
    std::vector<std::vector<unsigned>> before(shape.Nodes);
    for (auto const &edge : shape.Edges) {
        before[edge.second].push_back(edge.first);
    }
    std::atomic<unsigned> runStart{0};
    std::atomic<unsigned> orderViolations{0};

    ftl::TaskGraph graph(&ts);
    std::vector<ftl::TaskGraph::Node> nodes;
    for (unsigned i = 0; i < shape.Nodes; ++i) {
        nodes.push_back(graph.Add([&, i] {
            for (unsigned p : before[i]) {
                if (finishedAt[p].load() <= runStart.load()) {
                    orderViolations.fetch_add(1);
                }
            }
            runs[i].fetch_add(1);
            finishedAt[i].store(clock.fetch_add(1) + 1);
        }));
    }
    for (auto const &edge : shape.Edges) {
        nodes[edge.first].Precede(nodes[edge.second]);
    }
    REQUIRE(graph.Size() == shape.Nodes);

    constexpr unsigned kRuns = 20;
    ftl::TaskCounter done(&ts);
    for (unsigned run = 0; run < kRuns; ++run) {
        runStart.store(clock.load());
        graph.Run(&done);
        ts.WaitForCounter(&done);
    }
    REQUIRE(orderViolations.load() == 0u);
    REQUIRE(clock.load() == kRuns * shape.Nodes);
    unsigned wrongCount = 0;
    for (auto const &count : runs) {
        wrongCount += count.load() != kRuns ? 1u : 0u;
    }
    REQUIRE(wrongCount == 0u);
}

TEST_CASE("Graph shapes: a chain, a wide fan-out and fan-in, a diamond, a single node", "[graph]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskCounter done(&ts);

    SECTION("a chain keeps its order") {
        ftl::TaskGraph graph(&ts);
        std::vector<unsigned> order; // written by one node at a time
        std::vector<ftl::TaskGraph::Node> nodes;
        for (unsigned i = 0; i < 100; ++i) {
            nodes.push_back(graph.Add([&order, i] { order.push_back(i); }));
            if (i > 0) {
                nodes[i - 1].Precede(nodes[i]);
            }
        }
        for (int run = 0; run < 3; ++run) {
            order.clear();
            graph.Run(&done);
            ts.WaitForCounter(&done);
            std::vector<unsigned> expected(100);
            for (unsigned i = 0; i < 100; ++i) {
                expected[i] = i;
            }
            REQUIRE(order == expected);
        }
    }
    SECTION("a fan-out of 1000 and a fan-in") {
        ftl::TaskGraph graph(&ts);
        std::atomic<unsigned> rootRan{0};
        std::atomic<unsigned> middle{0};
        std::atomic<unsigned> middleBeforeRoot{0};
        std::atomic<unsigned> sinkSaw{0};
        auto root = graph.Add([&] { rootRan.store(1); });
        auto sink = graph.Add([&] { sinkSaw.store(middle.load()); });
        for (unsigned i = 0; i < 1000; ++i) {
            auto node = graph.Add([&] {
                if (rootRan.load() == 0) {
                    middleBeforeRoot.fetch_add(1);
                }
                middle.fetch_add(1);
            });
            root.Precede(node);
            node.Precede(sink);
        }
        graph.Run(&done);
        ts.WaitForCounter(&done);
        REQUIRE(middleBeforeRoot.load() == 0u);
        REQUIRE(middle.load() == 1000u);
        REQUIRE(sinkSaw.load() == 1000u);
    }
    SECTION("a diamond, and a node that adds tasks of its own with the run's counter") {
        ftl::TaskGraph graph(&ts);
        std::atomic<unsigned> children{0};
        std::atomic<unsigned> seenAtEnd{0};
        auto top = graph.Add([] {});
        auto left = graph.Add([&](ftl::TaskScheduler *inner) {
            inner->AddTasks(
                50, [&children](unsigned) { children.fetch_add(1); }, ftl::TaskPriority::Normal, &done);
        });
        auto right = graph.Add([] {});
        auto bottom = graph.Add([&] { seenAtEnd.store(1); });
        top.Precede(left);
        top.Precede(right);
        left.Precede(bottom);
        right.Precede(bottom);
        graph.Run(&done);
        ts.WaitForCounter(&done); // covers the children too
        REQUIRE(children.load() == 50u);
        REQUIRE(seenAtEnd.load() == 1u);
    }
    SECTION("one node, and an empty graph") {
        ftl::TaskGraph graph(&ts);
        ftl::TaskGraph empty(&ts);
        std::atomic<unsigned> ran{0};
        graph.Add([&ran](ftl::TaskScheduler *inner) { ran.fetch_add(inner != nullptr ? 1 : 0); });
        empty.Run(&done);
        graph.Run(&done);
        ts.WaitForCounter(&done);
        REQUIRE(ran.load() == 1u);
    }
}

TEST_CASE("Node functions of any size run on every run and are destroyed with the graph", "[graph]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskCounter done(&ts);

    auto const owned = std::make_shared<std::atomic<unsigned>>(0);
    std::atomic<unsigned> small{0};
    {
        ftl::TaskGraph graph(&ts);
        // A pointer's worth (kept in the node), a large capture, one that
        // owns something: a chain of the three, then a fan-out of owned ones.
        auto a = graph.Add([&small] { small.fetch_add(1); });
        std::array<unsigned, 32> large{};
        large[31] = 7;
        auto b = graph.Add([large, &small] { small.fetch_add(large[31]); });
        auto c = graph.Add([owned] { owned->fetch_add(1); });
        a.Precede(b);
        b.Precede(c);
        for (unsigned i = 0; i < 40; ++i) {
            auto leaf = graph.Add([owned, i] { owned->fetch_add(i); });
            c.Precede(leaf);
        }
        REQUIRE(owned.use_count() == 42);
        for (int run = 0; run < 3; ++run) {
            graph.Run(&done);
            ts.WaitForCounter(&done);
        }
    }
    REQUIRE(small.load() == 3u * 8u);
    REQUIRE(owned->load() == 3u * (1u + 39u * 40u / 2u));
    REQUIRE(owned.use_count() == 1); // every copy went with the graph
}

TEST_CASE("A pinned graph node runs on its thread", "[graph][pinned]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskGraph graph(&ts);
    std::vector<std::atomic<unsigned>> ranOn(threads);
    std::atomic<unsigned> wrong{0};
    auto root = graph.Add([] {});
    for (unsigned t = 0; t < threads; ++t) {
        for (int copy = 0; copy < 3; ++copy) {
            auto node = graph.Add([&, t](ftl::TaskScheduler *inner) {
                if (inner->GetCurrentThreadIndex() != t) {
                    wrong.fetch_add(1);
                }
                ranOn[t].fetch_add(1);
            });
            node.PinTo(t);
            if (copy != 0) {
                root.Precede(node); // and some are roots
            }
        }
    }
    ftl::TaskCounter done(&ts);
    for (int run = 0; run < 5; ++run) {
        graph.Run(&done);
        ts.WaitForCounter(&done);
    }
    REQUIRE(wrong.load() == 0u);
    for (unsigned t = 0; t < threads; ++t) {
        REQUIRE(ranOn[t].load() == 15u);
    }
}

TEST_CASE("An exception in a node cancels the rest of the run and reaches the waiter", "[graph][errors]") {
    unsigned const threads = FTL_GENERATE_THREAD_COUNT();
    CAPTURE(threads);
    ftl::TaskScheduler ts;
    REQUIRE(ts.Init(Options(threads)) == 0);
    ftl::TaskGraph graph(&ts);
    std::atomic<unsigned> afterRan{0};
    bool fail = true;
    auto first = graph.Add([&fail] {
        if (fail) {
            throw std::runtime_error("node failed");
        }
    });
    auto after = graph.Add([&] { afterRan.fetch_add(1); });
    first.Precede(after);
    ftl::TaskCounter done(&ts);
    graph.Run(&done);
    std::string caught;
    try {
        ts.WaitForCounter(&done);
    } catch (std::runtime_error const &error) {
        caught = error.what();
    }
    REQUIRE(caught == "node failed");
    REQUIRE(afterRan.load() == 0u);
    // The graph and the counter run again.
    fail = false;
    graph.Run(&done);
    ts.WaitForCounter(&done);
    REQUIRE(afterRan.load() == 1u);
}

TEST_CASE("TaskGraph misuse ends in a clear error", "[graph][misuse]") {
    using ftl_test::RunInChild;
    SECTION("a cycle") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            ftl::TaskGraph graph(&ts);
            auto a = graph.Add([] {});
            auto b = graph.Add([] {});
            auto c = graph.Add([] {});
            auto d = graph.Add([] {});
            a.Precede(b);
            b.Precede(c);
            c.Precede(b);
            c.Precede(d);
            ftl::TaskCounter done(&ts);
            graph.Run(&done);
            ts.WaitForCounter(&done);
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("cycle"));
        REQUIRE(result.StderrHas("3 of its 4 nodes"));
    }
    SECTION("a node pinned to a thread that does not exist") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            ftl::TaskGraph graph(&ts);
            graph.Add([] {}).PinTo(2);
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("TaskGraph::Node::PinTo"));
    }
    SECTION("a run while the graph runs") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(2)) == 0);
            ftl::TaskGraph graph(&ts);
            ftl::AtomicFlag gate(&ts, 1);
            graph.Add([&gate](ftl::TaskScheduler *inner) { inner->WaitForCounter(&gate); });
            ftl::TaskCounter done(&ts);
            graph.Run(&done);
            graph.Run(&done);
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("while the graph runs"));
    }
    SECTION("a null counter") {
        auto const result = RunInChild([] {
            ftl::TaskScheduler ts;
            REQUIRE(ts.Init(Options(1)) == 0);
            ftl::TaskGraph graph(&ts);
            graph.Add([] {});
            graph.Run(nullptr);
        });
        INFO(result.Stderr);
        REQUIRE(result.Died());
        REQUIRE(result.StderrHas("needs a TaskCounter"));
    }
}
