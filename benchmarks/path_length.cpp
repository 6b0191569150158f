// Path length: one lineage workload on one worker, for counting instructions
// under callgrind (benchmarks/path_length.py). Instruction counts do not drift
// with the host's state as times do, so two builds can be compared to the
// instruction per task. Written against the lineage API only, so that any
// past build of ftl compiles it too.
//
//   path_length W1|W3|W4|none SCALE
//
// W1: 20,000 x SCALE empty tasks (batches of 1,000, a counter each, waited
//     for); W3: fib(20) as a task tree, SCALE times (21,891 tasks each); W4:
//     10,000 x SCALE ping-pong round trips on a FullAtomicCounter. Prints a
//     checksum so the work cannot be optimized away.
#include "ftl/atomic_counter.h"
#include "ftl/task_counter.h"
#include "ftl/task_scheduler.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

std::uint64_t g_sum = 0;

void Empty(ftl::TaskScheduler *, void *) {
    ++g_sum;
}

struct FibNode {
    unsigned N;
    std::uint64_t Value;
};

void Fib(ftl::TaskScheduler *taskScheduler, void *arg) {
    auto *node = static_cast<FibNode *>(arg);
    if (node->N < 2) {
        node->Value = node->N;
        return;
    }
    FibNode children[2] = {{node->N - 1, 0}, {node->N - 2, 0}};
    ftl::Task const tasks[2] = {{Fib, &children[0]}, {Fib, &children[1]}};
    ftl::TaskCounter counter(taskScheduler);
    taskScheduler->AddTasks(2, tasks, ftl::TaskPriority::Normal, &counter);
    taskScheduler->WaitForCounter(&counter);
    node->Value = children[0].Value + children[1].Value;
}

struct PingPong {
    ftl::FullAtomicCounter *Value;
    unsigned Rounds;
    unsigned Parity;
};

void Player(ftl::TaskScheduler *taskScheduler, void *arg) {
    auto *self = static_cast<PingPong *>(arg);
    for (unsigned i = 0; i < self->Rounds; ++i) {
        taskScheduler->WaitForCounter(self->Value, 2 * i + self->Parity);
        self->Value->FetchAdd(1);
    }
}

} // namespace

int main(int argc, char **argv) {
    char const *const workload = argc > 1 ? argv[1] : "none";
    unsigned const scale = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1;
    ftl::TaskScheduler taskScheduler;
    ftl::TaskSchedulerInitOptions options;
    options.ThreadPoolSize = 1;
    if (taskScheduler.Init(options) != 0) {
        return 1;
    }
    if (std::strcmp(workload, "W1") == 0) {
        std::vector<ftl::Task> tasks(1000, ftl::Task{Empty, nullptr});
        for (unsigned batch = 0; batch < 20 * scale; ++batch) {
            ftl::TaskCounter counter(&taskScheduler);
            taskScheduler.AddTasks(1000, tasks.data(), ftl::TaskPriority::Normal, &counter);
            taskScheduler.WaitForCounter(&counter);
        }
    } else if (std::strcmp(workload, "W3") == 0) {
        for (unsigned run = 0; run < scale; ++run) {
            FibNode root{20, 0};
            ftl::TaskCounter counter(&taskScheduler);
            taskScheduler.AddTask(ftl::Task{Fib, &root}, ftl::TaskPriority::Normal, &counter);
            taskScheduler.WaitForCounter(&counter);
            g_sum += root.Value;
        }
    } else if (std::strcmp(workload, "W4") == 0) {
        ftl::FullAtomicCounter value(&taskScheduler, 0);
        PingPong players[2] = {{&value, 10000 * scale, 0}, {&value, 10000 * scale, 1}};
        ftl::Task const tasks[2] = {{Player, &players[0]}, {Player, &players[1]}};
        ftl::TaskCounter counter(&taskScheduler);
        taskScheduler.AddTasks(2, tasks, ftl::TaskPriority::Normal, &counter);
        taskScheduler.WaitForCounter(&counter);
        g_sum = value.Load();
    }
    std::printf("%s %llu\n", workload, static_cast<unsigned long long>(g_sum));
    return 0;
}
