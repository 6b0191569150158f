// ParallelFor: calls func(taskScheduler, &element) for every element of a
// range, in tasks of batchSize elements, and waits for all of them. It must be
// called where WaitForCounter may be (a task, or the thread that called Init).
#pragma once

#include "ftl/assert.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>

namespace ftl {

template <typename T>
using ParallelForTaskFunction = void(TaskScheduler *taskScheduler, T *value);

template <typename ItrType, typename Callable>
void ParallelFor(TaskScheduler *taskScheduler, ItrType begin, ItrType end, std::size_t batchSize,
                 Callable &&func, TaskPriority priority) {
    FTL_ASSERT(batchSize > 0, "ParallelFor needs a batch size of at least 1");
    using Function = std::remove_reference_t<Callable>;
    using Difference = typename std::iterator_traits<ItrType>::difference_type;
    struct Batch {
        ItrType First;
        std::size_t Count;
        Function *Func;
    };

    auto const size = static_cast<std::size_t>(std::distance(begin, end));
    if (size == 0) {
        return;
    }
    std::size_t const numBatches = (size + batchSize - 1) / batchSize;
    std::unique_ptr<Batch[]> batches(new Batch[numBatches]);
    std::unique_ptr<Task[]> tasks(new Task[numBatches]);

    ItrType first = begin;
    std::size_t remaining = size;
    for (std::size_t i = 0; i < numBatches; ++i) {
        std::size_t const count = remaining < batchSize ? remaining : batchSize;
        batches[i] = Batch{first, count, &func};
        tasks[i] = Task{[](TaskScheduler *ts, void *arg) {
                            auto *batch = static_cast<Batch *>(arg);
                            ItrType it = batch->First;
                            for (std::size_t j = 0; j < batch->Count; ++j, ++it) {
                                (*batch->Func)(ts, &*it);
                            }
                        },
                        &batches[i]};
        std::advance(first, static_cast<Difference>(count));
        remaining -= count;
    }

    TaskCounter counter(taskScheduler);
    taskScheduler->AddTasks(static_cast<unsigned>(numBatches), tasks.get(), priority, &counter);
    taskScheduler->WaitForCounter(&counter);
}

template <typename T, typename Callable>
void ParallelFor(TaskScheduler *taskScheduler, T *data, std::size_t dataSize, std::size_t batchSize,
                 Callable &&func, TaskPriority priority) {
    ParallelFor(taskScheduler, data, data + dataSize, batchSize, std::forward<Callable>(func), priority);
}

// The elements of the iterable itself are visited (it is taken by reference).
template <typename Iterable, typename Callable>
void ParallelFor(TaskScheduler *taskScheduler, Iterable &&iterable, std::size_t batchSize, Callable &&func,
                 TaskPriority priority) {
    ParallelFor(taskScheduler, std::begin(iterable), std::end(iterable), batchSize,
                std::forward<Callable>(func), priority);
}

} // namespace ftl
