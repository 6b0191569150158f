// Source compatibility with the lineage: idioms of code written for
// FiberTaskingLib that lean on what its headers brought in. The code under
// test comes before any other include, so only ftl's own headers can make it
// compile: std::lock_guard after ftl/fibtex.h alone, the Helgrind macros
// after ftl/task_scheduler.h alone, TaskPriority::Low, a wait's pin flag
// passed as 0, LockWrapper in both eras' forms, and ThreadLocal::GetAllValues
// / GetAllValuesByRef returning one value per thread.
#include "ftl/fibtex.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"
#include "ftl/thread_local.h"

namespace lineage {

struct Guarded {
    explicit Guarded(ftl::TaskScheduler *taskScheduler) : Lock(taskScheduler, 6) {}
    ftl::Fibtex Lock;
    unsigned Counter = 0;
    std::vector<unsigned> Order; // guarded by Lock
};

void LockGuardTask(ftl::TaskScheduler *, void *arg) {
    auto *data = static_cast<Guarded *>(arg);
    std::lock_guard<ftl::Fibtex> guard(data->Lock);
    data->Order.push_back(data->Counter++);
}

void SpinLockGuardTask(ftl::TaskScheduler *, void *arg) {
    auto *data = static_cast<Guarded *>(arg);
    ftl::LockWrapper wrapper(data->Lock, ftl::FibtexLockBehavior::Spin);
    std::lock_guard<ftl::LockWrapper> guard(wrapper);
    data->Order.push_back(data->Counter++);
}

// Today's form: the Fibtex and the pin flag only.
void WrapperLockGuardTask(ftl::TaskScheduler *, void *arg) {
    auto *data = static_cast<Guarded *>(arg);
    ftl::LockWrapper wrapper(data->Lock, false);
    std::lock_guard<ftl::LockWrapper> guard(wrapper);
    data->Order.push_back(data->Counter++);
}

// Adds `rounds` rounds of two tasks of each kind, waiting for each round with
// the lineage's two-argument call.
void LockRounds(ftl::TaskScheduler *taskScheduler, Guarded *data, unsigned rounds) {
    FTL_VALGRIND_HG_DISABLE_CHECKING(&data->Counter, sizeof(data->Counter));
    ftl::TaskCounter counter(taskScheduler);
    for (unsigned i = 0; i < rounds; ++i) {
        taskScheduler->AddTask(ftl::Task{LockGuardTask, data}, ftl::TaskPriority::Low, &counter);
        taskScheduler->AddTask(ftl::Task{LockGuardTask, data}, ftl::TaskPriority::Low, &counter);
        taskScheduler->AddTask(ftl::Task{SpinLockGuardTask, data}, ftl::TaskPriority::Low, &counter);
        taskScheduler->AddTask(ftl::Task{SpinLockGuardTask, data}, ftl::TaskPriority::High, &counter);
        taskScheduler->AddTask(ftl::Task{WrapperLockGuardTask, data}, ftl::TaskPriority::Normal, &counter);
        taskScheduler->AddTask(ftl::Task{WrapperLockGuardTask, data}, ftl::TaskPriority::High, &counter);
        taskScheduler->WaitForCounter(&counter, 0);
    }
    FTL_VALGRIND_HG_ENABLE_CHECKING(&data->Counter, sizeof(data->Counter));
}

void Touch(ftl::TaskScheduler *, void *arg) {
    **static_cast<ftl::ThreadLocal<unsigned> *>(arg) += 1;
}

} // namespace lineage

#include <catch2/catch.hpp>

#include <functional>
#include <numeric>

TEST_CASE("Lineage code: Fibtex under std::lock_guard, LockWrapper, TaskPriority::Low, Helgrind macros",
          "[compat]") {
    ftl::TaskScheduler taskScheduler;
    ftl::TaskSchedulerInitOptions options;
    options.Behavior = ftl::EmptyQueueBehavior::Yield;
    REQUIRE(taskScheduler.Init(options) == 0);

    lineage::Guarded data(&taskScheduler);
    constexpr unsigned kRounds = 500;
    lineage::LockRounds(&taskScheduler, &data, kRounds);

    // Every increment happened under the lock: the recorded values are
    // 0, 1, 2, ... with none lost or repeated.
    REQUIRE(data.Counter == 6 * kRounds);
    REQUIRE(data.Order.size() == 6 * kRounds);
    for (unsigned i = 0; i < data.Order.size(); ++i) {
        REQUIRE(data.Order[i] == i);
    }
}

TEST_CASE("Lineage code: ThreadLocal::GetAllValues has one value per thread", "[compat]") {
    ftl::TaskScheduler taskScheduler;
    REQUIRE(taskScheduler.Init() == 0);
    unsigned const threads = taskScheduler.GetThreadCount();

    ftl::ThreadLocal<unsigned> touches(&taskScheduler);
    std::vector<ftl::Task> tasks(threads, ftl::Task{lineage::Touch, &touches});
    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(static_cast<unsigned>(tasks.size()), tasks.data(), ftl::TaskPriority::Low,
                           &counter);
    taskScheduler.WaitForCounter(&counter, 0);

    // However the tasks spread over the threads, there is one value per
    // thread (threads that ran none hold 0) and they add up to the tasks.
    std::vector<unsigned> const values = touches.GetAllValues();
    REQUIRE(values.size() == threads);
    REQUIRE(std::accumulate(values.begin(), values.end(), 0u) == threads);

    std::vector<std::reference_wrapper<unsigned>> refs = touches.GetAllValuesByRef();
    REQUIRE(refs.size() == threads);
    for (unsigned i = 0; i < threads; ++i) {
        refs[i].get() = 100 + i;
    }
    std::vector<unsigned> const written = touches.GetAllValues();
    for (unsigned i = 0; i < threads; ++i) {
        REQUIRE(written[i] == 100 + i);
    }
}
