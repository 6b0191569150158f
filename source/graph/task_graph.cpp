// TaskGraph: nodes, edges, and runs without a waiting fiber.
//
// Build (on the first Run after a change): the successors of every node go
// into one array (node i's are Targets[Begin(i), End(i))), each node's
// predecessor count is kept, and Kahn's algorithm checks that every node can
// run (a node it never reaches lies on a cycle or behind one).
//
// Run: each node's Pending is reset to its predecessor count, and the nodes
// without predecessors are queued. A node's task runs its function, then
// lowers each successor's Pending; the one that brings it to 0 owns that
// successor's start. It runs the first such successor itself (a chain runs as
// one task) and queues the others: when every successor became ready, as one
// batch straight from the successor array, several successors per task when
// there are many. A task that runs several nodes with the same successor (a
// fan-in) lowers its Pending once, by their number: one contended atomic per
// task instead of one per node. A successor none of whose predecessors ran
// elsewhere (a chain link, each node of a fan-out from one node) is ready
// without touching its Pending at all. All of this happens before the task
// finishes, so `done` (raised for each task as it is queued and lowered as it
// ends) reaches 0 only after the last node.
#include "ftl/task_graph.h"

#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "scheduler/observe.h"
#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

namespace ftl {

namespace {
constexpr unsigned kNone = std::numeric_limits<unsigned>::max();
// A node's thread when it is not pinned (any index past the workers).
constexpr unsigned kAnyThread = std::numeric_limits<unsigned>::max();
// The most successors one task runs when a node readies many at once.
constexpr unsigned kMaxChunk = 16;
} // namespace

struct TaskGraph::Impl {
    // A node's function: called as Invoke(scheduler, Function, 0), and
    // destroyed with the graph (Destroy is null when it lives in the
    // pointer itself).
    struct Kept {
        detail::ClosureInvoker Invoke = nullptr;
        void *Function = nullptr;
        void (*Destroy)(void *) noexcept = nullptr;

        Kept() = default;
        Kept(Kept &&other) noexcept
            : Invoke(other.Invoke), Function(other.Function), Destroy(std::exchange(other.Destroy, nullptr)) {
        }
        Kept &operator=(Kept &&) = delete;
        ~Kept() {
            if (Destroy != nullptr) {
                Destroy(Function);
            }
        }
    };

    struct NodeData {
        Kept Body;
        std::vector<unsigned> Successors; // as built by Precede
        unsigned Predecessors = 0;
        unsigned Thread = kAnyThread;
        char const *Name = nullptr; // Node::Name's, for the trace
        // Set by Build.
        Impl *Graph = nullptr;
        unsigned Begin = 0;
        unsigned End = 0;
        bool AllSuccessorsFree = true; // none of its successors is pinned
        // Every successor has this node as its only predecessor (and none is
        // pinned): they all become ready when it finishes, with no atomic.
        bool AllSuccessorsOwned = false;
        unsigned Chunk = 1; // successors per task when all become ready at once
    };

    TaskScheduler *Scheduler;
    std::vector<NodeData> Nodes;
    // The roots (nodes without predecessors) that may run anywhere, as the
    // successors of a node that is never run; pinned roots on their own.
    NodeData Source;
    std::vector<unsigned> PinnedRoots;
    std::vector<unsigned> Targets;
    std::unique_ptr<std::atomic<unsigned>[]> Pending;
    std::size_t PendingSize = 0;
    bool Built = false;

    // The run going on.
    std::atomic<unsigned> Unfinished{0};
    std::atomic<bool> Cancelled{false};
    TaskCounter *Done = nullptr;
    bool Traced = false; // the scheduler records a trace: each node is a span

    void CheckIdle(char const *what) const {
        if (Unfinished.load(std::memory_order_acquire) != 0) {
            FTL_FATAL("TaskGraph::%s while the graph runs (wait on the counter of its Run first)", what);
        }
    }

    // What one task did: how many nodes it ran, the first exception, and a
    // successor's lowering it holds back (Target by Count).
    struct Batch {
        unsigned Ran = 0;
        unsigned Target = kNone;
        unsigned Count = 0;
        std::exception_ptr Error;
    };

    void Build();
    void Start(unsigned node);
    // Lowers the successors' Pending; returns one that became ready for the
    // caller to run, or kNone, and queues the others.
    unsigned ReleaseSuccessors(NodeData &node, Batch &batch);
    // Queues successors 1..count-1 of `node`, which all became ready.
    void QueueChunks(NodeData &node, unsigned count);
    // Applies the held-back lowering; returns its target if that made it
    // ready (and it is not pinned: a pinned one is queued).
    unsigned Flush(Batch &batch);
    void RunNode(unsigned index, Batch &batch);
    void RunChain(unsigned index, Batch &batch);
    // The end of a task: flushes, counts its nodes as finished, rethrows.
    void Finish(Batch &batch);

