// Runs a few tasks through an installed ftl and checks their sum.
#include <ftl/ftl.h>

#include <cstdio>

namespace {

struct Square {
    unsigned Input;
    unsigned long long Output;
};

void SquareTask(ftl::TaskScheduler * /*taskScheduler*/, void *arg) {
    auto *square = static_cast<Square *>(arg);
    square->Output = static_cast<unsigned long long>(square->Input) * square->Input;
}

} // namespace

int main() {
    ftl::TaskScheduler taskScheduler;
    if (int const error = taskScheduler.Init(); error != 0) {
        std::fprintf(stderr, "consumer: Init failed: %s\n", ftl::InitErrorString(error));
        return 1;
    }

    constexpr unsigned kCount = 100;
    Square squares[kCount];
    ftl::Task tasks[kCount];
    for (unsigned i = 0; i < kCount; ++i) {
        squares[i] = Square{i + 1, 0};
        tasks[i] = ftl::Task{SquareTask, &squares[i]};
    }

    ftl::TaskCounter counter(&taskScheduler);
    taskScheduler.AddTasks(kCount, tasks, ftl::TaskPriority::Normal, &counter);
    taskScheduler.WaitForCounter(&counter);

    unsigned long long sum = 0;
    for (Square const &square : squares) {
        sum += square.Output;
    }
    unsigned long long const expected = 1ull * kCount * (kCount + 1) * (2 * kCount + 1) / 6;
    std::printf("consumer: sum of squares 1..%u = %llu (expected %llu) on %u threads\n", kCount, sum,
                expected, taskScheduler.GetThreadCount());
    return sum == expected ? 0 : 1;
}
