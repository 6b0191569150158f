// TaskGraph: a set of tasks and the order between them, built once and run
// again and again (a frame's job list).
//
//   ftl::TaskGraph frame(&taskScheduler);
//   auto input = frame.Add([] { ReadInput(); });
//   auto physics = frame.Add([] { StepPhysics(); });
//   auto render = frame.Add([] { SubmitDrawCalls(); });
//   input.Precede(physics);           // input runs before physics
//   physics.Precede(render);
//   render.PinTo(0);                  // on the thread that called Init
//   ftl::TaskCounter done(&taskScheduler);
//   for (;;) { frame.Run(&done); taskScheduler.WaitForCounter(&done); }
//
// Contract
// - A node runs once per Run, after every node that precedes it finished.
//   No fiber waits for a dependency: the node that finishes last among a
//   node's predecessors starts it (running one ready successor itself, and
//   queueing the others at once).
// - Run(done) raises `done` for the nodes it starts and returns at once;
//   `done` reaches 0 when every node of the run finished. Wait on it as on
//   any TaskCounter, from a task or from any thread. `done` must not be null.
// - The first Run checks the graph: a cycle is a fatal error naming how
//   many nodes cannot run. Later runs (with no Add/Precede/PinTo between)
//   allocate nothing.
// - Errors: an exception escaping a node is rethrown by the wait on `done`
//   (the first one, as for any task with a TaskCounter). The run is
//   cancelled: nodes that have not started yet do not run their function
//   (they still count as finished, so the wait returns).
// - Add, Precede, PinTo and Run while a run is still going, Run with a null
//   counter, destroying a graph while it runs, and Precede between two
//   graphs are fatal errors.
// - Node functions are called as f() or f(TaskScheduler *) and are kept
//   (not consumed) by the graph; a node may add tasks of its own, with
//   `done` or another counter.
#pragma once

#include "ftl/detail/closure.h"
#include "ftl/task_scheduler.h"

#include <memory>
#include <type_traits>
#include <utility>

namespace ftl {

class TaskCounter;

class TaskGraph {
public:
    class Node {
    public:
        // This node runs before `other` (both of this graph).
        void Precede(Node other);
        // This node runs only on worker thread `threadIndex` (0: the thread
        // that called Init), like AddPinnedTask.
        void PinTo(unsigned threadIndex);
        // The node's name in the trace (TaskSchedulerInitOptions::TraceFile);
        // without one it is named after its function's type. The string must
        // outlive the scheduler (a string literal does).
        void Name(char const *name);

    private:
        friend class TaskGraph;
        Node(TaskGraph *graph, unsigned index) : m_graph(graph), m_index(index) {}
        TaskGraph *m_graph;
        unsigned m_index;
    };

    explicit TaskGraph(TaskScheduler *taskScheduler);
    ~TaskGraph();
    TaskGraph(TaskGraph const &) = delete;
    TaskGraph &operator=(TaskGraph const &) = delete;

    template <class F>
    Node Add(F &&f) {
        using Fn = std::decay_t<F>;
        static_assert(detail::kIsTaskClosure<Fn>,
                      "TaskGraph::Add takes a function called as f() or f(TaskScheduler *)");
        if constexpr (detail::kFitsInArg<Fn>) {
            // Kept in the node itself: no allocation, no pointer to follow.
            return AddNode(&detail::InvokeInArg<false, Fn>, detail::PackArg(f), nullptr);
        } else {
            auto owner = std::make_unique<Fn>(std::forward<F>(f));
            Node const node = AddNode(&InvokeKept<Fn>, owner.get(), &DestroyKept<Fn>);
            owner.release(); // the graph owns it now
            return node;
        }
    }

    void Run(TaskCounter *done);

    // How many nodes the graph holds.
    unsigned Size() const;

    struct Impl;

private:
    template <class Fn>
    static void InvokeKept(TaskScheduler *taskScheduler, void *function, unsigned) {
        detail::Call<false>(*static_cast<Fn *>(function), taskScheduler, 0);
    }
    template <class Fn>
    static void DestroyKept(void *function) noexcept {
        delete static_cast<Fn *>(function);
    }

    // Takes `function` (destroyed with `destroy` unless null) when it returns.
    Node AddNode(detail::ClosureInvoker invoke, void *function, void (*destroy)(void *) noexcept);

    std::unique_ptr<Impl> m_impl;
};

} // namespace ftl
