// ParallelFor: runs a loop body over a range in tasks and waits for all of
// them. It must be called where WaitForCounter may be (a task, or any thread
// once Init returned). No form allocates on the heap: the loop's state lives
// on the caller's stack for as long as its tasks run.
//
// - The index form, ParallelFor(ts, begin, end, f [, priority]): f(i) for
//   every i in [begin, end), or f(rangeBegin, rangeEnd) for consecutive
//   subranges that cover it. The batch sizes are automatic: one piece per
//   worker to start, and a piece still running hands half of what it has
//   left to a new task whenever a worker is idle and the piece's own worker
//   has nothing queued for it to take. A loop of uneven iterations spreads
//   over every worker, and an even one pays for one task per worker.
// - The lineage forms (an iterator pair, a pointer and a size, an iterable):
//   func(taskScheduler, &element) for every element, in tasks of batchSize
//   elements.
#pragma once

#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstddef>
#include <iterator>
#include <mutex>
#include <type_traits>
#include <utility>

namespace ftl {

template <typename T>
using ParallelForTaskFunction = void(TaskScheduler *taskScheduler, T *value);

namespace detail {

// Whether a running piece of an index-form ParallelFor should hand half of
// what it has left to a new task: some worker is idle, and the calling
// worker's own queues hold nothing that worker could take instead.
bool ParallelForWantsSplit(TaskScheduler *taskScheduler);

// How often a piece looks for idle workers: about this many times over the
// length of one starting piece (one per worker).
constexpr std::size_t kParallelForLooksPerPiece = 8;

template <class Index>
constexpr bool kIsLoopIndex = std::is_integral<Index>::value && !std::is_same<Index, bool>::value;

template <class Index, class F>
constexpr bool kIsRangeBody = std::is_invocable<F &, Index, Index>::value;

// The state of one index-form loop, on the caller's stack. Offsets count
// from Begin.
template <class Index, class F>
struct IndexLoop {
    TaskScheduler *Scheduler;
    F *Body;
    TaskCounter *Counter;
    TaskPriority Priority;
    Index Begin;
    std::size_t Size;
    std::size_t Pieces;
    std::size_t Chunk; // elements between two looks for idle workers
};

template <class Index, class F>
Index IndexAt(IndexLoop<Index, F> const &loop, std::size_t offset) {
    using Unsigned = std::make_unsigned_t<Index>;
    return static_cast<Index>(static_cast<Unsigned>(loop.Begin) + static_cast<Unsigned>(offset));
}

template <class Index, class F>
void RunLoopRange(IndexLoop<Index, F> const &loop, std::size_t first, std::size_t last) {
    while (first != last) {
        std::size_t const left = last - first;
        if (left >= 2 * loop.Chunk && ParallelForWantsSplit(loop.Scheduler)) {
            std::size_t const middle = first + left / 2;
            IndexLoop<Index, F> const *const shared = &loop;
            loop.Scheduler->AddTask([shared, middle, last] { RunLoopRange(*shared, middle, last); },
                                    loop.Priority, loop.Counter);
            last = middle;
            continue;
        }
        std::size_t const stop = left > loop.Chunk ? first + loop.Chunk : last;
        if constexpr (kIsRangeBody<Index, F>) {
            (*loop.Body)(IndexAt(loop, first), IndexAt(loop, stop));
        } else {
            // The body and the bounds in locals: a store the body makes
            // could alias the loop's fields, and reloading them every
            // iteration costs a tight loop 10-15%.
            F &body = *loop.Body;
            Index const stopIndex = IndexAt(loop, stop);
            for (Index i = IndexAt(loop, first); i != stopIndex; ++i) {
                body(i);
            }
        }
        first = stop;
    }
}

// Piece `piece` of the loop's starting division: [Size * piece / Pieces, ...).
template <class Index, class F>
void RunLoopPiece(IndexLoop<Index, F> const &loop, std::size_t piece) {
    std::size_t const base = loop.Size / loop.Pieces;
    std::size_t const extra = loop.Size % loop.Pieces;
    std::size_t const first = piece * base + (piece < extra ? piece : extra);
    RunLoopRange(loop, first, first + base + (piece < extra ? 1 : 0));
}

} // namespace detail

template <typename Index, typename End, typename F,
          std::enable_if_t<detail::kIsLoopIndex<Index> && detail::kIsLoopIndex<End>, int> = 0>
void ParallelFor(TaskScheduler *taskScheduler, Index begin, End end, F &&f,
                 TaskPriority priority = TaskPriority::Normal) {
    static_assert(std::is_same<Index, End>::value,
                  "ParallelFor(ts, begin, end, f): begin and end must have one type, e.g. "
                  "ParallelFor(ts, std::size_t{0}, v.size(), f)");
    using Body = std::remove_reference_t<F>;
    static_assert(std::is_invocable<Body &, Index>::value || detail::kIsRangeBody<Index, Body>,
                  "ParallelFor(ts, begin, end, f) calls f(i) or f(rangeBegin, rangeEnd)");
    if (!(begin < end)) {
        return;
    }
    using Unsigned = std::make_unsigned_t<Index>;
    auto const size = static_cast<std::size_t>(static_cast<Unsigned>(end) - static_cast<Unsigned>(begin));
    std::size_t const workers = taskScheduler->GetThreadCount();
    std::size_t const pieces = size < workers ? size : workers;
    std::size_t const chunk = size / (workers * detail::kParallelForLooksPerPiece);

    TaskCounter counter(taskScheduler);
    detail::IndexLoop<Index, Body> const loop{taskScheduler, &f,   &counter, priority,
                                              begin,         size, pieces,   chunk > 0 ? chunk : 1};
    auto const *const shared = &loop;
    taskScheduler->AddTasks(
        static_cast<unsigned>(pieces), [shared](unsigned piece) { detail::RunLoopPiece(*shared, piece); },
        priority, &counter);
    taskScheduler->WaitForCounter(&counter);
}

template <typename ItrType, typename Callable>
void ParallelFor(TaskScheduler *taskScheduler, ItrType begin, ItrType end, std::size_t batchSize,
                 Callable &&func, TaskPriority priority) {
    FTL_ASSERT(batchSize > 0, "ParallelFor needs a batch size of at least 1");
    using Difference = typename std::iterator_traits<ItrType>::difference_type;
    auto const size = static_cast<std::size_t>(std::distance(begin, end));
    if (size == 0) {
        return;
    }
    std::size_t const numBatches = (size - 1) / batchSize + 1;
    FTL_ASSERT(numBatches <= TaskCounter::kMaxCount,
               "ParallelFor: %zu batches are more than one call can add", numBatches);
    auto const visit = [taskScheduler, &func](ItrType it, std::size_t count) {
        for (std::size_t j = 0; j < count; ++j, ++it) {
            func(taskScheduler, &*it);
        }
    };
    auto const countOf = [size, batchSize](std::size_t batch) {
        std::size_t const first = batch * batchSize;
        return size - first < batchSize ? size - first : batchSize;
    };

    TaskCounter counter(taskScheduler);
    if constexpr (std::is_base_of<std::random_access_iterator_tag,
                                  typename std::iterator_traits<ItrType>::iterator_category>::value) {
        auto const batchTask = [&visit, &countOf, begin, batchSize](unsigned batch) {
            visit(begin + static_cast<Difference>(batch * batchSize), countOf(batch));
        };
        auto const *const shared = &batchTask;
        taskScheduler->AddTasks(
            static_cast<unsigned>(numBatches), [shared](unsigned batch) { (*shared)(batch); }, priority,
            &counter);
        taskScheduler->WaitForCounter(&counter);
    } else {
        // Each task claims the next batch under a lock: stepping through
        // the range once in all, whatever the iterator.
        struct Cursor {
            std::mutex Lock;
            ItrType Next;
            std::size_t Claimed = 0;
        } cursor{{}, begin};
        auto const batchTask = [&visit, &countOf, &cursor](unsigned) {
            std::unique_lock<std::mutex> lock(cursor.Lock);
            ItrType const first = cursor.Next;
            std::size_t const count = countOf(cursor.Claimed++);
            std::advance(cursor.Next, static_cast<Difference>(count));
            lock.unlock();
            visit(first, count);
        };
        auto const *const shared = &batchTask;
        taskScheduler->AddTasks(
            static_cast<unsigned>(numBatches), [shared](unsigned batch) { (*shared)(batch); }, priority,
            &counter);
        taskScheduler->WaitForCounter(&counter);
    }
}

template <typename T, typename Callable>
void ParallelFor(TaskScheduler *taskScheduler, T *data, std::size_t dataSize, std::size_t batchSize,
                 Callable &&func, TaskPriority priority) {
    ParallelFor(taskScheduler, data, data + dataSize, batchSize, std::forward<Callable>(func), priority);
}

// The elements of the iterable itself are visited (it is taken by reference).
template <typename Iterable, typename Callable, typename = decltype(std::begin(std::declval<Iterable &>()))>
void ParallelFor(TaskScheduler *taskScheduler, Iterable &&iterable, std::size_t batchSize, Callable &&func,
                 TaskPriority priority) {
    ParallelFor(taskScheduler, std::begin(iterable), std::end(iterable), batchSize,
                std::forward<Callable>(func), priority);
}

} // namespace ftl
