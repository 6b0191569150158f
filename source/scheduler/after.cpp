// Tasks after tasks (TaskScheduler::AddTaskAfter). The task waits in a record
// with one WaitNode per prerequisite, each registered on its counter's
// waiter list as a fiber's node would be. A counter that reaches 0 takes the
// node off its list and hands it to PrerequisiteDone instead of readying a
// fiber; the record counts its prerequisites down, and the one that brings
// it to 0 queues the task from the thread it runs on and frees the record.
// No fiber waits, and a chain of such tasks queues each link from the finish
// of the one before, so nothing recurses. A worker whose counter starts
// several such tasks at once wakes a worker once for all of them; a thread
// outside the scheduler wakes one for each, inside its outside call.
//
// With one prerequisite, its node is the record's only reference: the
// registration is AddAfter's last touch of the record, and the counter's
// waker, the only one to end that wait, starts the task with no count at
// all. With more, the count starts one above the number of nodes: AddAfter
// holds that one while it registers, so a prerequisite that reaches 0
// meanwhile cannot start the task (and free the record) under it.
//
// Records of up to kPooledNodes prerequisites come from the scheduler's
// record pool (a free list per worker, as closures'), larger ones from the
// heap.
#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "scheduler/counter_ops.h"
#include "scheduler/scheduler.h"
#include "scheduler/wait.h"
#include "scheduler/worker.h"
#include "wait/wait_list.h"

#include <atomic>
#include <new>

