// A plugin that uses ftl through libftl.so, loaded by plugin_host with
// dlopen: the program itself never links ftl, so libftl.so and its
// thread-local state arrive with the plugin, after the program's threads
// started.
#include <ftl/ftl.h>

#include <cstdio>
#include <mutex>

namespace {

// Each leaf adds its value under a Fibtex; each inner node adds two
// children and waits for them, so waits park fibers that may resume on
// another worker.
struct Tree {
    ftl::Fibtex *Lock;
    unsigned long long *Sum;
};

void Node(ftl::TaskScheduler *taskScheduler, Tree tree, unsigned first, unsigned last) {
    if (last - first <= 8) {
        for (unsigned i = first; i < last; ++i) {
            std::lock_guard<ftl::Fibtex> guard(*tree.Lock);
            *tree.Sum += i;
        }
        return;
    }
    unsigned const middle = first + (last - first) / 2;
    ftl::TaskCounter counter(taskScheduler);
    taskScheduler->AddTask([=](ftl::TaskScheduler *ts) { Node(ts, tree, first, middle); },
                           ftl::TaskPriority::Normal, &counter);
    taskScheduler->AddTask([=](ftl::TaskScheduler *ts) { Node(ts, tree, middle, last); },
                           ftl::TaskPriority::Normal, &counter);
    taskScheduler->WaitForCounter(&counter);
}

} // namespace

// Sums 0..count-1 in tasks on `threads` workers; 0 when the sum is right.
extern "C" __attribute__((visibility("default"))) int RunPluginTasks(unsigned threads, unsigned count) {
    ftl::TaskScheduler taskScheduler;
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = threads;
    if (int const error = taskScheduler.Init(options); error != 0) {
        std::fprintf(stderr, "plugin: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }
    ftl::Fibtex lock(&taskScheduler);
    unsigned long long sum = 0;
    ftl::TaskCounter counter(&taskScheduler);
    Tree const tree{&lock, &sum};
    taskScheduler.AddTask([=](ftl::TaskScheduler *ts) { Node(ts, tree, 0, count); },
                          ftl::TaskPriority::Normal, &counter);
    taskScheduler.WaitForCounter(&counter);
    // The Init thread's own lock and unlock, after its wait.
    std::lock_guard<ftl::Fibtex> guard(lock);
    unsigned long long const expected = 1ull * count * (count - 1) / 2;
    std::printf("plugin: %u workers, sum of 0..%u = %llu (expected %llu)\n", threads, count - 1, sum,
                expected);
    return sum == expected ? 0 : 1;
}