    // The task entry points: a node; the successor `index` + 1 of a node (the
    // first is run by the node's own task); chunk `index` of a node's
    // successors after the first; root `index`.
    static void RunOne(TaskScheduler *, void *arg, unsigned);
    static void RunSuccessor(TaskScheduler *, void *arg, unsigned index);
    static void RunChunk(TaskScheduler *, void *arg, unsigned index);
    static void RunRoot(TaskScheduler *, void *arg, unsigned index);
};

void TaskGraph::Impl::Build() {
    auto const n = static_cast<unsigned>(Nodes.size());
    unsigned const workers = detail::Scheduler::Of(Scheduler)->NumWorkers();
    Targets.clear();
    PinnedRoots.clear();
    std::vector<unsigned> roots;
    for (unsigned i = 0; i < n; ++i) {
        NodeData &node = Nodes[i];
        node.Graph = this;
        node.Begin = static_cast<unsigned>(Targets.size());
        node.AllSuccessorsFree = true;
        bool owned = true;
        for (unsigned successor : node.Successors) {
            Targets.push_back(successor);
            if (Nodes[successor].Thread != kAnyThread) {
                node.AllSuccessorsFree = false;
            }
            owned = owned && Nodes[successor].Predecessors == 1;
        }
        node.AllSuccessorsOwned = owned && node.AllSuccessorsFree && node.Successors.size() > 1;
        node.End = static_cast<unsigned>(Targets.size());
        // Several per task when there are many (a few tasks per worker still),
        // so that one steal carries several and a shared successor is
        // lowered once per task.
        unsigned const perWorker = 8 * workers;
        node.Chunk = std::max(1u, std::min(kMaxChunk, (node.End - node.Begin) / perWorker));
        if (node.Predecessors == 0) {
            (node.Thread == kAnyThread ? roots : PinnedRoots).push_back(i);
        }
    }
    Source.Graph = this;
    Source.Begin = static_cast<unsigned>(Targets.size());
    Targets.insert(Targets.end(), roots.begin(), roots.end());
    Source.End = static_cast<unsigned>(Targets.size());

    // Kahn's algorithm: every node must be reachable by removing nodes whose
    // predecessors are all removed.
    std::vector<unsigned> left(n);
    std::vector<unsigned> ready(roots);
    ready.insert(ready.end(), PinnedRoots.begin(), PinnedRoots.end());
    for (unsigned i = 0; i < n; ++i) {
        left[i] = Nodes[i].Predecessors;
    }
    unsigned reached = 0;
    while (!ready.empty()) {
        unsigned const i = ready.back();
        ready.pop_back();
        ++reached;
        for (unsigned k = Nodes[i].Begin; k < Nodes[i].End; ++k) {
            if (--left[Targets[k]] == 0) {
                ready.push_back(Targets[k]);
            }
        }
    }
    if (reached != n) {
        FTL_FATAL("TaskGraph::Run: the graph has a cycle (%u of its %u nodes are on a cycle or after one, "
                  "so they could never run)",
                  n - reached, n);
    }
    if (PendingSize < n) {
        Pending.reset(new std::atomic<unsigned>[n]);
        PendingSize = n;
    }
    Built = true;
}

void TaskGraph::Impl::Start(unsigned node) {
    detail::Scheduler::Of(Scheduler)->AddClosures(1, &RunOne, &Nodes[node], TaskPriority::Normal, Done,
                                                  Nodes[node].Thread);
}

unsigned TaskGraph::Impl::ReleaseSuccessors(NodeData &node, Batch &batch) {
    unsigned const count = node.End - node.Begin;
    if (count == 0) {
        return kNone;
    }
    if (count == 1) {
        // The common case of a fan-in: lowered once per task for a run of
        // nodes with the same successor (Batch), not once per node.
        unsigned const successor = Targets[node.Begin];
        if (batch.Target != successor) {
            unsigned const ready = Flush(batch);
            batch.Target = successor;
            batch.Count = 1;
            return ready;
        }
        ++batch.Count;
        return kNone;
    }
    if (node.AllSuccessorsOwned) {
        // A fan-out to nodes with no other predecessor: run the first, queue
        // the rest in chunks, and touch none of their counts.
        QueueChunks(node, count);
        return Targets[node.Begin];
    }
    unsigned next = kNone;
    // While every successor so far became ready (and none is pinned), the
    // ones after the first are left to one batch at the end.
    bool allReady = node.AllSuccessorsFree;
    for (unsigned k = 0; k < count; ++k) {
        unsigned const successor = Targets[node.Begin + k];
        // A successor whose only predecessor is this node needs no count.
        bool const ready = Nodes[successor].Predecessors == 1 ||
                           Pending[successor].fetch_sub(1, std::memory_order_acq_rel) == 1;
        if (allReady) {
            if (ready) {
                if (k == 0) {
                    next = successor;
                }
                continue;
            }
            // Not ready: the ones before it were, and are all still unqueued.
            allReady = false;
            if (k > 1) {
                detail::Scheduler::Of(Scheduler)->AddClosures(k - 1, &RunSuccessor, &node,
                                                              TaskPriority::Normal, Done, kAnyThread);
            }
            continue;
        }
        if (!ready) {
            continue;
        }
        if (next == kNone && Nodes[successor].Thread == kAnyThread) {
            next = successor;
        } else {
            Start(successor);
        }
    }
    if (allReady && count > 1) {
        QueueChunks(node, count);
    }
    return next;
}

void TaskGraph::Impl::QueueChunks(NodeData &node, unsigned count) {
    // The successors after the first, in chunks of node.Chunk: a task per chunk.
    unsigned const chunks = (count - 1 + node.Chunk - 1) / node.Chunk;
    detail::Scheduler::Of(Scheduler)->AddClosures(chunks, &RunChunk, &node, TaskPriority::Normal, Done,
                                                  kAnyThread);
}

unsigned TaskGraph::Impl::Flush(Batch &batch) {
    unsigned const target = batch.Target;
    unsigned const count = batch.Count;
    batch.Target = kNone;
    batch.Count = 0;
    if (count == 0) {
        return kNone;
    }
    // When this task ran every predecessor of the target, nobody else lowers
    // its count: it is ready without touching it.
    if (count != Nodes[target].Predecessors &&
        Pending[target].fetch_sub(count, std::memory_order_acq_rel) != count) {
        return kNone;
    }
    if (Nodes[target].Thread != kAnyThread) {
        Start(target);
        return kNone;
    }
    return target;
}

void TaskGraph::Impl::RunNode(unsigned index, Batch &batch) {
    NodeData &node = Nodes[index];
    ++batch.Ran;
    // After a node threw, or once the run's counter was cancelled
    // (TaskCounter::Cancel), the nodes left are skipped, their edges still
    // followed, so that the run ends as any other.
    if (Cancelled.load(std::memory_order_relaxed) || Done->IsCancelled()) {
        return;
    }
    if (Traced) {
        detail::SpanObserver::Begin(reinterpret_cast<void const *>(node.Body.Invoke), node.Name);
    }
#if defined(__cpp_exceptions)
    try {
        node.Body.Invoke(Scheduler, node.Body.Function, 0);
    } catch (...) {
        Cancelled.store(true, std::memory_order_relaxed);
        if (batch.Error == nullptr) {
            batch.Error = std::current_exception();
        }
    }
#else
    node.Body.Invoke(Scheduler, node.Body.Function, 0);
#endif
    if (Traced) {
        detail::SpanObserver::End();
    }
}

void TaskGraph::Impl::RunChain(unsigned index, Batch &batch) {
    while (index != kNone) {
        RunNode(index, batch);
        index = ReleaseSuccessors(Nodes[index], batch);
        if (index == kNone) {
            index = Flush(batch); // nothing else to run here: lower it now
        }
    }
}

void TaskGraph::Impl::Finish(Batch &batch) {
    unsigned const next = Flush(batch);
    if (next != kNone) {
        RunChain(next, batch);
    }
    Unfinished.fetch_sub(batch.Ran, std::memory_order_acq_rel);
#if defined(__cpp_exceptions)
    if (batch.Error != nullptr) {
        // Escapes this task, whose counter is `done`: its waiter gets it.
        std::rethrow_exception(batch.Error);
    }
#endif
}

void TaskGraph::Impl::RunOne(TaskScheduler *, void *arg, unsigned) {
    auto *node = static_cast<NodeData *>(arg);
    Impl *graph = node->Graph;
    Batch batch;
    graph->RunChain(static_cast<unsigned>(node - graph->Nodes.data()), batch);
    graph->Finish(batch);
}

void TaskGraph::Impl::RunSuccessor(TaskScheduler *, void *arg, unsigned index) {
    // A skipped task (kSkipTask) still does its nodes' bookkeeping;
    // RunNode skips their functions.
    index &= ~detail::kSkipTask;
    auto *from = static_cast<NodeData *>(arg);
    Impl *graph = from->Graph;
    Batch batch;
    graph->RunChain(graph->Targets[from->Begin + 1 + index], batch);
    graph->Finish(batch);
}

void TaskGraph::Impl::RunChunk(TaskScheduler *, void *arg, unsigned index) {
    index &= ~detail::kSkipTask; // as RunSuccessor
    auto *from = static_cast<NodeData *>(arg);
    Impl *graph = from->Graph;
    unsigned const first = from->Begin + 1 + index * from->Chunk;
    unsigned const last = std::min(first + from->Chunk, from->End);
    Batch batch;
    for (unsigned k = first; k < last; ++k) {
        unsigned const node = graph->Targets[k];
        graph->RunNode(node, batch);
        unsigned const next = graph->ReleaseSuccessors(graph->Nodes[node], batch);
        if (next != kNone) {
            graph->RunChain(next, batch);
        }
    }
    graph->Finish(batch);
}

void TaskGraph::Impl::RunRoot(TaskScheduler *, void *arg, unsigned index) {
    index &= ~detail::kSkipTask; // as RunSuccessor
    auto *graph = static_cast<Impl *>(arg);
    Batch batch;
    graph->RunChain(graph->Targets[graph->Source.Begin + index], batch);
    graph->Finish(batch);
}

TaskGraph::TaskGraph(TaskScheduler *taskScheduler) : m_impl(std::make_unique<Impl>()) {
    if (taskScheduler == nullptr) {
        FTL_FATAL("TaskGraph needs a TaskScheduler");
    }
    m_impl->Scheduler = taskScheduler;
}

TaskGraph::~TaskGraph() {
    m_impl->CheckIdle("destroyed");
}

unsigned TaskGraph::Size() const {
    return static_cast<unsigned>(m_impl->Nodes.size());
}

TaskGraph::Node TaskGraph::AddNode(detail::ClosureInvoker invoke, void *function,
                                   void (*destroy)(void *) noexcept) {
    m_impl->CheckIdle("Add");
    m_impl->Nodes.emplace_back();
    Impl::Kept &body = m_impl->Nodes.back().Body;
    body.Invoke = invoke;
    body.Function = function;
    body.Destroy = destroy;
    m_impl->Built = false;
    return Node(this, static_cast<unsigned>(m_impl->Nodes.size() - 1));
}

void TaskGraph::Node::Precede(Node other) {
    if (other.m_graph != m_graph) {
        FTL_FATAL("TaskGraph::Node::Precede: the two nodes belong to different graphs");
    }
    Impl &graph = *m_graph->m_impl;
    graph.CheckIdle("Node::Precede");
    graph.Nodes[m_index].Successors.push_back(other.m_index);
    ++graph.Nodes[other.m_index].Predecessors;
    graph.Built = false;
}

void TaskGraph::Node::Name(char const *name) {
    Impl &graph = *m_graph->m_impl;
    graph.CheckIdle("Node::Name");
    graph.Nodes[m_index].Name = name;
}

void TaskGraph::Node::PinTo(unsigned threadIndex) {
    Impl &graph = *m_graph->m_impl;
    graph.CheckIdle("Node::PinTo");
    detail::Scheduler *scheduler = detail::Scheduler::Of(graph.Scheduler);
    if (scheduler == nullptr) {
        FTL_FATAL("TaskGraph::Node::PinTo on a scheduler that is not initialized");
    }
    scheduler->CheckThreadIndex(threadIndex, "TaskGraph::Node::PinTo");
    graph.Nodes[m_index].Thread = threadIndex;
    graph.Built = false;
}

void TaskGraph::Run(TaskCounter *done) {
    Impl &graph = *m_impl;
    if (done == nullptr) {
        FTL_FATAL("TaskGraph::Run needs a TaskCounter to tell when the run is over");
    }
    graph.CheckIdle("Run");
    if (detail::Scheduler::Of(graph.Scheduler) == nullptr) {
        FTL_FATAL("TaskGraph::Run on a scheduler that is not initialized");
    }
    if (!graph.Built) {
        graph.Build();
    }
    auto const n = static_cast<unsigned>(graph.Nodes.size());
    if (n == 0) {
        return;
    }
    for (unsigned i = 0; i < n; ++i) {
        graph.Pending[i].store(graph.Nodes[i].Predecessors, std::memory_order_relaxed);
    }
    graph.Cancelled.store(false, std::memory_order_relaxed);
    graph.Done = done;
    graph.Traced = detail::SpanObserver::Recording(graph.Scheduler);
    // Publishes the resets above to the node tasks (queueing them releases too).
    graph.Unfinished.store(n, std::memory_order_release);
    detail::Scheduler::Of(graph.Scheduler)
        ->AddClosures(graph.Source.End - graph.Source.Begin, &Impl::RunRoot, &graph, TaskPriority::Normal,
                      done, kAnyThread);
    for (unsigned root : graph.PinnedRoots) {
        graph.Start(root);
    }
}

} // namespace ftl