namespace ftl {
namespace detail {

struct AfterTask {
    TaskItem Task;
    unsigned Queue = 1;
    bool Pooled = false;
    std::size_t NumNodes = 0;         // one per prerequisite, after the record
    std::atomic<std::size_t> Left{0}; // with 2 or more prerequisites
    WaitNode *Nodes() { return reinterpret_cast<WaitNode *>(this + 1); }
};
static_assert(sizeof(AfterTask) % alignof(WaitNode) == 0, "the nodes follow the record, aligned");

namespace {

constexpr std::size_t kPooledNodes = 2;

int IndexOf(Worker const *worker) {
    return worker != nullptr ? static_cast<int>(worker->Index()) : -1;
}

AfterTask *NewAfterTask(Scheduler &scheduler, Worker const *worker, TaskItem const &task, unsigned queue,
                        std::size_t nodes) {
    bool const pooled = nodes <= kPooledNodes;
    void *memory = pooled ? scheduler.AfterRecords().Allocate(IndexOf(worker))
                          : ::operator new(sizeof(AfterTask) + nodes * sizeof(WaitNode));
    auto *after = new (memory) AfterTask;
    after->Task = task;
    after->Queue = queue;
    after->Pooled = pooled;
    after->NumNodes = nodes;
    after->Left.store(nodes + 1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < nodes; ++i) {
        new (after->Nodes() + i) WaitNode;
    }
    return after;
}

// Frees the record and queues its task from `self`, the calling thread's
// worker (nullptr: a thread outside the scheduler, which also wakes a worker
// for it: see StartAfter).
void StartRecord(Scheduler &scheduler, Worker *self, AfterTask *after) {
    TaskItem const task = after->Task;
    unsigned const queue = after->Queue;
    bool const pooled = after->Pooled;
    for (std::size_t i = 0; i < after->NumNodes; ++i) {
        after->Nodes()[i].~WaitNode();
    }
    after->~AfterTask();
    if (pooled) {
        scheduler.AfterRecords().Free(after, IndexOf(self));
    } else {
        ::operator delete(after);
    }
    scheduler.StartAfter(self, task, queue);
}

// `done` of the record's references gone; the last starts the task, and
// returns true.
bool CountDown(Scheduler &scheduler, Worker *self, AfterTask *after, std::size_t done) {
    // acq_rel: the thread that starts the task has seen every prerequisite
    // reach 0 (each release came with its counter's last finish).
    if (after->Left.fetch_sub(done, std::memory_order_acq_rel) != done) {
        return false;
    }
    StartRecord(scheduler, self, after);
    return true;
}

} // namespace

void Scheduler::AddAfter(TaskCounter *const *prerequisites, std::size_t count, TaskItem const &task,
                         TaskPriority priority) {
    if (priority != TaskPriority::High && priority != TaskPriority::Normal) {
        FTL_FATAL("AddTaskAfter: TaskPriority(%d) is not a priority (High or Normal)",
                  static_cast<int>(priority));
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (prerequisites[i] == nullptr) {
            FTL_FATAL("AddTaskAfter: prerequisite %zu is nullptr", i);
        }
        if (prerequisites[i] == task.Counter) {
            FTL_FATAL("AddTaskAfter: prerequisite %zu is the task's own counter, which cannot reach 0 before "
                      "the task runs",
                      i);
        }
        CounterOps::CheckAlive(*prerequisites[i], "AddTaskAfter");
        if (CounterOps::Owner(*prerequisites[i]) != m_owner) {
            FTL_FATAL("AddTaskAfter: prerequisite %zu is a counter of another TaskScheduler", i);
        }
    }
    unsigned const queue = priority == TaskPriority::High ? 0 : 1;
    // One deeper than the adding task, as AddTask's (FiberPressure); an
    // outside thread's: 0.
    Worker *worker = CurrentWorkerOfThis();
    TaskItem deeper = task;
    if (worker != nullptr) {
        deeper.Extra |= TaskItem::DepthBits(worker->TaskDepth() + 1);
    }
    AfterTask *after = NewAfterTask(*this, worker, deeper, queue, count);
    // Counted as added now, and its counter raised: a wait on the counter
    // and the drain at destruction wait for it from here on.
    if (task.Counter != nullptr) {
        task.Counter->Add(1);
    }
    if (worker != nullptr) {
        worker->CountAdded(1);
    } else {
        OutsideCall const call(*this);
        if (Destroying()) {
            FTL_FATAL(
                "AddTaskAfter: called by a thread outside the scheduler while the TaskScheduler is being "
                "destroyed (add nothing after its destructor began)");
        }
        m_externalAdded.fetch_add(1, std::memory_order_seq_cst);
    }
    std::size_t reached = 0; // prerequisites at 0 already
    for (std::size_t i = 0; i < count; ++i) {
        WaitNode &node = after->Nodes()[i];
        node.After = after;
        node.Target = 0;
        node.Kind = WaitKind::Counter;
        node.Object = prerequisites[i];
        if (!CounterOps::Register(prerequisites[i], &node)) {
            ++reached;
        } else if (count == 1) {
            return; // the record is the waker's now
        }
    }
    if (count <= 1) {
        // No prerequisite, or one at 0 already: no reference but this call's.
        StartRecord(*this, worker, after);
    } else if (!CountDown(*this, worker, after, reached + 1)) {
        return;
    }
    if (worker != nullptr) {
        NotifyStarted();
    }
}

void Scheduler::StartAfter(Worker *worker, TaskItem const &task, unsigned queue) {
#if defined(__cpp_exceptions)
    try {
#endif
        if (worker != nullptr) {
            worker->Tasks(queue).Push(task);
        } else {
            // The wake too, inside the call: once the task is queued it may
            // run, and the scheduler be destroyed, before this thread's next
            // step.
            OutsideCall const call(*this);
            m_global[queue].PushBatch(1, [&task](std::size_t) { return task; });
            NotifyWork(Waker::Outside);
        }
#if defined(__cpp_exceptions)
    } catch (std::bad_alloc const &) {
        // Its prerequisites' last finish is in no position to take an error
        // back, and the task is counted: dropping it would hang its waits.
        FTL_FATAL("AddTaskAfter: no memory to queue a task whose prerequisites have all reached 0");
    }
#endif
}

void Scheduler::NotifyStarted() {
    NotifyWork(Waker::Worker);
}

std::size_t Scheduler::AfterRecordBytes() {
    std::size_t const bytes = sizeof(AfterTask) + kPooledNodes * sizeof(WaitNode);
    return (bytes + 63) / 64 * 64;
}

bool PrerequisiteDone(Scheduler &scheduler, Worker *self, WaitNode *node) {
    AfterTask *after = node->After;
    if (after->NumNodes == 1) {
        StartRecord(scheduler, self, after); // its only reference
        return self != nullptr;
    }
    return CountDown(scheduler, self, after, 1) && self != nullptr;
}

} // namespace detail
} // namespace ftl
